/* source.c: the dataset source (see source.h). */
#include "engine/source.h"

#include <string.h>

ptq_tensor eng_batch_tensor(const pp_config *cfg, const float *data, int n)
{
    ptq_tensor t = {.dtype = PTQ_F32, .rank = 4, .data = (void *)data};
    t.dims[0] = n;
    t.dims[1] = cfg->nhwc ? cfg->height : 3;
    t.dims[2] = cfg->nhwc ? cfg->width : cfg->height;
    t.dims[3] = cfg->nhwc ? 3 : cfg->width;
    return t;
}

static ptq_status ds_open(void *user)
{
    eng_dataset_source *ds = user;
    pp_dataset_close(ds->d);
    ds->d = NULL;
    return pp_dataset_open(&ds->o, &ds->cfg, &ds->d);
}

static ptq_status ds_next(void *user, ptq_tensor *x)
{
    eng_dataset_source *ds = user;
    const float *data;
    int n;
    memset(x, 0, sizeof *x);
    ptq_status st = pp_dataset_next(ds->d, &data, &n, NULL, NULL);
    if (st == PTQ_OK && n > 0) {
        pp_config c = ds->cfg; /* the batch's size: dims may follow the image */
        pp_dataset_batch_shape(ds->d, &c.width, &c.height);
        *x = eng_batch_tensor(&c, data, n);
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
    return (eng_source){.open = ds_open, .next = ds_next, .close = ds_close, .user = ds};
}
