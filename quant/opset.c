/* opset.c: default-domain opset upgrade to 13 (see opset.h for the list). */
#include "opset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graph_edit.h"
#include "runtime/op.h"

#define NAME_CAP 1024

/* A new initializer named after base holding n values of dtype dt (rank 1, or a scalar). */
static ptq_status add_values(ptq_graph *g, const char *base, ptq_dtype dt, const void *v, int64_t n, int rank1, int *out)
{
    ptq_status st = PTQ_OK;
    char name[NAME_CAP];
    ptq_tensor t = {0};
    t.dtype = dt;
    t.rank = rank1 ? 1 : 0;
    t.dims[0] = n;
    TRY(ptq_tensor_alloc(&t));
    if (n) memcpy(t.data, v, ptq_dtype_size(dt) * (size_t)n);
    ptq_graph_unique_name(g, base, name, sizeof name);
    TRY(ptq_graph_add_initializer(g, name, &t, out));
done:
    ptq_tensor_free(&t);
    return st;
}

static ptq_status add_i64(ptq_graph *g, const char *base, const int64_t *v, int64_t n, int rank1, int *out)
{
    return add_values(g, base, PTQ_I64, v, n, rank1, out);
}

static ptq_status add_f32(ptq_graph *g, const char *base, const float *v, int64_t n, int rank1, int *out)
{
    return add_values(g, base, PTQ_F32, v, n, rank1, out);
}

static void drop_attr(ptq_node *n, const char *name)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) {
            ptq_attr_clear(&n->attrs[i]);
            memmove(&n->attrs[i], &n->attrs[i + 1], sizeof *n->attrs * (size_t)(n->n_attrs - i - 1));
            n->n_attrs--;
            return;
        }
}

/* Sets input slot k (growing the input list with omitted inputs as needed). */
static ptq_status set_input(ptq_node *n, int k, int v)
{
    ptq_status st = PTQ_OK;
    if (k >= n->n_inputs) {
        int *ni = realloc(n->inputs, sizeof(int) * (size_t)(k + 1));
        CHECK_ALLOC(ni);
        n->inputs = ni;
        for (int i = n->n_inputs; i <= k; i++) n->inputs[i] = -1;
        n->n_inputs = k + 1;
    }
    n->inputs[k] = v;
done:
    return st;
}

static ptq_status set_string_attr(ptq_node *n, const char *name, const char *value)
{
    ptq_status st = PTQ_OK;
    ptq_attr a;
    drop_attr(n, name);
    memset(&a, 0, sizeof a);
    a.name = ptq_strdup(name);
    a.type = PTQ_ATTR_STRING;
    a.s = ptq_strdup(value);
    CHECK_ALLOC(a.name);
    CHECK_ALLOC(a.s);
    a.s_len = strlen(value);
    TRY(ptq_node_add_attr(n, &a));
done:
    return st;
}

static ptq_status set_int_attr(ptq_node *n, const char *name, int64_t value)
{
    ptq_attr a;
    drop_attr(n, name);
    memset(&a, 0, sizeof a);
    a.name = ptq_strdup(name);
    if (!a.name) {
        ptq_error("out of memory copying the name of attribute '%s'", name);
        return PTQ_ERR_NOMEM;
    }
    a.type = PTQ_ATTR_INT;
    a.i = value;
    return ptq_node_add_attr(n, &a);
}

/* Moves INTS attribute `attr` of node ni into input slot k as an int64 initializer. */
static ptq_status ints_attr_to_input(ptq_graph *g, int ni, const char *attr, int k, int *changed)
{
    ptq_status st = PTQ_OK;
    size_t n;
    const int64_t *v = ptq_attr_ints(&g->nodes[ni], attr, &n);
    char base[NAME_CAP];
    int iv;
    if (!v) return PTQ_OK;
    snprintf(base, sizeof base, "%.900s_%s", g->nodes[ni].name[0] ? g->nodes[ni].name : g->nodes[ni].op_type, attr);
    TRY(add_i64(g, base, v, (int64_t)n, 1, &iv));
    drop_attr(&g->nodes[ni], attr);
    TRY(set_input(&g->nodes[ni], k, iv));
    *changed = 1;
done:
    return st;
}

static const char *node_base(const ptq_node *n)
{
    return n->name[0] ? n->name : n->op_type;
}

/* Softmax/LogSoftmax/Hardmax below 13 with axis != rank-1: y = Reshape(op13(Flatten(x, axis), axis=1), Shape(x)). */
static ptq_status upgrade_softmax(ptq_graph *g, int ni, int *changed)
{
    ptq_status st = PTQ_OK;
    ptq_node *n = &g->nodes[ni];
    int64_t axis = ptq_attr_int(n, "axis", 1);
    int x = n->inputs[0], y = n->outputs[0];
    int rank = g->values[x].t.rank;
    if (rank > 0 && (axis == rank - 1 || axis == -1)) {
        TRY(set_int_attr(n, "axis", -1));
        return PTQ_OK;
    }
    if (axis == -1) {
        TRY(set_int_attr(n, "axis", -1));
        return PTQ_OK;
    }
    /* general case: flatten to 2-D at axis, softmax over the last axis, reshape back */
    char base[NAME_CAP], name[NAME_CAP];
    int flat, shape, soft_out, k;
    const char *b = node_base(n);
    snprintf(base, sizeof base, "%.900s_flatten_out", b);
    ptq_graph_unique_name(g, base, name, sizeof name);
    TRY(ptq_graph_add_value(g, name, &flat));
    snprintf(base, sizeof base, "%.900s_shape_out", b);
    ptq_graph_unique_name(g, base, name, sizeof name);
    TRY(ptq_graph_add_value(g, name, &shape));
    snprintf(base, sizeof base, "%.900s_2d_out", b);
    ptq_graph_unique_name(g, base, name, sizeof name);
    TRY(ptq_graph_add_value(g, name, &soft_out));
    n = &g->nodes[ni];
    b = node_base(n);
    char bcopy[NAME_CAP];
    snprintf(bcopy, sizeof bcopy, "%s", b);
    snprintf(base, sizeof base, "%.900s_flatten", bcopy);
    ptq_graph_unique_name(g, base, name, sizeof name);
    TRY(ptq_graph_add_node(g, name, "Flatten", "", &x, 1, &flat, 1, &k));
    TRY(set_int_attr(&g->nodes[k], "axis", axis));
    snprintf(base, sizeof base, "%.900s_shape", bcopy);
    ptq_graph_unique_name(g, base, name, sizeof name);
    TRY(ptq_graph_add_node(g, name, "Shape", "", &x, 1, &shape, 1, &k));
    int rin[2] = {soft_out, shape};
    snprintf(base, sizeof base, "%.900s_reshape", bcopy);
    ptq_graph_unique_name(g, base, name, sizeof name);
    TRY(ptq_graph_add_node(g, name, "Reshape", "", rin, 2, &y, 1, &k));
    n = &g->nodes[ni];
    n->inputs[0] = flat;
    n->outputs[0] = soft_out;
    TRY(set_int_attr(n, "axis", -1));
    *changed = 1;
done:
    return st;
}

/* Upsample-7/9 and Resize-10 -> Resize-13, asymmetric coordinates, floor for nearest. */
static ptq_status upgrade_upsample(ptq_graph *g, int ni, int *changed)
{
    ptq_status st = PTQ_OK;
    ptq_node *n = &g->nodes[ni];
    int is_upsample = strcmp(n->op_type, "Upsample") == 0;
    int scales = n->n_inputs > 1 ? n->inputs[1] : -1;
    const char *mode = ptq_attr_string(n, "mode", "nearest");
    char modebuf[32];
    snprintf(modebuf, sizeof modebuf, "%s", strcmp(mode, "bilinear") == 0 ? "linear" : mode);
    if (is_upsample && scales < 0) {
        size_t cnt;
        const float *s = ptq_attr_floats(n, "scales", &cnt);
        if (!s) FAIL(PTQ_ERR_FORMAT, "Upsample '%s': no scales", n->name);
        char base[NAME_CAP];
        snprintf(base, sizeof base, "%.900s_scales", node_base(n));
        TRY(add_f32(g, base, s, (int64_t)cnt, 1, &scales));
        n = &g->nodes[ni];
        drop_attr(n, "scales");
    }
    /* inputs: X, roi (empty), scales */
    int x = n->inputs[0];
    int *ni2 = realloc(n->inputs, sizeof(int) * 3);
    CHECK_ALLOC(ni2);
    n->inputs = ni2;
    n->inputs[0] = x;
    n->inputs[1] = -1;
    n->inputs[2] = scales;
    n->n_inputs = 3;
    if (is_upsample) {
        free(n->op_type);
        n->op_type = ptq_strdup("Resize");
        CHECK_ALLOC(n->op_type);
    }
    TRY(set_string_attr(n, "mode", modebuf));
    TRY(set_string_attr(n, "coordinate_transformation_mode", "asymmetric"));
    if (strcmp(modebuf, "nearest") == 0) TRY(set_string_attr(n, "nearest_mode", "floor"));
    *changed = 1;
done:
    return st;
}

ptq_status quant_upgrade_opset(ptq_graph *g, int64_t target, int *n_rewritten)
{
    ptq_status st = PTQ_OK;
    int64_t from = ptq_graph_opset(g, "");
    *n_rewritten = 0;
    if (from >= target) return PTQ_OK;
    if (target != 13) FAIL(PTQ_ERR_UNSUPPORTED, "opset upgrade to %lld: only 13 is supported", (long long)target);
    if (from < 7) FAIL(PTQ_ERR_UNSUPPORTED, "model opset %lld: ptq reads opset 7 and up", (long long)from);
    int n_orig = g->n_nodes;
    for (int ni = 0; ni < n_orig; ni++) {
        ptq_node *n = &g->nodes[ni];
        const char *op = n->op_type;
        int changed = 0;
        char base[NAME_CAP];
        if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0) continue;
        if (ptq_op_find("", op) < 0)
            FAIL(PTQ_ERR_UNSUPPORTED, "opset upgrade: op %s ('%s') is not among ptq's ops", op, n->name);
        if (strcmp(op, "Clip") == 0 && from < 11) {
            float lo = ptq_attr_float(n, "min", -INFINITY), hi = ptq_attr_float(n, "max", INFINITY);
            int has_lo = ptq_node_attr(n, "min") != NULL, has_hi = ptq_node_attr(n, "max") != NULL, v;
            if (has_lo) {
                snprintf(base, sizeof base, "%.900s_min", node_base(n));
                TRY(add_f32(g, base, &lo, 1, 0, &v));
                TRY(set_input(&g->nodes[ni], 1, v));
            }
            if (has_hi) {
                snprintf(base, sizeof base, "%.900s_max", node_base(&g->nodes[ni]));
                TRY(add_f32(g, base, &hi, 1, 0, &v));
                TRY(set_input(&g->nodes[ni], 2, v));
            }
            drop_attr(&g->nodes[ni], "min");
            drop_attr(&g->nodes[ni], "max");
            changed = 1;
        } else if (strcmp(op, "Slice") == 0 && from < 10) {
            TRY(ints_attr_to_input(g, ni, "starts", 1, &changed));
            TRY(ints_attr_to_input(g, ni, "ends", 2, &changed));
            TRY(ints_attr_to_input(g, ni, "axes", 3, &changed));
        } else if ((strcmp(op, "Squeeze") == 0 || strcmp(op, "Unsqueeze") == 0 || strcmp(op, "ReduceSum") == 0)) {
            TRY(ints_attr_to_input(g, ni, "axes", 1, &changed));
        } else if (strcmp(op, "Split") == 0) {
            TRY(ints_attr_to_input(g, ni, "split", 1, &changed));
        } else if (strcmp(op, "Pad") == 0 && from < 11) {
            float value = ptq_attr_float(n, "value", 0.0f);
            int v;
            TRY(ints_attr_to_input(g, ni, "pads", 1, &changed));
            snprintf(base, sizeof base, "%.900s_value", node_base(&g->nodes[ni]));
            TRY(add_f32(g, base, &value, 1, 0, &v));
            TRY(set_input(&g->nodes[ni], 2, v));
            drop_attr(&g->nodes[ni], "value");
            changed = 1;
        } else if (strcmp(op, "Dropout") == 0 && from < 12) {
            drop_attr(n, "ratio");
            drop_attr(n, "is_test");
            changed = 1;
        } else if ((strcmp(op, "Softmax") == 0 || strcmp(op, "LogSoftmax") == 0 || strcmp(op, "Hardmax") == 0)) {
            TRY(upgrade_softmax(g, ni, &changed));
        } else if (strcmp(op, "Upsample") == 0 || (strcmp(op, "Resize") == 0 && from < 11)) {
            TRY(upgrade_upsample(g, ni, &changed));
        } else if (strcmp(op, "BatchNormalization") == 0 && from < 9) {
            if (ptq_attr_int(n, "spatial", 1) != 1)
                FAIL(PTQ_ERR_UNSUPPORTED, "BatchNormalization '%s': spatial=0 has no opset-13 equivalent", n->name);
            drop_attr(n, "spatial");
            drop_attr(n, "consumed_inputs");
            changed = 1;
        }
        *n_rewritten += changed;
    }
    for (int i = 0; i < g->n_opsets; i++) {
        const char *d = g->opsets[i].domain ? g->opsets[i].domain : "";
        if (!d[0] || strcmp(d, "ai.onnx") == 0) g->opsets[i].version = target;
    }
    if (g->ir_version < 7) g->ir_version = 7;
    TRY(ptq_graph_sort_nodes(g));
done:
    return st;
}
