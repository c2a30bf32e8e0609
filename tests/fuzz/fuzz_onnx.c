/* fuzz_onnx.c: libFuzzer harness for the ONNX loader (io/onnx.c) and plan creation
 * (runtime/plan.c). The input is a serialized ModelProto; a model that loads is planned
 * with every graph input bound to a small shape (unknown dims 1 for the batch, 8 after
 * it; an unknown rank as 1x3x8x8). External data is refused (no base folder). The plan
 * is created and destroyed, never run, with its activation arena capped at 256 MiB (a few
 * bytes of ONNX can ask for gigabytes legitimately). Nothing outlives one input. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "io/onnx.h"
#include "runtime/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BOUND_INPUTS 16
#define MAX_INPUT_ELEMS ((int64_t)1 << 22) /* declared inputs larger than this are not planned */

/* Binds input value v; 0 when its declared shape is too large to plan. */
static int bind_input(const ptq_value *v, ptq_input_shape *s)
{
    static const int64_t unranked[4] = {1, 3, 8, 8};
    int64_t elems = 1;
    memset(s, 0, sizeof *s);
    s->name = v->name;
    if (v->t.rank < 0 || v->t.rank > PTQ_MAX_RANK) {
        s->rank = 4;
        memcpy(s->dims, unranked, sizeof unranked);
        return 1;
    }
    s->rank = v->t.rank;
    for (int d = 0; d < s->rank; d++) {
        int64_t n = v->t.dims[d];
        s->dims[d] = n >= 0 ? n : d == 0 ? 1 : 8;
        if (s->dims[d] && elems > MAX_INPUT_ELEMS / s->dims[d]) return 0;
        elems *= s->dims[d];
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ptq_graph *g = NULL;
    ptq_plan *p = NULL;
    ptq_input_shape shapes[MAX_BOUND_INPUTS];
    int n = 0;
    if (onnx_model_load_buffer(data, size, NULL, "fuzz input", &g) != PTQ_OK) return 0;
    for (int i = 0; i < g->n_inputs; i++) {
        const ptq_value *v = &g->values[g->inputs[i]];
        if (v->kind != PTQ_VALUE_INPUT) continue;
        if (n == MAX_BOUND_INPUTS || !bind_input(v, &shapes[n++])) goto done;
    }
    ptq_plan_options opt = ptq_plan_defaults();
    opt.nthreads = 1;
    opt.max_arena_bytes = (size_t)256 << 20; /* a small model may ask for gigabytes legitimately */
    if (ptq_plan_create(g, shapes, n, &opt, &p) == PTQ_OK) {
        (void)ptq_plan_arena_bytes(p);
        ptq_plan_destroy(p);
    }
done:
    ptq_graph_destroy(g);
    return 0;
}
