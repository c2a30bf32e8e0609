/* rules.h: the placement table (quantization spec §5; docs/placement.md lists it with the
 * public source of each row): which inputs of which op get a Q/DQ pair, and which ops stay
 * float on purpose. One row per op; edit the table in rules.c, not conditions elsewhere. */
#ifndef PTQ_QUANT_RULES_H
#define PTQ_QUANT_RULES_H

typedef enum {
    QUANT_RULE_PLAIN = 0,     /* act_inputs per tensor; weight_input per channel on weight_axis */
    QUANT_RULE_GEMM,          /* A per tensor; B per channel (axis 0 if transB else 1) when constant, else per tensor */
    QUANT_RULE_MATMUL,        /* A per tensor; a constant 2-D B per channel on axis 1, else per tensor */
    QUANT_RULE_RESIDUAL_ADD,  /* the input not coming straight from a weighted op; both if neither does;
                                 none when one input is a pointwise function of the other (GELU's tanh form) */
    QUANT_RULE_FLOAT          /* stays float on purpose (TensorRT fuses it); the row says why in the report */
} quant_rule_kind;

typedef struct {
    const char *op_type;
    quant_rule_kind kind;
    unsigned act_inputs;  /* bit i: input i quantized per tensor */
    int weight_input;     /* -1: none */
    int weight_axis;
    const char *why;      /* one line for --report */
} quant_rule;

/* The row for op_type, or NULL: the op stays float. */
const quant_rule *quant_rule_find(const char *op_type);
/* The whole table (for docs and tests): *n rows. */
const quant_rule *quant_rules(int *n);
/* 1 for ops whose output TensorRT fuses an add into (Conv, ConvTranspose, Gemm, MatMul). */
int quant_is_weighted_op(const char *op_type);
/* 1 for the element-wise ops (no Add or Sub) a pointwise chain such as GELU's x*x*x may hold. */
int quant_is_pointwise_op(const char *op_type);

#endif
