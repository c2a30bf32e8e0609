/* cmd_run.c: `ptq run`: run a model on .npy or seeded random inputs, write .npy outputs, time it. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/cli.h"
#include "engine/preprocessing.h"
#include "engine/runner.h"
#include "io/npy.h"
#include "io/onnx.h"
#include "preprocess/dataset.h"
#include "quant/fp16.h"
#include "runtime/graph.h"
#include "runtime/plan.h"

#define MAX_ARGS 64

static void run_usage(FILE *fp)
{
    fprintf(fp,
            "usage: ptq run MODEL [options]\n"
            "  --input-shape NAME:D1xD2x...  bind an input's shape (repeatable; needed for symbolic dims\n"
            "                                unless --input gives the shape)\n"
            "  --input [NAME=]FILE.npy       input data (repeatable; without NAME: inputs in order)\n"
            "  --random-seed N               random inputs instead: uniform [0,1) float32 from seed N\n"
            "  --save-input FILE.npy         write the (first) input that was used\n"
            "  --output FILE.npy             write output 0\n"
            "  --output-dir DIR              write every output as DIR/<name>.npy\n"
            "  --repeat N                    after one warm-up run, time N runs and print the median\n"
            "  --threads N                   threads (default: all cores)\n"
            "  --no-fuse                     do not fuse BatchNormalization or activations\n"
            "  --images DIR [--preset P]     instead: run over an image folder (or list) in batches of\n"
            "  [--batch N] [--limit N]       --batch (default: the most, up to 8, that 512 MB of activations\n"
            "                                and images hold) and print images/s (plain FP32 inference,\n"
            "                                the baseline of calibration's cost)\n");
    cli_help_overrides(fp);
    cli_help_help(fp);
}

/* splitmix64: a documented, portable stream for reproducible random inputs */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill_random(ptq_tensor *t, uint64_t *seed)
{
    size_t n = ptq_tensor_numel(t);
    if (t->dtype == PTQ_F32) {
        float *x = t->data;
        for (size_t i = 0; i < n; i++) x[i] = (float)(splitmix64(seed) >> 40) * (1.0f / 16777216.0f);
    } else if (t->dtype == PTQ_F16) { /* the same draws, rounded */
        uint16_t *x = t->data;
        for (size_t i = 0; i < n; i++) x[i] = ptq_f32_to_f16((float)(splitmix64(seed) >> 40) * (1.0f / 16777216.0f));
    } else if (t->dtype == PTQ_U8) {
        uint8_t *x = t->data;
        for (size_t i = 0; i < n; i++) x[i] = (uint8_t)(splitmix64(seed) >> 56);
    }
    /* other dtypes stay zero */
}

static void sanitize(const char *name, char *out, size_t cap)
{
    size_t i = 0;
    for (; name[i] && i + 1 < cap; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                 c == '-';
        out[i] = ok ? c : '_';
    }
    out[i] = 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ptq run --images: the model over an image folder, timed from the first batch to the last. */
static int run_images(const char *model, const pp_dataset_options *o, const char *preset, const char *const *set_keys,
                      const char *const *set_vals, int n_set, int fuse)
{
    pp_config cfg = pp_defaults();
    int images = 0, skipped = 0;
    double t0 = now_ms();
    ptq_status st = eng_preprocessing(preset, set_keys, set_vals, n_set, &cfg);
    if (st == PTQ_OK) st = eng_run_images(model, o, &cfg, fuse, &images, &skipped);
    if (st != PTQ_OK) return cli_fail(st);
    double ms = now_ms() - t0;
    printf("ptq run: %d images (%d skipped) in %.3f s, %.1f images/s\n", images, skipped, ms / 1e3,
           images / (ms / 1e3));
    return CLI_EXIT_OK;
}

int cmd_run(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"input-shape", required_argument, 0, 's'}, {"input", required_argument, 0, 'i'},
        {"random-seed", required_argument, 0, 'r'}, {"save-input", required_argument, 0, 'S'},
        {"output", required_argument, 0, 'o'},      {"output-dir", required_argument, 0, 'O'},
        {"repeat", required_argument, 0, 'n'},      {"threads", required_argument, 0, 't'},
        {"no-fuse", no_argument, 0, 'F'},           {"help", no_argument, 0, 'h'},
        {"images", required_argument, 0, 'I'},      {"preset", required_argument, 0, 'P'},
        {"batch", required_argument, 0, 'B'},       {"limit", required_argument, 0, 'L'},
        CLI_PP_LONGOPTS('p'),                       {0, 0, 0, 0}};
    ptq_status st = PTQ_OK;
    int rc = CLI_EXIT_OK;
    ptq_input_shape shapes[MAX_ARGS];
    char *shape_names[MAX_ARGS] = {0};
    const char *input_args[MAX_ARGS];
    int n_shapes = 0, n_input_args = 0, have_seed = 0, fuse = 1;
    long seed = 0, repeat = 0, threads = 0;
    const char *save_input = NULL, *output = NULL, *output_dir = NULL, *preset = NULL;
    const char *set_keys[CLI_PP_MAX], *set_vals[CLI_PP_MAX];
    int n_set = 0, idx;
    pp_dataset_options images = pp_dataset_defaults();
    images.batch = 0; /* the model's (eng_fit_batch) */
    ptq_graph *g = NULL;
    ptq_plan *plan = NULL;
    ptq_tensor *inputs = NULL;
    int n_inputs = 0;
    double *times = NULL;

    opterr = 0;
    optind = 1;
    int c;
    if (cli_list_options(argc, argv, longopts)) return CLI_EXIT_OK;
    while ((idx = -1, c = getopt_long(argc, argv, ":h", longopts, &idx)) != -1) {
        switch (c) {
        case 'p':
            if (n_set == CLI_PP_MAX) {
                rc = cli_usage_error("run", "too many overrides");
                goto out;
            }
            set_keys[n_set] = longopts[idx].name;
            set_vals[n_set++] = optarg;
            break;
        case 's':
            if (n_shapes == MAX_ARGS) {
                rc = cli_usage_error("run", "too many --input-shape options");
                goto out;
            }
            if (cli_parse_shape(optarg, &shapes[n_shapes], &shape_names[n_shapes]) != 0 || !shapes[n_shapes].name) {
                rc = cli_usage_error("run", "bad --input-shape '%s' (expected NAME:D1xD2x..., e.g. x:1x3x640x640)",
                                     optarg);
                goto out;
            }
            n_shapes++;
            break;
        case 'i':
            if (n_input_args == MAX_ARGS) {
                rc = cli_usage_error("run", "too many --input options");
                goto out;
            }
            input_args[n_input_args++] = optarg;
            break;
        case 'r':
            if (cli_parse_long(optarg, 0, 0x7fffffffL, &seed) != 0) {
                rc = cli_usage_error("run", "bad --random-seed '%s'", optarg);
                goto out;
            }
            have_seed = 1;
            break;
        case 'S': save_input = optarg; break;
        case 'o': output = optarg; break;
        case 'O': output_dir = optarg; break;
        case 'n':
            if (cli_parse_long(optarg, 1, 100000, &repeat) != 0) {
                rc = cli_usage_error("run", "bad --repeat '%s'", optarg);
                goto out;
            }
            break;
        case 't':
            if (cli_parse_long(optarg, 1, 1024, &threads) != 0) {
                rc = cli_usage_error("run", "bad --threads '%s'", optarg);
                goto out;
            }
            break;
        case 'F': fuse = 0; break;
        case 'I': images.images = optarg; break;
        case 'P': preset = optarg; break;
        case 'B':
        case 'L':
            if (cli_dataset_option("run", c == 'B' ? "batch" : "limit", optarg, &images) < 0) {
                rc = CLI_EXIT_USAGE;
                goto out;
            }
            break;
        case 'h': run_usage(stdout); goto out;
        default: rc = cli_bad_option("run", c, argv); goto out;
        }
    }
    if (optind != argc - 1) {
        rc = optind >= argc ? cli_usage_error("run", "no model given") : cli_usage_error("run", "unexpected argument '%s'", argv[optind + 1]);
        goto out;
    }
    if (images.images) {
        if (n_input_args || have_seed) {
            rc = cli_usage_error("run", "--images excludes --input and --random-seed");
            goto out;
        }
        images.threads = (int)threads;
        if (threads) omp_set_num_threads((int)threads);
        rc = run_images(argv[optind], &images, preset, set_keys, set_vals, n_set, fuse);
        goto out;
    }
    if (n_input_args && have_seed) {
        rc = cli_usage_error("run", "--input and --random-seed exclude each other");
        goto out;
    }
    if (!n_input_args && !have_seed) have_seed = 1; /* seed 0 */
    if (threads) omp_set_num_threads((int)threads);

    const char *model = argv[optind];
    int upcast = 0; /* float16 layers computed in float32, each output rounded to float16 (quant/fp16.h) */
    if ((st = onnx_model_load(model, &g)) != PTQ_OK || (st = quant_fp16_upcast(g, &upcast)) != PTQ_OK) goto fail;

    /* the model's runtime inputs, in order */
    int *in_vals = malloc(sizeof(int) * ((size_t)g->n_inputs + 1));
    if (!in_vals) {
        st = PTQ_ERR_NOMEM;
        ptq_error("out of memory allocating the list of %d model inputs", g->n_inputs);
        goto fail;
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (g->values[g->inputs[i]].kind == PTQ_VALUE_INPUT) in_vals[n_inputs++] = g->inputs[i];
    inputs = calloc((size_t)n_inputs + 1, sizeof *inputs);
    if (!inputs) {
        free(in_vals);
        st = PTQ_ERR_NOMEM;
        ptq_error("out of memory allocating %d input tensors", n_inputs);
        goto fail;
    }
    /* load .npy inputs; their shapes bind symbolic dims unless --input-shape did */
    for (int k = 0; k < n_input_args; k++) {
        const char *arg = input_args[k], *eq = strchr(arg, '='), *path = eq ? eq + 1 : arg;
        int slot = -1;
        if (eq) {
            for (int i = 0; i < n_inputs; i++)
                if (strlen(g->values[in_vals[i]].name) == (size_t)(eq - arg) &&
                    strncmp(g->values[in_vals[i]].name, arg, (size_t)(eq - arg)) == 0)
                    slot = i;
            if (slot < 0) {
                ptq_error("%s: --input '%.*s' is not an input of the model", model, (int)(eq - arg), arg);
                st = PTQ_ERR_ARG;
                free(in_vals);
                goto fail;
            }
        } else {
            slot = k;
            if (slot >= n_inputs) {
                ptq_error("%s: %d --input files for %d model inputs", model, n_input_args, n_inputs);
                st = PTQ_ERR_ARG;
                free(in_vals);
                goto fail;
            }
        }
        if ((st = npy_load(path, &inputs[slot])) != PTQ_OK) {
            free(in_vals);
            goto fail;
        }
        /* the values reach the model as they are: the file's dtype must be the input's, except
         * float32 whole pixels for a uint8 input (what `ptq preprocess --model` dumps for it),
         * which the plan converts exactly or refuses */
        const ptq_value *iv = &g->values[in_vals[slot]];
        if (iv->t.dtype != PTQ_UNDEFINED && inputs[slot].dtype != iv->t.dtype &&
            !(iv->t.dtype == PTQ_U8 && inputs[slot].dtype == PTQ_F32)) {
            ptq_error("%s: --input %s holds %s, model input '%s' takes %s", model, path, ptq_dtype_name(inputs[slot].dtype),
                      iv->name, ptq_dtype_name(iv->t.dtype));
            st = PTQ_ERR_ARG;
            free(in_vals);
            goto fail;
        }
        int bound = 0;
        for (int s = 0; s < n_shapes; s++)
            if (strcmp(shapes[s].name, g->values[in_vals[slot]].name) == 0) bound = 1;
        if (!bound && n_shapes < MAX_ARGS) {
            ptq_input_shape *b = &shapes[n_shapes++];
            memset(b, 0, sizeof *b);
            b->name = g->values[in_vals[slot]].name;
            b->rank = inputs[slot].rank;
            memcpy(b->dims, inputs[slot].dims, sizeof b->dims);
        }
    }
    free(in_vals);

    ptq_plan_options opt = ptq_plan_defaults();
    opt.nthreads = (int)threads;
    opt.fuse = fuse;
    if ((st = ptq_plan_create(g, shapes, n_shapes, &opt, &plan)) != PTQ_OK) {
        ptq_error_prefix("%s: ", model);
        goto fail;
    }
    uint64_t state = (uint64_t)seed;
    for (int i = 0; i < n_inputs; i++) {
        const char *name;
        const ptq_tensor *want = ptq_plan_input(plan, i, &name);
        if (inputs[i].data) continue; /* from --input: ptq_plan_run checks dtype and shape */
        if (n_input_args) {
            ptq_error("%s: no --input for model input '%s'", model, name);
            st = PTQ_ERR_ARG;
            goto fail;
        }
        inputs[i] = *want;
        inputs[i].data = NULL;
        if ((st = ptq_tensor_alloc(&inputs[i])) != PTQ_OK) goto fail;
        fill_random(&inputs[i], &state);
    }
    if (save_input && n_inputs > 0 && (st = npy_save(save_input, &inputs[0])) != PTQ_OK) goto fail;

    if ((st = ptq_plan_run(plan, inputs, n_inputs)) != PTQ_OK) {
        ptq_error_prefix("%s: ", model);
        goto fail;
    }
    if (repeat) {
        times = malloc(sizeof(double) * (size_t)repeat);
        if (!times) {
            st = PTQ_ERR_NOMEM;
            ptq_error("out of memory allocating the timings of %ld repeats", (long)repeat);
            goto fail;
        }
        for (long r = 0; r < repeat; r++) {
            double t0 = now_ms();
            if ((st = ptq_plan_run(plan, inputs, n_inputs)) != PTQ_OK) goto fail;
            times[r] = now_ms() - t0;
        }
        qsort(times, (size_t)repeat, sizeof *times, cmp_double);
        double median = repeat % 2 ? times[repeat / 2] : 0.5 * (times[repeat / 2 - 1] + times[repeat / 2]);
        printf("ptq run: median %.3f ms, min %.3f ms over %ld runs, %.2f GFLOP/s\n", median, times[0], repeat,
               ptq_plan_flops(plan) / (median * 1e6));
    }
    if (output && ptq_plan_n_outputs(plan) > 0) {
        if ((st = npy_save(output, ptq_plan_output(plan, 0, NULL))) != PTQ_OK) goto fail;
    }
    if (output_dir) {
        mkdir(output_dir, 0777);
        for (int i = 0; i < ptq_plan_n_outputs(plan); i++) {
            const char *name;
            const ptq_tensor *y = ptq_plan_output(plan, i, &name);
            char clean[256], path[4096];
            sanitize(name, clean, sizeof clean);
            snprintf(path, sizeof path, "%s/%s.npy", output_dir, clean);
            if ((st = npy_save(path, y)) != PTQ_OK) goto fail;
        }
    }
    goto out;
fail:
    rc = cli_fail(st);
out:
    for (int i = 0; i < n_inputs; i++) ptq_tensor_free(&inputs[i]);
    free(inputs);
    free(times);
    ptq_plan_destroy(plan);
    ptq_graph_destroy(g);
    for (int i = 0; i < MAX_ARGS; i++) free(shape_names[i]);
    return rc;
}
