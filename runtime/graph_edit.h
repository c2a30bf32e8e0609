/* graph_edit.h: editing passes over a ptq_graph (used by quant/): sorting nodes
 * in place, counting consumers, adding initializers, renaming unique names.
 *
 *   TRY(ptq_graph_add_initializer(g, "w_scale", &t, &v));   // t's data is moved into g
 *   TRY(ptq_graph_sort_nodes(g));                            // file order = topological
 */
#ifndef PTQ_GRAPH_EDIT_H
#define PTQ_GRAPH_EDIT_H

#include "graph.h"

/* Reorders g->nodes topologically (stable: an already sorted graph is unchanged)
 * and recomputes producers. */
ptq_status ptq_graph_sort_nodes(ptq_graph *g);
/* Number of node inputs (over all nodes) reading value v, plus 1 for each subgraph of a node
 * that reads it by name, plus 1 if it is a graph output. */
int ptq_graph_count_uses(const ptq_graph *g, int v);
/* Adds an initializer named `name` holding *t (data ownership moves into the graph;
 * *t is cleared). Fails if the name exists. */
ptq_status ptq_graph_add_initializer(ptq_graph *g, const char *name, ptq_tensor *t, int *out);
/* Removes initializer v from g->initializers (and g->inputs if listed) when nothing
 * reads it anymore; its value entry stays (unreferenced values are not written). */
void ptq_graph_drop_initializer_if_unused(ptq_graph *g, int v);
/* Writes into buf `base` or, if a value or node already has that name, `base_<k>` for
 * the smallest k >= 1 that is free. */
void ptq_graph_unique_name(const ptq_graph *g, const char *base, char *buf, size_t cap);

/* Turns every Constant node holding a tensor (`value`, or value_float(s)/value_int(s))
 * into an initializer named after its output, and removes the node: weights stored as
 * Constant nodes (paddle2onnx does that) become initializers quantization can rewrite.
 * Sets *n_converted. */
ptq_status ptq_graph_constants_to_initializers(ptq_graph *g, int *n_converted);

/* A view of g reduced to what computing the values keep[v] != 0 needs: the nodes that produce
 * them and their ancestors (in g's order), with those values as the view's outputs. It shares
 * g's names, tensors, nodes' contents and attributes (borrowed: g must outlive it, unchanged);
 * node indices are the view's own. A plan of the view runs only that part of the model: a
 * calibration pass needs no post-processing after the last quantized layer. *n_dropped: nodes
 * left out (may be NULL). Free with ptq_graph_view_destroy (never ptq_graph_destroy). */
ptq_status ptq_graph_view_create(const ptq_graph *g, const unsigned char *keep, ptq_graph **out, int *n_dropped);
void ptq_graph_view_destroy(ptq_graph *view); /* NULL-safe */

/* Marks in mark[] (room for g->n_values) the values node n reads: its inputs, and what its
 * subgraphs (If, Loop, Scan) read of g by name. */
void ptq_graph_node_reads(const ptq_graph *g, int n, unsigned char *mark);

/* A view of g that runs only the nodes run[n] != 0, in g's order: a segment of the model
 * whose inputs are values computed before it (engine/stepper.h advances a model through its
 * images one segment at a time). inputs[i] (n_inputs values the segment's nodes read that none
 * of them produces, initializers excepted) become the view's graph inputs, of kind INPUT with
 * the dtype and shape of types[i]; outputs[] (values its nodes produce) its outputs. Sharing
 * and lifetime as ptq_graph_view_create; free with ptq_graph_segment_destroy. */
ptq_status ptq_graph_segment_create(const ptq_graph *g, const unsigned char *run, const int *inputs, const ptq_tensor *types,
                                    int n_inputs, const int *outputs, int n_outputs, ptq_graph **out);
void ptq_graph_segment_destroy(ptq_graph *view); /* NULL-safe */

#endif
