/* map_boot.c: CPU seconds of a detector's mAP bootstrap intervals (engine/compare_truth.h), each
 * resample evaluated by COCO's evaluation again (cmp_coco_map, as before cmp_map_prepare) and
 * accumulated from the matches made once (cmp_map_prepare + cmp_map_resample), on synthetic images
 * shaped like a YOLO export's output at score >= 0.001 (IMAGES images, 1-4 ground truth boxes of 6
 * classes, DETS detections each, a third near a ground truth box); checks that both give the same
 * intervals bit for bit. One thread. Not part of make: after `make`,
 *   cc -O2 -fopenmp -I. -Ibuild/gen bench/map_boot.c build/obj/engine/compare_truth.o build/obj/runtime/status.o -lm -o build/map_boot
 *   build/map_boot [IMAGES [DETS [DRAWS]]]      (default 300 100 200) */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/compare_truth.h"

typedef struct {
    const cmp_gt *const *gt;
    const int *ngt;
    const cmp_det *const *dq, *const *df;
    const int *nq, *nf;
    int n_classes;
    const cmp_map_prep *pq, *pf;
} ctx;

static int draw_full(const int *idx, int n, void *user, double *v) /* COCO's evaluation of each resample */
{
    const ctx *c = user;
    const cmp_gt **gt = malloc(sizeof *gt * (size_t)n);
    const cmp_det **dq = malloc(sizeof *dq * (size_t)n), **df = malloc(sizeof *df * (size_t)n);
    int *ngt = malloc(sizeof *ngt * (size_t)n), *nq = malloc(sizeof *nq * (size_t)n), *nf = malloc(sizeof *nf * (size_t)n);
    cmp_map_result r = {0}, g = {0};
    for (int i = 0; i < n; i++) {
        gt[i] = c->gt[idx[i]];
        ngt[i] = c->ngt[idx[i]];
        dq[i] = c->dq[idx[i]];
        nq[i] = c->nq[idx[i]];
        df[i] = c->df[idx[i]];
        nf[i] = c->nf[idx[i]];
    }
    int rc = cmp_coco_map(gt, ngt, dq, nq, n, c->n_classes, &r) || cmp_coco_map(gt, ngt, df, nf, n, c->n_classes, &g) ? -1 : 0;
    v[0] = r.map50, v[1] = r.map, v[2] = g.map50, v[3] = g.map, v[4] = v[0] - v[2], v[5] = v[1] - v[3];
    cmp_map_result_free(&r);
    cmp_map_result_free(&g);
    free(gt), free(dq), free(df), free(ngt), free(nq), free(nf);
    return rc;
}

static int draw_prep(const int *idx, int n, void *user, double *v) /* accumulated from the matches made once */
{
    const ctx *c = user;
    if (cmp_map_resample(c->pq, idx, n, &v[0], &v[1]) || cmp_map_resample(c->pf, idx, n, &v[2], &v[3])) return -1;
    v[4] = v[0] - v[2], v[5] = v[1] - v[3];
    return 0;
}

static uint32_t s = 35;
static double u(void)
{
    s = s * 1664525u + 1013904223u;
    return (double)(s >> 8) / 16777216.0;
}

static double cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    int N = argc > 1 ? atoi(argv[1]) : 300, D = argc > 2 ? atoi(argv[2]) : 100, B = argc > 3 ? atoi(argv[3]) : 200, K = 6;
    if (B > CMP_BOOT) B = CMP_BOOT;
    omp_set_num_threads(1);
    cmp_gt **gt = malloc(sizeof *gt * (size_t)N);
    cmp_det **dq = malloc(sizeof *dq * (size_t)N), **df = malloc(sizeof *df * (size_t)N);
    int *ngt = malloc(sizeof *ngt * (size_t)N), *nd = malloc(sizeof *nd * (size_t)N);
    for (int i = 0; i < N; i++) {
        ngt[i] = 1 + (int)(u() * 4);
        nd[i] = D;
        gt[i] = malloc(sizeof **gt * (size_t)ngt[i]);
        dq[i] = malloc(sizeof **dq * (size_t)D);
        df[i] = malloc(sizeof **df * (size_t)D);
        for (int j = 0; j < ngt[i]; j++) {
            double w = 20 + u() * 200, h = 20 + u() * 200;
            gt[i][j] = (cmp_gt){u() * 400, u() * 400, w, h, w * h, (int)(u() * K), 0};
        }
        for (int j = 0; j < D; j++)
            for (int q = 0; q < 2; q++) {
                cmp_det d = {u() * 600, u() * 600, 10 + u() * 200, 10 + u() * 200, (float)(0.001 + u() * 0.3), (int)(u() * K)};
                if (j % 3 == 0) { /* near a ground truth box, scoring higher */
                    const cmp_gt *g = &gt[i][(int)(u() * ngt[i])];
                    d = (cmp_det){g->x + (u() - 0.5) * 0.3 * g->w, g->y + (u() - 0.5) * 0.3 * g->h, g->w * (0.85 + 0.3 * u()),
                                  g->h * (0.85 + 0.3 * u()), (float)(0.2 + 0.8 * u()), u() < 0.9 ? g->cls : (int)(u() * K)};
                }
                (q ? df : dq)[i][j] = d;
            }
    }
    ctx c = {(const cmp_gt *const *)gt, ngt, (const cmp_det *const *)dq, (const cmp_det *const *)df, nd, nd, K, NULL, NULL};
    double lo[2][6], hi[2][6];
    double t0 = cpu();
    if (cmp_bootstrap_stats(N, B, 6, draw_full, &c, lo[0], hi[0]) != PTQ_OK) return 1;
    double t1 = cpu();
    cmp_map_prep *pq = NULL, *pf = NULL;
    if (cmp_map_prepare(c.gt, ngt, c.dq, nd, N, K, &pq) != PTQ_OK || cmp_map_prepare(c.gt, ngt, c.df, nd, N, K, &pf) != PTQ_OK) return 1;
    c.pq = pq, c.pf = pf;
    if (cmp_bootstrap_stats(N, B, 6, draw_prep, &c, lo[1], hi[1]) != PTQ_OK) return 1;
    double t2 = cpu();
    int same = !memcmp(lo[0], lo[1], sizeof lo[0]) && !memcmp(hi[0], hi[1], sizeof hi[0]);
    printf("%d images, %d detections each, 2 models, %d resamples: COCO evaluation per resample %.2f s CPU, "
           "matches once %.2f s CPU (%.1fx); intervals %s (mAP50-95 [%.4f, %.4f])\n",
           N, D, B, t1 - t0, t2 - t1, (t1 - t0) / (t2 - t1), same ? "identical" : "DIFFER", lo[1][1], hi[1][1]);
    cmp_map_prep_free(pq);
    cmp_map_prep_free(pf);
    return !same;
}
