/* graph.h: ptq's neutral graph IR, the model as io/onnx.c loads it and writes it back.
 *
 *   ptq_graph *g = NULL;
 *   TRY(onnx_model_load("m.onnx", &g));   // io/ fills the IR; runtime never sees protobuf
 *   for (int i = 0; i < g->n_nodes; i++) { ptq_node *n = &g->nodes[i]; ... }
 *   int64_t axis = ptq_attr_int(n, "axis", 1);
 *   ptq_graph_destroy(g);
 *
 * Everything the ONNX file holds that ptq does not interpret (doc strings,
 * metadata, value_info, attributes of kinds it does not decode) is kept here so
 * load -> save is lossless. Strings are owned by the graph (malloc'd, freed by
 * ptq_graph_destroy); use ptq_strdup to set them. Values are referenced by index
 * into g->values; -1 stands for an omitted optional input ("" in ONNX).
 * Nodes keep the file's order; ptq_graph_toposort() gives an execution order. */
#ifndef PTQ_GRAPH_H
#define PTQ_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "tensor.h"

typedef enum {
    PTQ_VALUE_INTERMEDIATE = 0, /* produced by a node */
    PTQ_VALUE_INPUT,            /* graph input without initializer */
    PTQ_VALUE_INITIALIZER,      /* constant from the file (data set) */
    PTQ_VALUE_OUTER             /* subgraphs only: a value of an enclosing graph, read by name
                                   (ptq_value.outer: its index in ptq_graph.parent) */
} ptq_value_kind;

typedef struct {
    char *name;
    ptq_value_kind kind;
    /* Type as declared (graph input/output, value_info) or as the initializer holds it.
     * t.data is set only for initializers (owned by the graph). rank -1: unknown. */
    ptq_tensor t;
    char *dim_params[PTQ_MAX_RANK]; /* symbolic dim names (t.dims[i] = -1), or NULL */
    int has_type;                   /* a declared type exists (input/output/value_info) */
    int in_value_info;              /* listed in graph.value_info */
    int initializer_is_input;       /* IR < 4 style: initializer also listed as graph input */
    int producer;                   /* node index, -1 for inputs and initializers */
    char *doc_string;               /* of the ValueInfoProto or TensorProto, or NULL */
    int is_output;                  /* listed in graph.output */
    /* What io/ keeps of the ValueInfoProto that ptq does not decode (a non-tensor type such
     * as a sequence, type denotations, fields newer than ptq's schema): a serialized
     * ValueInfoProto, or NULL. Owned; written back by io/ when it still fits the value. */
    uint8_t *opaque;
    size_t opaque_len;
    int outer;                      /* kind OUTER: the value's index in the enclosing graph */
} ptq_value;

typedef enum {
    PTQ_ATTR_UNDEFINED = 0,
    PTQ_ATTR_FLOAT = 1,
    PTQ_ATTR_INT = 2,
    PTQ_ATTR_STRING = 3,
    PTQ_ATTR_TENSOR = 4,
    PTQ_ATTR_GRAPH = 5,
    PTQ_ATTR_FLOATS = 6,
    PTQ_ATTR_INTS = 7,
    PTQ_ATTR_STRINGS = 8,
    PTQ_ATTR_TENSORS = 9,
    PTQ_ATTR_GRAPHS = 10,
    PTQ_ATTR_SPARSE_TENSOR = 11,
    PTQ_ATTR_SPARSE_TENSORS = 12,
    PTQ_ATTR_TYPE_PROTO = 13,
    PTQ_ATTR_TYPE_PROTOS = 14
} ptq_attr_type; /* codes equal ONNX AttributeProto.AttributeType */

typedef struct {
    char *name;
    ptq_attr_type type;
    float f;
    int64_t i;
    char *s;          /* STRING: bytes, NUL-terminated, length s_len */
    size_t s_len;
    float *floats;    /* FLOATS */
    int64_t *ints;    /* INTS */
    char **strings;   /* STRINGS (each NUL-terminated) */
    size_t n;         /* element count of floats/ints/strings */
    ptq_tensor tensor;  /* TENSOR: owned data */
    char *tensor_name;  /* TENSOR: name of the TensorProto, or NULL */
    char *doc_string;
    char *ref_attr_name;
    /* Kinds ptq does not decode (GRAPH(S), TENSORS, SPARSE_*, TYPE_PROTO(S)): the whole
     * serialized AttributeProto, written back verbatim. */
    uint8_t *opaque;
    size_t opaque_len;
    /* GRAPH: the subgraph, decoded (owned; its parent is the node's graph); GRAPHS: n_graphs
     * of them. Read-only views for the executor: io/ writes the attribute back from opaque. */
    struct ptq_graph *graph;
    struct ptq_graph **graphs;
    int n_graphs;
} ptq_attr;

typedef struct {
    char *name;       /* may be "" */
    char *op_type;
    char *domain;     /* "" for the default ONNX domain */
    char *doc_string; /* or NULL */
    int n_inputs, n_outputs, n_attrs;
    int *inputs;      /* value indices, -1 = omitted optional input */
    int *outputs;     /* value indices, -1 = omitted optional output */
    ptq_attr *attrs;
    /* Fields of the NodeProto newer than ptq's schema: a serialized NodeProto holding
     * only them, or NULL. Owned; written back by io/. */
    uint8_t *opaque;
    size_t opaque_len;
} ptq_node;

typedef struct {
    char *domain;
    int64_t version;
} ptq_opset;

typedef struct {
    char *key, *value;
} ptq_kv;

typedef struct ptq_graph {
    ptq_value *values;
    int n_values, cap_values;
    int *name_slots;           /* open-addressing index of values by name (ptq_graph_find_value):
                                  value index + 1, 0 = empty; cap_values * 2 slots */
    ptq_node *nodes;
    int n_nodes, cap_nodes;
    int *inputs, n_inputs;     /* graph.input order (values of kind INPUT, or initializers listed as input) */
    int *outputs, n_outputs;   /* graph.output order */
    int *initializers, n_initializers; /* file order */
    int *value_infos, n_value_infos;   /* graph.value_info order */

    /* model-level fields, kept for the round trip */
    int64_t ir_version;
    ptq_opset *opsets;
    int n_opsets;
    char *producer_name, *producer_version, *domain, *doc_string;
    int64_t model_version;
    ptq_kv *metadata;
    int n_metadata;
    char *graph_name, *graph_doc_string;
    /* Model fields ptq does not decode (training_info, functions, sparse initializers,
     * quantization annotations, fields newer than ptq's schema): a serialized ModelProto
     * fragment written back verbatim by io/. */
    uint8_t *opaque_model;
    size_t opaque_model_len;
    /* Subgraphs (an attribute's body): the graph holding the node, borrowed; NULL for the
     * model's graph. A subgraph's graph.input are its formal inputs; names it reads from
     * enclosing graphs are values of kind OUTER. Model-level fields stay empty, except
     * opsets, copied from the model. */
    struct ptq_graph *parent;
} ptq_graph;

ptq_graph *ptq_graph_create(void);
void ptq_graph_destroy(ptq_graph *g);              /* NULL-safe; frees everything */
char *ptq_strdup(const char *s);                   /* NULL for NULL */

/* Finds the value named `name`; -1 when absent. Linear scan; use a
 * ptq_name_index for repeated lookups. */
int ptq_graph_find_value(const ptq_graph *g, const char *name);
/* Adds a value (name copied) and returns its index in *out. The value has kind
 * INTERMEDIATE, rank -1, dtype UNDEFINED. Fails on a duplicate name. */
ptq_status ptq_graph_add_value(ptq_graph *g, const char *name, int *out);
/* Adds a node (strings copied; inputs/outputs copied); returns its index in *out.
 * Sets the producer of each output value. Attributes are added with ptq_node_add_attr. */
ptq_status ptq_graph_add_node(ptq_graph *g, const char *name, const char *op_type, const char *domain,
                              const int *inputs, int n_inputs, const int *outputs, int n_outputs, int *out);
/* Appends an attribute (moved: the node takes ownership of a's pointers). */
ptq_status ptq_node_add_attr(ptq_node *n, ptq_attr *a);
/* Recomputes producer indices from node outputs; fails (FORMAT) if a value has two producers. */
ptq_status ptq_graph_link(ptq_graph *g);

/* Opset version of a domain ("" or "ai.onnx" for the default), 0 if not imported. */
int64_t ptq_graph_opset(const ptq_graph *g, const char *domain);

/* Writes into order[0..n_nodes) a topological order (stable: file order when
 * already sorted). Fails with PTQ_ERR_FORMAT naming a node on a cycle, or an input
 * that nothing produces (not an input, initializer nor node output). */
ptq_status ptq_graph_toposort(const ptq_graph *g, int *order);

/* Attribute access; the default is returned when the attribute is absent. */
const ptq_attr *ptq_node_attr(const ptq_node *n, const char *name);
int64_t ptq_attr_int(const ptq_node *n, const char *name, int64_t def);
float ptq_attr_float(const ptq_node *n, const char *name, float def);
const char *ptq_attr_string(const ptq_node *n, const char *name, const char *def);
/* INTS: returns the array and sets *count; NULL (count 0) when absent. */
const int64_t *ptq_attr_ints(const ptq_node *n, const char *name, size_t *count);
const float *ptq_attr_floats(const ptq_node *n, const char *name, size_t *count);
const ptq_tensor *ptq_attr_tensor(const ptq_node *n, const char *name);
/* GRAPH attribute's decoded subgraph; NULL when absent or of another kind. */
const struct ptq_graph *ptq_attr_graph(const ptq_node *n, const char *name);
void ptq_attr_clear(ptq_attr *a);                  /* frees what the attribute owns */
void ptq_node_clear(ptq_node *n);                  /* frees what the node owns */

/* Name -> index hash map (open addressing), for graphs with many values. */
typedef struct ptq_name_index ptq_name_index;
ptq_name_index *ptq_name_index_build(const ptq_graph *g);
int ptq_name_index_find(const ptq_name_index *ix, const char *name);
void ptq_name_index_destroy(ptq_name_index *ix);

#endif
