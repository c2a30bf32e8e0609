/* fp16.h: the float part of a QDQ model in half precision, as TensorRT runs it with
 * `trtexec --int8 --fp16`.
 *
 *   ptq_graph *q = ...;                        // a QDQ graph (quant_insert_qdq)
 *   quant_fp16_report r;
 *   TRY(quant_fp16_simulate(q, &r));            // evaluation copy: float32, values rounded to FP16
 *   TRY(quant_fp16_convert(q, &r));             // or: the float part written in float16
 *   TRY(quant_fp16_upcast(g, &changed));        // a float16 model made runnable by ptq's float32 kernels
 *
 * The float part: every node that is neither QuantizeLinear nor DequantizeLinear, reads no
 * DequantizeLinear output (those are the INT8 layers: TensorRT fuses the DQ into them and they
 * stay as they are), computes on data (a value that depends on a graph input, not only on
 * initializers and shapes), is not a detector's post-processing (quant_post_processing: after
 * a data-dependent selection, where coordinates become indices; weighted layers there are in)
 * and whose op takes float16 in ONNX (quant_fp16_op; others stay float32 in both forms). Its
 * float32 inputs (initializers and activations; not Resize's roi and
 * scales) and its outputs are FP16 values:
 *   simulate: initializers rounded in place (a rounded copy when other nodes read them too), a
 *     Cast(float16) -> Cast(float) pair after each output (and before the float-part readers of
 *     an INT8 layer's output or a graph input); types stay float32, names of existing values
 *     keep their meaning (an output's name is its rounded value), so graph outputs, Q inputs and
 *     the layer-wise names are unchanged. An output read only by Relu (exact in FP16) is not
 *     rounded twice.
 *   convert: initializers stored as float16 (a float16 copy when others read them too), outputs
 *     float16, a Cast(float16) where float32 enters the float part and a Cast(float) where it
 *     leaves it (into QuantizeLinear, INT8 layers, float32 nodes, graph outputs, whose declared
 *     type stays float32). QuantizeLinear and DequantizeLinear keep float32 scales and data
 *     (opset 13 has no float16 Q/DQ), so the model runs in ONNX Runtime and TensorRT alike.
 * Both give the same values (ONNX Runtime's CPU kernels and ptq compute float16 ops in float32
 * and round each output). Rounding: IEEE binary16, round to nearest even (ptq_f32_to_f16). */
#ifndef PTQ_QUANT_FP16_H
#define PTQ_QUANT_FP16_H

#include "runtime/graph.h"

typedef struct {
    int n_nodes;          /* nodes of the float part */
    int n_values;         /* activations rounded (simulate) or made float16 (convert) */
    int n_initializers;   /* float initializers rounded or stored as float16 */
    int n_casts;          /* Cast nodes added */
} quant_fp16_report;

/* 1 when ONNX's type constraints of op_type (default domain, opsets 13 on) take float16 for
 * its data inputs and outputs, and ptq puts it in the float part. */
int quant_fp16_op(const char *op_type);
/* x rounded to the nearest FP16 value (ties to even), back in float32; overflow gives +-inf. */
float quant_fp16_round(float x);

/* in_part[i] (g->n_nodes bytes) = 1 for the nodes of the float part (see above). */
ptq_status quant_fp16_float_part(const ptq_graph *g, unsigned char *in_part);
ptq_status quant_fp16_simulate(ptq_graph *g, quant_fp16_report *rep);
ptq_status quant_fp16_convert(ptq_graph *g, quant_fp16_report *rep);
/* Each node other than Cast that reads or writes float16 data is made to compute in float32, as
 * ONNX Runtime's CPU provider does: float16 initializers it reads become float32 copies (exact),
 * float16 activations it reads pass through Cast(float), and it writes a float32 value that a
 * Cast(float16) turns into its float16 output. The float16 values keep their names and types.
 * *n_changed: nodes changed (0: g is unchanged). */
ptq_status quant_fp16_upcast(ptq_graph *g, int *n_changed);
/* Each float16 graph input takes float32 data (preprocessed images) that a Cast(float16) rounds
 * for its readers, as a caller converting its float32 data to float16 would; *n_changed: inputs
 * changed. */
ptq_status quant_fp16_float_inputs(ptq_graph *g, int *n_changed);

/* A model that stores or computes in float16, made into its float32 twin for calibration,
 * quantization and comparison: float16 initializers and Constant tensors widened (exact),
 * float16 types and Casts to float16 made float32, and the Casts to float32 of float32 values
 * that result (a float16 weight's Cast(to=float) in front of its Conv) removed, their readers
 * reading the value itself. The names of the graph inputs and outputs declared float16 are kept
 * for quant_fp16_restore_io. A model without float16 is left unchanged. */
typedef struct {
    int n_initializers;   /* float16 initializers widened */
    int n_values;         /* activations typed float16 made float32 */
    int n_casts;          /* Cast nodes removed */
    int computes_half;    /* 1: float16 activations (not only weights stored in float16) */
    char **io;            /* names of the graph inputs and outputs declared float16 (owned) */
    int n_io;
} quant_fp16_widened;

ptq_status quant_fp16_widen(ptq_graph *g, quant_fp16_widened *w);
void quant_fp16_widened_free(quant_fp16_widened *w); /* NULL-safe fields; zeroes *w */
/* The graph inputs and outputs w names declared float16 again in g (a QDQ model made from the
 * twin, its float part written by quant_fp16_convert or not): an input's float16 Cast (from
 * quant_fp16_convert) is removed, its float32 readers read a Cast(float) of it; an output
 * written by a Cast(float) of a float16 value is written by that value's producer, any other
 * through a Cast(float16). *n_casts: Casts added minus Casts removed. */
ptq_status quant_fp16_restore_io(ptq_graph *g, const quant_fp16_widened *w, int *n_casts);

#endif
