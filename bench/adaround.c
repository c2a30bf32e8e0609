/* bench/adaround.c: the time of one quant_adaround_layer call on a random layer.
 *
 *   make build/bench/adaround && build/bench/adaround [COUT K P ITERS THREADS BATCH]
 *   (defaults 256 2304 4096 2000 2 64: a 3x3 conv of 256 -> 256 channels, 4096 positions)
 *
 * Inputs: 4 latent factors per position mixed into the k rows plus noise (correlated
 * patches), xq = x on a grid of step 0.25; Gaussian weights, scale = amax / 127 per channel.
 * Prints the wall time, the time per iteration and both losses. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "quant/adaround.h"

static uint64_t st_rng = 1;

static float gauss(void)
{
    double s = 0.0;
    for (int i = 0; i < 4; i++) {
        uint64_t z = (st_rng += 0x9e3779b97f4a7c15u);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        s += (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
    }
    return (float)((s - 2.0) * 1.7320508);
}

int main(int argc, char **argv)
{
    int cout = argc > 1 ? atoi(argv[1]) : 256, k = argc > 2 ? atoi(argv[2]) : 2304;
    int p = argc > 3 ? atoi(argv[3]) : 4096;
    quant_adaround_options o = quant_adaround_defaults();
    o.iters = argc > 4 ? atoi(argv[4]) : 2000;
    o.nthreads = argc > 5 ? atoi(argv[5]) : 2;
    o.batch = argc > 6 ? atoi(argv[6]) : 64;
    if (cout < 1 || k < 1 || p < 1) {
        fprintf(stderr, "usage: %s [COUT K P ITERS THREADS BATCH]\n", argv[0]);
        return 2;
    }
    size_t nx = (size_t)k * p, nw = (size_t)cout * k;
    float *x = malloc(sizeof(float) * nx), *xq = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw);
    float *scale = malloc(sizeof(float) * (size_t)cout), *mix = malloc(sizeof(float) * (size_t)k * 4);
    int8_t *codes = malloc(nw);
    if (!x || !xq || !w || !scale || !mix || !codes) return 1;
    for (size_t i = 0; i < (size_t)k * 4; i++) mix[i] = gauss();
    for (int j = 0; j < p; j++) {
        float z[4] = {gauss(), gauss(), gauss(), gauss()};
        for (int i = 0; i < k; i++) {
            float v = 0.3f * gauss();
            for (int f = 0; f < 4; f++) v += 0.5f * mix[i * 4 + f] * z[f];
            x[(size_t)i * p + j] = v;
            xq[(size_t)i * p + j] = 0.25f * (float)(int)(v * 4.0f + (v >= 0.0f ? 0.5f : -0.5f));
        }
    }
    for (int c = 0; c < cout; c++) {
        float amax = 0.0f;
        for (int i = 0; i < k; i++) {
            float v = gauss() * 0.05f;
            w[(size_t)c * k + i] = v;
            amax = v > amax ? v : (-v > amax ? -v : amax);
        }
        scale[c] = amax / 127.0f;
    }
    quant_adaround_result r;
    double t = omp_get_wtime();
    ptq_status st = quant_adaround_layer(w, cout, k, 1, scale, x, xq, p, &o, codes, &r);
    t = omp_get_wtime() - t;
    if (st != PTQ_OK) {
        fprintf(stderr, "adaround: %s\n", ptq_last_error());
        return 1;
    }
    printf("adaround cout %d k %d p %d batch %d iters %d threads %d: %.2f s (%.2f ms/iteration)\n", cout, k, p,
           o.batch, o.iters, o.nthreads, t, o.iters ? 1e3 * t / o.iters : 0.0);
    printf("  loss nearest %.6g learned %.6g (%.2f %%), %d codes changed, %d channels fell back\n", r.loss_nearest,
           r.loss_learned, 100.0 * (r.loss_learned / r.loss_nearest - 1.0), r.changed, r.fell_back);
    free(x);
    free(xq);
    free(w);
    free(scale);
    free(mix);
    free(codes);
    return 0;
}
