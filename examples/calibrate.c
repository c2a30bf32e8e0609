/* calibrate.c: ptq as a library (include/ptq.h). Loads a model, opens an image folder with a
 * preprocessing preset, calibrates (entropy ranges, written as a TensorRT cache), quantizes
 * and writes the QDQ model and its cache: what `ptq quantize MODEL --images DIR --preset P
 * -o OUT.qdq.onnx --cache OUT.cache` writes, byte for byte.
 *
 *   cc calibrate.c $(pkg-config --cflags --libs ptq) -o calibrate
 *   ./calibrate model.onnx photos/ paddleocr-cls out     # out.qdq.onnx, out.cache, out.calib.cache */
#include <ptq.h>
#include <stdio.h>
#include <string.h>

static void on_message(int level, const char *text, void *user)
{
    (void)user;
    fprintf(stderr, "calibrate: %s%s\n", level == PTQ_LOG_WARNING ? "warning: " : "", text);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: calibrate MODEL IMAGES PRESET OUT_PREFIX\n");
        return 2;
    }
    char model_out[4096], cache_out[4096], calib_out[4096];
    snprintf(model_out, sizeof model_out, "%s.qdq.onnx", argv[4]);
    snprintf(cache_out, sizeof cache_out, "%s.cache", argv[4]);
    snprintf(calib_out, sizeof calib_out, "%s.calib.cache", argv[4]);
    ptq_model *m = NULL;
    ptq_dataset *d = NULL;
    ptq_calibration *c = NULL;
    ptq_ranges *r = NULL;
    ptq_quantized *q = NULL;
    ptq_log log = {NULL, on_message, NULL};
    int rc = 1;

    ptq_dataset_options dopt;
    ptq_dataset_defaults(&dopt);
    dopt.preset = argv[3];
    dopt.log = log;
    if (ptq_model_load(argv[1], &m) || ptq_dataset_open(argv[2], &dopt, &d)) goto fail;

    ptq_calibrate_options copt;
    ptq_calibrate_defaults(&copt);
    copt.log = log;
    if (ptq_calibrate(m, d, &copt, &c) || ptq_calibration_ranges(c, "entropy", &r) ||
        ptq_ranges_write_cache(r, calib_out, 0, NULL))
        goto fail;
    printf("%s: %d tensors calibrated (%s) on %d images\n", calib_out, r->n, r->method, ptq_calibration_images(c));

    ptq_quantize_options qopt;
    ptq_quantize_defaults(&qopt);
    qopt.log = log;
    ptq_quantize_info info;
    if (ptq_quantize(m, d, &qopt, &q) || ptq_quantized_write(q, model_out, cache_out, NULL)) goto fail;
    ptq_quantized_info(q, &info);
    printf("%s: %d activations and %d weights quantized in %d nodes\n", model_out, info.activations, info.weights,
           info.quantized_nodes);
    printf("%s: TensorRT calibration cache\n", cache_out);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "calibrate: %s\n", ptq_error_message());
done:
    ptq_quantized_free(q);
    ptq_ranges_free(r);
    ptq_calibration_free(c);
    ptq_dataset_free(d);
    ptq_model_free(m);
    return rc;
}
