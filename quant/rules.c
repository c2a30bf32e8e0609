/* rules.c: TensorRT explicit-quantization placement, as a table. */
#include "rules.h"

#include <string.h>

static const quant_rule rules[] = {
    {"Conv", QUANT_RULE_PLAIN, 1u << 0, 1, 0, "Conv: input per tensor, weight per output channel (axis 0)"},
    {"ConvTranspose", QUANT_RULE_PLAIN, 1u << 0, 1, 1, "ConvTranspose: input per tensor, weight per output channel (axis 1)"},
    {"Gemm", QUANT_RULE_GEMM, 1u << 0, 1, -1, "Gemm: A per tensor, constant B per output channel"},
    {"MatMul", QUANT_RULE_MATMUL, 1u << 0, 1, 1, "MatMul: both inputs; constant 2-D B per output channel (axis 1)"},
    {"Add", QUANT_RULE_RESIDUAL_ADD, 0, -1, -1, "residual Add: the identity branch, so TensorRT fuses the add into the convolution"},
    {"MaxPool", QUANT_RULE_PLAIN, 1u << 0, -1, -1, "pooling runs in INT8"},
    {"AveragePool", QUANT_RULE_PLAIN, 1u << 0, -1, -1, "pooling runs in INT8"},
    {"GlobalAveragePool", QUANT_RULE_PLAIN, 1u << 0, -1, -1, "pooling runs in INT8"},
};

const quant_rule *quant_rule_find(const char *op_type)
{
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strcmp(rules[i].op_type, op_type) == 0) return &rules[i];
    return NULL;
}

int quant_is_weighted_op(const char *op_type)
{
    return strcmp(op_type, "Conv") == 0 || strcmp(op_type, "ConvTranspose") == 0 || strcmp(op_type, "Gemm") == 0 ||
           strcmp(op_type, "MatMul") == 0;
}
