/* rules.h: the placement table (quantization spec §5): which inputs of which op get
 * a Q/DQ pair. One row per op; edit the table in rules.c, not conditions elsewhere. */
#ifndef PTQ_QUANT_RULES_H
#define PTQ_QUANT_RULES_H

typedef enum {
    QUANT_RULE_PLAIN = 0,     /* act_inputs per tensor; weight_input per channel on weight_axis */
    QUANT_RULE_GEMM,          /* A per tensor; B per channel (axis 0 if transB else 1) when constant, else per tensor */
    QUANT_RULE_MATMUL,        /* A per tensor; a constant 2-D B per channel on axis 1, else per tensor */
    QUANT_RULE_RESIDUAL_ADD   /* the input not coming straight from a weighted op; both if neither does */
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
/* 1 for ops whose output TensorRT fuses an add into (Conv, ConvTranspose, Gemm, MatMul). */
int quant_is_weighted_op(const char *op_type);

#endif
