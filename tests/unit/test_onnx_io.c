/* test_onnx_io.c: ONNX load/save.
 *
 * - Round trips (load -> save -> load) of the PaddleOCR models in build/models, of some
 *   libonnx-testdata models (subgraphs, sequences, optionals, initializers listed as
 *   inputs), of a graph built in memory and of a hand-encoded model with everything ptq
 *   keeps opaque (unknown fields, functions, a sequence-typed output, denotations):
 *   the IR is compared field by field and the saved files go to $BUILD/tmp/roundtrip_*.onnx
 *   for tests/e2e/onnx_checker.sh (onnx.checker).
 * - Tensor files (input_*.pb) of the ONNX node tests: values, and Optional/Sequence protos
 *   refused as unsupported.
 * - Malformed models built here with a tiny protobuf encoder (tests may not include
 *   protobuf-c's ONNX types): empty, truncated, random bytes, bit flips, bad raw_data
 *   length, negative and absurd dims, a node without op_type, duplicate names, two
 *   producers, external data escaping the folder. Each must fail with one line naming
 *   the file, never crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/onnx.h"
#include "tests/test.h"
#include "tests/unit/pb_encode.h"
#include "tests/unit/files.h"

#define TESTDATA "/usr/share/libonnx-testdata/data"

static char tmp_dir[512], ext_dir[600];

static void make_tmp_dirs(void)
{
    const char *b = getenv("BUILD");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/tmp", b && b[0] ? b : "build");
    mkdir(tmp_dir, 0755);
    snprintf(ext_dir, sizeof ext_dir, "%s/test_onnx_io", tmp_dir);
    mkdir(ext_dir, 0755);
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* a tiny protobuf encoder: tests/unit/pb_encode.h */

/* ONNX field numbers used below */
enum {
    M_IR = 1, M_PRODUCER = 2, M_DOC = 6, M_GRAPH = 7, M_OPSET = 8, M_META = 14, M_FUNCTIONS = 25,
    G_NODE = 1, G_NAME = 2, G_INIT = 5, G_DOC = 10, G_INPUT = 11, G_OUTPUT = 12, G_VALUE_INFO = 13, G_QANN = 14,
    N_INPUT = 1, N_OUTPUT = 2, N_NAME = 3, N_OP = 4, N_ATTR = 5, N_DOC = 6, N_DOMAIN = 7,
    A_NAME = 1, A_F = 2, A_I = 3, A_S = 4, A_INTS = 8, A_TYPE = 20,
    T_DIMS = 1, T_TYPE = 2, T_FLOAT = 4, T_INT32 = 5, T_INT64 = 7, T_NAME = 8, T_RAW = 9, T_EXT = 13, T_LOC = 14,
    V_NAME = 1, V_TYPE = 2, V_DOC = 3,
    TP_TENSOR = 1, TP_SEQUENCE = 4, TP_DENOTATION = 6, TT_ELEM = 1, TT_SHAPE = 2, SH_DIM = 1, D_VALUE = 1,
    D_PARAM = 2, D_DENOTATION = 3,
    F_NAME = 1, F_INPUT = 4, F_OUTPUT = 5, F_NODE = 7, F_OPSET = 9, F_DOMAIN = 10
};

static pb tensor_type(int elem, const int64_t *dims, int rank, const char *denotation)
{
    pb tp = {0}, tt = {0}, sh = {0};
    pb_int(&tt, TT_ELEM, elem);
    if (rank >= 0) {
        for (int i = 0; i < rank; i++) {
            pb d = {0};
            if (dims[i] >= 0) pb_int(&d, D_VALUE, dims[i]);
            else pb_str(&d, D_PARAM, "batch");
            if (denotation) pb_str(&d, D_DENOTATION, "DATA_BATCH");
            pb_msg(&sh, SH_DIM, &d);
        }
        pb_msg(&tt, TT_SHAPE, &sh);
    }
    pb_msg(&tp, TP_TENSOR, &tt);
    if (denotation) pb_str(&tp, TP_DENOTATION, denotation);
    return tp;
}

static void add_value_info(pb *g, int field, const char *name, int elem, const int64_t *dims, int rank)
{
    pb vi = {0}, tp = tensor_type(elem, dims, rank, NULL);
    pb_str(&vi, V_NAME, name);
    pb_msg(&vi, V_TYPE, &tp);
    pb_msg(g, field, &vi);
}

/* Initializer with raw data (raw may be NULL: no data field). */
static void add_init(pb *g, const char *name, int dtype, const int64_t *dims, int rank, const void *raw, size_t len)
{
    pb t = {0};
    for (int i = 0; i < rank; i++) pb_int(&t, T_DIMS, dims[i]);
    pb_int(&t, T_TYPE, dtype);
    pb_str(&t, T_NAME, name);
    if (raw) pb_bytes(&t, T_RAW, raw, len);
    pb_msg(g, G_INIT, &t);
}

static void add_node(pb *g, const char *op, const char *name, const char *in0, const char *in1, const char *out)
{
    pb n = {0};
    if (in0) pb_str(&n, N_INPUT, in0);
    if (in1) pb_str(&n, N_INPUT, in1);
    pb_str(&n, N_OUTPUT, out);
    if (name) pb_str(&n, N_NAME, name);
    if (op) pb_str(&n, N_OP, op);
    pb_msg(g, G_NODE, &n);
}

/* ModelProto: ir_version 8, opset 13, then the graph (last, so every strict prefix
 * lacks a complete graph). Frees g. */
static pb make_model(pb *g)
{
    pb m = {0}, o = {0};
    pb_int(&m, M_IR, 8);
    pb_str(&o, 1, "");
    pb_int(&o, 2, 13);
    pb_msg(&m, M_OPSET, &o);
    pb_msg(&m, M_GRAPH, g);
    return m;
}

static const int64_t dims22[2] = {2, 2};
static const float w22[4] = {0.5f, -1.0f, 2.0f, 0.25f};

/* y = Add(x, w): the base of the malformed variants. */
static pb base_graph(void)
{
    pb g = {0};
    pb_str(&g, G_NAME, "g");
    add_init(&g, "w", 1, dims22, 2, w22, sizeof w22);
    add_value_info(&g, G_INPUT, "x", 1, dims22, 2);
    add_node(&g, "Add", "add", "x", "w", "y");
    add_value_info(&g, G_OUTPUT, "y", 1, dims22, 2);
    return g;
}

/* Loads buf as `what`; expects failure with `want` (PTQ_OK: any error) and a one-line
 * message naming what and containing `needle` (NULL: any). */
static void expect_load_error(const char *what, const uint8_t *buf, size_t len, const char *base_dir,
                              ptq_status want, const char *needle)
{
    ptq_graph *g = (ptq_graph *)1;
    ptq_status st = onnx_model_load_buffer(buf, len, base_dir, what, &g);
    if (st == PTQ_OK) {
        TEST_FAILF("%s: loaded, expected an error", what);
        ptq_graph_destroy(g);
        return;
    }
    const char *msg = ptq_last_error();
    if (g != NULL) TEST_FAILF("%s: *out not NULL after an error", what);
    if (want != PTQ_OK && st != want)
        TEST_FAILF("%s: status %s, expected %s (%s)", what, ptq_status_name(st), ptq_status_name(want), msg);
    if (strncmp(msg, what, strlen(what)) != 0) TEST_FAILF("%s: message does not start with the file: %s", what, msg);
    if (strchr(msg, '\n')) TEST_FAILF("%s: message is not one line: %s", what, msg);
    if (needle && !strstr(msg, needle)) TEST_FAILF("%s: message lacks '%s': %s", what, needle, msg);
}

/* ------------------------------------------------ IR comparison */

#define DIFF(...)                                   \
    do {                                            \
        snprintf(why, cap, __VA_ARGS__);            \
        return 0;                                   \
    } while (0)

static int str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int str_eq_empty(const char *a, const char *b) /* NULL and "" alike */
{
    return str_eq(a && a[0] ? a : NULL, b && b[0] ? b : NULL);
}

static int bytes_eq(const void *a, size_t na, const void *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na) == 0);
}

static int tensor_eq(const ptq_tensor *a, const ptq_tensor *b, int with_data, const char *what, char *why, size_t cap)
{
    if (a->dtype != b->dtype) DIFF("%s: dtype %d vs %d", what, a->dtype, b->dtype);
    if (a->rank != b->rank) DIFF("%s: rank %d vs %d", what, a->rank, b->rank);
    for (int i = 0; i < a->rank && i < PTQ_MAX_RANK; i++)
        if (a->dims[i] != b->dims[i])
            DIFF("%s: dim %d %lld vs %lld", what, i, (long long)a->dims[i], (long long)b->dims[i]);
    if (with_data) {
        size_t n = ptq_tensor_nbytes(a);
        if ((a->data == NULL) != (b->data == NULL) && n) DIFF("%s: data present in one only", what);
        if (n && memcmp(a->data, b->data, n) != 0) DIFF("%s: data differs (%zu bytes)", what, n);
    }
    return 1;
}

static int attr_eq(const ptq_attr *a, const ptq_attr *b, const char *node, char *why, size_t cap)
{
    char what[300];
    snprintf(what, sizeof what, "node '%s' attribute '%s'", node, a->name);
    if (!str_eq(a->name, b->name)) DIFF("node '%s': attribute '%s' vs '%s'", node, a->name, b->name);
    if (a->type != b->type) DIFF("%s: type %d vs %d", what, a->type, b->type);
    if (!str_eq(a->doc_string, b->doc_string)) DIFF("%s: doc_string", what);
    if (!str_eq(a->ref_attr_name, b->ref_attr_name)) DIFF("%s: ref_attr_name", what);
    if (!bytes_eq(a->opaque, a->opaque_len, b->opaque, b->opaque_len))
        DIFF("%s: kept bytes differ (%zu vs %zu)", what, a->opaque_len, b->opaque_len);
    if (a->opaque) return 1;
    switch (a->type) {
    case PTQ_ATTR_FLOAT:
        if (memcmp(&a->f, &b->f, sizeof a->f) != 0) DIFF("%s: %g vs %g", what, (double)a->f, (double)b->f);
        break;
    case PTQ_ATTR_INT:
        if (a->i != b->i) DIFF("%s: %lld vs %lld", what, (long long)a->i, (long long)b->i);
        break;
    case PTQ_ATTR_STRING:
        if (!bytes_eq(a->s, a->s_len, b->s, b->s_len)) DIFF("%s: string differs", what);
        break;
    case PTQ_ATTR_FLOATS:
        if (!bytes_eq(a->floats, a->n * sizeof(float), b->floats, b->n * sizeof(float))) DIFF("%s: floats", what);
        break;
    case PTQ_ATTR_INTS:
        if (!bytes_eq(a->ints, a->n * sizeof(int64_t), b->ints, b->n * sizeof(int64_t))) DIFF("%s: ints", what);
        break;
    case PTQ_ATTR_STRINGS:
        if (a->n != b->n) DIFF("%s: %zu vs %zu strings", what, a->n, b->n);
        for (size_t i = 0; i < a->n; i++)
            if (!str_eq(a->strings[i], b->strings[i])) DIFF("%s: string %zu", what, i);
        break;
    case PTQ_ATTR_TENSOR:
        if (!str_eq(a->tensor_name, b->tensor_name)) DIFF("%s: tensor name", what);
        return tensor_eq(&a->tensor, &b->tensor, 1, what, why, cap);
    default: break;
    }
    return 1;
}

static int index_list_eq(const int *a, int na, const int *b, int nb, const char *what, char *why, size_t cap)
{
    if (na != nb) DIFF("%s: %d vs %d entries", what, na, nb);
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) DIFF("%s[%d]: value %d vs %d", what, i, a[i], b[i]);
    return 1;
}

/* Field-by-field equality of two IRs; why gets the first difference. */
static int graph_eq(const ptq_graph *a, const ptq_graph *b, char *why, size_t cap)
{
    if (a->ir_version != b->ir_version) DIFF("ir_version %lld vs %lld", (long long)a->ir_version, (long long)b->ir_version);
    if (a->model_version != b->model_version) DIFF("model_version");
    if (!str_eq(a->producer_name, b->producer_name)) DIFF("producer_name");
    if (!str_eq(a->producer_version, b->producer_version)) DIFF("producer_version");
    if (!str_eq(a->domain, b->domain)) DIFF("domain");
    if (!str_eq(a->doc_string, b->doc_string)) DIFF("model doc_string");
    if (!str_eq(a->graph_name, b->graph_name)) DIFF("graph name '%s' vs '%s'", a->graph_name, b->graph_name);
    if (!str_eq(a->graph_doc_string, b->graph_doc_string)) DIFF("graph doc_string");
    if (a->n_opsets != b->n_opsets) DIFF("%d vs %d opsets", a->n_opsets, b->n_opsets);
    for (int i = 0; i < a->n_opsets; i++)
        if (!str_eq(a->opsets[i].domain, b->opsets[i].domain) || a->opsets[i].version != b->opsets[i].version)
            DIFF("opset %d", i);
    if (a->n_metadata != b->n_metadata) DIFF("%d vs %d metadata", a->n_metadata, b->n_metadata);
    for (int i = 0; i < a->n_metadata; i++)
        if (!str_eq(a->metadata[i].key, b->metadata[i].key) || !str_eq(a->metadata[i].value, b->metadata[i].value))
            DIFF("metadata %d", i);
    if (!bytes_eq(a->opaque_model, a->opaque_model_len, b->opaque_model, b->opaque_model_len))
        DIFF("kept model fields differ (%zu vs %zu bytes)", a->opaque_model_len, b->opaque_model_len);
    if (a->n_values != b->n_values) DIFF("%d vs %d values", a->n_values, b->n_values);
    for (int i = 0; i < a->n_values; i++) {
        const ptq_value *x = &a->values[i], *y = &b->values[i];
        char what[300];
        snprintf(what, sizeof what, "value %d '%s'", i, x->name);
        if (!str_eq(x->name, y->name)) DIFF("%s: name '%s'", what, y->name);
        if (x->kind != y->kind) DIFF("%s: kind %d vs %d", what, x->kind, y->kind);
        if (!tensor_eq(&x->t, &y->t, x->kind == PTQ_VALUE_INITIALIZER, what, why, cap)) return 0;
        for (int d = 0; d < PTQ_MAX_RANK; d++)
            if (!str_eq(x->dim_params[d], y->dim_params[d])) DIFF("%s: dim_param %d", what, d);
        if (x->has_type != y->has_type) DIFF("%s: has_type", what);
        if (x->in_value_info != y->in_value_info) DIFF("%s: in_value_info", what);
        if (x->initializer_is_input != y->initializer_is_input) DIFF("%s: initializer_is_input", what);
        if (x->producer != y->producer) DIFF("%s: producer %d vs %d", what, x->producer, y->producer);
        if (x->is_output != y->is_output) DIFF("%s: is_output", what);
        if (!str_eq(x->doc_string, y->doc_string)) DIFF("%s: doc_string", what);
        if (!bytes_eq(x->opaque, x->opaque_len, y->opaque, y->opaque_len)) DIFF("%s: kept bytes differ", what);
    }
    if (!index_list_eq(a->inputs, a->n_inputs, b->inputs, b->n_inputs, "inputs", why, cap)) return 0;
    if (!index_list_eq(a->outputs, a->n_outputs, b->outputs, b->n_outputs, "outputs", why, cap)) return 0;
    if (!index_list_eq(a->initializers, a->n_initializers, b->initializers, b->n_initializers, "initializers", why,
                       cap))
        return 0;
    if (!index_list_eq(a->value_infos, a->n_value_infos, b->value_infos, b->n_value_infos, "value_infos", why, cap))
        return 0;
    if (a->n_nodes != b->n_nodes) DIFF("%d vs %d nodes", a->n_nodes, b->n_nodes);
    for (int i = 0; i < a->n_nodes; i++) {
        const ptq_node *x = &a->nodes[i], *y = &b->nodes[i];
        if (!str_eq(x->name, y->name)) DIFF("node %d: name '%s' vs '%s'", i, x->name, y->name);
        if (!str_eq(x->op_type, y->op_type)) DIFF("node '%s': op_type", x->name);
        if (!str_eq_empty(x->domain, y->domain)) DIFF("node '%s': domain", x->name);
        if (!str_eq(x->doc_string, y->doc_string)) DIFF("node '%s': doc_string", x->name);
        if (!index_list_eq(x->inputs, x->n_inputs, y->inputs, y->n_inputs, "node inputs", why, cap)) return 0;
        if (!index_list_eq(x->outputs, x->n_outputs, y->outputs, y->n_outputs, "node outputs", why, cap)) return 0;
        if (x->n_attrs != y->n_attrs) DIFF("node '%s': %d vs %d attributes", x->name, x->n_attrs, y->n_attrs);
        for (int k = 0; k < x->n_attrs; k++)
            if (!attr_eq(&x->attrs[k], &y->attrs[k], x->name, why, cap)) return 0;
        if (!bytes_eq(x->opaque, x->opaque_len, y->opaque, y->opaque_len)) DIFF("node '%s': kept bytes", x->name);
    }
    return 1;
}

/* load(path) -> save to $BUILD/tmp/roundtrip_<stem>.onnx -> load; IRs must be equal and
 * the second save byte-identical to the first. *same_file: the saved file equals the
 * original byte for byte. Returns 1 when everything held. */
static int round_trip_file(const char *path, const char *stem, int *same_file)
{
    ptq_graph *g = NULL, *g2 = NULL;
    uint8_t *buf1 = NULL, *buf2 = NULL, *orig = NULL;
    size_t len1 = 0, len2 = 0, olen = 0;
    char out[800], why[512];
    int ok = 0;
    snprintf(out, sizeof out, "%s/roundtrip_%s.onnx", tmp_dir, stem);
    if (onnx_model_load(path, &g) != PTQ_OK) {
        TEST_FAILF("%s: %s", path, ptq_last_error());
        goto out;
    }
    if (onnx_model_save(g, out) != PTQ_OK || onnx_model_serialize(g, &buf1, &len1) != PTQ_OK) {
        TEST_FAILF("%s: save: %s", path, ptq_last_error());
        goto out;
    }
    if (onnx_model_load(out, &g2) != PTQ_OK) {
        TEST_FAILF("%s: reload of %s: %s", path, out, ptq_last_error());
        goto out;
    }
    if (!graph_eq(g, g2, why, sizeof why)) {
        TEST_FAILF("%s: round trip changed the IR: %s", path, why);
        goto out;
    }
    if (onnx_model_serialize(g2, &buf2, &len2) != PTQ_OK || !bytes_eq(buf1, len1, buf2, len2)) {
        TEST_FAILF("%s: second save differs (%zu vs %zu bytes)", path, len1, len2);
        goto out;
    }
    orig = read_bytes(path, &olen);
    if (same_file) *same_file = orig && bytes_eq(orig, olen, buf1, len1);
    ok = 1;
out:
    ptq_graph_destroy(g);
    ptq_graph_destroy(g2);
    free(buf1);
    free(buf2);
    free(orig);
    return ok;
}

/* ------------------------------------------------ tests */

TEST(paddleocr_round_trip)
{
    const char *models[] = {"ch_PP-OCRv4_det_infer", "ch_PP-OCRv4_rec_infer", "ch_ppocr_mobile_v2.0_cls_infer"};
    int found = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[300];
        snprintf(path, sizeof path, "build/models/%s.onnx", models[i]);
        if (!exists(path)) continue;
        found++;
        int same = 0;
        if (round_trip_file(path, models[i], &same))
            printf("  ok %s: IR equal after load->save->load%s\n", models[i],
                   same ? "; saved file byte-identical to the original" : "");
    }
    if (!found) SKIP("build/models/*.onnx absent (make deps)");
}

TEST(paddleocr_contents)
{
    const char *path = "build/models/ch_ppocr_mobile_v2.0_cls_infer.onnx";
    ptq_graph *g = NULL;
    if (!exists(path)) SKIP("build/models/ch_ppocr_mobile_v2.0_cls_infer.onnx absent (make deps)");
    EXPECT_EQ_INT(onnx_model_load(path, &g), PTQ_OK);
    if (!g) return;
    EXPECT(g->n_nodes > 10);
    int consts = 0; /* this export keeps its weights in Constant nodes */
    for (int n = 0; n < g->n_nodes; n++) {
        const ptq_tensor *t = ptq_attr_tensor(&g->nodes[n], "value");
        consts += strcmp(g->nodes[n].op_type, "Constant") == 0 && t && t->data;
    }
    EXPECT(g->n_initializers + consts > 10);
    EXPECT_EQ_INT(g->n_inputs, 1);
    EXPECT(ptq_graph_opset(g, "") > 0);
    const ptq_value *in = &g->values[g->inputs[0]];
    EXPECT_EQ_INT(in->kind, PTQ_VALUE_INPUT);
    EXPECT_EQ_INT(in->t.dtype, PTQ_F32);
    EXPECT_EQ_INT(in->t.rank, 4);
    /* every node input is -1, an input, an initializer or some node's output */
    for (int n = 0; n < g->n_nodes; n++)
        for (int k = 0; k < g->nodes[n].n_inputs; k++) {
            int v = g->nodes[n].inputs[k];
            if (v < 0) continue;
            EXPECT(v < g->n_values);
            EXPECT(g->values[v].kind != PTQ_VALUE_INTERMEDIATE || g->values[v].producer >= 0);
        }
    for (int i = 0; i < g->n_initializers; i++) EXPECT(g->values[g->initializers[i]].t.data != NULL);
    ptq_graph_destroy(g);
}

TEST(testdata_models_round_trip)
{
    const char *tests[] = {"node/test_conv_with_strides_padding", "node/test_constant", "node/test_if",
                           "node/test_loop11", "node/test_scan_sum", "node/test_identity_sequence",
                           "node/test_optional_get_element_sequence", "node/test_sequence_insert_at_back",
                           "node/test_castlike_FLOAT_to_STRING", "pytorch-converted/test_BatchNorm1d_3d_input_eval",
                           "simple/test_sign_model", "node/test_softmax_axis_0_expanded"};
    int found = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        char path[400];
        snprintf(path, sizeof path, "%s/%s/model.onnx", TESTDATA, tests[i]);
        if (!exists(path)) continue;
        found++;
        round_trip_file(path, strchr(tests[i], '/') + 1, NULL);
    }
    if (!found) SKIP(TESTDATA " absent (libonnx-testdata)");
    /* what the loader made of some of them */
    char path[400];
    ptq_graph *g = NULL;
    snprintf(path, sizeof path, "%s/pytorch-converted/test_BatchNorm1d_3d_input_eval/model.onnx", TESTDATA);
    if (exists(path) && onnx_model_load(path, &g) == PTQ_OK) {
        int listed = 0;
        for (int i = 0; i < g->n_inputs; i++) listed += g->values[g->inputs[i]].initializer_is_input;
        EXPECT(listed > 0); /* IR 3 style: weights also listed as graph inputs */
        ptq_graph_destroy(g);
        g = NULL;
    }
    snprintf(path, sizeof path, "%s/node/test_if/model.onnx", TESTDATA);
    if (exists(path) && onnx_model_load(path, &g) == PTQ_OK) {
        const ptq_attr *a = ptq_node_attr(&g->nodes[0], "then_branch");
        EXPECT(a && a->type == PTQ_ATTR_GRAPH && a->opaque && a->opaque_len > 0);
        ptq_graph_destroy(g);
        g = NULL;
    }
    snprintf(path, sizeof path, "%s/node/test_identity_sequence/model.onnx", TESTDATA);
    if (exists(path) && onnx_model_load(path, &g) == PTQ_OK) {
        const ptq_value *out = &g->values[g->outputs[0]];
        EXPECT(out->opaque != NULL); /* the sequence type is kept */
        EXPECT_EQ_INT(out->has_type, 0);
        ptq_graph_destroy(g);
        g = NULL;
    }
    snprintf(path, sizeof path, "%s/node/test_constant/model.onnx", TESTDATA);
    if (exists(path) && onnx_model_load(path, &g) == PTQ_OK) {
        const ptq_tensor *t = ptq_attr_tensor(&g->nodes[0], "value");
        EXPECT(t && t->dtype == PTQ_F32 && t->rank == 2 && t->dims[0] == 5 && t->dims[1] == 5 && t->data);
        ptq_graph_destroy(g);
    }
}

TEST(testdata_tensor_files)
{
    char a[800], b[800], c[800];
    ptq_tensor x, y, z;
    char *name = NULL;
    snprintf(a, sizeof a, "%s/node/test_add/test_data_set_0/input_0.pb", TESTDATA);
    snprintf(b, sizeof b, "%s/node/test_add/test_data_set_0/input_1.pb", TESTDATA);
    snprintf(c, sizeof c, "%s/node/test_add/test_data_set_0/output_0.pb", TESTDATA);
    if (!exists(a)) SKIP(TESTDATA " absent (libonnx-testdata)");
    EXPECT_EQ_INT(onnx_tensor_load(a, &x, &name), PTQ_OK);
    EXPECT_STR(name, "x");
    free(name);
    EXPECT_EQ_INT(onnx_tensor_load(b, &y, NULL), PTQ_OK);
    EXPECT_EQ_INT(onnx_tensor_load(c, &z, NULL), PTQ_OK);
    EXPECT_EQ_INT(x.dtype, PTQ_F32);
    EXPECT_EQ_INT(x.rank, 3);
    EXPECT(x.dims[0] == 3 && x.dims[1] == 4 && x.dims[2] == 5);
    if (x.data && y.data && z.data && ptq_shape_equal(&x, &z)) {
        int bad = 0;
        for (size_t i = 0; i < ptq_tensor_numel(&x); i++)
            bad += ((float *)x.data)[i] + ((float *)y.data)[i] != ((float *)z.data)[i];
        EXPECT_EQ_INT(bad, 0); /* x + y == the expected output, exactly */
    }
    ptq_tensor_free(&x);
    ptq_tensor_free(&y);
    ptq_tensor_free(&z);
    /* int64 and bool tensors */
    snprintf(a, sizeof a, "%s/node/test_argmax_default_axis_example/test_data_set_0/output_0.pb", TESTDATA);
    if (exists(a)) {
        EXPECT_EQ_INT(onnx_tensor_load(a, &x, NULL), PTQ_OK);
        EXPECT_EQ_INT(x.dtype, PTQ_I64);
        ptq_tensor_free(&x);
    }
    snprintf(a, sizeof a, "%s/node/test_and2d/test_data_set_0/input_0.pb", TESTDATA);
    if (exists(a)) {
        EXPECT_EQ_INT(onnx_tensor_load(a, &x, NULL), PTQ_OK);
        EXPECT_EQ_INT(x.dtype, PTQ_BOOL);
        for (size_t i = 0; x.data && i < ptq_tensor_numel(&x); i++) EXPECT(((uint8_t *)x.data)[i] <= 1);
        ptq_tensor_free(&x);
    }
    /* Optional and Sequence protos, string tensors: unsupported, with a message */
    const char *refused[] = {"node/test_identity_opt/test_data_set_0/input_0.pb",
                             "node/test_optional_get_element_sequence/test_data_set_0/input_0.pb",
                             "node/test_sequence_insert_at_back/test_data_set_0/input_0.pb",
                             "node/test_if_opt/test_data_set_0/output_0.pb",
                             "node/test_loop16_seq_none/test_data_set_0/input_2.pb",
                             "node/test_castlike_FLOAT_to_STRING/test_data_set_0/output_0.pb"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        snprintf(a, sizeof a, "%s/%s", TESTDATA, refused[i]);
        if (!exists(a)) continue;
        ptq_status st = onnx_tensor_load(a, &x, &name);
        if (st != PTQ_ERR_UNSUPPORTED)
            TEST_FAILF("%s: status %s, expected unsupported (%s)", refused[i], ptq_status_name(st), ptq_last_error());
        else if (!strstr(ptq_last_error(), a))
            TEST_FAILF("%s: message does not name the file: %s", refused[i], ptq_last_error());
        if (st == PTQ_OK) ptq_tensor_free(&x);
        free(name);
        name = NULL;
    }
    /* garbage and empty files */
    snprintf(a, sizeof a, "%s/garbage.pb", ext_dir);
    uint8_t junk[256];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)rng();
    EXPECT(write_bytes(a, junk, sizeof junk));
    EXPECT(onnx_tensor_load(a, &x, NULL) != PTQ_OK);
    EXPECT(write_bytes(a, junk, 0));
    EXPECT(onnx_tensor_load(a, &x, NULL) != PTQ_OK);
}

/* A graph built with the IR API (as ptq's passes do) saves, reloads and keeps everything. */
TEST(in_memory_graph)
{
    ptq_graph *g = ptq_graph_create(), *g2 = NULL, *g3 = NULL;
    int x, w, y, c, z, n;
    char why[512], out[800];
    if (!g) {
        TEST_FAILF("out of memory");
        return;
    }
    g->opsets = calloc(2, sizeof *g->opsets);
    g->opsets[0].domain = ptq_strdup("");
    g->opsets[0].version = 13;
    g->opsets[1].domain = ptq_strdup("com.example");
    g->opsets[1].version = 1;
    g->n_opsets = 2;
    g->producer_name = ptq_strdup("ptq-test");
    g->graph_name = ptq_strdup("built");
    g->doc_string = ptq_strdup("model doc");
    g->metadata = calloc(1, sizeof *g->metadata);
    g->metadata[0].key = ptq_strdup("k");
    g->metadata[0].value = ptq_strdup("v");
    g->n_metadata = 1;
    g->inputs = malloc(sizeof(int) * 4);
    g->outputs = malloc(sizeof(int) * 4);
    g->initializers = malloc(sizeof(int) * 4);
    g->value_infos = malloc(sizeof(int) * 4);
    EXPECT_EQ_INT(ptq_graph_add_value(g, "x", &x), PTQ_OK);
    g->values[x].kind = PTQ_VALUE_INPUT;
    g->values[x].t.dtype = PTQ_F32;
    g->values[x].t.rank = 2;
    g->values[x].t.dims[0] = -1;
    g->values[x].dim_params[0] = ptq_strdup("N");
    g->values[x].t.dims[1] = 4;
    g->values[x].has_type = 1;
    g->inputs[g->n_inputs++] = x;
    EXPECT_EQ_INT(ptq_graph_add_value(g, "w", &w), PTQ_OK);
    g->values[w].kind = PTQ_VALUE_INITIALIZER;
    g->values[w].t.dtype = PTQ_F32;
    g->values[w].t.rank = 1;
    g->values[w].t.dims[0] = 4;
    EXPECT_EQ_INT(ptq_tensor_alloc(&g->values[w].t), PTQ_OK);
    for (int i = 0; i < 4; i++) ((float *)g->values[w].t.data)[i] = (float)i - 1.5f;
    g->values[w].doc_string = ptq_strdup("weights");
    g->initializers[g->n_initializers++] = w;
    EXPECT_EQ_INT(ptq_graph_add_value(g, "y", &y), PTQ_OK);
    EXPECT_EQ_INT(ptq_graph_add_value(g, "c", &c), PTQ_OK);
    EXPECT_EQ_INT(ptq_graph_add_value(g, "z", &z), PTQ_OK);
    int ins[2] = {x, w};
    EXPECT_EQ_INT(ptq_graph_add_node(g, "mul", "Mul", "", ins, 2, &y, 1, &n), PTQ_OK);
    g->nodes[n].doc_string = ptq_strdup("node doc");
    EXPECT_EQ_INT(ptq_graph_add_node(g, "const", "Constant", NULL, NULL, 0, &c, 1, &n), PTQ_OK);
    ptq_attr a;
    memset(&a, 0, sizeof a);
    a.name = ptq_strdup("value");
    a.type = PTQ_ATTR_TENSOR;
    a.tensor.dtype = PTQ_I64;
    a.tensor.rank = 1;
    a.tensor.dims[0] = 3;
    EXPECT_EQ_INT(ptq_tensor_alloc(&a.tensor), PTQ_OK);
    for (int i = 0; i < 3; i++) ((int64_t *)a.tensor.data)[i] = (int64_t)i * 1000000000000LL - 7;
    EXPECT_EQ_INT(ptq_node_add_attr(&g->nodes[n], &a), PTQ_OK);
    int ins2[3] = {y, -1, c};
    EXPECT_EQ_INT(ptq_graph_add_node(g, "custom", "Custom", "com.example", ins2, 3, &z, 1, &n), PTQ_OK);
    /* every decoded attribute kind */
    static const float fl[3] = {1.0f, -0.0f, 3.5f};
    static const int64_t il[4] = {1, -2, 1LL << 40, 0};
    memset(&a, 0, sizeof a);
    a.name = ptq_strdup("f");
    a.type = PTQ_ATTR_FLOAT;
    a.f = 0.1f;
    ptq_node_add_attr(&g->nodes[n], &a);
    a.name = ptq_strdup("i");
    a.type = PTQ_ATTR_INT;
    a.i = -42;
    ptq_node_add_attr(&g->nodes[n], &a);
    a.name = ptq_strdup("s");
    a.type = PTQ_ATTR_STRING;
    a.s = ptq_strdup("hello");
    a.s_len = 5;
    ptq_node_add_attr(&g->nodes[n], &a);
    a.name = ptq_strdup("floats");
    a.type = PTQ_ATTR_FLOATS;
    a.floats = malloc(sizeof fl);
    memcpy(a.floats, fl, sizeof fl);
    a.n = 3;
    ptq_node_add_attr(&g->nodes[n], &a);
    a.name = ptq_strdup("ints");
    a.type = PTQ_ATTR_INTS;
    a.ints = malloc(sizeof il);
    memcpy(a.ints, il, sizeof il);
    a.n = 4;
    ptq_node_add_attr(&g->nodes[n], &a);
    a.name = ptq_strdup("strings");
    a.type = PTQ_ATTR_STRINGS;
    a.strings = calloc(2, sizeof(char *));
    a.strings[0] = ptq_strdup("a");
    a.strings[1] = ptq_strdup("");
    a.n = 2;
    ptq_node_add_attr(&g->nodes[n], &a);
    g->values[z].t.dtype = PTQ_F32; /* type set without has_type: still declared */
    g->values[z].t.rank = 2;
    g->values[z].t.dims[0] = 2;
    g->values[z].t.dims[1] = 4;
    g->values[z].is_output = 1;
    g->outputs[g->n_outputs++] = z;
    g->values[y].t.dtype = PTQ_F32;
    g->values[y].has_type = 1;
    g->values[y].in_value_info = 1;
    g->value_infos[g->n_value_infos++] = y;
    EXPECT_EQ_INT(ptq_graph_link(g), PTQ_OK);

    snprintf(out, sizeof out, "%s/roundtrip_in_memory.onnx", tmp_dir);
    ptq_status st = onnx_model_save(g, out);
    if (st != PTQ_OK) TEST_FAILF("save: %s", ptq_last_error());
    st = onnx_model_load(out, &g2);
    if (st != PTQ_OK) {
        TEST_FAILF("reload: %s", ptq_last_error());
        ptq_graph_destroy(g);
        return;
    }
    EXPECT_EQ_INT(g2->n_nodes, 3);
    EXPECT_EQ_INT(g2->n_values, g->n_values);
    EXPECT_STR(g2->producer_name, "ptq-test");
    EXPECT_STR(g2->metadata[0].value, "v");
    EXPECT_STR(g2->nodes[2].domain, "com.example");
    EXPECT_EQ_INT(g2->nodes[2].inputs[1], -1);
    EXPECT_STR(g2->nodes[0].doc_string, "node doc");
    int w2 = ptq_graph_find_value(g2, "w"), x2 = ptq_graph_find_value(g2, "x"), z2 = ptq_graph_find_value(g2, "z");
    EXPECT(w2 >= 0 && g2->values[w2].kind == PTQ_VALUE_INITIALIZER &&
           memcmp(g2->values[w2].t.data, g->values[w].t.data, 16) == 0);
    EXPECT_STR(g2->values[w2].doc_string, "weights");
    EXPECT(x2 >= 0 && g2->values[x2].t.dims[0] == -1 && g2->values[x2].t.dims[1] == 4);
    EXPECT_STR(g2->values[x2].dim_params[0], "N");
    EXPECT(z2 >= 0 && g2->values[z2].has_type && g2->values[z2].t.rank == 2);
    EXPECT_EQ_INT(g2->n_value_infos, 1);
    for (int k = 0; k < g->nodes[2].n_attrs; k++)
        if (!attr_eq(&g->nodes[2].attrs[k], &g2->nodes[2].attrs[k], "custom", why, sizeof why)) TEST_FAILF("%s", why);
    if (!attr_eq(&g->nodes[1].attrs[0], &g2->nodes[1].attrs[0], "const", why, sizeof why)) TEST_FAILF("%s", why);
    /* and the saved file is a fixed point */
    snprintf(out, sizeof out, "%s/in_memory_2.onnx", ext_dir);
    EXPECT_EQ_INT(onnx_model_save(g2, out), PTQ_OK);
    EXPECT_EQ_INT(onnx_model_load(out, &g3), PTQ_OK);
    if (g3 && !graph_eq(g2, g3, why, sizeof why)) TEST_FAILF("second round trip: %s", why);

    /* save refuses what it cannot write, with a message, and never crashes */
    void *keep = g->values[w].t.data;
    g->values[w].t.data = NULL;
    st = onnx_model_save(g, out);
    EXPECT_EQ_INT(st, PTQ_ERR_ARG);
    EXPECT(strstr(ptq_last_error(), "initializer 'w'") != NULL);
    g->values[w].t.data = keep;
    g->nodes[0].inputs[0] = 1000;
    EXPECT_EQ_INT(onnx_model_save(g, out), PTQ_ERR_INTERNAL);
    g->nodes[0].inputs[0] = x;
    ptq_graph_destroy(g);
    ptq_graph_destroy(g2);
    ptq_graph_destroy(g3);
}

/* What ptq keeps opaque survives: unknown fields at model, graph, node and value level,
 * local functions, quantization annotations, a sequence-typed output, type denotations,
 * an attribute without `type` (IR < 3). */
TEST(kept_fields_round_trip)
{
    pb g = {0}, m = {0}, o = {0}, f = {0}, fn = {0}, vi = {0}, tp = {0}, st_ = {0}, ann = {0};
    int64_t dyn[2] = {-1, 2};
    pb_str(&g, G_NAME, "kept");
    pb_str(&g, G_DOC, "graph doc");
    add_init(&g, "w", 1, dims22, 2, w22, sizeof w22);
    /* input x with a symbolic dim and denotations */
    tp = tensor_type(1, dyn, 2, "IMAGE");
    pb_str(&vi, V_NAME, "x");
    pb_msg(&vi, V_TYPE, &tp);
    pb_str(&vi, V_DOC, "input doc");
    pb_str(&vi, 77, "value-level unknown field");
    pb_msg(&g, G_INPUT, &vi);
    /* Add with an unknown node field, an untyped INTS attribute */
    pb n = {0}, at = {0};
    pb_str(&n, N_INPUT, "x");
    pb_str(&n, N_INPUT, "w");
    pb_str(&n, N_OUTPUT, "y");
    pb_str(&n, N_NAME, "add");
    pb_str(&n, N_OP, "Add");
    pb_str(&n, N_DOC, "node doc");
    pb_str(&n, 88, "node-level unknown field");
    pb_msg(&g, G_NODE, &n);
    add_node(&g, "SequenceConstruct", "seq", "y", NULL, "s");
    /* the local function, used by a node */
    pb_str(&n, N_INPUT, "y");
    pb_str(&n, N_OUTPUT, "z");
    pb_str(&n, N_NAME, "local");
    pb_str(&n, N_OP, "LocalId");
    pb_str(&n, N_DOMAIN, "local.fn");
    pb_str(&at, A_NAME, "untyped");
    pb_int(&at, A_INTS, 3);
    pb_int(&at, A_INTS, -4);
    pb_msg(&n, N_ATTR, &at);
    pb_msg(&g, G_NODE, &n);
    add_value_info(&g, G_OUTPUT, "y", 1, dyn, 2);
    /* output s: sequence(tensor(float)) */
    pb_str(&vi, V_NAME, "s");
    tp = tensor_type(1, NULL, -1, NULL);
    pb_msg(&st_, 1, &tp); /* Sequence.elem_type */
    pb_msg(&tp, TP_SEQUENCE, &st_);
    pb_msg(&vi, V_TYPE, &tp);
    pb_msg(&g, G_OUTPUT, &vi);
    add_value_info(&g, G_OUTPUT, "z", 1, dyn, 2);
    add_value_info(&g, G_VALUE_INFO, "y", 1, dyn, 2);
    pb_str(&ann, 1, "w");
    pb_msg(&g, G_QANN, &ann);
    pb_str(&g, 99, "graph-level unknown field");
    /* model */
    pb_int(&m, M_IR, 8);
    pb_str(&m, M_PRODUCER, "hand");
    pb_str(&m, M_DOC, "model doc");
    pb_str(&o, 1, "");
    pb_int(&o, 2, 13);
    pb_msg(&m, M_OPSET, &o);
    pb_str(&o, 1, "local.fn");
    pb_int(&o, 2, 1);
    pb_msg(&m, M_OPSET, &o);
    pb kv = {0};
    pb_str(&kv, 1, "author");
    pb_str(&kv, 2, "test");
    pb_msg(&m, M_META, &kv);
    pb_msg(&m, M_GRAPH, &g);
    pb_str(&f, F_NAME, "LocalId");
    pb_str(&f, F_INPUT, "a");
    pb_str(&f, F_OUTPUT, "b");
    pb_str(&fn, N_INPUT, "a");
    pb_str(&fn, N_OUTPUT, "b");
    pb_str(&fn, N_OP, "Identity");
    pb_msg(&f, F_NODE, &fn);
    pb_str(&o, 1, "");
    pb_int(&o, 2, 13);
    pb_msg(&f, F_OPSET, &o);
    pb_str(&f, F_DOMAIN, "local.fn");
    pb_msg(&m, M_FUNCTIONS, &f);
    pb_str(&m, 123, "model-level unknown field");

    char path[800], why[512];
    snprintf(path, sizeof path, "%s/kept.onnx", ext_dir);
    EXPECT(write_bytes(path, m.d, m.n));
    ptq_graph *g1 = NULL;
    if (onnx_model_load(path, &g1) != PTQ_OK) {
        TEST_FAILF("load: %s", ptq_last_error());
        free(m.d);
        return;
    }
    EXPECT(g1->opaque_model != NULL);
    EXPECT(g1->nodes[0].opaque != NULL);
    const ptq_attr *u = ptq_node_attr(&g1->nodes[2], "untyped");
    EXPECT(u && u->type == PTQ_ATTR_INTS && u->n == 2 && u->ints[1] == -4);
    int s = ptq_graph_find_value(g1, "s"), x = ptq_graph_find_value(g1, "x");
    EXPECT(s >= 0 && g1->values[s].opaque && !g1->values[s].has_type);
    EXPECT(x >= 0 && g1->values[x].opaque && g1->values[x].has_type && g1->values[x].t.dims[0] == -1);
    EXPECT_STR(g1->values[x].dim_params[0], "batch");
    uint8_t *buf = NULL;
    size_t len = 0;
    EXPECT_EQ_INT(onnx_model_serialize(g1, &buf, &len), PTQ_OK);
    const char *needles[] = {"model-level unknown field", "graph-level unknown field", "node-level unknown field",
                             "value-level unknown field", "IMAGE", "DATA_BATCH", "LocalId", "local.fn"};
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
        if (!buf || !memmem(buf, len, needles[i], strlen(needles[i]))) TEST_FAILF("saved model lacks '%s'", needles[i]);
    free(buf);
    /* change x's declared shape: the kept denotations no longer describe it, the IR wins */
    g1->values[x].t.dims[0] = 7;
    EXPECT_EQ_INT(onnx_model_serialize(g1, &buf, &len), PTQ_OK);
    EXPECT(buf && !memmem(buf, len, "DATA_BATCH", 10));
    free(buf);
    g1->values[x].t.dims[0] = -1;
    int same = 0;
    round_trip_file(path, "kept_fields", &same);
    ptq_graph *g2 = NULL;
    snprintf(path, sizeof path, "%s/roundtrip_kept_fields.onnx", tmp_dir);
    if (onnx_model_load(path, &g2) == PTQ_OK) {
        if (!graph_eq(g1, g2, why, sizeof why)) TEST_FAILF("%s", why);
        ptq_graph_destroy(g2);
    }
    ptq_graph_destroy(g1);
    free(m.d);
}

TEST(truncated_random_and_empty)
{
    pb g = base_graph();
    pb m = make_model(&g);
    ptq_graph *out = NULL;
    EXPECT_EQ_INT(onnx_model_load_buffer(m.d, m.n, NULL, "base.onnx", &out), PTQ_OK);
    ptq_graph_destroy(out);
    expect_load_error("empty.onnx", m.d, 0, NULL, PTQ_ERR_FORMAT, "empty");
    /* every strict prefix: the graph (last field) is cut or missing */
    for (size_t len = 1; len < m.n; len++) expect_load_error("prefix.onnx", m.d, len, NULL, PTQ_ERR_FORMAT, NULL);
    /* random bytes */
    uint8_t junk[2048];
    for (int k = 0; k < 300; k++) {
        size_t len = 1 + rng() % sizeof junk;
        for (size_t i = 0; i < len; i++) junk[i] = (uint8_t)rng();
        expect_load_error("random.onnx", junk, len, NULL, PTQ_OK, NULL);
    }
    /* random byte changes: any outcome but a crash; errors name the file */
    uint8_t *bad = malloc(m.n);
    for (int k = 0; k < 2000 && bad; k++) {
        memcpy(bad, m.d, m.n);
        for (int j = 0; j < 1 + k % 3; j++) bad[rng() % m.n] = (uint8_t)rng();
        out = NULL;
        ptq_status st = onnx_model_load_buffer(bad, m.n, NULL, "flip.onnx", &out);
        if (st == PTQ_OK) {
            uint8_t *s = NULL;
            size_t sl = 0;
            if (onnx_model_serialize(out, &s, &sl) != PTQ_OK) TEST_FAILF("case %d: loads but does not save: %s", k, ptq_last_error());
            free(s);
            ptq_graph_destroy(out);
        } else if (strncmp(ptq_last_error(), "flip.onnx", 9) != 0) {
            TEST_FAILF("case %d: message does not name the file: %s", k, ptq_last_error());
        }
    }
    free(bad);
    free(m.d);
}

TEST(corrupted_real_model)
{
    const char *path = "build/models/ch_ppocr_mobile_v2.0_cls_infer.onnx";
    size_t len;
    uint8_t *orig = exists(path) ? read_bytes(path, &len) : NULL;
    if (!orig) SKIP("build/models/ch_ppocr_mobile_v2.0_cls_infer.onnx absent (make deps)");
    uint8_t *bad = malloc(len);
    for (int k = 0; k < 150 && bad; k++) {
        ptq_graph *out = NULL;
        size_t cut = k < 50 ? rng() % len : len;
        memcpy(bad, orig, len);
        if (k >= 50)
            for (int j = 0; j < 1 + k % 8; j++) bad[rng() % len] ^= (uint8_t)(1u << (rng() % 8));
        ptq_status st = onnx_model_load_buffer(bad, cut, NULL, "cls.onnx", &out);
        if (st == PTQ_OK) ptq_graph_destroy(out);
        else if (strncmp(ptq_last_error(), "cls.onnx", 8) != 0 || strchr(ptq_last_error(), '\n'))
            TEST_FAILF("case %d: %s", k, ptq_last_error());
    }
    free(bad);
    free(orig);
}

TEST(malformed_models)
{
    pb g, m;
    float w44[12] = {0};
    /* 12 bytes of raw_data for a 4x4 float32 */
    int64_t d44[2] = {4, 4};
    g = (pb){0};
    pb_str(&g, G_NAME, "g");
    add_init(&g, "w", 1, d44, 2, w44, 12);
    m = make_model(&g);
    expect_load_error("m.onnx", m.d, m.n, NULL, PTQ_ERR_FORMAT,
                      "initializer 'w': 12 bytes of raw_data for 4x4 float32 (64 expected)");
    free(m.d);
    /* negative dim */
    int64_t neg[2] = {2, -3};
    g = (pb){0};
    add_init(&g, "w", 1, neg, 2, w44, 0);
    m = make_model(&g);
    expect_load_error("neg.onnx", m.d, m.n, NULL, PTQ_ERR_FORMAT, "negative dim -3");
    free(m.d);
    /* absurd dims: 2^21 x 2^21 floats = 2^44 bytes */
    int64_t huge[2] = {1 << 21, 1 << 21};
    g = (pb){0};
    add_init(&g, "big", 1, huge, 2, w44, 16);
    m = make_model(&g);
    expect_load_error("huge.onnx", m.d, m.n, NULL, PTQ_ERR_FORMAT, "2^40");
    free(m.d);
    int64_t overflow[4] = {INT64_MAX, INT64_MAX, 4, 0};
    g = (pb){0};
    add_init(&g, "of", 1, overflow, 4, NULL, 0);
    m = make_model(&g);
    expect_load_error("overflow.onnx", m.d, m.n, NULL, PTQ_ERR_FORMAT, "2^40");
    free(m.d);
    /* typed field with the wrong count */
    g = (pb){0};
    {
        pb t = {0};
        pb_int(&t, T_DIMS, 2);
        pb_int(&t, T_DIMS, 2);
        pb_int(&t, T_TYPE, 1);
        pb_str(&t, T_NAME, "w");
        for (int i = 0; i < 3; i++) pb_float(&t, T_FLOAT, 1.0f);
        pb_msg(&g, G_INIT, &t);
    }
    m = make_model(&g);
    expect_load_error("typed.onnx", m.d, m.n, NULL, PTQ_ERR_FORMAT, "3 values in float_data");
    free(m.d);
    /* unsupported dtypes: string, bfloat16; rank 9 */
    g = (pb){0};
    add_init(&g, "s", 8, dims22, 2, NULL, 0);
    m = make_model(&g);
    expect_load_error("string.onnx", m.d, m.n, NULL, PTQ_ERR_UNSUPPORTED, "initializer 's'");
    free(m.d);
    g = (pb){0};
    add_init(&g, "b", 16, dims22, 2, w22, 8);
    m = make_model(&g);
    expect_load_error("bf16.onnx", m.d, m.n, NULL, PTQ_ERR_UNSUPPORTED, "data type 16");
    free(m.d);
    int64_t ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    g = (pb){0};
    add_init(&g, "r9", 1, ones, 9, w22, 4);
    m = make_model(&g);
    expect_load_error("rank9.onnx", m.d, m.n, NULL, PTQ_ERR_UNSUPPORTED, "rank 9");
    free(m.d);
    /* node without op_type */
    g = base_graph();
    add_node(&g, NULL, "nameless_op", "y", NULL, "q");
    m = make_model(&g);
    expect_load_error("noop.onnx", m.d, m.n, NULL, PTQ_ERR_FORMAT, "has no op_type");
    free(m.d);
    /* duplicate initializer, input listed twice, two producers, a node writing an initializer */
    g = base_graph();
    add_init(&g, "w", 1, dims22, 2, w22, sizeof w22);
    m = make_model(&g);
    expect_load_error("dupinit.onnx", m.d, m.n, NULL, PTQ_ERR_FORMAT, "'w'");
    free(m.d);
    g = base_graph();
    add_value_info(&g, G_INPUT, "x", 1, dims22, 2);
    m = make_model(&g);
    expect_load_error("dupinput.onnx", m.d, m.n, NULL, PTQ_ERR_FORMAT, "'x'");
    free(m.d);
    g = base_graph();
    add_node(&g, "Sub", "sub", "x", "w", "y");
    m = make_model(&g);
    expect_load_error("twoproducers.onnx", m.d, m.n, NULL, PTQ_ERR_FORMAT, "two nodes");
    free(m.d);
    g = base_graph();
    add_node(&g, "Neg", "neg", "x", NULL, "w");
    m = make_model(&g);
    expect_load_error("writesinit.onnx", m.d, m.n, NULL, PTQ_ERR_FORMAT, "'w'");
    free(m.d);
    /* no graph; a graph without ir_version or opset */
    m = (pb){0};
    pb_int(&m, M_IR, 8);
    expect_load_error("nograph.onnx", m.d, m.n, NULL, PTQ_ERR_FORMAT, "no graph");
    free(m.d);
}

/* Writes an initializer stored in `location` (offset/length as strings, NULL to omit) and
 * returns the model bytes. */
static pb external_model(const char *location, const char *offset, const char *length)
{
    pb g = {0}, t = {0}, e = {0};
    pb_str(&g, G_NAME, "ext");
    pb_int(&t, T_DIMS, 2);
    pb_int(&t, T_DIMS, 2);
    pb_int(&t, T_TYPE, 1);
    pb_str(&t, T_NAME, "w");
    pb_str(&e, 1, "location");
    pb_str(&e, 2, location);
    pb_msg(&t, T_EXT, &e);
    if (offset) {
        pb_str(&e, 1, "offset");
        pb_str(&e, 2, offset);
        pb_msg(&t, T_EXT, &e);
    }
    if (length) {
        pb_str(&e, 1, "length");
        pb_str(&e, 2, length);
        pb_msg(&t, T_EXT, &e);
    }
    pb_int(&t, T_LOC, 1);
    pb_msg(&g, G_INIT, &t);
    add_value_info(&g, G_INPUT, "x", 1, dims22, 2);
    add_node(&g, "Add", "add", "x", "w", "y");
    add_value_info(&g, G_OUTPUT, "y", 1, dims22, 2);
    return make_model(&g);
}

static void external_case(const char *stem, const char *location, const char *offset, const char *length,
                          ptq_status want, const char *needle)
{
    char path[800];
    pb m = external_model(location, offset, length);
    snprintf(path, sizeof path, "%s/%s.onnx", ext_dir, stem);
    EXPECT(write_bytes(path, m.d, m.n));
    free(m.d);
    ptq_graph *g = NULL;
    ptq_status st = onnx_model_load(path, &g);
    if (want == PTQ_OK) {
        if (st != PTQ_OK) {
            TEST_FAILF("%s: %s", stem, ptq_last_error());
            return;
        }
        int w = ptq_graph_find_value(g, "w");
        EXPECT(w >= 0 && g->values[w].t.data && memcmp(g->values[w].t.data, w22, sizeof w22) == 0);
        /* saved inline: the copy no longer needs the data file */
        char out[800];
        snprintf(out, sizeof out, "%s/roundtrip_external_%s.onnx", tmp_dir, stem);
        EXPECT_EQ_INT(onnx_model_save(g, out), PTQ_OK);
        ptq_graph_destroy(g);
        g = NULL;
        EXPECT_EQ_INT(onnx_model_load(out, &g), PTQ_OK);
        w = g ? ptq_graph_find_value(g, "w") : -1;
        EXPECT(w >= 0 && g->values[w].t.data && memcmp(g->values[w].t.data, w22, sizeof w22) == 0);
        ptq_graph_destroy(g);
        return;
    }
    if (st == PTQ_OK) {
        TEST_FAILF("%s: loaded, expected an error", stem);
        ptq_graph_destroy(g);
        return;
    }
    if (st != want)
        TEST_FAILF("%s: status %s, expected %s (%s)", stem, ptq_status_name(st), ptq_status_name(want),
                   ptq_last_error());
    if (!strstr(ptq_last_error(), path)) TEST_FAILF("%s: message does not name the file: %s", stem, ptq_last_error());
    if (needle && !strstr(ptq_last_error(), needle))
        TEST_FAILF("%s: message lacks '%s': %s", stem, needle, ptq_last_error());
}

TEST(external_data)
{
    char path[800];
    uint8_t data[64] = {0};
    memcpy(data + 8, w22, sizeof w22);
    snprintf(path, sizeof path, "%s/weights.bin", ext_dir);
    EXPECT(write_bytes(path, data, 8 + sizeof w22));
    /* a secret one level up, which the escaping locations try to read */
    snprintf(path, sizeof path, "%s/test_onnx_io_secret.bin", tmp_dir);
    EXPECT(write_bytes(path, data, sizeof data));
    external_case("ok", "weights.bin", "8", "16", PTQ_OK, NULL);
    external_case("ok_nolength", "weights.bin", "8", NULL, PTQ_OK, NULL);
    external_case("dotdot", "../test_onnx_io_secret.bin", NULL, NULL, PTQ_ERR_FORMAT, "leaves the model's folder");
    external_case("dotdot_inner", "sub/../../test_onnx_io_secret.bin", NULL, NULL, PTQ_ERR_FORMAT, "leaves the model's folder");
    external_case("absolute", "/etc/passwd", NULL, NULL, PTQ_ERR_FORMAT, "leaves the model's folder");
    external_case("missing", "nothere.bin", NULL, NULL, PTQ_ERR_IO, "nothere.bin");
    external_case("short", "weights.bin", "16", NULL, PTQ_ERR_FORMAT, "24 bytes");
    external_case("offset_past_end", "weights.bin", "1000000", NULL, PTQ_ERR_FORMAT, NULL);
    external_case("bad_length", "weights.bin", "8", "12", PTQ_ERR_FORMAT, "length 12");
    external_case("bad_offset", "weights.bin", "-8", NULL, PTQ_ERR_FORMAT, "offset");
    external_case("junk_offset", "weights.bin", "8abc", NULL, PTQ_ERR_FORMAT, "offset");
    external_case("folder", ".", NULL, NULL, PTQ_ERR_IO, "is a directory, not a regular file");
    /* resolved with its symlinks: a link out of the folder is refused, one inside is read */
    snprintf(path, sizeof path, "%s/passwd.bin", ext_dir);
    unlink(path);
    EXPECT(symlink("/etc/passwd", path) == 0);
    external_case("symlink_out", "passwd.bin", NULL, "16", PTQ_ERR_FORMAT, "resolves to /etc/passwd, outside the model's folder");
    snprintf(path, sizeof path, "%s/link.bin", ext_dir);
    unlink(path);
    EXPECT(symlink("weights.bin", path) == 0);
    external_case("symlink_in", "link.bin", "8", "16", PTQ_OK, NULL);
    /* a FIFO is refused without blocking in open */
    snprintf(path, sizeof path, "%s/fifo.bin", ext_dir);
    unlink(path);
    EXPECT(mkfifo(path, 0600) == 0);
    external_case("fifo", "fifo.bin", NULL, "16", PTQ_ERR_IO, "is a FIFO, not a regular file");
    /* from a buffer there is no folder: refused */
    pb m = external_model("weights.bin", "8", NULL);
    expect_load_error("buffer.onnx", m.d, m.n, NULL, PTQ_ERR_FORMAT, "not allowed");
    free(m.d);
}

int main(void)
{
    make_tmp_dirs();
    RUN(paddleocr_round_trip);
    RUN(paddleocr_contents);
    RUN(testdata_models_round_trip);
    RUN(testdata_tensor_files);
    RUN(in_memory_graph);
    RUN(kept_fields_round_trip);
    RUN(truncated_random_and_empty);
    RUN(corrupted_real_model);
    RUN(malformed_models);
    RUN(external_data);
    return test_summary();
}
