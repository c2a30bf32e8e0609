/* opset.h: upgrade a model's default-domain opset to 13, the first with per-channel
 * QuantizeLinear/DequantizeLinear (quantization spec §5), rewriting every node whose
 * signature changed on the way so the model computes the same outputs.
 *
 *   TRY(quant_upgrade_opset(g, 13, &changed));   // no-op when already >= 13
 *
 * Rewrites (from opsets 7..12): Clip min/max attributes -> inputs; Slice
 * starts/ends/axes attributes -> inputs; Squeeze/Unsqueeze/ReduceSum axes -> input;
 * Split `split` -> input; Pad pads/value -> inputs; Dropout ratio -> input;
 * Softmax/LogSoftmax with a non-last axis (coerced-2-D semantics) -> Flatten, op,
 * Reshape back; Upsample -> Resize (asymmetric coordinates, floor nearest);
 * Resize-10 -> Resize-13 with the same asymmetric semantics; BatchNormalization
 * loses `spatial`/`consumed_inputs`. Ops outside ptq's list are refused by name. */
#ifndef PTQ_QUANT_OPSET_H
#define PTQ_QUANT_OPSET_H

#include "runtime/graph.h"

ptq_status quant_upgrade_opset(ptq_graph *g, int64_t target, int *n_rewritten);

#endif
