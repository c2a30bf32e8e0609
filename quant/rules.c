/* rules.c: TensorRT explicit-quantization placement, as a table (docs/placement.md lists it).
 *
 * Sources, named in each row's comment:
 *  [TRT]  TensorRT developer guide, "Explicit Quantization", section "Q/DQ Layer-Placement
 *         Recommendations": quantize all inputs of weighted operations (convolution,
 *         transposed convolution, GEMM), per-channel weights, per-tensor activations; do not
 *         quantize the outputs of weighted operations; quantize the residual input of an add
 *         TensorRT fuses into the convolution.
 *  [MO]   NVIDIA TensorRT Model Optimizer, modelopt/onnx/quantization: int8.py (quantizable op
 *         types Add, AveragePool, BatchNormalization, Clip, Conv, ConvTranspose, Gemm,
 *         GlobalAveragePool, MatMul, MaxPool, Mul), partitioning.py (find_layer_norm_partitions,
 *         find_hardcoded_patterns' GELU [Div, Erf, Add, Mul, Mul] and find_mha_partitions: left
 *         unquantized), graph_utils.py (get_fusible_backbone: the conv an add fuses into).
 *  [PQ]   NVIDIA pytorch-quantization's quantized attention (TensorQuantizer with
 *         QuantLinear.default_quant_desc_input, per tensor, on the query, key, value and the
 *         softmax output: matmul_q/k/v/a_input_quantizer, as in the FasterTransformer ViT/Swin
 *         and TensorRT demo/BERT recipes; TensorRT's fused MHA takes the softmax output's
 *         amax / 127 as its dq_probs).
 *  [ORT]  ONNX Runtime quantize_static (QDQ format): MatMul quantizes both inputs; its
 *         QDQSoftmax forces the softmax output's range to [0, 1] (ptq calibrates it instead,
 *         as [PQ] does). */
#include "rules.h"

#include <string.h>

static const quant_rule rules[] = {
    /* [TRT] weighted ops: all inputs; [MO] Conv, ConvTranspose, Gemm, MatMul */
    {"Conv", QUANT_RULE_PLAIN, 1u << 0, 1, 0, "Conv: input per tensor, weight per output channel (axis 0)"},
    {"ConvTranspose", QUANT_RULE_PLAIN, 1u << 0, 1, 1, "ConvTranspose: input per tensor, weight per output channel (axis 1)"},
    {"Gemm", QUANT_RULE_GEMM, 1u << 0, 1, -1, "Gemm: A per tensor, constant B per output channel"},
    /* [TRT] GEMM inputs; [PQ] both operands of the attention products Q*K^T and softmax*V per
     * tensor (a non-constant B is an activation); [ORT] MatMul: both inputs */
    {"MatMul", QUANT_RULE_MATMUL, 1u << 0, 1, 1, "MatMul: both inputs; constant 2-D B per output channel (axis 1)"},
    /* [TRT] residual input; [MO] build_non_residual_input_map; an add that is part of GELU's
     * tanh form (x + 0.044715 x^3) stays float like the rest of that GELU ([MO] GELU pattern) */
    {"Add", QUANT_RULE_RESIDUAL_ADD, 0, -1, -1, "residual Add: the identity branch, so TensorRT fuses the add into the convolution"},
    /* [MO] pooling op types; TensorRT runs pooling in INT8 between quantized layers */
    {"MaxPool", QUANT_RULE_PLAIN, 1u << 0, -1, -1, "pooling runs in INT8"},
    {"AveragePool", QUANT_RULE_PLAIN, 1u << 0, -1, -1, "pooling runs in INT8"},
    {"GlobalAveragePool", QUANT_RULE_PLAIN, 1u << 0, -1, -1, "pooling runs in INT8"},
    /* transformer blocks: float on purpose ([MO] layer-norm partitions; TensorRT fuses
     * LayerNormalization and its decomposed ReduceMean/Sub/Pow/Sqrt/Div form) */
    {"LayerNormalization", QUANT_RULE_FLOAT, 0, -1, -1, "LayerNormalization: float, fused by TensorRT (as ModelOpt leaves it)"},
    {"ReduceMean", QUANT_RULE_FLOAT, 0, -1, -1, "ReduceMean: float (a LayerNorm's mean and variance, fused by TensorRT)"},
    {"Sub", QUANT_RULE_FLOAT, 0, -1, -1, "Sub: float (element-wise; a LayerNorm's centring, fused by TensorRT)"},
    {"Pow", QUANT_RULE_FLOAT, 0, -1, -1, "Pow: float (element-wise; LayerNorm's variance or GELU's cube, fused by TensorRT)"},
    {"Sqrt", QUANT_RULE_FLOAT, 0, -1, -1, "Sqrt: float (element-wise; a LayerNorm's deviation, fused by TensorRT)"},
    {"Div", QUANT_RULE_FLOAT, 0, -1, -1, "Div: float (element-wise; LayerNorm, GELU or the attention scale, fused by TensorRT)"},
    /* [PQ] the softmax output is quantized where softmax*V reads it (the MatMul row), not here;
     * [MO] leaves Softmax unquantized */
    {"Softmax", QUANT_RULE_FLOAT, 0, -1, -1, "Softmax: float; its output is quantized as the input of softmax*V"},
    /* [MO] GELU pattern [Div, Erf, Add, Mul, Mul]; the tanh form (Pow or Mul, Tanh) likewise;
     * opset 20's Gelu op */
    {"Erf", QUANT_RULE_FLOAT, 0, -1, -1, "Erf: float (GELU, fused by TensorRT)"},
    {"Tanh", QUANT_RULE_FLOAT, 0, -1, -1, "Tanh: float (activation or GELU's tanh form, fused by TensorRT)"},
    {"Gelu", QUANT_RULE_FLOAT, 0, -1, -1, "Gelu: float, fused by TensorRT"},
};

const quant_rule *quant_rule_find(const char *op_type)
{
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strcmp(rules[i].op_type, op_type) == 0) return &rules[i];
    return NULL;
}

const quant_rule *quant_rules(int *n)
{
    *n = (int)(sizeof rules / sizeof rules[0]);
    return rules;
}

int quant_is_weighted_op(const char *op_type)
{
    return strcmp(op_type, "Conv") == 0 || strcmp(op_type, "ConvTranspose") == 0 || strcmp(op_type, "Gemm") == 0 ||
           strcmp(op_type, "MatMul") == 0;
}

int quant_is_pointwise_op(const char *op_type)
{
    /* no Add or Sub: y + (y + b) is still an add of two branches */
    static const char *const ops[] = {"Mul", "Div", "Pow", "Tanh", "Erf", "Sqrt", "Neg", "Abs", "Exp", "Sigmoid"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strcmp(ops[i], op_type) == 0) return 1;
    return 0;
}
