/* TEMPLATE.c: copy to runtime/ops/<family>.c (or add to an existing family file),
 * add OP(MY_OP, "MyOp", my_op) to runtime/ops.def, and you are done: ops.c picks
 * the definition up by its symbol op_my_op. Not compiled. */
#include "runtime/op.h"
#include "runtime/shape.h"

/* infer: validate everything once; set output dtype and shape; precompute state. */
static ptq_status my_op_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    if (x->dtype != PTQ_F32) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s, expected float32", ptq_dtype_name(x->dtype));
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    y->rank = x->rank;
    for (int i = 0; i < x->rank; i++) y->dims[i] = x->dims[i];
    ctx->scratch_bytes = 0;
    return PTQ_OK;
}

/* run: trust infer; no allocation; OpenMP over independent outputs only. */
static ptq_status my_op_run(ptq_op_ctx *ctx)
{
    const float *x = ctx->in[0]->data;
    float *y = ctx->out[0]->data;
    size_t n = ptq_tensor_numel(ctx->out[0]);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return PTQ_OK;
}

const ptq_op_def op_my_op = {my_op_infer, my_op_run, NULL, 0};
