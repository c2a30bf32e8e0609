/* fp16.c: the float part of a QDQ model in half precision (see fp16.h). One classification
 * (which nodes TensorRT runs in FP16) serves the simulation, the float16 writer and the
 * float32 upcast, so that the three give the same values. */
#include "quant/fp16.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/qdq.h"
#include "quant/rules.h"
#include "runtime/graph_edit.h"

#define NAME_CAP 1024

/* Ops whose data inputs and outputs ONNX types as T with float16 among T's types (opsets 13
 * on), computed element-wise or by TensorRT's float layers. Not here: Q/DQ, Cast, ops with
 * outputs of another type (ArgMax, comparisons), data-dependent post-processing (NMS, TopK)
 * and ops whose float16 forms appear only in late opsets: they stay float32. */
static const char *const fp16_ops[] = {
    "Abs", "Add", "AveragePool", "BatchNormalization", "Ceil", "Clip", "Concat", "Conv", "ConvTranspose", "Cos",
    "DepthToSpace", "Div", "Elu", "Erf", "Exp", "Expand", "Flatten", "Floor", "Gather", "GatherElements", "Gemm",
    "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid", "HardSwish", "Identity", "InstanceNormalization",
    "LayerNormalization", "LeakyRelu", "Log", "LogSoftmax", "LRN", "MatMul", "Max", "MaxPool", "Mean", "Min", "Mul",
    "Neg", "Pad", "Pow", "PRelu", "Reciprocal", "ReduceL2", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum",
    "Relu", "Reshape", "Resize", "Selu", "Sigmoid", "Sin", "Slice", "Softmax", "Softplus", "Softsign", "SpaceToDepth",
    "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Tile", "Transpose", "Unsqueeze", "Upsample", "Where"};

int quant_fp16_op(const char *op_type)
{
    for (size_t i = 0; i < sizeof fp16_ops / sizeof *fp16_ops; i++)
        if (!strcmp(fp16_ops[i], op_type)) return 1;
    return 0;
}

float quant_fp16_round(float x)
{
    return ptq_f16_to_f32(ptq_f32_to_f16(x));
}

/* The input whose type is T (the output's type) for an op of the list. */
static int type_input(const ptq_node *n)
{
    return !strcmp(n->op_type, "Where") ? 1 : 0;
}

/* Inputs of a float-part node that keep their own type: Resize's roi and scales,
 * Upsample's scales. */
static int kept_input(const ptq_node *n, int j)
{
    return j >= 1 && (!strcmp(n->op_type, "Resize") || !strcmp(n->op_type, "Upsample"));
}

/* What the transforms need to know of each value and node. */
typedef struct {
    int *order;           /* topological order */
    ptq_dtype *dt;        /* element type of each value, UNDEFINED when unknown */
    unsigned char *data;  /* depends on a graph input (not only on initializers and shapes) */
    uint8_t *post;        /* computed from a data-dependent selection (quant_post_processing) */
    int *direct;          /* uses by node inputs and graph outputs (not by subgraphs) */
} facts;

/* Idempotent: facts_make frees on its error path and its callers free again at their end. */
static void facts_free(facts *f)
{
    free(f->order);
    free(f->dt);
    free(f->data);
    free(f->direct);
    free(f->post);
    memset(f, 0, sizeof *f);
}

/* The element type a Constant or ConstantOfShape node writes (float32 for ConstantOfShape
 * without a value); UNDEFINED when unknown. */
static ptq_dtype constant_dtype(const ptq_node *n)
{
    const ptq_tensor *t = ptq_attr_tensor(n, "value");
    if (t) return t->dtype;
    if (!strcmp(n->op_type, "ConstantOfShape") || ptq_node_attr(n, "value_float") || ptq_node_attr(n, "value_floats")) return PTQ_F32;
    if (ptq_node_attr(n, "value_int") || ptq_node_attr(n, "value_ints")) return PTQ_I64;
    return PTQ_UNDEFINED;
}

static ptq_status facts_make(const ptq_graph *g, facts *f)
{
    ptq_status st = PTQ_OK;
    memset(f, 0, sizeof *f);
    f->order = malloc(sizeof *f->order * ((size_t)g->n_nodes + 1));
    f->dt = calloc((size_t)g->n_values + 1, sizeof *f->dt);
    f->data = calloc((size_t)g->n_values + 1, 1);
    f->direct = calloc((size_t)g->n_values + 1, sizeof *f->direct);
    f->post = calloc((size_t)g->n_values + 1, 1);
    CHECK_ALLOC(f->post);
    CHECK_ALLOC(f->order);
    CHECK_ALLOC(f->dt);
    CHECK_ALLOC(f->data);
    CHECK_ALLOC(f->direct);
    TRY(ptq_graph_toposort(g, f->order));
    TRY(quant_post_processing(g, f->post));
    for (int v = 0; v < g->n_values; v++) {
        const ptq_value *val = &g->values[v];
        f->dt[v] = val->kind == PTQ_VALUE_INITIALIZER || val->kind == PTQ_VALUE_INPUT || val->has_type ? val->t.dtype : PTQ_UNDEFINED;
        f->data[v] = val->kind == PTQ_VALUE_INPUT;
    }
    for (int k = 0; k < g->n_nodes; k++) {
        const ptq_node *n = &g->nodes[f->order[k]];
        int shape = !strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size"), data = 0;
        for (int j = 0; j < n->n_inputs; j++) {
            if (n->inputs[j] < 0) continue;
            data |= f->data[n->inputs[j]];
            f->direct[n->inputs[j]]++;
        }
        ptq_dtype t = PTQ_UNDEFINED;
        int defaults = !n->domain[0] || !strcmp(n->domain, "ai.onnx");
        if (!defaults) t = PTQ_UNDEFINED;
        else if (!strcmp(n->op_type, "Cast")) t = (ptq_dtype)ptq_attr_int(n, "to", 0);
        else if (!strcmp(n->op_type, "Constant") || !strcmp(n->op_type, "ConstantOfShape")) /* the value's type */
            t = constant_dtype(n);
        else if (!strcmp(n->op_type, "DequantizeLinear")) /* the scale's type: float32 until opset 19 */
            t = n->n_inputs > 1 && n->inputs[1] >= 0 && f->dt[n->inputs[1]] != PTQ_UNDEFINED ? f->dt[n->inputs[1]] : PTQ_F32;
        else if (shape) t = PTQ_I64;
        else if (quant_fp16_op(n->op_type) && type_input(n) < n->n_inputs && n->inputs[type_input(n)] >= 0)
            t = f->dt[n->inputs[type_input(n)]];
        for (int o = 0; o < n->n_outputs; o++) {
            int v = n->outputs[o];
            if (v < 0) continue;
            f->data[v] = (unsigned char)(data && !shape);
            if (f->dt[v] == PTQ_UNDEFINED) f->dt[v] = o > 0 && !strcmp(n->op_type, "MaxPool") ? PTQ_I64 : t; /* Indices */
        }
    }
    for (int i = 0; i < g->n_outputs; i++) f->direct[g->outputs[i]]++;
done:
    if (st != PTQ_OK) facts_free(f);
    return st;
}

/* 0 for a float32 initializer with a finite value beyond FP16's range (65504, rounding to
 * infinity): a BatchNormalization's running variance of 1e8, a mask constant of -1e9. Its node
 * stays float32 (TensorRT folds such parameters into weights before it converts them). */
static int holds_in_fp16(const ptq_value *v)
{
    if (v->kind != PTQ_VALUE_INITIALIZER || v->t.dtype != PTQ_F32 || !v->t.data) return 1;
    size_t n = ptq_tensor_numel(&v->t);
    const float *x = v->t.data;
    for (size_t i = 0; i < n; i++)
        if (fabsf(x[i]) >= 65520.0f && fabsf(x[i]) < INFINITY) return 0;
    return 1;
}

/* Activations TensorRT fuses into the layer before them (quantization spec §5). */
static int fused_activation(const ptq_node *n)
{
    static const char *const ops[] = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (!strcmp(ops[i], n->op_type)) return 1;
    return 0;
}

/* The float part, given the facts (see fp16.h). INT8 layers: the nodes reading a
 * DequantizeLinear output, and the activations that are the only readers of an INT8 layer's
 * output (TensorRT fuses them into its epilogue: Conv -> Relu, Conv -> Add -> Relu). */
static ptq_status float_part(const ptq_graph *g, const facts *f, unsigned char *in_part)
{
    ptq_status st = PTQ_OK;
    unsigned char *int8 = calloc((size_t)g->n_nodes + 1, 1);
    CHECK_ALLOC(int8);
    for (int k = 0; k < g->n_nodes; k++) {
        int i = f->order[k];
        const ptq_node *n = &g->nodes[i];
        int ok = (!n->domain[0] || !strcmp(n->domain, "ai.onnx")) && quant_fp16_op(n->op_type) && n->n_outputs > 0 &&
                 n->outputs[0] >= 0 && f->dt[n->outputs[0]] == PTQ_F32 && f->data[n->outputs[0]];
        for (int j = 0; j < n->n_inputs; j++) {
            int v = n->inputs[j];
            if (v < 0) continue;
            int p = g->values[v].producer;
            if (p >= 0 && !strcmp(g->nodes[p].op_type, "DequantizeLinear")) int8[i] = 1;
            if (f->post[v] && !quant_is_weighted_op(n->op_type)) ok = 0; /* post-processing stays float32 */
            if (f->dt[v] == PTQ_UNDEFINED && !kept_input(n, j)) ok = 0;   /* unknown type: left alone */
            if (ok && !kept_input(n, j) && !holds_in_fp16(&g->values[v])) ok = 0;
        }
        if (fused_activation(n) && n->n_inputs > 0 && n->inputs[0] >= 0) {
            int p = g->values[n->inputs[0]].producer;
            if (p >= 0 && int8[p] && f->direct[n->inputs[0]] == 1 && ptq_graph_count_uses(g, n->inputs[0]) == 1) int8[i] = 1;
        }
        if (int8[i]) ok = 0;
        for (int o = 0; ok && o < n->n_outputs; o++) { /* a value read by a subgraph keeps its type */
            int v = n->outputs[o];
            if (v >= 0 && ptq_graph_count_uses(g, v) != f->direct[v]) ok = 0;
        }
        in_part[i] = (unsigned char)ok;
    }
    /* a BatchNormalization kept float32 keeps the convolution it alone reads in float32 too:
     * TensorRT folds the pair in float32, so the convolution's output never exists in FP16 */
    for (int i = 0; i < g->n_nodes; i++) {
        const ptq_node *n = &g->nodes[i];
        if (in_part[i] || int8[i] || strcmp(n->op_type, "BatchNormalization") || n->n_inputs < 1 || n->inputs[0] < 0) continue;
        int p = g->values[n->inputs[0]].producer;
        if (p >= 0 && in_part[p] && f->direct[n->inputs[0]] == 1 &&
            (!strcmp(g->nodes[p].op_type, "Conv") || !strcmp(g->nodes[p].op_type, "ConvTranspose")))
            in_part[p] = 0;
    }
done:
    free(int8);
    return st;
}

ptq_status quant_fp16_float_part(const ptq_graph *g, unsigned char *in_part)
{
    ptq_status st = PTQ_OK;
    facts f;
    TRY(facts_make(g, &f));
    st = float_part(g, &f, in_part);
    facts_free(&f);
done:
    return st;
}

/* 1 when input j of node n (in the float part) is FP16 in TensorRT: a float32 input other than
 * the kept ones. */
static int converted_input(const ptq_node *n, int j, const facts *f)
{
    return n->inputs[j] >= 0 && f->dt[n->inputs[j]] == PTQ_F32 && !kept_input(n, j);
}

/* A Cast node named after `base` from value in to value out. */
static ptq_status cast_node(ptq_graph *g, int in, int out, const char *base, ptq_dtype to, int *n_casts)
{
    ptq_status st = PTQ_OK;
    char name[NAME_CAP], base2[NAME_CAP + 8];
    int node;
    snprintf(base2, sizeof base2, "%s_Cast", base);
    ptq_graph_unique_name(g, base2, name, sizeof name);
    TRY(ptq_graph_add_node(g, name, "Cast", "", &in, 1, &out, 1, &node));
    ptq_attr a;
    memset(&a, 0, sizeof a);
    a.name = ptq_strdup("to");
    a.type = PTQ_ATTR_INT;
    a.i = to;
    CHECK_ALLOC(a.name);
    TRY(ptq_node_add_attr(&g->nodes[node], &a));
    (*n_casts)++;
done:
    return st;
}

/* A Cast of value `in` to `to`, writing a new value named after `base`; returns it in *out. */
static ptq_status add_cast(ptq_graph *g, int in, const char *base, ptq_dtype to, int *out, int *n_casts)
{
    ptq_status st = PTQ_OK;
    char vname[NAME_CAP];
    ptq_graph_unique_name(g, base, vname, sizeof vname);
    TRY(ptq_graph_add_value(g, vname, out));
    TRY(cast_node(g, in, *out, vname, to, n_casts));
done:
    return st;
}

/* A Cast(to) whose output replaces v as the output of v's producer: the producer writes a new
 * value (named after base, returned in *fresh) and Cast(to) writes v. */
static ptq_status cast_after(ptq_graph *g, int v, const char *base, ptq_dtype to, int *fresh, int *n_casts)
{
    ptq_status st = PTQ_OK;
    char vname[NAME_CAP];
    int p = g->values[v].producer;
    ptq_graph_unique_name(g, base, vname, sizeof vname);
    TRY(ptq_graph_add_value(g, vname, fresh));
    for (int o = 0; o < g->nodes[p].n_outputs; o++)
        if (g->nodes[p].outputs[o] == v) g->nodes[p].outputs[o] = *fresh;
    g->values[*fresh].producer = p;
    TRY(cast_node(g, *fresh, v, g->values[v].name, to, n_casts));
done:
    return st;
}

/* A copy of float32 tensor src as float16 (to_half) or rounded float32. */
static ptq_status rounded_tensor(const ptq_tensor *src, int to_half, ptq_tensor *dst)
{
    ptq_status st = PTQ_OK;
    *dst = *src;
    dst->data = NULL;
    dst->dtype = to_half ? PTQ_F16 : PTQ_F32;
    TRY(ptq_tensor_alloc(dst));
    size_t n = ptq_tensor_numel(src);
    const float *x = src->data;
    for (size_t i = 0; i < n; i++) {
        if (to_half) ((uint16_t *)dst->data)[i] = ptq_f32_to_f16(x[i]);
        else ((float *)dst->data)[i] = quant_fp16_round(x[i]);
    }
done:
    return st;
}

/* Float32 initializer v read by float-part nodes at converted inputs (`part_uses` of them):
 * rounded (or made float16) in place when nothing else reads it, else a copy named
 * <v>_fp16; *out is the value those inputs read. */
static ptq_status round_initializer(ptq_graph *g, int v, int part_uses, int to_half, int *out)
{
    ptq_status st = PTQ_OK;
    ptq_tensor t;
    TRY(rounded_tensor(&g->values[v].t, to_half, &t));
    if (part_uses == ptq_graph_count_uses(g, v) && !g->values[v].initializer_is_input) {
        ptq_tensor_free(&g->values[v].t);
        g->values[v].t = t;
        *out = v;
        return PTQ_OK;
    }
    char name[NAME_CAP], base[NAME_CAP];
    snprintf(base, sizeof base, "%s_fp16", g->values[v].name);
    ptq_graph_unique_name(g, base, name, sizeof name);
    st = ptq_graph_add_initializer(g, name, &t, out);
    ptq_tensor_free(&t);
done:
    return st;
}

/* The float part in FP16: simulated (to_half 0) or written (to_half 1); see fp16.h. */
static ptq_status transform(ptq_graph *g, int to_half, quant_fp16_report *rep)
{
    ptq_status st = PTQ_OK;
    facts f = {0};
    int n0 = g->n_nodes, v0 = g->n_values;
    unsigned char *part = calloc((size_t)n0 + 1, 1);
    int *part_uses = calloc((size_t)v0 + 1, sizeof *part_uses); /* converted inputs of float-part nodes */
    int *f32_uses = calloc((size_t)v0 + 1, sizeof *f32_uses);   /* other node inputs (convert: float32 readers) */
    int *swap = malloc(sizeof *swap * ((size_t)v0 + 1));        /* the value float-part readers read instead */
    memset(rep, 0, sizeof *rep);
    CHECK_ALLOC(part);
    CHECK_ALLOC(part_uses);
    CHECK_ALLOC(f32_uses);
    CHECK_ALLOC(swap);
    TRY(facts_make(g, &f));
    TRY(float_part(g, &f, part));
    for (int v = 0; v < v0; v++) swap[v] = -1;
    for (int i = 0; i < n0; i++) {
        const ptq_node *n = &g->nodes[i];
        rep->n_nodes += part[i];
        for (int j = 0; j < n->n_inputs; j++) {
            if (n->inputs[j] < 0) continue;
            if (part[i] && converted_input(n, j, &f)) part_uses[n->inputs[j]]++;
            else f32_uses[n->inputs[j]]++;
        }
    }
    /* the inputs of the float part: initializers rounded, other producers' values rounded once */
    for (int v = 0; v < v0; v++) {
        if (!part_uses[v]) continue;
        const ptq_value *val = &g->values[v];
        int p = val->producer;
        char base[NAME_CAP];
        if (val->kind == PTQ_VALUE_INITIALIZER && val->t.data) {
            TRY(round_initializer(g, v, part_uses[v], to_half, &swap[v]));
            rep->n_initializers++;
        } else if (p < 0 || !part[p]) { /* a graph input, an INT8 layer's or a float32 node's output */
            snprintf(base, sizeof base, "%s_fp16", g->values[v].name);
            if (to_half) {
                TRY(add_cast(g, v, base, PTQ_F16, &swap[v], &rep->n_casts));
                g->values[swap[v]].t.dtype = PTQ_F16;
            } else {
                int h;
                TRY(add_cast(g, v, base, PTQ_F16, &h, &rep->n_casts));
                snprintf(base, sizeof base, "%s_fp16_fp32", g->values[v].name);
                TRY(add_cast(g, h, base, PTQ_F32, &swap[v], &rep->n_casts));
            }
            rep->n_values++;
        }
    }
    for (int i = 0; i < n0; i++) {
        if (!part[i]) continue;
        for (int j = 0; j < g->nodes[i].n_inputs; j++)
            if (converted_input(&g->nodes[i], j, &f) && swap[g->nodes[i].inputs[j]] >= 0)
                g->nodes[i].inputs[j] = swap[g->nodes[i].inputs[j]];
    }
    /* the outputs of the float part */
    for (int i = 0; i < n0; i++) {
        if (!part[i]) continue;
        for (int o = 0; o < g->nodes[i].n_outputs; o++) {
            int v = g->nodes[i].outputs[o];
            if (v < 0 || f.dt[v] != PTQ_F32) continue;
            char base[NAME_CAP];
            int is_out = 0, fresh;
            for (int k = 0; k < g->n_outputs; k++) is_out |= g->outputs[k] == v;
            if (!to_half) {
                /* read only by float-part Relus, which give the same FP16 values */
                int relu_only = !is_out && !f32_uses[v];
                for (int k = 0; relu_only && k < n0; k++)
                    for (int j = 0; j < g->nodes[k].n_inputs; j++)
                        if (g->nodes[k].inputs[j] == v && strcmp(g->nodes[k].op_type, "Relu")) relu_only = 0;
                if (relu_only) continue;
                int h;
                snprintf(base, sizeof base, "%s_fp32", g->values[v].name);
                TRY(cast_after(g, v, base, PTQ_F16, &fresh, &rep->n_casts)); /* node -> fresh -> Cast(float16) -> v */
                snprintf(base, sizeof base, "%s_fp16", g->values[v].name);
                TRY(cast_after(g, v, base, PTQ_F32, &h, &rep->n_casts));     /* ... -> h -> Cast(float) -> v */
                rep->n_values++;
                continue;
            }
            rep->n_values++;
            if (is_out) { /* the graph output keeps its name and float32 type: a Cast writes it */
                snprintf(base, sizeof base, "%s_fp16", g->values[v].name);
                TRY(cast_after(g, v, base, PTQ_F32, &fresh, &rep->n_casts));
                g->values[fresh].t.dtype = PTQ_F16;
                for (int k = 0; k < n0; k++)
                    for (int j = 0; part[k] && j < g->nodes[k].n_inputs; j++)
                        if (g->nodes[k].inputs[j] == v && converted_input(&g->nodes[k], j, &f)) g->nodes[k].inputs[j] = fresh;
                continue;
            }
            g->values[v].t.dtype = PTQ_F16;
            if (!f32_uses[v]) continue;
            snprintf(base, sizeof base, "%s_fp32", g->values[v].name);
            int f32v;
            TRY(add_cast(g, v, base, PTQ_F32, &f32v, &rep->n_casts));
            for (int k = 0; k < n0; k++)
                for (int j = 0; j < g->nodes[k].n_inputs; j++)
                    if (g->nodes[k].inputs[j] == v && !(part[k] && converted_input(&g->nodes[k], j, &f)))
                        g->nodes[k].inputs[j] = f32v;
        }
    }
    TRY(ptq_graph_sort_nodes(g));
done:
    facts_free(&f);
    free(part);
    free(part_uses);
    free(f32_uses);
    free(swap);
    return st;
}

ptq_status quant_fp16_simulate(ptq_graph *g, quant_fp16_report *rep)
{
    return transform(g, 0, rep);
}

ptq_status quant_fp16_convert(ptq_graph *g, quant_fp16_report *rep)
{
    return transform(g, 1, rep);
}

ptq_status quant_fp16_upcast(ptq_graph *g, int *n_changed)
{
    ptq_status st = PTQ_OK;
    facts f = {0};
    int n0 = g->n_nodes, v0 = g->n_values, casts = 0;
    int *up = malloc(sizeof *up * ((size_t)v0 + 1)); /* the float32 form of a float16 value read by a node */
    *n_changed = 0;
    CHECK_ALLOC(up);
    int any = 0; /* a model without float16 is left as it is, untouched (its errors are the plan's) */
    for (int v = 0; v < v0 && !any; v++) any = g->values[v].t.dtype == PTQ_F16;
    for (int i = 0; i < n0 && !any; i++) any = !strcmp(g->nodes[i].op_type, "Cast") && ptq_attr_int(&g->nodes[i], "to", 0) == PTQ_F16;
    if (!any) goto done;
    TRY(facts_make(g, &f));
    for (int v = 0; v < v0; v++) up[v] = -1;
    for (int i = 0; i < n0; i++) {
        if (!strcmp(g->nodes[i].op_type, "Cast") || !strcmp(g->nodes[i].op_type, "CastLike")) continue;
        int half = 0;
        for (int j = 0; j < g->nodes[i].n_inputs; j++) half |= g->nodes[i].inputs[j] >= 0 && f.dt[g->nodes[i].inputs[j]] == PTQ_F16;
        for (int o = 0; o < g->nodes[i].n_outputs; o++) half |= g->nodes[i].outputs[o] >= 0 && f.dt[g->nodes[i].outputs[o]] == PTQ_F16;
        if (!half) continue;
        (*n_changed)++;
        for (int j = 0; j < g->nodes[i].n_inputs; j++) {
            int v = g->nodes[i].inputs[j];
            if (v < 0 || f.dt[v] != PTQ_F16) continue;
            if (up[v] < 0) {
                char base[NAME_CAP];
                snprintf(base, sizeof base, "%s_fp32", g->values[v].name);
                if (g->values[v].kind == PTQ_VALUE_INITIALIZER && g->values[v].t.data) {
                    ptq_tensor t = g->values[v].t;
                    t.data = NULL;
                    t.dtype = PTQ_F32;
                    TRY(ptq_tensor_alloc(&t));
                    size_t n = ptq_tensor_numel(&t);
                    for (size_t k = 0; k < n; k++) ((float *)t.data)[k] = ptq_f16_to_f32(((const uint16_t *)g->values[v].t.data)[k]);
                    char name[NAME_CAP];
                    ptq_graph_unique_name(g, base, name, sizeof name);
                    st = ptq_graph_add_initializer(g, name, &t, &up[v]);
                    ptq_tensor_free(&t);
                    if (st != PTQ_OK) goto done;
                } else {
                    TRY(add_cast(g, v, base, PTQ_F32, &up[v], &casts));
                }
            }
            g->nodes[i].inputs[j] = up[v];
        }
        for (int o = 0; o < g->nodes[i].n_outputs; o++) {
            int v = g->nodes[i].outputs[o], fresh;
            if (v < 0 || f.dt[v] != PTQ_F16) continue;
            char base[NAME_CAP];
            snprintf(base, sizeof base, "%s_fp32", g->values[v].name);
            TRY(cast_after(g, v, base, PTQ_F16, &fresh, &casts));
        }
    }
    if (*n_changed) TRY(ptq_graph_sort_nodes(g));
done:
    facts_free(&f);
    free(up);
    return st;
}

/* ---- float16 models as float32 twins (see fp16.h) ---- */

/* t (float16 data) widened to float32 in place: exact. */
static ptq_status widen_tensor(ptq_tensor *t)
{
    ptq_status st = PTQ_OK;
    ptq_tensor w = *t;
    w.data = NULL;
    w.dtype = PTQ_F32;
    TRY(ptq_tensor_alloc(&w));
    size_t n = ptq_tensor_numel(t);
    for (size_t k = 0; k < n; k++) ((float *)w.data)[k] = ptq_f16_to_f32(((const uint16_t *)t->data)[k]);
    ptq_tensor_free(t);
    *t = w;
done:
    return st;
}

/* Removes the nodes with drop[i] set (their outputs' readers were redirected), keeps the
 * rest in order and links producers again. */
static ptq_status drop_nodes(ptq_graph *g, const unsigned char *drop)
{
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (drop[i]) ptq_node_clear(&g->nodes[i]);
        else g->nodes[k++] = g->nodes[i];
    }
    g->n_nodes = k;
    return ptq_graph_link(g);
}

/* Reads of value from (node inputs) become reads of value to. */
static void redirect(ptq_graph *g, int from, int to)
{
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_inputs; j++)
            if (g->nodes[i].inputs[j] == from) g->nodes[i].inputs[j] = to;
}

/* Number of node inputs reading v (not subgraphs, not graph outputs). */
static int node_reads(const ptq_graph *g, int v)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_inputs; j++) n += g->nodes[i].inputs[j] == v;
    return n;
}

void quant_fp16_widened_free(quant_fp16_widened *w)
{
    for (int i = 0; i < w->n_io; i++) free(w->io[i]);
    free(w->io);
    memset(w, 0, sizeof *w);
}

ptq_status quant_fp16_widen(ptq_graph *g, quant_fp16_widened *w)
{
    ptq_status st = PTQ_OK;
    facts f = {0};
    unsigned char *drop = NULL;
    int dummy, any = 0;
    memset(w, 0, sizeof *w);
    for (int v = 0; v < g->n_values && !any; v++) any = g->values[v].t.dtype == PTQ_F16;
    for (int i = 0; i < g->n_nodes && !any; i++) {
        const ptq_node *n = &g->nodes[i];
        any = !strcmp(n->op_type, "Cast") && ptq_attr_int(n, "to", 0) == PTQ_F16;
        for (int a = 0; a < n->n_attrs && !any; a++) any = n->attrs[a].type == PTQ_ATTR_TENSOR && n->attrs[a].tensor.dtype == PTQ_F16;
    }
    if (!any) return PTQ_OK; /* a float32 model is left as it is */
    TRY(ptq_graph_constants_to_initializers(g, &dummy));
    /* what computes in float16: activations typed float16, Casts to it, float16 initializers
     * read by other nodes than Cast */
    for (int v = 0; v < g->n_values; v++) {
        const ptq_value *val = &g->values[v];
        if (val->t.dtype != PTQ_F16) continue;
        if (val->kind != PTQ_VALUE_INITIALIZER) w->computes_half = 1;
        else
            for (int i = 0; i < g->n_nodes; i++)
                for (int j = 0; j < g->nodes[i].n_inputs; j++)
                    if (g->nodes[i].inputs[j] == v && strcmp(g->nodes[i].op_type, "Cast")) w->computes_half = 1;
    }
    w->io = calloc((size_t)g->n_inputs + (size_t)g->n_outputs + 1, sizeof *w->io);
    CHECK_ALLOC(w->io);
    for (int k = 0; k < g->n_inputs + g->n_outputs; k++) {
        int v = k < g->n_inputs ? g->inputs[k] : g->outputs[k - g->n_inputs];
        if (g->values[v].kind == PTQ_VALUE_INITIALIZER || g->values[v].t.dtype != PTQ_F16) continue;
        CHECK_ALLOC(w->io[w->n_io] = ptq_strdup(g->values[v].name));
        w->n_io++;
    }
    for (int v = 0; v < g->n_values; v++) {
        ptq_value *val = &g->values[v];
        if (val->t.dtype != PTQ_F16) continue;
        if (val->kind == PTQ_VALUE_INITIALIZER && val->t.data) {
            TRY(widen_tensor(&val->t));
            w->n_initializers++;
        } else {
            val->t.dtype = PTQ_F32;
            w->n_values++;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        ptq_node *n = &g->nodes[i];
        if (n->domain[0] && strcmp(n->domain, "ai.onnx")) continue;
        for (int a = 0; a < n->n_attrs; a++) {
            ptq_attr *at = &n->attrs[a];
            if (at->type == PTQ_ATTR_TENSOR && at->tensor.dtype == PTQ_F16 && at->tensor.data) TRY(widen_tensor(&at->tensor));
            if (at->type == PTQ_ATTR_INT && at->i == PTQ_F16 &&
                ((!strcmp(n->op_type, "Cast") && !strcmp(at->name, "to")) || !strcmp(at->name, "dtype")))
                at->i = PTQ_F32;
        }
    }
    /* Casts to float32 of float32 values (a float16 weight's Cast, the model's own Casts
     * between float16 and float32) are identities now: their readers read the input */
    TRY(facts_make(g, &f));
    CHECK_ALLOC(drop = calloc((size_t)g->n_nodes + 1, 1));
    for (int i = 0; i < g->n_nodes; i++) {
        const ptq_node *n = &g->nodes[i];
        if (strcmp(n->op_type, "Cast") || n->domain[0] || ptq_attr_int(n, "to", 0) != PTQ_F32 || n->n_inputs != 1 ||
            n->n_outputs != 1 || n->inputs[0] < 0 || n->outputs[0] < 0 || f.dt[n->inputs[0]] != PTQ_F32)
            continue;
        int out = n->outputs[0];
        if (g->values[out].is_output || ptq_graph_count_uses(g, out) != node_reads(g, out)) continue;
        redirect(g, out, n->inputs[0]);
        drop[i] = 1;
        w->n_casts++;
    }
    if (w->n_casts) {
        int k = 0; /* the dropped outputs leave value_info */
        for (int i = 0; i < g->n_value_infos; i++) {
            int v = g->value_infos[i], p = g->values[v].producer;
            if (p >= 0 && drop[p]) g->values[v].in_value_info = 0;
            else g->value_infos[k++] = v;
        }
        g->n_value_infos = k;
        TRY(drop_nodes(g, drop));
    }
done:
    facts_free(&f);
    free(drop);
    if (st != PTQ_OK) quant_fp16_widened_free(w);
    return st;
}

ptq_status quant_fp16_restore_io(ptq_graph *g, const quant_fp16_widened *w, int *n_casts)
{
    ptq_status st = PTQ_OK;
    unsigned char *drop = NULL;
    int n0 = g->n_nodes;
    *n_casts = 0;
    if (!w->n_io) return PTQ_OK;
    CHECK_ALLOC(drop = calloc((size_t)n0 + (size_t)w->n_io + 1, 1)); /* each name adds at most one Cast */
    for (int k = 0; k < w->n_io; k++) {
        int v = ptq_graph_find_value(g, w->io[k]);
        if (v < 0) continue;
        int is_in = g->values[v].kind == PTQ_VALUE_INPUT;
        if (is_in) {
            /* readers that want float16 (the float part's Cast) read the input; the others a
             * Cast(float) of it */
            int f32 = -1;
            for (int i = 0; i < n0; i++) {
                ptq_node *n = &g->nodes[i];
                if (drop[i]) continue;
                for (int j = 0; j < n->n_inputs; j++) {
                    if (n->inputs[j] != v) continue;
                    if (!strcmp(n->op_type, "Cast") && ptq_attr_int(n, "to", 0) == PTQ_F16 && n->n_outputs == 1 &&
                        n->outputs[0] >= 0 && !g->values[n->outputs[0]].is_output &&
                        ptq_graph_count_uses(g, n->outputs[0]) == node_reads(g, n->outputs[0])) {
                        drop[i] = 2; /* its readers read v once every reader of v is seen */
                        (*n_casts)--;
                        break;
                    }
                    if (f32 < 0) {
                        char base[NAME_CAP];
                        snprintf(base, sizeof base, "%s_fp32", g->values[v].name);
                        TRY(add_cast(g, v, base, PTQ_F32, &f32, n_casts));
                        n = &g->nodes[i]; /* add_cast may move the nodes */
                    }
                    n->inputs[j] = f32;
                }
            }
            for (int i = 0; i < n0; i++)
                if (drop[i] == 2) {
                    redirect(g, g->nodes[i].outputs[0], v);
                    drop[i] = 1;
                }
            g->values[v].t.dtype = PTQ_F16;
            continue;
        }
        int p = g->values[v].producer;
        if (p < 0) continue;
        const ptq_node *pn = &g->nodes[p];
        int h = pn->n_inputs == 1 ? pn->inputs[0] : -1;
        if (!strcmp(pn->op_type, "Cast") && ptq_attr_int(pn, "to", 0) == PTQ_F32 && h >= 0 && g->values[h].t.dtype == PTQ_F16 &&
            g->values[h].producer >= 0 && !g->values[h].is_output &&
            ptq_graph_count_uses(g, h) == node_reads(g, h)) {
            /* the float part's Cast(float) in front of the output: its input's producer writes it */
            ptq_node *hp = &g->nodes[g->values[h].producer];
            for (int o = 0; o < hp->n_outputs; o++)
                if (hp->outputs[o] == h) hp->outputs[o] = v;
            redirect(g, h, v);
            drop[p] = 1;
            (*n_casts)--;
        } else {
            char base[NAME_CAP];
            int fresh;
            snprintf(base, sizeof base, "%s_fp32", g->values[v].name);
            TRY(cast_after(g, v, base, PTQ_F16, &fresh, n_casts));
            g->values[fresh].t.dtype = PTQ_F32;
        }
        g->values[v].t.dtype = PTQ_F16;
    }
    TRY(drop_nodes(g, drop));
    TRY(ptq_graph_sort_nodes(g));
done:
    free(drop);
    return st;
}

ptq_status quant_fp16_float_inputs(ptq_graph *g, int *n_changed)
{
    ptq_status st = PTQ_OK;
    *n_changed = 0;
    for (int k = 0; k < g->n_inputs; k++) {
        int v = g->inputs[k], h, casts = 0;
        if (g->values[v].kind != PTQ_VALUE_INPUT || g->values[v].t.dtype != PTQ_F16) continue;
        char base[NAME_CAP];
        snprintf(base, sizeof base, "%s_fp16", g->values[v].name);
        int n0 = g->n_nodes;
        TRY(add_cast(g, v, base, PTQ_F16, &h, &casts));
        g->values[h].t = g->values[v].t;
        g->values[h].t.data = NULL;
        for (int i = 0; i < n0; i++)
            for (int j = 0; j < g->nodes[i].n_inputs; j++)
                if (g->nodes[i].inputs[j] == v) g->nodes[i].inputs[j] = h;
        g->values[v].t.dtype = PTQ_F32;
        (*n_changed)++;
    }
    if (*n_changed) TRY(ptq_graph_sort_nodes(g));
done:
    return st;
}
