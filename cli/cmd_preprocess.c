/* cmd_preprocess.c: `ptq preprocess`: write exactly the tensors a model will see, so users
 * can diff them against their training pipeline. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "engine/preprocessing.h"
#include "engine/runner.h"
#include "engine/source.h"
#include "io/onnx.h"
#include "io/image.h"
#include "io/npy.h"
#include "io/preset.h"
#include "preprocess/dataset.h"

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: ptq preprocess --images DIR|LIST [--preset NAME|FILE] [--model M.onnx] --dump OUT.npy [options]\n"
            "  --model M.onnx   fit the preprocessing to the model's input as quantize does (its size, layout,\n"
            "                   channels; a uint8 input: pixels without scale/mean/std), saying each choice\n"
            "  --limit N, --shuffle --seed S, --strict, --exif on|off, --threads N\n"
            "  --shard I/N      only images k of the sorted (or shuffled) list with k mod N = I (I from 0)\n"
            "  overrides: --mode M --size WxH --resize I --shorter N --pad-value V\n"
            "             --channel-order RGB|BGR|GRAY|GRAY_PIL|GRAY_CV\n"
            "             --scale V --mean a,b,c --std a,b,c --layout NCHW|NHWC\n"
            "             --max-width N --limit-side N --limit-type max|min --multiple N --max-side N\n"
            "  --dump-png DIR   also write each tensor back as an 8-bit PNG (undoing mean, std and scale)\n"
            "  with a preset whose size follows the image (max_width, mode limit-side), --dump names a\n"
            "  folder: one 000000.npy (1 image) per image, in order\n"
            "  --list-presets   the presets found (configs/*.yaml), one per line; ptq inspect MODEL says which fit\n");
    char **names = NULL;
    int n = io_preset_names(&names);
    fprintf(fp, "presets:");
    for (int i = 0; i < n; i++) {
        fprintf(fp, "%s %s", i ? "," : "", names[i]);
        free(names[i]);
    }
    free(names);
    fprintf(fp, "%s\n", n > 0 ? "" : n < 0 ? " (out of memory listing them)" : " none found");
    cli_help_help(fp);
}

/* Undoes normalisation of image i of the dump and writes it as PNG (RGB). */
static ptq_status write_png(const char *dir, int i, const float *x, const pp_config *c)
{
    int W = c->width, H = c->height;
    uint8_t *rgb = malloc((size_t)W * (size_t)H * 3);
    if (!rgb) {
        ptq_error("out of memory allocating a %dx%d RGB image", W, H);
        return PTQ_ERR_NOMEM;
    }
    for (int y = 0; y < H; y++)
        for (int xx = 0; xx < W; xx++)
            for (int k = 0; k < 3; k++) {
                int nc = pp_channels(c), kc = nc == 1 ? 0 : k; /* gray: the luma in all three */
                size_t idx = c->nhwc ? ((size_t)y * (size_t)W + (size_t)xx) * (size_t)nc + (size_t)kc
                                     : ((size_t)kc * (size_t)H + (size_t)y) * (size_t)W + (size_t)xx;
                float v = (x[idx] * c->std[kc] + c->mean[kc]) / c->scale;
                int ch = c->bgr && nc == 3 ? 2 - k : k;
                long r = lrintf(v);
                rgb[((size_t)y * (size_t)W + (size_t)xx) * 3 + (size_t)ch] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
            }
    char path[4200];
    snprintf(path, sizeof path, "%.4000s/%06d.png", dir, i);
    ptq_status st = io_image_save_png(path, rgb, W, H);
    free(rgb);
    return st;
}

int cmd_preprocess(int argc, char **argv)
{
    enum { O_IMAGES = 256, O_PRESET, O_LIMIT, O_SHUFFLE, O_SEED, O_STRICT, O_EXIF, O_THREADS, O_DUMP, O_DUMP_PNG, O_SET, O_SHARD,
           O_MODEL };
    static const struct option longopts[] = {
        {"images", required_argument, 0, O_IMAGES}, {"preset", required_argument, 0, O_PRESET},
        {"limit", required_argument, 0, O_LIMIT},   {"shuffle", no_argument, 0, O_SHUFFLE},
        {"seed", required_argument, 0, O_SEED},     {"strict", no_argument, 0, O_STRICT},
        {"exif", required_argument, 0, O_EXIF},     {"threads", required_argument, 0, O_THREADS},
        {"dump", required_argument, 0, O_DUMP},     {"dump-png", required_argument, 0, O_DUMP_PNG},
        {"shard", required_argument, 0, O_SHARD},   {"model", required_argument, 0, O_MODEL},
        CLI_PP_LONGOPTS(O_SET),
        {"list-presets", no_argument, 0, 'L'},      {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    pp_dataset_options o = pp_dataset_defaults();
    pp_config cfg = pp_defaults();
    const char *preset = NULL, *dump = NULL, *dump_png = NULL, *model = NULL;
    ptq_graph *g = NULL;
    const char *set_keys[CLI_PP_MAX], *set_vals[CLI_PP_MAX];
    int n_set = 0, c, idx = 0, rc = CLI_EXIT_OK;
    ptq_status st = PTQ_OK;
    pp_dataset *d = NULL;
    float *all = NULL;
    o.batch = 0; /* PP_DEFAULT_BATCH */
    opterr = 0;
    optind = 1;
    if (cli_list_options(argc, argv, longopts)) return CLI_EXIT_OK;
    while ((idx = -1, c = getopt_long(argc, argv, ":h", longopts, &idx)) != -1) {
        int shared = c != '?' && c != ':' && idx >= 0 ? cli_dataset_option("preprocess", longopts[idx].name, optarg, &o) : 0;
        if (shared < 0) return CLI_EXIT_USAGE;
        if (shared) continue;
        switch (c) {
        case O_IMAGES: o.images = optarg; break;
        case O_PRESET: preset = optarg; break;
        case O_DUMP: dump = optarg; break;
        case O_DUMP_PNG: dump_png = optarg; break;
        case O_MODEL: model = optarg; break;
        case O_SET:
            if (n_set == CLI_PP_MAX) return cli_usage_error("preprocess", "too many overrides");
            set_keys[n_set] = longopts[idx].name;
            set_vals[n_set++] = optarg;
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        case 'L': {
            char **names = NULL;
            int n = io_preset_names(&names);
            if (n < 0) return cli_fail(PTQ_ERR_NOMEM);
            for (int i = 0; i < n; i++) {
                printf("%s\n", names[i]);
                free(names[i]);
            }
            free(names);
            return CLI_EXIT_OK;
        }
        default: return cli_bad_option("preprocess", c, argv);
        }
    }
    if (optind != argc) return cli_usage_error("preprocess", "unexpected argument '%s'", argv[optind]);
    if (!o.images) return cli_usage_error("preprocess", "--images is required");
    if (!dump && !dump_png) return cli_usage_error("preprocess", "--dump OUT.npy or --dump-png DIR is required");
    if ((st = eng_preprocessing(preset, set_keys, set_vals, n_set, &cfg)) != PTQ_OK) goto fail;
    if (!model) eng_preprocessing_say(NULL);
    if (model) { /* what quantize would feed this model */
        if ((st = onnx_model_load(model, &g)) != PTQ_OK ||
            (st = eng_fit_preprocessing(g, model, &cfg, NULL)) != PTQ_OK ||
            (st = eng_check_input_dims(g, model, &cfg)) != PTQ_OK)
            goto fail;
    }
    if ((st = pp_dataset_open(&o, &cfg, &d)) != PTQ_OK) goto fail;
    if (dump_png) mkdir(dump_png, 0777);
    int dynamic = pp_dynamic(&cfg) != 0;
    if (dump && dynamic) mkdir(dump, 0777);
    size_t per = pp_tensor_floats(&cfg);
    int total = 0, cap = 0;
    for (;;) {
        const float *x;
        int n;
        if ((st = pp_dataset_next(d, &x, &n, NULL, NULL)) != PTQ_OK) goto fail;
        if (n == 0) break;
        pp_config shaped = cfg; /* this batch's size */
        pp_dataset_batch_shape(d, &shaped.width, &shaped.height);
        per = (size_t)pp_channels(&cfg) * (size_t)shaped.width * (size_t)shaped.height;
        for (int i = 0; dump && dynamic && i < n; i++) {
            ptq_tensor t = eng_batch_tensor(&shaped, x + per * (size_t)i, 1);
            char path[4200];
            snprintf(path, sizeof path, "%.4000s/%06d.npy", dump, total + i);
            if ((st = npy_save(path, &t)) != PTQ_OK) goto fail;
        }
        if (dump && !dynamic) {
            if (total + n > cap) {
                cap = (total + n) * 2;
                float *na = realloc(all, sizeof(float) * per * (size_t)cap);
                if (!na) {
                    ptq_error("out of memory keeping %d images for --dump (use --limit)", total + n);
                    st = PTQ_ERR_NOMEM;
                    goto fail;
                }
                all = na;
            }
            memcpy(all + per * (size_t)total, x, sizeof(float) * per * (size_t)n);
        }
        for (int i = 0; dump_png && i < n; i++)
            if ((st = write_png(dump_png, total + i, x + per * (size_t)i, &shaped)) != PTQ_OK) goto fail;
        total += n;
    }
    int used, skipped;
    pp_dataset_counts(d, &used, &skipped);
    if (total == 0) {
        ptq_error("%s: no usable image (%d skipped)", o.images, skipped);
        st = PTQ_ERR_FORMAT;
        goto fail;
    }
    if (dump && !dynamic) {
        ptq_tensor t = eng_batch_tensor(&cfg, all, total);
        if ((st = npy_save(dump, &t)) != PTQ_OK) goto fail;
    }
    if ((rc = cli_outputs_commit(dump)) != CLI_EXIT_OK) goto out;
    fprintf(stderr, "ptq preprocess: %d images used, %d skipped%s%s\n", used, skipped, dump ? "; wrote " : "",
            dump ? dump : "");
    goto out;
fail:
    rc = cli_fail(st);
out:
    pp_dataset_close(d);
    free(all);
    ptq_graph_destroy(g);
    return rc;
}
