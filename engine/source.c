/* source.c: the dataset source (see source.h). */
#include "engine/source.h"

#include <stdlib.h>
#include <string.h>

#include "engine/runner.h"

ptq_tensor eng_batch_tensor(const pp_config *cfg, const float *data, int n)
{
    ptq_tensor t = {.dtype = PTQ_F32, .rank = 4, .data = (void *)data};
    t.dims[0] = n;
    t.dims[1] = cfg->nhwc ? cfg->height : pp_channels(cfg);
    t.dims[2] = cfg->nhwc ? cfg->width : cfg->height;
    t.dims[3] = cfg->nhwc ? pp_channels(cfg) : cfg->width;
    return t;
}

static void cache_drop(eng_dataset_source *ds)
{
    for (int i = 0; i < ds->n_cache; i++) free(ds->cache[i].t.data);
    free(ds->cache);
    ds->cache = NULL;
    ds->n_cache = ds->cap_cache = 0;
    ds->bytes = 0;
    ds->replay = 0;
}

static ptq_status ds_open(void *user)
{
    eng_dataset_source *ds = user;
    pp_dataset_close(ds->d);
    ds->d = NULL;
    ds->pos = 0;
    if (ds->replay) return PTQ_OK;
    cache_drop(ds); /* an unfinished pass's batches */
    return pp_dataset_open(&ds->o, &ds->cfg, &ds->d);
}

/* Keeps a copy of x while the pass fits the budget (a failed allocation only ends the caching). */
static void cache_keep(eng_dataset_source *ds, const ptq_tensor *x)
{
    size_t bytes = ptq_tensor_numel(x) * sizeof(float);
    if (ds->over || ds->bytes + bytes > ds->budget) {
        cache_drop(ds);
        ds->over = 1;
        return;
    }
    if (ds->n_cache == ds->cap_cache) {
        int cap = ds->cap_cache ? 2 * ds->cap_cache : 16;
        eng_cached_batch *nc = realloc(ds->cache, sizeof *nc * (size_t)cap);
        if (!nc) goto give_up;
        ds->cache = nc;
        ds->cap_cache = cap;
    }
    eng_cached_batch *c = &ds->cache[ds->n_cache];
    c->t = *x;
    if (!(c->t.data = malloc(bytes ? bytes : 1))) goto give_up;
    memcpy(c->t.data, x->data, bytes);
    ds->n_cache++;
    ds->bytes += bytes;
    return;
give_up:
    cache_drop(ds);
    ds->over = 1;
}

static ptq_status ds_next(void *user, ptq_tensor *x)
{
    eng_dataset_source *ds = user;
    const float *data;
    int n;
    memset(x, 0, sizeof *x);
    if (ds->replay) {
        if (ds->pos < ds->n_cache) *x = ds->cache[ds->pos++].t;
        return PTQ_OK;
    }
    ptq_status st = pp_dataset_next(ds->d, &data, &n, NULL, NULL);
    if (st == PTQ_OK && n > 0) {
        pp_config c = ds->cfg; /* the batch's size: dims may follow the image */
        pp_dataset_batch_shape(ds->d, &c.width, &c.height);
        *x = eng_batch_tensor(&c, data, n);
        cache_keep(ds, x);
    } else if (st == PTQ_OK && !ds->over) {
        ds->replay = 1; /* a whole pass is in memory */
    }
    return st;
}

static void ds_close(void *user)
{
    eng_dataset_source *ds = user;
    pp_dataset_close(ds->d);
    ds->d = NULL;
}

eng_source eng_source_dataset(eng_dataset_source *ds, const pp_dataset_options *o, const pp_config *cfg)
{
    memset(ds, 0, sizeof *ds);
    ds->o = *o;
    ds->cfg = *cfg;
    ds->budget = eng_cache_budget_bytes(o); /* half the memory budget (--memory) */
    return (eng_source){.open = ds_open, .next = ds_next, .close = ds_close, .user = ds};
}

void eng_source_dataset_free(eng_dataset_source *ds)
{
    if (!ds) return;
    ds_close(ds);
    cache_drop(ds);
}
