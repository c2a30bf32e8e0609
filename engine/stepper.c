/* stepper.c: a model advanced segment by segment over all its images (see stepper.h). */
#include "engine/stepper.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/runner.h"
#include "runtime/graph_edit.h"

/* Integer tensors up to this size crossing a cut are given to the segment as constants. */
enum { CONST_BYTES = 4096, PLANS = 2 };

/* One batch of one kept value: in memory (t.data) or in the spill file at off. */
typedef struct {
    ptq_tensor t; /* dtype and shape; data owned when in memory */
    int64_t off;  /* -1: in memory */
    size_t bytes;
    int set;
} entry;

typedef struct {
    int64_t off, len;
} extent;

/* A plan of the current segment for one set of input shapes (and constant contents). */
typedef struct {
    ptq_plan *plan;
    ptq_tensor *key;     /* the inputs' dtypes and shapes ([n_in]); constants' data owned */
    unsigned long used;
} slot;

struct eng_stepper {
    const ptq_graph *g;
    int nv, nn, nb, images;
    int *first;                /* [nb] first image of each batch */
    unsigned char *done;       /* [nn] nodes run */
    int *users;                /* [nv] nodes not run yet that read the value */
    int *pins;                 /* [nv] pin counts */
    entry **ent;               /* [nv] -> [nb], NULL: not kept */
    int **reads;               /* [nn] -> values read (-1 ended) */
    size_t budget, in_mem;
    int fd;                    /* spill file, -1 until needed */
    int64_t spill_end, spilled;
    extent *free_ext;
    int n_free, cap_free;
    void **scratch;            /* [max(1, inputs of a segment)] read buffers */
    size_t *scratch_cap;
    int n_scratch;
    eng_stepper_options o;
    eng_memory mem;
    eng_stepper_stats stats;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static size_t tensor_bytes(const ptq_tensor *t)
{
    return ptq_tensor_numel(t) * ptq_dtype_size(t->dtype);
}

/* ---- the spill file: extents first-fit, freed ones merged with their neighbours ---- */

static ptq_status spill_open(eng_stepper *s)
{
    ptq_status st = PTQ_OK;
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/ptq-refine-XXXXXX", dir && *dir ? dir : "/tmp");
    s->fd = mkstemp(path);
    if (s->fd < 0) FAIL(PTQ_ERR_IO, "%s: cannot create a temporary file: %s", path, strerror(errno));
    unlink(path);
done:
    return st;
}

static int64_t extent_take(eng_stepper *s, int64_t len)
{
    for (int i = 0; i < s->n_free; i++)
        if (s->free_ext[i].len >= len) {
            int64_t off = s->free_ext[i].off;
            s->free_ext[i].off += len;
            s->free_ext[i].len -= len;
            if (!s->free_ext[i].len) memmove(&s->free_ext[i], &s->free_ext[i + 1], sizeof(extent) * (size_t)(s->n_free-- - i - 1));
            return off;
        }
    int64_t off = s->spill_end;
    s->spill_end += len;
    return off;
}

static ptq_status extent_give(eng_stepper *s, int64_t off, int64_t len)
{
    ptq_status st = PTQ_OK;
    int i = 0;
    while (i < s->n_free && s->free_ext[i].off < off) i++;
    if (i > 0 && s->free_ext[i - 1].off + s->free_ext[i - 1].len == off) { /* grows its left neighbour */
        s->free_ext[i - 1].len += len;
        if (i < s->n_free && s->free_ext[i - 1].off + s->free_ext[i - 1].len == s->free_ext[i].off) {
            s->free_ext[i - 1].len += s->free_ext[i].len;
            memmove(&s->free_ext[i], &s->free_ext[i + 1], sizeof(extent) * (size_t)(s->n_free-- - i - 1));
        }
        return PTQ_OK;
    }
    if (i < s->n_free && off + len == s->free_ext[i].off) {
        s->free_ext[i].off = off;
        s->free_ext[i].len += len;
        return PTQ_OK;
    }
    if (s->n_free == s->cap_free) {
        int cap = s->cap_free ? 2 * s->cap_free : 16;
        extent *e = realloc(s->free_ext, sizeof *e * (size_t)cap);
        CHECK_ALLOC(e);
        s->free_ext = e;
        s->cap_free = cap;
    }
    memmove(&s->free_ext[i + 1], &s->free_ext[i], sizeof(extent) * (size_t)(s->n_free - i));
    s->free_ext[i] = (extent){off, len};
    s->n_free++;
done:
    return st;
}

static ptq_status io_all(int fd, void *buf, size_t n, int64_t off, int write)
{
    ptq_status st = PTQ_OK;
    char *p = buf;
    while (n > 0) {
        ssize_t k = write ? pwrite(fd, p, n, (off_t)off) : pread(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) FAIL(PTQ_ERR_IO, "refinement's temporary file: %s", k < 0 ? strerror(errno) : "short read");
        p += k;
        n -= (size_t)k;
        off += k;
    }
done:
    return st;
}

/* ---- kept values ---- */

static void entry_drop(eng_stepper *s, entry *e)
{
    if (!e->set) return;
    if (e->off >= 0) {
        (void)extent_give(s, e->off, (int64_t)e->bytes); /* failing (no memory for the list), the extent is lost */
        s->spilled -= (int64_t)e->bytes;
    } else {
        ptq_aligned_free(e->t.data);
        s->in_mem -= e->bytes;
    }
    memset(e, 0, sizeof *e);
}

static void value_drop(eng_stepper *s, int v)
{
    if (!s->ent[v]) return;
    for (int b = 0; b < s->nb; b++) entry_drop(s, &s->ent[v][b]);
    free(s->ent[v]);
    s->ent[v] = NULL;
}

/* Keeps a copy of t as batch b of value v. */
static ptq_status keep(eng_stepper *s, int v, int b, const ptq_tensor *t)
{
    ptq_status st = PTQ_OK;
    if (!s->ent[v]) CHECK_ALLOC(s->ent[v] = calloc((size_t)s->nb, sizeof(entry)));
    entry *e = &s->ent[v][b];
    entry_drop(s, e);
    size_t bytes = tensor_bytes(t);
    e->t = *t;
    e->t.data = NULL;
    e->t.owns_data = 0;
    e->bytes = bytes;
    e->off = -1;
    if (s->in_mem + bytes <= s->budget || bytes == 0) {
        CHECK_ALLOC(e->t.data = ptq_aligned_alloc(bytes ? bytes : 64));
        memcpy(e->t.data, t->data, bytes);
        s->in_mem += bytes;
        if (s->in_mem > s->stats.peak_memory) s->stats.peak_memory = s->in_mem;
    } else {
        if (s->fd < 0) TRY(spill_open(s));
        e->off = extent_take(s, (int64_t)bytes);
        TRY(io_all(s->fd, t->data, bytes, e->off, 1));
        s->spilled += (int64_t)bytes;
        if ((size_t)s->spilled > s->stats.peak_spilled) s->stats.peak_spilled = (size_t)s->spilled;
    }
    e->set = 1;
done:
    return st;
}

/* Batch b of value v into *t, read into scratch buffer k when spilled. */
static ptq_status fetch(eng_stepper *s, int v, int b, int k, ptq_tensor *t)
{
    ptq_status st = PTQ_OK;
    if (!s->ent[v] || !s->ent[v][b].set)
        FAIL(PTQ_ERR_INTERNAL, "refinement: '%s' is no longer kept", s->g->values[v].name);
    entry *e = &s->ent[v][b];
    *t = e->t;
    if (e->off < 0) return PTQ_OK;
    if (k >= s->n_scratch) {
        void **sc = realloc(s->scratch, sizeof(void *) * (size_t)(k + 1));
        CHECK_ALLOC(sc);
        s->scratch = sc;
        size_t *cap = realloc(s->scratch_cap, sizeof(size_t) * (size_t)(k + 1));
        CHECK_ALLOC(cap);
        s->scratch_cap = cap;
        for (int i = s->n_scratch; i <= k; i++) {
            s->scratch[i] = NULL;
            s->scratch_cap[i] = 0;
        }
        s->n_scratch = k + 1;
    }
    if (s->scratch_cap[k] < e->bytes) {
        ptq_aligned_free(s->scratch[k]);
        s->scratch_cap[k] = 0;
        CHECK_ALLOC(s->scratch[k] = ptq_aligned_alloc(e->bytes));
        s->scratch_cap[k] = e->bytes;
    }
    TRY(io_all(s->fd, s->scratch[k], e->bytes, e->off, 0));
    t->data = s->scratch[k];
done:
    return st;
}

/* ---- creation ---- */

/* The values node n reads, each once, -1 ended. */
static int *node_reads(const ptq_graph *g, int n, unsigned char *mark)
{
    const ptq_node *node = &g->nodes[n];
    int has_sub = 0, cnt = 0;
    for (int k = 0; k < node->n_attrs; k++) has_sub |= node->attrs[k].graph != NULL || node->attrs[k].n_graphs > 0;
    int cap = node->n_inputs + 1;
    if (has_sub) {
        memset(mark, 0, (size_t)g->n_values);
        ptq_graph_node_reads(g, n, mark);
        cap = 1;
        for (int v = 0; v < g->n_values; v++) cap += mark[v] != 0;
    }
    int *r = malloc(sizeof(int) * (size_t)cap);
    if (!r) return NULL;
    if (has_sub) {
        for (int v = 0; v < g->n_values; v++)
            if (mark[v]) r[cnt++] = v;
    } else {
        for (int i = 0; i < node->n_inputs; i++) {
            int v = node->inputs[i], seen = v < 0;
            for (int j = 0; j < cnt && !seen; j++) seen = r[j] == v;
            if (!seen) r[cnt++] = v;
        }
    }
    r[cnt] = -1;
    return r;
}

ptq_status eng_stepper_create(const ptq_graph *g, const eng_source *src, const eng_stepper_options *o, eng_stepper **out)
{
    ptq_status st = PTQ_OK;
    eng_stepper *s = calloc(1, sizeof *s);
    unsigned char *mark = calloc((size_t)g->n_values + 1, 1);
    entry *in = NULL;
    int cap_in = 0, opened = 0;
    *out = NULL;
    CHECK_ALLOC(s);
    CHECK_ALLOC(mark);
    s->g = g;
    s->fd = -1;
    s->o = *o;
    s->budget = o->budget ? o->budget : (size_t)ENG_STEPPER_BUDGET_MB << 20;
    s->mem.pool = o->pool;
    s->nv = g->n_values;
    s->nn = g->n_nodes;
    CHECK_ALLOC(s->done = calloc((size_t)s->nn + 1, 1));
    CHECK_ALLOC(s->users = calloc((size_t)s->nv + 1, sizeof(int)));
    CHECK_ALLOC(s->pins = calloc((size_t)s->nv + 1, sizeof(int)));
    CHECK_ALLOC(s->ent = calloc((size_t)s->nv + 1, sizeof(entry *)));
    CHECK_ALLOC(s->reads = calloc((size_t)s->nn + 1, sizeof(int *)));
    for (int n = 0; n < s->nn; n++) {
        CHECK_ALLOC(s->reads[n] = node_reads(g, n, mark));
        for (const int *r = s->reads[n]; *r >= 0; r++) s->users[*r]++;
    }
    int in_v = eng_graph_input(g);
    if (in_v < 0) FAIL(PTQ_ERR_FORMAT, "the model has no data input");
    TRY(src->open(src->user));
    opened = 1;
    for (;;) { /* every batch of the source: in memory while the budget lasts, then in the file */
        ptq_tensor t;
        TRY(src->next(src->user, &t));
        if (t.rank < 1 || t.dims[0] == 0) break;
        if (s->nb == cap_in) {
            cap_in = cap_in ? 2 * cap_in : 16;
            entry *e = realloc(in, sizeof *e * (size_t)cap_in);
            CHECK_ALLOC(e);
            in = e;
            int *f = realloc(s->first, sizeof(int) * (size_t)cap_in);
            CHECK_ALLOC(f);
            s->first = f;
        }
        ptq_tensor tm = eng_model_tensor(g, &t);
        entry *e = &in[s->nb];
        memset(e, 0, sizeof *e);
        e->t = tm;
        e->t.data = NULL;
        e->t.owns_data = 0;
        e->bytes = tensor_bytes(&tm);
        e->off = -1;
        e->set = 1;
        s->first[s->nb++] = s->images;
        s->images += (int)t.dims[0];
        if (s->in_mem + e->bytes <= s->budget) {
            CHECK_ALLOC(e->t.data = ptq_aligned_alloc(e->bytes ? e->bytes : 64));
            memcpy(e->t.data, tm.data, e->bytes);
            s->in_mem += e->bytes;
        } else { /* past the budget: to the file */
            if (s->fd < 0) TRY(spill_open(s));
            e->off = extent_take(s, (int64_t)e->bytes);
            TRY(io_all(s->fd, tm.data, e->bytes, e->off, 1));
            s->spilled += (int64_t)e->bytes;
        }
    }
    s->ent[in_v] = in;
    in = NULL;
    s->stats.peak_memory = s->in_mem;
    s->stats.peak_spilled = (size_t)s->spilled;
    *out = s;
    s = NULL;
done:
    if (opened) src->close(src->user);
    if (in) {
        for (int b = 0; b < s->nb; b++) ptq_aligned_free(in[b].t.data);
        free(in);
        s->nb = 0;
    }
    eng_stepper_destroy(s);
    free(mark);
    return st;
}

void eng_stepper_destroy(eng_stepper *s)
{
    if (!s) return;
    for (int v = 0; s->ent && v < s->nv; v++) value_drop(s, v);
    for (int n = 0; s->reads && n < s->nn; n++) free(s->reads[n]);
    for (int k = 0; k < s->n_scratch; k++) ptq_aligned_free(s->scratch[k]);
    if (s->fd >= 0) close(s->fd);
    eng_memory_free(&s->mem);
    free(s->scratch);
    free(s->scratch_cap);
    free(s->free_ext);
    free(s->reads);
    free(s->ent);
    free(s->pins);
    free(s->users);
    free(s->done);
    free(s->first);
    free(s);
}

int eng_stepper_batches(const eng_stepper *s)
{
    return s->nb;
}

int eng_stepper_images(const eng_stepper *s)
{
    return s->images;
}

int eng_stepper_first(const eng_stepper *s, int b)
{
    return s->first[b];
}

eng_stepper_stats eng_stepper_get_stats(const eng_stepper *s)
{
    return s->stats;
}

static int find(const eng_stepper *s, const char *name)
{
    int v = ptq_graph_find_value(s->g, name);
    return v >= 0 && v < s->nv ? v : -1;
}

static int computed(const eng_stepper *s, int v)
{
    int p = s->g->values[v].producer;
    return p < 0 || s->done[p];
}

ptq_status eng_stepper_pin(eng_stepper *s, const char *name)
{
    ptq_status st = PTQ_OK;
    int v = find(s, name);
    if (v < 0) FAIL(PTQ_ERR_ARG, "refinement: the model has no tensor '%s'", name);
    if (s->g->values[v].kind == PTQ_VALUE_INITIALIZER) FAIL(PTQ_ERR_ARG, "refinement: '%s' is a weight, not an activation", name);
    if (s->nb && computed(s, v) && !s->ent[v]) FAIL(PTQ_ERR_INTERNAL, "refinement: '%s' was dropped before it was pinned", name);
    s->pins[v]++;
done:
    return st;
}

void eng_stepper_release(eng_stepper *s, const char *name)
{
    int v = find(s, name);
    if (v < 0 || s->pins[v] == 0) return;
    if (--s->pins[v] == 0 && !s->users[v] && computed(s, v)) value_drop(s, v);
}

ptq_status eng_stepper_get(eng_stepper *s, const char *name, int b, ptq_tensor *t)
{
    ptq_status st = PTQ_OK;
    int v = find(s, name);
    if (v < 0 || b < 0 || b >= s->nb) FAIL(PTQ_ERR_ARG, "refinement: no batch %d of '%s'", b, name);
    TRY(fetch(s, v, b, 0, t));
done:
    return st;
}

/* 1 when the cached inputs of batch b match slot k's plan (shapes; constants' contents). */
static int slot_fits(const slot *k, const ptq_tensor *in, const int *is_const, int n)
{
    if (!k->plan) return 0;
    for (int i = 0; i < n; i++) {
        if (k->key[i].dtype != in[i].dtype || !ptq_shape_equal(&k->key[i], &in[i])) return 0;
        if (is_const[i] && memcmp(k->key[i].data, in[i].data, tensor_bytes(&in[i]))) return 0;
    }
    return 1;
}

static void slot_clear(slot *k, int n)
{
    ptq_plan_destroy(k->plan);
    for (int i = 0; k->key && i < n; i++) free(k->key[i].data);
    free(k->key);
    memset(k, 0, sizeof *k);
}

ptq_status eng_stepper_advance(eng_stepper *s, const char *name)
{
    ptq_status st = PTQ_OK;
    const ptq_graph *g = s->g;
    int v = find(s, name);
    unsigned char *run = NULL, *is_in = NULL;
    int *stack = NULL, *inputs = NULL, *outputs = NULL, *is_const = NULL, n_in = 0, n_out = 0;
    ptq_tensor *types = NULL, *in_t = NULL, *run_t = NULL;
    ptq_input_shape *shapes = NULL;
    ptq_graph *seg = NULL;
    slot slots[PLANS];
    unsigned long tick = 0;
    memset(slots, 0, sizeof slots);
    if (v < 0) FAIL(PTQ_ERR_ARG, "refinement: the model has no tensor '%s'", name);
    if (!s->nb) return PTQ_OK; /* no images: nothing to compute */
    if (computed(s, v)) {
        if (!s->ent[v]) FAIL(PTQ_ERR_INTERNAL, "refinement: '%s' was computed and dropped", name);
        return PTQ_OK;
    }
    CHECK_ALLOC(run = calloc((size_t)s->nn + 1, 1));
    CHECK_ALLOC(is_in = calloc((size_t)s->nv + 1, 1));
    CHECK_ALLOC(stack = malloc(sizeof(int) * ((size_t)s->nn + 1)));
    /* the nodes not run yet that v needs */
    int sp = 0;
    stack[sp++] = g->values[v].producer;
    run[g->values[v].producer] = 1;
    while (sp) {
        int n = stack[--sp];
        for (const int *r = s->reads[n]; *r >= 0; r++) {
            int p = g->values[*r].producer;
            if (p >= 0 && !s->done[p] && !run[p]) {
                run[p] = 1;
                stack[sp++] = p;
            }
        }
    }
    /* its inputs: kept values it reads; its outputs: what is read later or pinned */
    for (int n = 0; n < s->nn; n++) {
        if (!run[n]) continue;
        for (const int *r = s->reads[n]; *r >= 0; r++) {
            int u = *r, p = g->values[u].producer;
            if (g->values[u].kind == PTQ_VALUE_INITIALIZER || (p >= 0 && run[p]) || is_in[u]) continue;
            if (!s->ent[u]) FAIL(PTQ_ERR_INTERNAL, "refinement: '%s' is no longer kept", g->values[u].name);
            is_in[u] = 1;
            n_in++;
        }
    }
    CHECK_ALLOC(inputs = malloc(sizeof(int) * ((size_t)n_in + 1)));
    CHECK_ALLOC(types = calloc((size_t)n_in + 1, sizeof *types));
    CHECK_ALLOC(in_t = calloc((size_t)n_in + 1, sizeof *in_t));
    CHECK_ALLOC(run_t = calloc((size_t)n_in + 1, sizeof *run_t));
    CHECK_ALLOC(is_const = calloc((size_t)n_in + 1, sizeof *is_const));
    CHECK_ALLOC(shapes = calloc((size_t)n_in + 1, sizeof *shapes));
    n_in = 0;
    for (int u = 0; u < s->nv; u++)
        if (is_in[u]) {
            inputs[n_in] = u;
            types[n_in] = s->ent[u][0].t;
            types[n_in].data = NULL;
            is_const[n_in] = types[n_in].dtype != PTQ_F32 && s->ent[u][0].bytes <= CONST_BYTES;
            n_in++;
        }
    for (int n = 0; n < s->nn; n++) /* the readers that run now */
        if (run[n])
            for (const int *r = s->reads[n]; *r >= 0; r++) s->users[*r]--;
    CHECK_ALLOC(outputs = malloc(sizeof(int) * ((size_t)s->nv + 1)));
    for (int n = 0; n < s->nn; n++) {
        if (!run[n]) continue;
        for (int o = 0; o < g->nodes[n].n_outputs; o++) {
            int u = g->nodes[n].outputs[o];
            if (u >= 0 && (s->users[u] > 0 || s->pins[u] > 0)) outputs[n_out++] = u;
        }
    }
    double tp = now();
    TRY(ptq_graph_segment_create(g, run, inputs, types, n_in, outputs, n_out, &seg));
    s->stats.seconds_plans += now() - tp;
    for (int b = 0; b < s->nb; b++) {
        for (int i = 0; i < n_in; i++) TRY(fetch(s, inputs[i], b, i, &in_t[i]));
        int k = -1;
        for (int j = 0; j < PLANS && k < 0; j++)
            if (slot_fits(&slots[j], in_t, is_const, n_in)) k = j;
        if (k < 0) { /* a plan for these shapes, in the least recently used slot */
            k = slots[0].used <= slots[1].used ? 0 : 1;
            slot_clear(&slots[k], n_in);
            tp = now();
            CHECK_ALLOC(slots[k].key = calloc((size_t)n_in + 1, sizeof(ptq_tensor)));
            for (int i = 0; i < n_in; i++) {
                slots[k].key[i] = in_t[i];
                slots[k].key[i].data = NULL;
                slots[k].key[i].owns_data = 0;
                if (is_const[i]) {
                    size_t bytes = tensor_bytes(&in_t[i]);
                    CHECK_ALLOC(slots[k].key[i].data = malloc(bytes ? bytes : 1));
                    memcpy(slots[k].key[i].data, in_t[i].data, bytes);
                }
                shapes[i] = (ptq_input_shape){.name = g->values[inputs[i]].name, .rank = in_t[i].rank,
                                              .data = is_const[i] ? slots[k].key[i].data : NULL};
                memcpy(shapes[i].dims, in_t[i].dims, sizeof shapes[i].dims);
                seg->values[inputs[i]].t.rank = in_t[i].rank;
                memcpy(seg->values[inputs[i]].t.dims, in_t[i].dims, sizeof in_t[i].dims);
            }
            ptq_plan_options po = ptq_plan_defaults();
            po.nthreads = s->o.nthreads;
            po.bound_memory = 1;
            TRY(ptq_plan_create(seg, shapes, n_in, &po, &slots[k].plan));
            s->stats.seconds_plans += now() - tp;
        }
        slots[k].used = ++tick;
        int nr = 0;
        for (int i = 0; i < n_in; i++)
            if (!is_const[i]) run_t[nr++] = in_t[i];
        double tr = now();
        TRY(eng_memory_bind(&s->mem, slots[k].plan));
        TRY(ptq_plan_run(slots[k].plan, run_t, nr));
        s->stats.seconds_runs += now() - tr;
        for (int i = 0; i < n_out; i++) {
            const ptq_tensor *y = ptq_plan_output(slots[k].plan, i, NULL);
            TRY(keep(s, outputs[i], b, y));
        }
        for (int i = 0; i < n_in; i++) /* the last reader of an input has run: this batch's copy goes */
            if (!s->users[inputs[i]] && !s->pins[inputs[i]]) entry_drop(s, &s->ent[inputs[i]][b]);
    }
    for (int i = 0; i < n_in; i++)
        if (!s->users[inputs[i]] && !s->pins[inputs[i]]) value_drop(s, inputs[i]);
    for (int n = 0; n < s->nn; n++) s->done[n] |= run[n];
    s->stats.segments++;
done:
    for (int j = 0; j < PLANS; j++) slot_clear(&slots[j], n_in);
    ptq_graph_segment_destroy(seg);
    free(run);
    free(is_in);
    free(stack);
    free(inputs);
    free(outputs);
    free(types);
    free(in_t);
    free(run_t);
    free(is_const);
    free(shapes);
    return st;
}
