/* onnx.c: ONNX protobuf (protobuf-c, bindings generated at build time) <-> ptq_graph.
 * Load converts everything into the IR and frees the protobuf; save builds a new
 * ModelProto whose strings and tensor bytes point into the IR (nothing copied),
 * packs it and releases only the arrays it allocated. */
#include "onnx.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"
#include "onnx.pb-c.h"

#define MAX_MODEL_BYTES ((size_t)2 << 30)
#define MAX_TENSOR_BYTES ((uint64_t)1 << 40)

/* ---------------------------------------------------------------- load */

typedef struct {
    const char *what;     /* file name for messages */
    const char *base_dir; /* for external data; NULL: refused */
    ptq_graph *g;
} load_ctx;

/* Value index for `name`, created (kind INTERMEDIATE) if new. */
static ptq_status value_for(ptq_graph *g, const char *name, int *out)
{
    int v = ptq_graph_find_value(g, name);
    if (v >= 0) {
        *out = v;
        return PTQ_OK;
    }
    return ptq_graph_add_value(g, name, out);
}

static ptq_status read_external(const load_ctx *lc, const Onnx__TensorProto *tp, const char *tname, uint8_t *dst,
                                size_t want)
{
    ptq_status st = PTQ_OK;
    const char *location = NULL;
    long long offset = 0, length = -1;
    FILE *fp = NULL;
    char path[4096];
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key || !e->value) continue;
        if (strcmp(e->key, "location") == 0) location = e->value;
        else if (strcmp(e->key, "offset") == 0) offset = strtoll(e->value, NULL, 10);
        else if (strcmp(e->key, "length") == 0) length = strtoll(e->value, NULL, 10);
    }
    if (!location) FAIL(PTQ_ERR_FORMAT, "%s: tensor '%s': external data without a location", lc->what, tname);
    if (!lc->base_dir) FAIL(PTQ_ERR_FORMAT, "%s: tensor '%s': external data is not allowed here", lc->what, tname);
    if (location[0] == '/' || strstr(location, "..") != NULL)
        FAIL(PTQ_ERR_FORMAT, "%s: tensor '%s': external data location '%s' leaves the model's folder", lc->what, tname,
             location);
    if (offset < 0 || (length >= 0 && (unsigned long long)length != want))
        FAIL(PTQ_ERR_FORMAT, "%s: tensor '%s': external data offset %lld length %lld for %zu bytes", lc->what, tname,
             offset, length, want);
    snprintf(path, sizeof path, "%s/%s", lc->base_dir, location);
    fp = fopen(path, "rb");
    if (!fp) FAIL(PTQ_ERR_IO, "%s: tensor '%s': external data %s: %s", lc->what, tname, path, strerror(errno));
    if (fseek(fp, (long)offset, SEEK_SET) != 0 || (want && fread(dst, 1, want, fp) != want))
        FAIL(PTQ_ERR_FORMAT, "%s: tensor '%s': external data %s is shorter than offset %lld + %zu bytes", lc->what,
             tname, path, offset, want);
done:
    if (fp) fclose(fp);
    return st;
}

/* TensorProto -> ptq_tensor (data owned by t). */
static ptq_status tensor_from_proto(const load_ctx *lc, const Onnx__TensorProto *tp, ptq_tensor *t)
{
    ptq_status st = PTQ_OK;
    const char *tname = tp->name ? tp->name : "";
    memset(t, 0, sizeof *t);
    ptq_dtype dt = (ptq_dtype)tp->data_type;
    size_t es = ptq_dtype_size(dt);
    if (tp->data_type == PTQ_STRING)
        FAIL(PTQ_ERR_UNSUPPORTED, "%s: tensor '%s': string tensors are not supported", lc->what, tname);
    if (es == 0)
        FAIL(PTQ_ERR_UNSUPPORTED, "%s: tensor '%s': data type %d is not supported", lc->what, tname, (int)tp->data_type);
    if (tp->n_dims > PTQ_MAX_RANK)
        FAIL(PTQ_ERR_UNSUPPORTED, "%s: tensor '%s': rank %zu (at most %d)", lc->what, tname, tp->n_dims, PTQ_MAX_RANK);
    if (tp->segment) FAIL(PTQ_ERR_UNSUPPORTED, "%s: tensor '%s': segmented tensors are not supported", lc->what, tname);
    t->dtype = dt;
    t->rank = (int)tp->n_dims;
    uint64_t n = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0) FAIL(PTQ_ERR_FORMAT, "%s: tensor '%s': negative dim %lld", lc->what, tname, (long long)tp->dims[i]);
        t->dims[i] = tp->dims[i];
        if (tp->dims[i] && n > MAX_TENSOR_BYTES / (uint64_t)tp->dims[i])
            FAIL(PTQ_ERR_FORMAT, "%s: tensor '%s': absurd size", lc->what, tname);
        n *= (uint64_t)tp->dims[i];
    }
    if (n * es > MAX_TENSOR_BYTES) FAIL(PTQ_ERR_FORMAT, "%s: tensor '%s': absurd size", lc->what, tname);
    TRY(ptq_tensor_alloc(t));
    size_t bytes = (size_t)n * es;
    uint8_t *dst = t->data;
    char shape[96];
    ptq_shape_str(t, shape, sizeof shape);
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        TRY(read_external(lc, tp, tname, dst, bytes));
    } else if (tp->has_raw_data) {
        if (tp->raw_data.len != bytes)
            FAIL(PTQ_ERR_FORMAT, "%s: tensor '%s': %zu bytes of raw_data for %s %s (%zu expected)", lc->what, tname,
                 tp->raw_data.len, shape, ptq_dtype_name(dt), bytes);
        if (bytes) memcpy(dst, tp->raw_data.data, bytes);
    } else {
        size_t have;
        switch (dt) {
        case PTQ_F32: have = tp->n_float_data; break;
        case PTQ_F64: have = tp->n_double_data; break;
        case PTQ_I64: have = tp->n_int64_data; break;
        case PTQ_U32: case PTQ_U64: have = tp->n_uint64_data; break;
        default: have = tp->n_int32_data; break; /* int32, int16, int8, uint16, uint8, bool, float16 */
        }
        if (have != n)
            FAIL(PTQ_ERR_FORMAT, "%s: tensor '%s': %zu values for %s %s (%llu expected)", lc->what, tname, have, shape,
                 ptq_dtype_name(dt), (unsigned long long)n);
        for (size_t i = 0; i < n; i++) {
            switch (dt) {
            case PTQ_F32: ((float *)dst)[i] = tp->float_data[i]; break;
            case PTQ_F64: ((double *)dst)[i] = tp->double_data[i]; break;
            case PTQ_I64: ((int64_t *)dst)[i] = tp->int64_data[i]; break;
            case PTQ_U32: ((uint32_t *)dst)[i] = (uint32_t)tp->uint64_data[i]; break;
            case PTQ_U64: ((uint64_t *)dst)[i] = tp->uint64_data[i]; break;
            case PTQ_I32: ((int32_t *)dst)[i] = tp->int32_data[i]; break;
            case PTQ_I16: ((int16_t *)dst)[i] = (int16_t)tp->int32_data[i]; break;
            case PTQ_U16: case PTQ_F16: ((uint16_t *)dst)[i] = (uint16_t)tp->int32_data[i]; break;
            case PTQ_I8: ((int8_t *)dst)[i] = (int8_t)tp->int32_data[i]; break;
            default: ((uint8_t *)dst)[i] = (uint8_t)tp->int32_data[i]; break;
            }
        }
    }
done:
    if (st != PTQ_OK) ptq_tensor_free(t);
    return st;
}

/* Declared type of a ValueInfoProto into value v (tensor types only). */
static ptq_status read_value_info(const load_ctx *lc, const Onnx__ValueInfoProto *vi, ptq_value *v)
{
    ptq_status st = PTQ_OK;
    if (vi->doc_string && !v->doc_string) {
        v->doc_string = ptq_strdup(vi->doc_string);
        CHECK_ALLOC(v->doc_string);
    }
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type) return PTQ_OK;
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    v->has_type = 1;
    if (v->kind != PTQ_VALUE_INITIALIZER) v->t.dtype = (ptq_dtype)tt->elem_type;
    if (!tt->shape) {
        if (v->kind != PTQ_VALUE_INITIALIZER) v->t.rank = -1;
        return PTQ_OK;
    }
    if (tt->shape->n_dim > PTQ_MAX_RANK)
        FAIL(PTQ_ERR_UNSUPPORTED, "%s: '%s' has rank %zu (at most %d)", lc->what, vi->name, tt->shape->n_dim, PTQ_MAX_RANK);
    if (v->kind == PTQ_VALUE_INITIALIZER) return PTQ_OK; /* the data's shape wins */
    v->t.rank = (int)tt->shape->n_dim;
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        free(v->dim_params[d]);
        v->dim_params[d] = NULL;
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value >= 0) {
            v->t.dims[d] = dim->dim_value;
        } else {
            v->t.dims[d] = -1;
            if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param) {
                v->dim_params[d] = ptq_strdup(dim->dim_param);
                CHECK_ALLOC(v->dim_params[d]);
            }
        }
    }
done:
    return st;
}

static ptq_status pack_opaque(const ProtobufCMessage *m, uint8_t **out, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    *out = malloc(n ? n : 1);
    if (!*out) {
        ptq_error("out of memory");
        return PTQ_ERR_NOMEM;
    }
    *len = protobuf_c_message_pack(m, *out);
    return PTQ_OK;
}

static ptq_status read_attr(const load_ctx *lc, const Onnx__AttributeProto *ap, const char *node, ptq_attr *a)
{
    ptq_status st = PTQ_OK;
    memset(a, 0, sizeof *a);
    if (!ap->name) FAIL(PTQ_ERR_FORMAT, "%s: node '%s': attribute without a name", lc->what, node);
    a->name = ptq_strdup(ap->name);
    CHECK_ALLOC(a->name);
    a->type = (ptq_attr_type)ap->type;
    if (ap->doc_string) CHECK_ALLOC(a->doc_string = ptq_strdup(ap->doc_string));
    if (ap->ref_attr_name) CHECK_ALLOC(a->ref_attr_name = ptq_strdup(ap->ref_attr_name));
    switch (ap->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: a->f = ap->f; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: a->i = ap->i; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        a->s = malloc(ap->s.len + 1);
        CHECK_ALLOC(a->s);
        if (ap->s.len) memcpy(a->s, ap->s.data, ap->s.len);
        a->s[ap->s.len] = 0;
        a->s_len = ap->s.len;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        a->n = ap->n_floats;
        a->floats = malloc(sizeof(float) * (a->n ? a->n : 1));
        CHECK_ALLOC(a->floats);
        if (a->n) memcpy(a->floats, ap->floats, sizeof(float) * a->n);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        a->n = ap->n_ints;
        a->ints = malloc(sizeof(int64_t) * (a->n ? a->n : 1));
        CHECK_ALLOC(a->ints);
        if (a->n) memcpy(a->ints, ap->ints, sizeof(int64_t) * a->n);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        a->n = ap->n_strings;
        a->strings = calloc(a->n ? a->n : 1, sizeof(char *));
        CHECK_ALLOC(a->strings);
        for (size_t i = 0; i < a->n; i++) {
            a->strings[i] = malloc(ap->strings[i].len + 1);
            CHECK_ALLOC(a->strings[i]);
            if (ap->strings[i].len) memcpy(a->strings[i], ap->strings[i].data, ap->strings[i].len);
            a->strings[i][ap->strings[i].len] = 0;
        }
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        if (!ap->t) FAIL(PTQ_ERR_FORMAT, "%s: node '%s': tensor attribute '%s' has no tensor", lc->what, node, ap->name);
        TRY(tensor_from_proto(lc, ap->t, &a->tensor));
        if (ap->t->name) CHECK_ALLOC(a->tensor_name = ptq_strdup(ap->t->name));
        break;
    default: /* graphs, tensor lists, sparse tensors, type protos: kept verbatim */
        TRY(pack_opaque(&ap->base, &a->opaque, &a->opaque_len));
        break;
    }
done:
    return st;
}

static ptq_status graph_from_proto(load_ctx *lc, const Onnx__ModelProto *mp)
{
    ptq_status st = PTQ_OK;
    ptq_graph *g = lc->g;
    const Onnx__GraphProto *gp = mp->graph;
    if (!gp) FAIL(PTQ_ERR_FORMAT, "%s: the model has no graph", lc->what);
    g->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    g->model_version = mp->has_model_version ? mp->model_version : 0;
    if (mp->producer_name) CHECK_ALLOC(g->producer_name = ptq_strdup(mp->producer_name));
    if (mp->producer_version) CHECK_ALLOC(g->producer_version = ptq_strdup(mp->producer_version));
    if (mp->domain) CHECK_ALLOC(g->domain = ptq_strdup(mp->domain));
    if (mp->doc_string) CHECK_ALLOC(g->doc_string = ptq_strdup(mp->doc_string));
    if (gp->name) CHECK_ALLOC(g->graph_name = ptq_strdup(gp->name));
    if (gp->doc_string) CHECK_ALLOC(g->graph_doc_string = ptq_strdup(gp->doc_string));
    g->opsets = calloc(mp->n_opset_import + 1, sizeof *g->opsets);
    CHECK_ALLOC(g->opsets);
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        g->opsets[i].domain = ptq_strdup(mp->opset_import[i]->domain ? mp->opset_import[i]->domain : "");
        CHECK_ALLOC(g->opsets[i].domain);
        g->opsets[i].version = mp->opset_import[i]->version;
        g->n_opsets++;
    }
    g->metadata = calloc(mp->n_metadata_props + 1, sizeof *g->metadata);
    CHECK_ALLOC(g->metadata);
    for (size_t i = 0; i < mp->n_metadata_props; i++) {
        g->metadata[i].key = ptq_strdup(mp->metadata_props[i]->key ? mp->metadata_props[i]->key : "");
        g->metadata[i].value = ptq_strdup(mp->metadata_props[i]->value ? mp->metadata_props[i]->value : "");
        CHECK_ALLOC(g->metadata[i].key);
        CHECK_ALLOC(g->metadata[i].value);
        g->n_metadata++;
    }
    /* model and graph parts ptq does not decode, packed for the round trip */
    if (mp->n_training_info || mp->n_functions || gp->n_sparse_initializer || gp->n_quantization_annotation) {
        Onnx__ModelProto keep = ONNX__MODEL_PROTO__INIT;
        Onnx__GraphProto keepg = ONNX__GRAPH_PROTO__INIT;
        keep.n_training_info = mp->n_training_info;
        keep.training_info = mp->training_info;
        keep.n_functions = mp->n_functions;
        keep.functions = mp->functions;
        keepg.n_sparse_initializer = gp->n_sparse_initializer;
        keepg.sparse_initializer = gp->sparse_initializer;
        keepg.n_quantization_annotation = gp->n_quantization_annotation;
        keepg.quantization_annotation = gp->quantization_annotation;
        keep.graph = &keepg;
        TRY(pack_opaque(&keep.base, &g->opaque_model, &g->opaque_model_len));
    }

    g->inputs = malloc(sizeof(int) * (gp->n_input + 1));
    g->outputs = malloc(sizeof(int) * (gp->n_output + 1));
    g->initializers = malloc(sizeof(int) * (gp->n_initializer + 1));
    g->value_infos = malloc(sizeof(int) * (gp->n_value_info + 1));
    CHECK_ALLOC(g->inputs);
    CHECK_ALLOC(g->outputs);
    CHECK_ALLOC(g->initializers);
    CHECK_ALLOC(g->value_infos);
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        int v;
        if (!tp->name || !tp->name[0]) FAIL(PTQ_ERR_FORMAT, "%s: initializer %zu has no name", lc->what, i);
        if (ptq_graph_find_value(g, tp->name) >= 0)
            FAIL(PTQ_ERR_FORMAT, "%s: initializer '%s' is defined twice", lc->what, tp->name);
        TRY(ptq_graph_add_value(g, tp->name, &v));
        ptq_value *val = &g->values[v];
        val->kind = PTQ_VALUE_INITIALIZER;
        TRY(tensor_from_proto(lc, tp, &val->t));
        if (tp->doc_string) CHECK_ALLOC(val->doc_string = ptq_strdup(tp->doc_string));
        g->initializers[g->n_initializers++] = v;
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        int v;
        if (!vi->name || !vi->name[0]) FAIL(PTQ_ERR_FORMAT, "%s: graph input %zu has no name", lc->what, i);
        v = ptq_graph_find_value(g, vi->name);
        if (v >= 0 && g->values[v].kind == PTQ_VALUE_INITIALIZER) {
            g->values[v].initializer_is_input = 1;
        } else if (v >= 0) {
            FAIL(PTQ_ERR_FORMAT, "%s: graph input '%s' is listed twice", lc->what, vi->name);
        } else {
            TRY(ptq_graph_add_value(g, vi->name, &v));
            g->values[v].kind = PTQ_VALUE_INPUT;
        }
        TRY(read_value_info(lc, vi, &g->values[v]));
        g->inputs[g->n_inputs++] = v;
    }
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        const char *nname = np->name ? np->name : "";
        int *ins = NULL, *outs = NULL, n;
        if (!np->op_type || !np->op_type[0]) FAIL(PTQ_ERR_FORMAT, "%s: node %zu ('%s') has no op_type", lc->what, i, nname);
        ins = malloc(sizeof(int) * (np->n_input + 1));
        outs = malloc(sizeof(int) * (np->n_output + 1));
        if (!ins || !outs) {
            free(ins);
            free(outs);
            FAIL(PTQ_ERR_NOMEM, "out of memory");
        }
        for (size_t k = 0; k < np->n_input && st == PTQ_OK; k++)
            if (!np->input[k] || !np->input[k][0]) ins[k] = -1;
            else st = value_for(g, np->input[k], &ins[k]);
        for (size_t k = 0; k < np->n_output && st == PTQ_OK; k++)
            if (!np->output[k] || !np->output[k][0]) outs[k] = -1;
            else st = value_for(g, np->output[k], &outs[k]);
        if (st == PTQ_OK)
            st = ptq_graph_add_node(g, nname, np->op_type, np->domain, ins, (int)np->n_input, outs, (int)np->n_output, &n);
        free(ins);
        free(outs);
        if (st != PTQ_OK) goto done;
        ptq_node *node = &g->nodes[n];
        if (np->doc_string) CHECK_ALLOC(node->doc_string = ptq_strdup(np->doc_string));
        for (size_t k = 0; k < np->n_attribute; k++) {
            ptq_attr a;
            st = read_attr(lc, np->attribute[k], nname, &a);
            if (st != PTQ_OK) {
                ptq_attr_clear(&a);
                goto done;
            }
            TRY(ptq_node_add_attr(&g->nodes[n], &a));
        }
    }
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        int v;
        if (!vi->name || !vi->name[0]) FAIL(PTQ_ERR_FORMAT, "%s: graph output %zu has no name", lc->what, i);
        TRY(value_for(g, vi->name, &v));
        g->values[v].is_output = 1;
        TRY(read_value_info(lc, vi, &g->values[v]));
        g->outputs[g->n_outputs++] = v;
    }
    for (size_t i = 0; i < gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = gp->value_info[i];
        int v;
        if (!vi->name || !vi->name[0]) continue;
        TRY(value_for(g, vi->name, &v));
        g->values[v].in_value_info = 1;
        TRY(read_value_info(lc, vi, &g->values[v]));
        g->value_infos[g->n_value_infos++] = v;
    }
    st = ptq_graph_link(g);
    if (st != PTQ_OK) ptq_error_prefix("%s: ", lc->what);
done:
    return st;
}

ptq_status onnx_model_load_buffer(const uint8_t *buf, size_t len, const char *base_dir, const char *what,
                                  ptq_graph **out)
{
    ptq_status st = PTQ_OK;
    Onnx__ModelProto *mp = NULL;
    load_ctx lc = {what ? what : "model", base_dir, NULL};
    *out = NULL;
    if (len == 0) FAIL(PTQ_ERR_FORMAT, "%s: empty file, not an ONNX model", lc.what);
    mp = onnx__model_proto__unpack(NULL, len, buf);
    if (!mp) FAIL(PTQ_ERR_FORMAT, "%s: not an ONNX model (protobuf parse failed: truncated or corrupt)", lc.what);
    if (!mp->graph || (!mp->has_ir_version && mp->n_opset_import == 0))
        FAIL(PTQ_ERR_FORMAT, "%s: not an ONNX model (no graph or no ir_version)", lc.what);
    lc.g = ptq_graph_create();
    CHECK_ALLOC(lc.g);
    TRY(graph_from_proto(&lc, mp));
    *out = lc.g;
    lc.g = NULL;
done:
    if (mp) onnx__model_proto__free_unpacked(mp, NULL);
    ptq_graph_destroy(lc.g);
    return st;
}

ptq_status onnx_model_load(const char *path, ptq_graph **out)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len = 0;
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else snprintf(dir, sizeof dir, ".");
    *out = NULL;
    TRY(io_read_file(path, &buf, &len, MAX_MODEL_BYTES));
    TRY(onnx_model_load_buffer(buf, len, dir, path, out));
done:
    free(buf);
    return st;
}

ptq_status onnx_tensor_load(const char *path, ptq_tensor *out, char **name)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len = 0;
    Onnx__TensorProto *tp = NULL;
    load_ctx lc = {path, NULL, NULL};
    memset(out, 0, sizeof *out);
    if (name) *name = NULL;
    TRY(io_read_file(path, &buf, &len, MAX_MODEL_BYTES));
    tp = onnx__tensor_proto__unpack(NULL, len, buf);
    if (!tp) FAIL(PTQ_ERR_UNSUPPORTED, "%s: not a TensorProto (a sequence, map or optional?)", path);
    if (!tp->has_data_type || tp->data_type == 0) FAIL(PTQ_ERR_UNSUPPORTED, "%s: not a TensorProto (no data type)", path);
    TRY(tensor_from_proto(&lc, tp, out));
    if (name && tp->name) *name = ptq_strdup(tp->name);
done:
    if (tp) onnx__tensor_proto__free_unpacked(tp, NULL);
    free(buf);
    return st;
}

/* ---------------------------------------------------------------- save */

/* Arena of everything save allocates, released in one go. */
typedef struct {
    void **ptrs;
    size_t n, cap;
    int oom;
} pool;

static void *pool_alloc(pool *p, size_t bytes)
{
    if (p->oom) return NULL;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        void **np = realloc(p->ptrs, sizeof(void *) * cap);
        if (!np) {
            p->oom = 1;
            return NULL;
        }
        p->ptrs = np;
        p->cap = cap;
    }
    void *m = calloc(1, bytes ? bytes : 1);
    if (!m) {
        p->oom = 1;
        return NULL;
    }
    p->ptrs[p->n++] = m;
    return m;
}

static void pool_free(pool *p)
{
    for (size_t i = 0; i < p->n; i++) free(p->ptrs[i]);
    free(p->ptrs);
}


static Onnx__TensorProto *tensor_to_proto(pool *p, const ptq_tensor *t, const char *name, const char *doc)
{
    Onnx__TensorProto *tp = pool_alloc(p, sizeof *tp);
    int64_t *dims = pool_alloc(p, sizeof(int64_t) * (size_t)(t->rank ? t->rank : 1));
    if (!tp || !dims) return NULL;
    onnx__tensor_proto__init(tp);
    for (int i = 0; i < t->rank; i++) dims[i] = t->dims[i];
    tp->n_dims = (size_t)t->rank;
    tp->dims = dims;
    tp->has_data_type = 1;
    tp->data_type = (int32_t)t->dtype;
    tp->name = (char *)name;
    tp->doc_string = (char *)doc;
    tp->has_raw_data = ptq_tensor_nbytes(t) > 0; /* an empty tensor has no data field */
    tp->raw_data.len = ptq_tensor_nbytes(t);
    tp->raw_data.data = t->data;
    return tp;
}

static Onnx__ValueInfoProto *value_info_to_proto(pool *p, const ptq_value *v)
{
    Onnx__ValueInfoProto *vi = pool_alloc(p, sizeof *vi);
    if (!vi) return NULL;
    onnx__value_info_proto__init(vi);
    vi->name = v->name;
    vi->doc_string = v->doc_string;
    if (!v->has_type && v->kind != PTQ_VALUE_INITIALIZER) return vi;
    Onnx__TypeProto *tp = pool_alloc(p, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = pool_alloc(p, sizeof *tt);
    if (!tp || !tt) return NULL;
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = (int32_t)v->t.dtype;
    vi->type = tp;
    if (v->t.rank < 0) return vi;
    Onnx__TensorShapeProto *sh = pool_alloc(p, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dims = pool_alloc(p, sizeof(void *) * (size_t)(v->t.rank + 1));
    if (!sh || !dims) return NULL;
    onnx__tensor_shape_proto__init(sh);
    for (int d = 0; d < v->t.rank; d++) {
        Onnx__TensorShapeProto__Dimension *dim = pool_alloc(p, sizeof *dim);
        if (!dim) return NULL;
        onnx__tensor_shape_proto__dimension__init(dim);
        if (v->t.dims[d] >= 0) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = v->t.dims[d];
        } else if (v->dim_params[d]) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = v->dim_params[d];
        }
        dims[d] = dim;
    }
    sh->n_dim = (size_t)v->t.rank;
    sh->dim = dims;
    tt->shape = sh;
    return vi;
}

static Onnx__AttributeProto *attr_to_proto(pool *p, const ptq_attr *a, Onnx__AttributeProto **unpacked)
{
    *unpacked = NULL;
    if (a->opaque) {
        Onnx__AttributeProto *ap = onnx__attribute_proto__unpack(NULL, a->opaque_len, a->opaque);
        *unpacked = ap;
        return ap;
    }
    Onnx__AttributeProto *ap = pool_alloc(p, sizeof *ap);
    if (!ap) return NULL;
    onnx__attribute_proto__init(ap);
    ap->name = a->name;
    ap->doc_string = a->doc_string;
    ap->ref_attr_name = a->ref_attr_name;
    ap->has_type = 1;
    ap->type = (Onnx__AttributeProto__AttributeType)a->type;
    switch (a->type) {
    case PTQ_ATTR_FLOAT: ap->has_f = 1; ap->f = a->f; break;
    case PTQ_ATTR_INT: ap->has_i = 1; ap->i = a->i; break;
    case PTQ_ATTR_STRING:
        ap->has_s = 1;
        ap->s.data = (uint8_t *)a->s;
        ap->s.len = a->s_len;
        break;
    case PTQ_ATTR_FLOATS: ap->n_floats = a->n; ap->floats = a->floats; break;
    case PTQ_ATTR_INTS: ap->n_ints = a->n; ap->ints = a->ints; break;
    case PTQ_ATTR_STRINGS: {
        ProtobufCBinaryData *s = pool_alloc(p, sizeof *s * (a->n ? a->n : 1));
        if (!s) return NULL;
        for (size_t i = 0; i < a->n; i++) {
            s[i].data = (uint8_t *)a->strings[i];
            s[i].len = strlen(a->strings[i]);
        }
        ap->n_strings = a->n;
        ap->strings = s;
        break;
    }
    case PTQ_ATTR_TENSOR:
        ap->t = tensor_to_proto(p, &a->tensor, a->tensor_name, NULL);
        if (!ap->t) return NULL;
        break;
    default: break;
    }
    return ap;
}

ptq_status onnx_model_serialize(const ptq_graph *g, uint8_t **buf, size_t *len)
{
    ptq_status st = PTQ_OK;
    pool p = {0};
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto gp = ONNX__GRAPH_PROTO__INIT;
    Onnx__ModelProto *kept = NULL;
    Onnx__AttributeProto **unpacked = NULL;
    size_t n_unpacked = 0, total_attrs = 0;
    *buf = NULL;
    *len = 0;
    for (int i = 0; i < g->n_nodes; i++) total_attrs += (size_t)g->nodes[i].n_attrs;
    unpacked = calloc(total_attrs + 1, sizeof *unpacked);
    CHECK_ALLOC(unpacked);

    mp.has_ir_version = 1;
    mp.ir_version = g->ir_version;
    mp.producer_name = g->producer_name;
    mp.producer_version = g->producer_version;
    mp.domain = g->domain;
    mp.doc_string = g->doc_string;
    if (g->model_version) {
        mp.has_model_version = 1;
        mp.model_version = g->model_version;
    }
    mp.opset_import = pool_alloc(&p, sizeof(void *) * (size_t)(g->n_opsets + 1));
    CHECK_ALLOC(mp.opset_import);
    for (int i = 0; i < g->n_opsets; i++) {
        Onnx__OperatorSetIdProto *o = pool_alloc(&p, sizeof *o);
        CHECK_ALLOC(o);
        onnx__operator_set_id_proto__init(o);
        o->domain = g->opsets[i].domain;
        o->has_version = 1;
        o->version = g->opsets[i].version;
        mp.opset_import[mp.n_opset_import++] = o;
    }
    mp.metadata_props = pool_alloc(&p, sizeof(void *) * (size_t)(g->n_metadata + 1));
    CHECK_ALLOC(mp.metadata_props);
    for (int i = 0; i < g->n_metadata; i++) {
        Onnx__StringStringEntryProto *e = pool_alloc(&p, sizeof *e);
        CHECK_ALLOC(e);
        onnx__string_string_entry_proto__init(e);
        e->key = g->metadata[i].key;
        e->value = g->metadata[i].value;
        mp.metadata_props[mp.n_metadata_props++] = e;
    }
    gp.name = g->graph_name ? g->graph_name : "ptq";
    gp.doc_string = g->graph_doc_string;

    /* nodes */
    gp.node = pool_alloc(&p, sizeof(void *) * (size_t)(g->n_nodes + 1));
    CHECK_ALLOC(gp.node);
    for (int i = 0; i < g->n_nodes; i++) {
        const ptq_node *n = &g->nodes[i];
        Onnx__NodeProto *np = pool_alloc(&p, sizeof *np);
        char **ins = pool_alloc(&p, sizeof(char *) * (size_t)(n->n_inputs + 1));
        char **outs = pool_alloc(&p, sizeof(char *) * (size_t)(n->n_outputs + 1));
        Onnx__AttributeProto **attrs = pool_alloc(&p, sizeof(void *) * (size_t)(n->n_attrs + 1));
        CHECK_ALLOC(np);
        CHECK_ALLOC(ins);
        CHECK_ALLOC(outs);
        CHECK_ALLOC(attrs);
        onnx__node_proto__init(np);
        for (int k = 0; k < n->n_inputs; k++) ins[k] = n->inputs[k] >= 0 ? g->values[n->inputs[k]].name : "";
        for (int k = 0; k < n->n_outputs; k++) outs[k] = n->outputs[k] >= 0 ? g->values[n->outputs[k]].name : "";
        np->n_input = (size_t)n->n_inputs;
        np->input = ins;
        np->n_output = (size_t)n->n_outputs;
        np->output = outs;
        np->name = n->name[0] ? n->name : NULL; /* "" and absent mean the same; keep the file's form */
        np->op_type = n->op_type;
        np->domain = n->domain[0] ? n->domain : NULL;
        np->doc_string = n->doc_string;
        for (int k = 0; k < n->n_attrs; k++) {
            Onnx__AttributeProto *up = NULL;
            attrs[k] = attr_to_proto(&p, &n->attrs[k], &up);
            if (up) unpacked[n_unpacked++] = up;
            if (!attrs[k]) FAIL(PTQ_ERR_NOMEM, "node '%s': cannot encode attribute '%s'", n->name, n->attrs[k].name);
        }
        np->n_attribute = (size_t)n->n_attrs;
        np->attribute = attrs;
        gp.node[gp.n_node++] = np;
    }
    /* initializers, inputs, outputs, value_info */
    gp.initializer = pool_alloc(&p, sizeof(void *) * (size_t)(g->n_initializers + 1));
    gp.input = pool_alloc(&p, sizeof(void *) * (size_t)(g->n_inputs + 1));
    gp.output = pool_alloc(&p, sizeof(void *) * (size_t)(g->n_outputs + 1));
    gp.value_info = pool_alloc(&p, sizeof(void *) * (size_t)(g->n_value_infos + 1));
    CHECK_ALLOC(gp.initializer);
    CHECK_ALLOC(gp.input);
    CHECK_ALLOC(gp.output);
    CHECK_ALLOC(gp.value_info);
    for (int i = 0; i < g->n_initializers; i++) {
        const ptq_value *v = &g->values[g->initializers[i]];
        gp.initializer[i] = tensor_to_proto(&p, &v->t, v->name, v->doc_string);
        CHECK_ALLOC(gp.initializer[i]);
    }
    gp.n_initializer = (size_t)g->n_initializers;
    for (int i = 0; i < g->n_inputs; i++) CHECK_ALLOC(gp.input[i] = value_info_to_proto(&p, &g->values[g->inputs[i]]));
    gp.n_input = (size_t)g->n_inputs;
    for (int i = 0; i < g->n_outputs; i++) CHECK_ALLOC(gp.output[i] = value_info_to_proto(&p, &g->values[g->outputs[i]]));
    gp.n_output = (size_t)g->n_outputs;
    for (int i = 0; i < g->n_value_infos; i++) {
        const ptq_value *v = &g->values[g->value_infos[i]];
        if (!v->in_value_info) continue; /* dropped since load */
        CHECK_ALLOC(gp.value_info[gp.n_value_info++] = value_info_to_proto(&p, v));
    }
    if (g->opaque_model) {
        kept = onnx__model_proto__unpack(NULL, g->opaque_model_len, g->opaque_model);
        if (!kept) FAIL(PTQ_ERR_INTERNAL, "kept model fields do not parse");
        mp.n_training_info = kept->n_training_info;
        mp.training_info = kept->training_info;
        mp.n_functions = kept->n_functions;
        mp.functions = kept->functions;
        if (kept->graph) {
            gp.n_sparse_initializer = kept->graph->n_sparse_initializer;
            gp.sparse_initializer = kept->graph->sparse_initializer;
            gp.n_quantization_annotation = kept->graph->n_quantization_annotation;
            gp.quantization_annotation = kept->graph->quantization_annotation;
        }
    }
    mp.graph = &gp;
    if (p.oom) FAIL(PTQ_ERR_NOMEM, "out of memory serialising the model");
    size_t size = onnx__model_proto__get_packed_size(&mp);
    *buf = malloc(size ? size : 1);
    CHECK_ALLOC(*buf);
    *len = onnx__model_proto__pack(&mp, *buf);
done:
    for (size_t i = 0; i < n_unpacked; i++) onnx__attribute_proto__free_unpacked(unpacked[i], NULL);
    free(unpacked);
    if (kept) onnx__model_proto__free_unpacked(kept, NULL);
    pool_free(&p);
    return st;
}

ptq_status onnx_model_save(const ptq_graph *g, const char *path)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len = 0;
    TRY(onnx_model_serialize(g, &buf, &len));
    TRY(io_write_atomic(path, buf, len));
done:
    free(buf);
    return st;
}
