/* onnx.c: ONNX protobuf (protobuf-c, bindings generated at build time) <-> ptq_graph.
 *
 * Load converts everything ptq understands into the IR and keeps the rest as serialized
 * protobuf fragments (opaque fields of the graph, values, nodes and attributes), then
 * frees the protobuf. Every length, dim and index from the file is checked before use,
 * and tensor sizes are checked against their data before anything is allocated.
 * Save builds a new ModelProto whose strings and tensor bytes point into the IR (nothing
 * copied), merges the kept fragments back, packs it and releases what it allocated. */
#include "onnx.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/file.h"
#include "onnx.pb-c.h"

#define MAX_MODEL_BYTES ((size_t)2 << 30)    /* protobuf's own limit */
#define MAX_TENSOR_BYTES ((uint64_t)1 << 40) /* anything larger is a corrupt file */
#define ONNX_MAX_OPSET 22                    /* the newest default-domain opset ptq reads (ONNX 1.17) */

/* ---------------------------------------------------------------- load */

/* Messages inside the loader name the thing (initializer 'w', node 'conv1'); the
 * entry points prefix the file name once. */
typedef struct {
    const char *base_dir; /* for external data; NULL: refused */
    ptq_graph *g;
    int depth;            /* subgraph nesting (0: the model's graph) */
} load_ctx;

#define MAX_SUBGRAPH_DEPTH 32

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

/* protobuf-c's allocations through ptq's, recording a failure: an unpack that returns NULL
 * after one is out of memory, not a corrupt file. allocator_data points to the struct itself:
 * it is never copied once set up. */
typedef struct {
    ProtobufCAllocator a;
    int failed;
} pb_allocator;

static void *pb_alloc(void *data, size_t n)
{
    void *m = malloc(n ? n : 1);
    if (!m) ((pb_allocator *)data)->failed = 1;
    return m;
}

static void pb_free(void *data, void *m)
{
    (void)data;
    free(m);
}

static void pb_allocator_init(pb_allocator *pa)
{
    pa->a.alloc = pb_alloc;
    pa->a.free = pb_free;
    pa->a.allocator_data = pa;
    pa->failed = 0;
}

/* Serialises any message into a malloc'd buffer. */
static ptq_status pack_opaque(const ProtobufCMessage *m, uint8_t **out, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    *out = malloc(n ? n : 1);
    if (!*out) {
        ptq_error("out of memory keeping %zu bytes of ONNX fields", n);
        return PTQ_ERR_NOMEM;
    }
    *len = protobuf_c_message_pack(m, *out);
    return PTQ_OK;
}

/* Non-negative decimal integer filling the whole string; -1 otherwise. */
static long long parse_count(const char *s)
{
    char *end;
    if (!s || *s < '0' || *s > '9') return -1;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    return v;
}

/* What a file of mode m is, for a refusal. */
static const char *file_kind(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

/* Reads `want` bytes of external data (keys location/offset/length) beside the model.
 * Contained: the location is relative, resolved with every symlink (realpath) and must stay
 * inside the model's folder (itself resolved); the resolved file is opened O_NONBLOCK |
 * O_NOFOLLOW (a FIFO does not block the open) and must be a regular file (fstat), so FIFOs,
 * devices, sockets and directories are refused by name without reading a byte. */
static ptq_status read_external(const load_ctx *lc, const Onnx__TensorProto *tp, const char *kind, const char *tname,
                                ptq_tensor *t, size_t want)
{
    ptq_status st = PTQ_OK;
    const char *location = NULL, *off_s = NULL, *len_s = NULL;
    long long offset = 0, length = -1;
    int fd = -1;
    char path[PATH_MAX], real[PATH_MAX], dir[PATH_MAX];
    struct stat sb;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key || !e->value) continue;
        if (strcmp(e->key, "location") == 0) location = e->value;
        else if (strcmp(e->key, "offset") == 0) off_s = e->value;
        else if (strcmp(e->key, "length") == 0) len_s = e->value;
    }
    if (!location || !location[0])
        FAIL(PTQ_ERR_FORMAT, "%s '%s': external data without a location", kind, tname);
    if (location[0] == '/' || location[0] == '\\' || strstr(location, "..") != NULL || strchr(location, ':'))
        FAIL(PTQ_ERR_FORMAT, "%s '%s': external data location '%s' leaves the model's folder", kind,
             tname, location);
    if (!lc->base_dir)
        FAIL(PTQ_ERR_FORMAT, "%s '%s': external data '%s' is not allowed here (no model folder)", kind,
             tname, location);
    if (off_s && (offset = parse_count(off_s)) < 0)
        FAIL(PTQ_ERR_FORMAT, "%s '%s': external data offset '%s' is not a byte count", kind, tname,
             off_s);
    if (len_s && (length = parse_count(len_s)) < 0)
        FAIL(PTQ_ERR_FORMAT, "%s '%s': external data length '%s' is not a byte count", kind, tname,
             len_s);
    if (length >= 0 && (unsigned long long)length != want)
        FAIL(PTQ_ERR_FORMAT, "%s '%s': external data length %lld for %zu bytes of tensor", kind, tname,
             length, want);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", lc->base_dir, location) >= sizeof path)
        FAIL(PTQ_ERR_FORMAT, "%s '%s': external data path too long", kind, tname);
    if (!realpath(lc->base_dir, dir))
        FAIL(PTQ_ERR_IO, "%s '%s': external data '%s': model folder %s: %s", kind, tname, location, lc->base_dir,
             strerror(errno));
    if (!realpath(path, real))
        FAIL(PTQ_ERR_IO, "%s '%s': external data '%s': %s", kind, tname, location, strerror(errno));
    size_t dn = strlen(dir);
    if (strcmp(dir, "/") != 0 && (strncmp(real, dir, dn) != 0 || (real[dn] != '/' && real[dn] != 0)))
        FAIL(PTQ_ERR_FORMAT, "%s '%s': external data location '%s' resolves to %s, outside the model's folder %s",
             kind, tname, location, real, dir);
    fd = open(real, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) FAIL(PTQ_ERR_IO, "%s '%s': external data '%s': %s", kind, tname, location, strerror(errno));
    if (fstat(fd, &sb) != 0)
        FAIL(PTQ_ERR_IO, "%s '%s': external data '%s': %s", kind, tname, location, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        FAIL(PTQ_ERR_IO, "%s '%s': external data '%s' is %s, not a regular file", kind, tname, location,
             file_kind(sb.st_mode));
    if ((unsigned long long)offset > (unsigned long long)sb.st_size ||
        want > (unsigned long long)sb.st_size - (unsigned long long)offset)
        FAIL(PTQ_ERR_FORMAT, "%s '%s': external data %s has %lld bytes, %lld + %zu needed", kind, tname,
             path, (long long)sb.st_size, offset, want);
    TRY(ptq_tensor_alloc(t));
    for (size_t got = 0; got < want;) {
        ssize_t r = pread(fd, (char *)t->data + got, want - got, (off_t)offset + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            FAIL(PTQ_ERR_IO, "%s '%s': cannot read %zu bytes at offset %lld of %s%s%s", kind, tname, want, offset,
                 path, r < 0 ? ": " : " (file shrank)", r < 0 ? strerror(errno) : "");
        got += (size_t)r;
    }
done:
    if (fd >= 0) close(fd);
    return st;
}

/* Number of typed-field values the TensorProto holds for dtype dt. */
static size_t typed_count(const Onnx__TensorProto *tp, ptq_dtype dt, const char **field)
{
    switch (dt) {
    case PTQ_F32: *field = "float_data"; return tp->n_float_data;
    case PTQ_F64: *field = "double_data"; return tp->n_double_data;
    case PTQ_I64: *field = "int64_data"; return tp->n_int64_data;
    case PTQ_U32: case PTQ_U64: *field = "uint64_data"; return tp->n_uint64_data;
    default: *field = "int32_data"; return tp->n_int32_data; /* int32/16/8, uint16/8, bool, float16 */
    }
}

/* TensorProto -> ptq_tensor (data owned by t). kind names it in messages ("initializer"). */
static ptq_status tensor_from_proto(const load_ctx *lc, const Onnx__TensorProto *tp, const char *kind, ptq_tensor *t)
{
    ptq_status st = PTQ_OK;
    const char *tname = tp->name ? tp->name : "";
    char shape[160];
    memset(t, 0, sizeof *t);
    ptq_dtype dt = (ptq_dtype)tp->data_type;
    size_t es = ptq_dtype_size(dt);
    if (tp->data_type == PTQ_STRING)
        FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': string tensors are not supported", kind, tname);
    if (es == 0)
        FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': data type %d is not supported", kind, tname,
             (int)tp->data_type);
    if (tp->n_dims > PTQ_MAX_RANK)
        FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': rank %zu (at most %d)", kind, tname, tp->n_dims,
             PTQ_MAX_RANK);
    if (tp->segment)
        FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': segmented tensors are not supported", kind, tname);
    t->dtype = dt;
    t->rank = (int)tp->n_dims;
    uint64_t n = 1;
    int absurd = 0;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0)
            FAIL(PTQ_ERR_FORMAT, "%s '%s': negative dim %lld (dim %zu)", kind, tname,
                 (long long)tp->dims[i], i);
        t->dims[i] = tp->dims[i];
        if (tp->dims[i] && n > MAX_TENSOR_BYTES / (uint64_t)tp->dims[i]) absurd = 1;
        else n *= (uint64_t)tp->dims[i];
    }
    ptq_shape_str(t, shape, sizeof shape);
    if (absurd || n * es > MAX_TENSOR_BYTES)
        FAIL(PTQ_ERR_FORMAT, "%s '%s': %s %s is larger than 2^40 bytes", kind, tname, shape,
             ptq_dtype_name(dt));
    size_t bytes = (size_t)n * es;
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        TRY(read_external(lc, tp, kind, tname, t, bytes));
        goto done;
    }
    if (tp->has_raw_data) {
        if (tp->raw_data.len != bytes)
            FAIL(PTQ_ERR_FORMAT, "%s '%s': %zu bytes of raw_data for %s %s (%zu expected)", kind, tname,
                 tp->raw_data.len, shape, ptq_dtype_name(dt), bytes);
        TRY(ptq_tensor_alloc(t));
        if (bytes) memcpy(t->data, tp->raw_data.data, bytes);
        goto done;
    }
    const char *field;
    size_t have = typed_count(tp, dt, &field);
    if (have != n)
        FAIL(PTQ_ERR_FORMAT, "%s '%s': %zu values in %s for %s %s (%llu expected)", kind, tname, have,
             field, shape, ptq_dtype_name(dt), (unsigned long long)n);
    TRY(ptq_tensor_alloc(t));
    void *dst = t->data;
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
        case PTQ_BOOL: ((uint8_t *)dst)[i] = tp->int32_data[i] != 0; break;
        default: ((uint8_t *)dst)[i] = (uint8_t)tp->int32_data[i]; break;
        }
    }
done:
    if (st != PTQ_OK) ptq_tensor_free(t);
    return st;
}

static int has_unknown(const ProtobufCMessage *m)
{
    return m && m->n_unknown_fields > 0;
}

/* 1 when the TypeProto is a tensor type the IR holds completely (no denotation, no
 * unknown fields), so nothing of it needs keeping. */
static int plain_tensor_type(const Onnx__TypeProto *tp)
{
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return 0;
    if ((tp->denotation && tp->denotation[0]) || has_unknown(&tp->base) || has_unknown(&tp->tensor_type->base))
        return 0;
    const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
    if (!sh) return 1;
    if (has_unknown(&sh->base)) return 0;
    for (size_t d = 0; d < sh->n_dim; d++)
        if ((sh->dim[d]->denotation && sh->dim[d]->denotation[0]) || has_unknown(&sh->dim[d]->base)) return 0;
    return 1;
}

/* Declared type of a ValueInfoProto into value v; what the IR cannot hold goes to v->opaque. */
static ptq_status read_value_info(const Onnx__ValueInfoProto *vi, ptq_value *v)
{
    ptq_status st = PTQ_OK;
    if (vi->doc_string && !v->doc_string) CHECK_ALLOC(v->doc_string = ptq_strdup(vi->doc_string));
    if (has_unknown(&vi->base) || (vi->type && !plain_tensor_type(vi->type))) {
        Onnx__ValueInfoProto keep = ONNX__VALUE_INFO_PROTO__INIT;
        keep.base.n_unknown_fields = vi->base.n_unknown_fields;
        keep.base.unknown_fields = vi->base.unknown_fields;
        keep.type = vi->type && !plain_tensor_type(vi->type) ? vi->type : NULL;
        free(v->opaque);
        v->opaque = NULL;
        TRY(pack_opaque(&keep.base, &v->opaque, &v->opaque_len));
    }
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type)
        return PTQ_OK;
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    if (tt->shape && tt->shape->n_dim > PTQ_MAX_RANK)
        FAIL(PTQ_ERR_UNSUPPORTED, "'%s' has rank %zu (at most %d)", vi->name, tt->shape->n_dim,
             PTQ_MAX_RANK);
    v->has_type = 1;
    if (v->kind == PTQ_VALUE_INITIALIZER) return PTQ_OK; /* the data's type and shape win */
    v->t.dtype = (ptq_dtype)tt->elem_type;
    for (int d = 0; d < PTQ_MAX_RANK; d++) {
        free(v->dim_params[d]);
        v->dim_params[d] = NULL;
    }
    if (!tt->shape) {
        v->t.rank = -1;
        return PTQ_OK;
    }
    v->t.rank = (int)tt->shape->n_dim;
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value >= 0) {
            v->t.dims[d] = dim->dim_value;
        } else {
            v->t.dims[d] = -1;
            if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param)
                CHECK_ALLOC(v->dim_params[d] = ptq_strdup(dim->dim_param));
        }
    }
done:
    return st;
}

/* Attribute type from the field that is set, for files that omit `type` (IR < 3). */
static int attr_type_of(const Onnx__AttributeProto *ap)
{
    if (ap->has_type) return (int)ap->type;
    if (ap->has_f) return PTQ_ATTR_FLOAT;
    if (ap->has_i) return PTQ_ATTR_INT;
    if (ap->has_s) return PTQ_ATTR_STRING;
    if (ap->t) return PTQ_ATTR_TENSOR;
    if (ap->n_floats) return PTQ_ATTR_FLOATS;
    if (ap->n_ints) return PTQ_ATTR_INTS;
    if (ap->n_strings) return PTQ_ATTR_STRINGS;
    return PTQ_ATTR_UNDEFINED;
}

static ptq_status graph_body_from_proto(load_ctx *lc, const Onnx__GraphProto *gp);

/* Decodes a GRAPH attribute's GraphProto into a subgraph of lc->g (opsets copied from the
 * enclosing graph). Names the body reads without defining them become values of kind OUTER,
 * referring to the enclosing graph's value of that name (created there when the enclosing
 * graph is itself a subgraph that does not define it either: it is then its OUTER value). */
static ptq_status subgraph_from_proto(const load_ctx *lc, const Onnx__GraphProto *gp, const char *node,
                                      const char *attr, ptq_graph **out)
{
    ptq_status st = PTQ_OK;
    load_ctx sub = {lc->base_dir, NULL, lc->depth + 1};
    ptq_graph *parent = lc->g;
    *out = NULL;
    if (!gp) FAIL(PTQ_ERR_FORMAT, "node '%s': graph attribute '%s' has no graph", node, attr);
    if (sub.depth > MAX_SUBGRAPH_DEPTH)
        FAIL(PTQ_ERR_UNSUPPORTED, "node '%s': subgraphs nested more than %d deep", node, MAX_SUBGRAPH_DEPTH);
    CHECK_ALLOC(sub.g = ptq_graph_create());
    sub.g->parent = parent;
    CHECK_ALLOC(sub.g->opsets = calloc((size_t)parent->n_opsets + 1, sizeof *sub.g->opsets));
    for (int i = 0; i < parent->n_opsets; i++) {
        CHECK_ALLOC(sub.g->opsets[i].domain = ptq_strdup(parent->opsets[i].domain));
        sub.g->opsets[i].version = parent->opsets[i].version;
        sub.g->n_opsets++;
    }
    if (gp->name) CHECK_ALLOC(sub.g->graph_name = ptq_strdup(gp->name));
    st = graph_body_from_proto(&sub, gp);
    if (st != PTQ_OK) {
        ptq_error_prefix("node '%s' attribute '%s': ", node, attr);
        goto done;
    }
    for (int v = 0; v < sub.g->n_values; v++) {
        ptq_value *val = &sub.g->values[v];
        if (val->kind != PTQ_VALUE_INTERMEDIATE || val->producer >= 0) continue;
        int pv;
        TRY(value_for(parent, val->name, &pv));
        sub.g->values[v].kind = PTQ_VALUE_OUTER; /* value_for may have moved parent's values, not ours */
        sub.g->values[v].outer = pv;
    }
    *out = sub.g;
    sub.g = NULL;
done:
    ptq_graph_destroy(sub.g);
    return st;
}

static ptq_status read_attr(const load_ctx *lc, const Onnx__AttributeProto *ap, const char *node, ptq_attr *a)
{
    ptq_status st = PTQ_OK;
    memset(a, 0, sizeof *a);
    if (!ap->name || !ap->name[0]) FAIL(PTQ_ERR_FORMAT, "node '%s': attribute without a name", node);
    CHECK_ALLOC(a->name = ptq_strdup(ap->name));
    a->type = (ptq_attr_type)attr_type_of(ap);
    if (ap->doc_string) CHECK_ALLOC(a->doc_string = ptq_strdup(ap->doc_string));
    if (ap->ref_attr_name) CHECK_ALLOC(a->ref_attr_name = ptq_strdup(ap->ref_attr_name));
    switch ((int)a->type) {
    case PTQ_ATTR_FLOAT: a->f = ap->f; break;
    case PTQ_ATTR_INT: a->i = ap->i; break;
    case PTQ_ATTR_STRING:
        CHECK_ALLOC(a->s = malloc(ap->s.len + 1));
        if (ap->s.len) memcpy(a->s, ap->s.data, ap->s.len);
        a->s[ap->s.len] = 0;
        a->s_len = ap->s.len;
        break;
    case PTQ_ATTR_FLOATS:
        a->n = ap->n_floats;
        CHECK_ALLOC(a->floats = malloc(sizeof(float) * (a->n ? a->n : 1)));
        if (a->n) memcpy(a->floats, ap->floats, sizeof(float) * a->n);
        break;
    case PTQ_ATTR_INTS:
        a->n = ap->n_ints;
        CHECK_ALLOC(a->ints = malloc(sizeof(int64_t) * (a->n ? a->n : 1)));
        if (a->n) memcpy(a->ints, ap->ints, sizeof(int64_t) * a->n);
        break;
    case PTQ_ATTR_STRINGS:
        CHECK_ALLOC(a->strings = calloc(ap->n_strings ? ap->n_strings : 1, sizeof(char *)));
        for (size_t i = 0; i < ap->n_strings; i++) {
            CHECK_ALLOC(a->strings[i] = malloc(ap->strings[i].len + 1));
            a->n = i + 1; /* so ptq_attr_clear frees what exists */
            if (ap->strings[i].len) memcpy(a->strings[i], ap->strings[i].data, ap->strings[i].len);
            a->strings[i][ap->strings[i].len] = 0;
        }
        break;
    case PTQ_ATTR_TENSOR: {
        char what[300];
        if (!ap->t) FAIL(PTQ_ERR_FORMAT, "node '%s': tensor attribute '%s' has no tensor", node, ap->name);
        snprintf(what, sizeof what, "node '%s' attribute '%s' tensor", node, ap->name);
        TRY(tensor_from_proto(lc, ap->t, what, &a->tensor));
        if (ap->t->name) CHECK_ALLOC(a->tensor_name = ptq_strdup(ap->t->name));
        break;
    }
    case PTQ_ATTR_GRAPH: /* decoded for the executor, written back verbatim */
        TRY(pack_opaque(&ap->base, &a->opaque, &a->opaque_len));
        TRY(subgraph_from_proto(lc, ap->g, node, ap->name, &a->graph));
        break;
    case PTQ_ATTR_GRAPHS:
        TRY(pack_opaque(&ap->base, &a->opaque, &a->opaque_len));
        if (ap->n_graphs > INT_MAX / 2) FAIL(PTQ_ERR_FORMAT, "node '%s': %zu graphs in '%s'", node, ap->n_graphs, ap->name);
        CHECK_ALLOC(a->graphs = calloc(ap->n_graphs + 1, sizeof *a->graphs));
        for (size_t i = 0; i < ap->n_graphs; i++) {
            TRY(subgraph_from_proto(lc, ap->graphs[i], node, ap->name, &a->graphs[i]));
            a->n_graphs++;
        }
        break;
    default: /* tensor lists, sparse tensors, type protos, unknown kinds: kept verbatim */
        TRY(pack_opaque(&ap->base, &a->opaque, &a->opaque_len));
        break;
    }
done:
    return st;
}

/* Model and graph parts ptq does not decode, packed into g->opaque_model for the round trip. */
static ptq_status keep_model_rest(ptq_graph *g, const Onnx__ModelProto *mp)
{
    const Onnx__GraphProto *gp = mp->graph;
    if (!mp->n_training_info && !mp->n_functions && !gp->n_sparse_initializer && !gp->n_quantization_annotation &&
        !has_unknown(&mp->base) && !has_unknown(&gp->base))
        return PTQ_OK;
    Onnx__ModelProto keep = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto keepg = ONNX__GRAPH_PROTO__INIT;
    keep.base.n_unknown_fields = mp->base.n_unknown_fields;
    keep.base.unknown_fields = mp->base.unknown_fields;
    keep.n_training_info = mp->n_training_info;
    keep.training_info = mp->training_info;
    keep.n_functions = mp->n_functions;
    keep.functions = mp->functions;
    keepg.base.n_unknown_fields = gp->base.n_unknown_fields;
    keepg.base.unknown_fields = gp->base.unknown_fields;
    keepg.n_sparse_initializer = gp->n_sparse_initializer;
    keepg.sparse_initializer = gp->sparse_initializer;
    keepg.n_quantization_annotation = gp->n_quantization_annotation;
    keepg.quantization_annotation = gp->quantization_annotation;
    keep.graph = &keepg;
    return pack_opaque(&keep.base, &g->opaque_model, &g->opaque_model_len);
}

static ptq_status read_model_fields(const load_ctx *lc, const Onnx__ModelProto *mp)
{
    ptq_status st = PTQ_OK;
    ptq_graph *g = lc->g;
    const Onnx__GraphProto *gp = mp->graph;
    g->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    g->model_version = mp->has_model_version ? mp->model_version : 0;
    if (mp->producer_name) CHECK_ALLOC(g->producer_name = ptq_strdup(mp->producer_name));
    if (mp->producer_version) CHECK_ALLOC(g->producer_version = ptq_strdup(mp->producer_version));
    if (mp->domain) CHECK_ALLOC(g->domain = ptq_strdup(mp->domain));
    if (mp->doc_string) CHECK_ALLOC(g->doc_string = ptq_strdup(mp->doc_string));
    if (gp->name) CHECK_ALLOC(g->graph_name = ptq_strdup(gp->name));
    if (gp->doc_string) CHECK_ALLOC(g->graph_doc_string = ptq_strdup(gp->doc_string));
    CHECK_ALLOC(g->opsets = calloc(mp->n_opset_import + 1, sizeof *g->opsets));
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        CHECK_ALLOC(g->opsets[i].domain = ptq_strdup(o->domain ? o->domain : ""));
        g->opsets[i].version = o->version;
        g->n_opsets++;
        /* ops are read with the semantics of the model's opset: one newer than ptq knows may
         * have changed them, and would be written back as if ptq had understood it */
        if ((!o->domain || !o->domain[0] || strcmp(o->domain, "ai.onnx") == 0) &&
            o->version > ONNX_MAX_OPSET)
            FAIL(PTQ_ERR_UNSUPPORTED, "opset_import declares opset %lld of the default ONNX domain; ptq knows opsets up to %d",
                 (long long)o->version, ONNX_MAX_OPSET);
    }
    CHECK_ALLOC(g->metadata = calloc(mp->n_metadata_props + 1, sizeof *g->metadata));
    for (size_t i = 0; i < mp->n_metadata_props; i++) {
        const Onnx__StringStringEntryProto *e = mp->metadata_props[i];
        g->metadata[i].key = ptq_strdup(e->key ? e->key : "");
        g->metadata[i].value = ptq_strdup(e->value ? e->value : "");
        g->n_metadata++; /* counted first: destroy frees a half-made entry */
        CHECK_ALLOC(g->metadata[i].key);
        CHECK_ALLOC(g->metadata[i].value);
    }
    TRY(keep_model_rest(g, mp));
done:
    return st;
}

static ptq_status read_node(const load_ctx *lc, const Onnx__NodeProto *np, size_t index)
{
    ptq_status st = PTQ_OK;
    ptq_graph *g = lc->g;
    const char *nname = np->name ? np->name : "";
    int *ins = NULL, *outs = NULL, n;
    ptq_attr a;
    memset(&a, 0, sizeof a);
    if (!np->op_type || !np->op_type[0])
        FAIL(PTQ_ERR_FORMAT, "node %zu ('%s') has no op_type", index, nname);
    if (np->n_input > INT_MAX / 2 || np->n_output > INT_MAX / 2)
        FAIL(PTQ_ERR_FORMAT, "node '%s' has %zu inputs and %zu outputs", nname, np->n_input,
             np->n_output);
    CHECK_ALLOC(ins = malloc(sizeof(int) * (np->n_input + 1)));
    CHECK_ALLOC(outs = malloc(sizeof(int) * (np->n_output + 1)));
    for (size_t k = 0; k < np->n_input; k++) {
        if (!np->input[k] || !np->input[k][0]) ins[k] = -1;
        else TRY(value_for(g, np->input[k], &ins[k]));
    }
    for (size_t k = 0; k < np->n_output; k++) {
        if (!np->output[k] || !np->output[k][0]) outs[k] = -1;
        else TRY(value_for(g, np->output[k], &outs[k]));
    }
    TRY(ptq_graph_add_node(g, nname, np->op_type, np->domain, ins, (int)np->n_input, outs, (int)np->n_output, &n));
    if (np->doc_string) CHECK_ALLOC(g->nodes[n].doc_string = ptq_strdup(np->doc_string));
    if (has_unknown(&np->base)) {
        Onnx__NodeProto keep = ONNX__NODE_PROTO__INIT;
        keep.base.n_unknown_fields = np->base.n_unknown_fields;
        keep.base.unknown_fields = np->base.unknown_fields;
        TRY(pack_opaque(&keep.base, &g->nodes[n].opaque, &g->nodes[n].opaque_len));
    }
    for (size_t k = 0; k < np->n_attribute; k++) {
        TRY(read_attr(lc, np->attribute[k], nname, &a));
        TRY(ptq_node_add_attr(&g->nodes[n], &a));
    }
done:
    ptq_attr_clear(&a);
    free(ins);
    free(outs);
    return st;
}

/* Checks that every name the subgraphs of g's nodes read from g exists in g. */
static ptq_status check_outer_refs(const ptq_graph *g)
{
    ptq_status st = PTQ_OK;
    for (int n = 0; n < g->n_nodes; n++) {
        const ptq_node *node = &g->nodes[n];
        for (int k = 0; k < node->n_attrs; k++) {
            const ptq_attr *a = &node->attrs[k];
            int count = a->graph ? 1 : a->n_graphs;
            for (int i = 0; i < count; i++) {
                const ptq_graph *sub = a->graph ? a->graph : a->graphs[i];
                for (int v = 0; v < sub->n_values; v++) {
                    const ptq_value *val = &sub->values[v];
                    if (val->kind != PTQ_VALUE_OUTER) continue;
                    const ptq_value *pv = &g->values[val->outer];
                    if (pv->kind == PTQ_VALUE_INTERMEDIATE && pv->producer < 0)
                        FAIL(PTQ_ERR_FORMAT, "node '%s' (%s): subgraph '%s' reads '%s', which no enclosing graph defines",
                             node->name, node->op_type, a->name, val->name);
                }
            }
        }
    }
done:
    return st;
}

static ptq_status graph_from_proto(load_ctx *lc, const Onnx__ModelProto *mp)
{
    ptq_status st = PTQ_OK;
    TRY(read_model_fields(lc, mp));
    TRY(graph_body_from_proto(lc, mp->graph));
    TRY(check_outer_refs(lc->g));
done:
    return st;
}

/* GraphProto's inputs, initializers, nodes, outputs and value_info into lc->g. */
static ptq_status graph_body_from_proto(load_ctx *lc, const Onnx__GraphProto *gp)
{
    ptq_status st = PTQ_OK;
    ptq_graph *g = lc->g;
    if (gp->n_input > INT_MAX / 2 || gp->n_output > INT_MAX / 2 || gp->n_initializer > INT_MAX / 2 ||
        gp->n_value_info > INT_MAX / 2 || gp->n_node > INT_MAX / 2)
        FAIL(PTQ_ERR_FORMAT, "absurd graph size");
    CHECK_ALLOC(g->inputs = malloc(sizeof(int) * (gp->n_input + 1)));
    CHECK_ALLOC(g->outputs = malloc(sizeof(int) * (gp->n_output + 1)));
    CHECK_ALLOC(g->initializers = malloc(sizeof(int) * (gp->n_initializer + 1)));
    CHECK_ALLOC(g->value_infos = malloc(sizeof(int) * (gp->n_value_info + 1)));
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        int v;
        if (!tp->name || !tp->name[0]) FAIL(PTQ_ERR_FORMAT, "initializer %zu has no name", i);
        if (ptq_graph_find_value(g, tp->name) >= 0)
            FAIL(PTQ_ERR_FORMAT, "initializer '%s' is defined twice", tp->name);
        TRY(ptq_graph_add_value(g, tp->name, &v));
        ptq_value *val = &g->values[v];
        val->kind = PTQ_VALUE_INITIALIZER;
        TRY(tensor_from_proto(lc, tp, "initializer", &val->t));
        if (tp->doc_string) CHECK_ALLOC(val->doc_string = ptq_strdup(tp->doc_string));
        g->initializers[g->n_initializers++] = v;
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        int v;
        if (!vi->name || !vi->name[0]) FAIL(PTQ_ERR_FORMAT, "graph input %zu has no name", i);
        v = ptq_graph_find_value(g, vi->name);
        if (v >= 0 && g->values[v].kind == PTQ_VALUE_INITIALIZER && !g->values[v].initializer_is_input) {
            g->values[v].initializer_is_input = 1;
        } else if (v >= 0) {
            FAIL(PTQ_ERR_FORMAT, "graph input '%s' is listed twice", vi->name);
        } else {
            TRY(ptq_graph_add_value(g, vi->name, &v));
            g->values[v].kind = PTQ_VALUE_INPUT;
        }
        TRY(read_value_info(vi, &g->values[v]));
        g->inputs[g->n_inputs++] = v;
    }
    for (size_t i = 0; i < gp->n_node; i++) TRY(read_node(lc, gp->node[i], i));
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        int v;
        if (!vi->name || !vi->name[0]) FAIL(PTQ_ERR_FORMAT, "graph output %zu has no name", i);
        TRY(value_for(g, vi->name, &v));
        g->values[v].is_output = 1;
        TRY(read_value_info(vi, &g->values[v]));
        g->outputs[g->n_outputs++] = v;
    }
    for (size_t i = 0; i < gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = gp->value_info[i];
        int v;
        if (!vi->name || !vi->name[0]) FAIL(PTQ_ERR_FORMAT, "value_info %zu has no name", i);
        TRY(value_for(g, vi->name, &v));
        g->values[v].in_value_info = 1;
        TRY(read_value_info(vi, &g->values[v]));
        g->value_infos[g->n_value_infos++] = v;
    }
    TRY(ptq_graph_link(g));
done:
    return st;
}

ptq_status onnx_model_load_buffer(const uint8_t *buf, size_t len, const char *base_dir, const char *what,
                                  ptq_graph **out)
{
    ptq_status st = PTQ_OK;
    Onnx__ModelProto *mp = NULL;
    load_ctx lc = {base_dir, NULL, 0};
    pb_allocator pa;
    pb_allocator_init(&pa);
    *out = NULL;
    if (!what) what = "model";
    if (!buf || len == 0) FAIL(PTQ_ERR_FORMAT, "empty file, not an ONNX model");
    if (len > MAX_MODEL_BYTES) FAIL(PTQ_ERR_FORMAT, "%zu bytes, larger than protobuf's 2 GB", len);
    mp = onnx__model_proto__unpack(&pa.a, len, buf);
    if (!mp && pa.failed) FAIL(PTQ_ERR_NOMEM, "out of memory parsing the ONNX protobuf (%zu bytes)", len);
    if (!mp) FAIL(PTQ_ERR_FORMAT, "not an ONNX model (protobuf parse failed: truncated or corrupt)");
    if (!mp->graph) FAIL(PTQ_ERR_FORMAT, "not an ONNX model (no graph)");
    if (!mp->has_ir_version && mp->n_opset_import == 0)
        FAIL(PTQ_ERR_FORMAT, "not an ONNX model (no ir_version and no opset_import)");
    CHECK_ALLOC(lc.g = ptq_graph_create());
    TRY(graph_from_proto(&lc, mp));
    *out = lc.g;
    lc.g = NULL;
done:
    if (st != PTQ_OK) ptq_error_prefix("%s: ", what);
    if (mp) onnx__model_proto__free_unpacked(mp, &pa.a);
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
    *out = NULL;
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - path) >= sizeof dir) FAIL(PTQ_ERR_ARG, "%s: path too long", path);
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    TRY(io_read_file(path, &buf, &len, MAX_MODEL_BYTES));
    TRY(onnx_model_load_buffer(buf, len, dir, path, out));
done:
    free(buf);
    return st;
}

/* 1 when packing m gives exactly buf. */
static int repacks_to(const ProtobufCMessage *m, const uint8_t *buf, size_t len)
{
    if (protobuf_c_message_get_packed_size(m) != len) return 0;
    uint8_t *re = malloc(len ? len : 1);
    if (!re) return 1; /* cannot tell: keep the first diagnosis */
    int same = protobuf_c_message_pack(m, re) == len && memcmp(re, buf, len) == 0;
    free(re);
    return same;
}

ptq_status onnx_tensor_load(const char *path, ptq_tensor *out, char **name)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len = 0;
    Onnx__TensorProto *tp = NULL;
    const char *dir_end = strrchr(path, '/');
    char dir[4096];
    load_ctx lc = {NULL, NULL, 0};
    pb_allocator pa;
    pb_allocator_init(&pa);
    memset(out, 0, sizeof *out);
    if (name) *name = NULL;
    if (dir_end && (size_t)(dir_end - path) < sizeof dir) {
        snprintf(dir, sizeof dir, "%.*s", (int)(dir_end - path), path);
        lc.base_dir = dir;
    } else if (!dir_end) {
        lc.base_dir = ".";
    }
    TRY(io_read_file(path, &buf, &len, MAX_MODEL_BYTES));
    tp = onnx__tensor_proto__unpack(&pa.a, len, buf);
    if (!tp && pa.failed) FAIL(PTQ_ERR_NOMEM, "%s: out of memory parsing the TensorProto (%zu bytes)", path, len);
    /* SequenceProto, OptionalProto and MapProto share field numbers with TensorProto
     * (name 1, elem_type 2, values 3...), so some of them parse: tell them apart by what
     * a real tensor always has (a data type, data for its elements, no segment). */
    if (!tp) FAIL(PTQ_ERR_UNSUPPORTED, "%s: not a TensorProto (a sequence, map or optional?)", path);
    if (!tp->has_data_type || tp->data_type == 0 || tp->segment)
        FAIL(PTQ_ERR_UNSUPPORTED, "%s: not a TensorProto (a sequence, map or optional?)", path);
    if (!tp->has_raw_data && !tp->n_external_data) {
        const char *field;
        int empty = 0;
        for (size_t i = 0; i < tp->n_dims; i++) empty |= tp->dims[i] == 0;
        if (!empty && ptq_dtype_size((ptq_dtype)tp->data_type) &&
            typed_count(tp, (ptq_dtype)tp->data_type, &field) == 0)
            FAIL(PTQ_ERR_UNSUPPORTED, "%s: not a TensorProto (no data: a sequence, map or optional?)", path);
    }
    st = tensor_from_proto(&lc, tp, "tensor", out);
    if (st == PTQ_ERR_FORMAT && !repacks_to(&tp->base, buf, len)) {
        /* An OptionalProto or SequenceProto whose name parsed as dims: a real
         * TensorProto from a standard writer packs back to the same bytes. */
        FAIL(PTQ_ERR_UNSUPPORTED, "%s: not a TensorProto (a sequence, map or optional?)", path);
    }
    if (st != PTQ_OK) {
        ptq_error_prefix("%s: ", path);
        goto done;
    }
    if (name && tp->name) {
        *name = ptq_strdup(tp->name);
        if (!*name) {
            ptq_tensor_free(out);
            FAIL(PTQ_ERR_NOMEM, "out of memory copying the name of tensor '%s'", tp->name);
        }
    }
done:
    if (tp) onnx__tensor_proto__free_unpacked(tp, &pa.a);
    free(buf);
    return st;
}

/* ---------------------------------------------------------------- save */

/* Everything save allocates, released in one go: plain blocks (free) and messages
 * unpacked from kept fragments (protobuf_c_message_free_unpacked). */
typedef struct {
    void **ptrs;
    size_t n, cap;
    ProtobufCMessage **msgs;
    size_t n_msgs, cap_msgs;
    int oom;
    pb_allocator pa; /* for the kept fragments: set up by pool_init, the pool never copied */
} pool;

static void pool_init(pool *p)
{
    memset(p, 0, sizeof *p);
    pb_allocator_init(&p->pa);
}

static int pool_grow(void ***arr, size_t *cap, size_t n)
{
    if (n < *cap) return 1;
    size_t c = *cap ? *cap * 2 : 256;
    void **na = realloc(*arr, sizeof(void *) * c);
    if (!na) return 0;
    *arr = na;
    *cap = c;
    return 1;
}

static void *pool_alloc(pool *p, size_t bytes)
{
    if (p->oom) return NULL;
    if (!pool_grow(&p->ptrs, &p->cap, p->n)) {
        p->oom = 1;
        return NULL;
    }
    void *m = calloc(1, bytes ? bytes : 1);
    if (!m) {
        p->oom = 1;
        return NULL;
    }
    p->ptrs[p->n++] = m;
    return m;
}

/* Unpacks a kept fragment; the message lives until pool_free. NULL if it does not parse. */
static ProtobufCMessage *pool_unpack(pool *p, const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len)
{
    if (p->oom) return NULL;
    void **arr = (void **)p->msgs;
    int ok = pool_grow(&arr, &p->cap_msgs, p->n_msgs);
    p->msgs = (ProtobufCMessage **)arr;
    if (!ok) {
        p->oom = 1;
        return NULL;
    }
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, &p->pa.a, len, data);
    if (m) p->msgs[p->n_msgs++] = m;
    if (!m && p->pa.failed) p->oom = 1;
    return m;
}

static void pool_free(pool *p)
{
    for (size_t i = 0; i < p->n; i++) free(p->ptrs[i]);
    for (size_t i = 0; i < p->n_msgs; i++) protobuf_c_message_free_unpacked(p->msgs[i], &p->pa.a);
    free(p->ptrs);
    free(p->msgs);
}

/* Checks that an in-memory tensor can be written as raw_data. */
static ptq_status check_tensor(const ptq_tensor *t, const char *kind, const char *name)
{
    ptq_status st = PTQ_OK;
    if (ptq_dtype_size(t->dtype) == 0)
        FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': cannot write a %s tensor", kind, name, ptq_dtype_name(t->dtype));
    if (t->rank < 0 || t->rank > PTQ_MAX_RANK)
        FAIL(PTQ_ERR_ARG, "%s '%s': rank %d is not a tensor's", kind, name, t->rank);
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0) FAIL(PTQ_ERR_ARG, "%s '%s': dim %d is %lld", kind, name, i, (long long)t->dims[i]);
    if (!t->data && ptq_tensor_nbytes(t) > 0)
        FAIL(PTQ_ERR_ARG, "%s '%s': %zu bytes of data expected, none set", kind, name, ptq_tensor_nbytes(t));
done:
    return st;
}

static Onnx__TensorProto *tensor_to_proto(pool *p, const ptq_tensor *t, const char *name, const char *doc)
{
    Onnx__TensorProto *tp = pool_alloc(p, sizeof *tp);
    int64_t *dims = pool_alloc(p, sizeof(int64_t) * (size_t)(t->rank > 0 ? t->rank : 1));
    if (!tp || !dims) return NULL;
    onnx__tensor_proto__init(tp);
    for (int i = 0; i < t->rank; i++) dims[i] = t->dims[i];
    tp->n_dims = (size_t)t->rank;
    tp->dims = dims;
    tp->has_data_type = 1;
    tp->data_type = (int32_t)t->dtype;
    tp->name = (char *)name;
    tp->doc_string = (char *)doc;
    size_t bytes = ptq_tensor_nbytes(t);
    tp->has_raw_data = bytes > 0; /* an empty tensor has no data field */
    tp->raw_data.len = bytes;
    tp->raw_data.data = t->data;
    return tp;
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* 1 when the kept tensor TypeProto still describes value v as the IR has it now. */
static int kept_type_fits(const Onnx__TypeProto *tp, const ptq_value *v)
{
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return 0;
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if ((ptq_dtype)tt->elem_type != v->t.dtype) return 0;
    if (!tt->shape) return v->t.rank < 0;
    if ((int)tt->shape->n_dim != v->t.rank) return 0;
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value >= 0) {
            if (v->t.dims[d] != dim->dim_value) return 0;
        } else {
            const char *param =
                dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? dim->dim_param : NULL;
            if (v->t.dims[d] != -1 || !same_str(param, v->dim_params[d])) return 0;
        }
    }
    return 1;
}

static Onnx__TypeProto *tensor_type_to_proto(pool *p, const ptq_value *v)
{
    Onnx__TypeProto *tp = pool_alloc(p, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = pool_alloc(p, sizeof *tt);
    if (!tp || !tt) return NULL;
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = (int32_t)v->t.dtype;
    if (v->t.rank < 0 || v->t.rank > PTQ_MAX_RANK) return tp;
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
    return tp;
}

/* ValueInfoProto of v: the IR's tensor type, or the kept type when it still fits (or when
 * the value is not a tensor and the IR declares nothing), plus kept unknown fields. */
static Onnx__ValueInfoProto *value_info_to_proto(pool *p, const ptq_value *v)
{
    Onnx__ValueInfoProto *vi = pool_alloc(p, sizeof *vi);
    const Onnx__ValueInfoProto *kept = NULL;
    if (!vi) return NULL;
    onnx__value_info_proto__init(vi);
    vi->name = v->name;
    vi->doc_string = v->doc_string;
    if (v->opaque) {
        kept = (const Onnx__ValueInfoProto *)pool_unpack(p, &onnx__value_info_proto__descriptor, v->opaque,
                                                         v->opaque_len);
        if (!kept) return NULL;
        vi->base.n_unknown_fields = kept->base.n_unknown_fields;
        vi->base.unknown_fields = kept->base.unknown_fields;
    }
    int ir_typed = v->has_type || v->kind == PTQ_VALUE_INITIALIZER || v->t.dtype != PTQ_UNDEFINED;
    if (kept && kept->type &&
        (kept_type_fits(kept->type, v) ||
         (!ir_typed && kept->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE))) {
        vi->type = kept->type;
    } else if (ir_typed) {
        vi->type = tensor_type_to_proto(p, v);
        if (!vi->type) return NULL;
    }
    return vi;
}

static Onnx__AttributeProto *attr_to_proto(pool *p, const ptq_attr *a)
{
    if (a->opaque) return (Onnx__AttributeProto *)pool_unpack(p, &onnx__attribute_proto__descriptor, a->opaque,
                                                               a->opaque_len);
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
        ap->s.len = a->s ? (a->s_len ? a->s_len : strlen(a->s)) : 0;
        break;
    case PTQ_ATTR_FLOATS: ap->n_floats = a->floats ? a->n : 0; ap->floats = a->floats; break;
    case PTQ_ATTR_INTS: ap->n_ints = a->ints ? a->n : 0; ap->ints = a->ints; break;
    case PTQ_ATTR_STRINGS: {
        size_t n = a->strings ? a->n : 0;
        ProtobufCBinaryData *s = pool_alloc(p, sizeof *s * (n ? n : 1));
        if (!s) return NULL;
        for (size_t i = 0; i < n; i++) {
            s[i].data = (uint8_t *)a->strings[i];
            s[i].len = a->strings[i] ? strlen(a->strings[i]) : 0;
        }
        ap->n_strings = n;
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

/* Name of value index v for node `node`, "" for -1; NULL when out of range. */
static char *value_name(const ptq_graph *g, int v)
{
    if (v == -1) return "";
    if (v < 0 || v >= g->n_values) return NULL;
    return g->values[v].name;
}

static ptq_status nodes_to_proto(pool *p, const ptq_graph *g, Onnx__GraphProto *gp)
{
    ptq_status st = PTQ_OK;
    CHECK_ALLOC(gp->node = pool_alloc(p, sizeof(void *) * (size_t)(g->n_nodes + 1)));
    for (int i = 0; i < g->n_nodes; i++) {
        const ptq_node *n = &g->nodes[i];
        const char *nname = n->name ? n->name : "";
        Onnx__NodeProto *np = pool_alloc(p, sizeof *np);
        char **ins = pool_alloc(p, sizeof(char *) * (size_t)(n->n_inputs + 1));
        char **outs = pool_alloc(p, sizeof(char *) * (size_t)(n->n_outputs + 1));
        Onnx__AttributeProto **attrs = pool_alloc(p, sizeof(void *) * (size_t)(n->n_attrs + 1));
        if (!np || !ins || !outs || !attrs) FAIL(PTQ_ERR_NOMEM, "out of memory serialising node '%s'", nname);
        if (!n->op_type || !n->op_type[0]) FAIL(PTQ_ERR_ARG, "node %d ('%s') has no op_type", i, nname);
        onnx__node_proto__init(np);
        for (int k = 0; k < n->n_inputs; k++)
            if (!(ins[k] = value_name(g, n->inputs[k])))
                FAIL(PTQ_ERR_INTERNAL, "node '%s': input %d is value %d of %d", nname, k, n->inputs[k], g->n_values);
        for (int k = 0; k < n->n_outputs; k++)
            if (!(outs[k] = value_name(g, n->outputs[k])))
                FAIL(PTQ_ERR_INTERNAL, "node '%s': output %d is value %d of %d", nname, k, n->outputs[k],
                     g->n_values);
        np->n_input = (size_t)n->n_inputs;
        np->input = ins;
        np->n_output = (size_t)n->n_outputs;
        np->output = outs;
        np->name = nname[0] ? (char *)nname : NULL; /* "" and absent mean the same */
        np->op_type = n->op_type;
        np->domain = n->domain && n->domain[0] ? n->domain : NULL;
        np->doc_string = n->doc_string;
        for (int k = 0; k < n->n_attrs; k++) {
            const ptq_attr *a = &n->attrs[k];
            if (a->type == PTQ_ATTR_TENSOR && !a->opaque) TRY(check_tensor(&a->tensor, "attribute tensor", a->name));
            if (!(attrs[k] = attr_to_proto(p, a)))
                FAIL(p->oom ? PTQ_ERR_NOMEM : PTQ_ERR_INTERNAL, "node '%s': %s attribute '%s'", nname,
                     p->oom ? "out of memory encoding" : "cannot encode", a->name ? a->name : "");
        }
        np->n_attribute = (size_t)n->n_attrs;
        np->attribute = attrs;
        if (n->opaque) {
            const ProtobufCMessage *kept = pool_unpack(p, &onnx__node_proto__descriptor, n->opaque, n->opaque_len);
            if (!kept)
                FAIL(p->oom ? PTQ_ERR_NOMEM : PTQ_ERR_INTERNAL, "node '%s': %s", nname,
                     p->oom ? "out of memory decoding its kept fields" : "kept fields do not parse");
            np->base.n_unknown_fields = kept->n_unknown_fields;
            np->base.unknown_fields = kept->unknown_fields;
        }
        gp->node[gp->n_node++] = np;
    }
done:
    return st;
}

static ptq_status values_to_proto(pool *p, const ptq_graph *g, Onnx__GraphProto *gp)
{
    ptq_status st = PTQ_OK;
    CHECK_ALLOC(gp->initializer = pool_alloc(p, sizeof(void *) * (size_t)(g->n_initializers + 1)));
    CHECK_ALLOC(gp->input = pool_alloc(p, sizeof(void *) * (size_t)(g->n_inputs + 1)));
    CHECK_ALLOC(gp->output = pool_alloc(p, sizeof(void *) * (size_t)(g->n_outputs + 1)));
    CHECK_ALLOC(gp->value_info = pool_alloc(p, sizeof(void *) * (size_t)(g->n_value_infos + 1)));
    const struct {
        const int *idx;
        int n;
        const char *what;
    } lists[] = {{g->initializers, g->n_initializers, "initializer"},
                 {g->inputs, g->n_inputs, "graph input"},
                 {g->outputs, g->n_outputs, "graph output"},
                 {g->value_infos, g->n_value_infos, "value_info"}};
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++)
        for (int i = 0; i < lists[l].n; i++)
            if (lists[l].idx[i] < 0 || lists[l].idx[i] >= g->n_values)
                FAIL(PTQ_ERR_INTERNAL, "%s %d is value %d of %d", lists[l].what, i, lists[l].idx[i], g->n_values);
    for (int i = 0; i < g->n_initializers; i++) {
        const ptq_value *v = &g->values[g->initializers[i]];
        TRY(check_tensor(&v->t, "initializer", v->name));
        CHECK_ALLOC(gp->initializer[i] = tensor_to_proto(p, &v->t, v->name, v->doc_string));
    }
    gp->n_initializer = (size_t)g->n_initializers;
    for (int i = 0; i < g->n_inputs; i++)
        if (!(gp->input[i] = value_info_to_proto(p, &g->values[g->inputs[i]])))
            FAIL(p->oom ? PTQ_ERR_NOMEM : PTQ_ERR_INTERNAL, "%s the type of graph input '%s'", p->oom ? "out of memory encoding" : "cannot encode",
                 g->values[g->inputs[i]].name);
    gp->n_input = (size_t)g->n_inputs;
    for (int i = 0; i < g->n_outputs; i++)
        if (!(gp->output[i] = value_info_to_proto(p, &g->values[g->outputs[i]])))
            FAIL(p->oom ? PTQ_ERR_NOMEM : PTQ_ERR_INTERNAL, "%s the type of graph output '%s'", p->oom ? "out of memory encoding" : "cannot encode",
                 g->values[g->outputs[i]].name);
    gp->n_output = (size_t)g->n_outputs;
    for (int i = 0; i < g->n_value_infos; i++) {
        const ptq_value *v = &g->values[g->value_infos[i]];
        if (!v->in_value_info) continue; /* dropped since load (graph_edit clears the flag) */
        if (!(gp->value_info[gp->n_value_info] = value_info_to_proto(p, v)))
            FAIL(p->oom ? PTQ_ERR_NOMEM : PTQ_ERR_INTERNAL, "%s the type of value_info '%s'", p->oom ? "out of memory encoding" : "cannot encode", v->name);
        gp->n_value_info++;
    }
done:
    return st;
}

ptq_status onnx_model_serialize(const ptq_graph *g, uint8_t **buf, size_t *len)
{
    ptq_status st = PTQ_OK;
    pool p;
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto gp = ONNX__GRAPH_PROTO__INIT;
    pool_init(&p);
    *buf = NULL;
    *len = 0;

    if (g->ir_version) {
        mp.has_ir_version = 1;
        mp.ir_version = g->ir_version;
    }
    mp.producer_name = g->producer_name;
    mp.producer_version = g->producer_version;
    mp.domain = g->domain;
    mp.doc_string = g->doc_string;
    if (g->model_version) {
        mp.has_model_version = 1;
        mp.model_version = g->model_version;
    }
    CHECK_ALLOC(mp.opset_import = pool_alloc(&p, sizeof(void *) * (size_t)(g->n_opsets + 1)));
    for (int i = 0; i < g->n_opsets; i++) {
        Onnx__OperatorSetIdProto *o = pool_alloc(&p, sizeof *o);
        CHECK_ALLOC(o);
        onnx__operator_set_id_proto__init(o);
        o->domain = g->opsets[i].domain;
        o->has_version = 1;
        o->version = g->opsets[i].version;
        mp.opset_import[mp.n_opset_import++] = o;
    }
    CHECK_ALLOC(mp.metadata_props = pool_alloc(&p, sizeof(void *) * (size_t)(g->n_metadata + 1)));
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
    TRY(nodes_to_proto(&p, g, &gp));
    TRY(values_to_proto(&p, g, &gp));
    if (g->opaque_model) {
        const Onnx__ModelProto *kept = (const Onnx__ModelProto *)pool_unpack(&p, &onnx__model_proto__descriptor,
                                                                             g->opaque_model, g->opaque_model_len);
        if (!kept)
            FAIL(p.oom ? PTQ_ERR_NOMEM : PTQ_ERR_INTERNAL, "%s", p.oom ? "out of memory decoding the kept model fields" : "kept model fields do not parse");
        mp.base.n_unknown_fields = kept->base.n_unknown_fields;
        mp.base.unknown_fields = kept->base.unknown_fields;
        mp.n_training_info = kept->n_training_info;
        mp.training_info = kept->training_info;
        mp.n_functions = kept->n_functions;
        mp.functions = kept->functions;
        if (kept->graph) {
            gp.base.n_unknown_fields = kept->graph->base.n_unknown_fields;
            gp.base.unknown_fields = kept->graph->base.unknown_fields;
            gp.n_sparse_initializer = kept->graph->n_sparse_initializer;
            gp.sparse_initializer = kept->graph->sparse_initializer;
            gp.n_quantization_annotation = kept->graph->n_quantization_annotation;
            gp.quantization_annotation = kept->graph->quantization_annotation;
        }
    }
    mp.graph = &gp;
    if (p.oom) FAIL(PTQ_ERR_NOMEM, "out of memory serialising the model");
    size_t size = onnx__model_proto__get_packed_size(&mp);
    if (size > MAX_MODEL_BYTES)
        FAIL(PTQ_ERR_UNSUPPORTED, "the model serialises to %zu bytes, above protobuf's 2 GB limit", size);
    CHECK_ALLOC(*buf = malloc(size ? size : 1));
    *len = onnx__model_proto__pack(&mp, *buf);
done:
    pool_free(&p);
    return st;
}

ptq_status onnx_model_save(const ptq_graph *g, const char *path)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len = 0;
    st = onnx_model_serialize(g, &buf, &len);
    if (st != PTQ_OK) {
        ptq_error_prefix("%s: ", path);
        goto done;
    }
    TRY(io_write_atomic(path, buf, len));
done:
    free(buf);
    return st;
}
