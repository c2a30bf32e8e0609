/* pipeline.c: geometry on 8-bit RGB (resize, letterbox, crop), then float conversion
 * with scale, mean/std, channel order and layout, in the order the named libraries
 * apply them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "preprocess/preprocess.h"

pp_config pp_defaults(void)
{
    pp_config c;
    memset(&c, 0, sizeof c);
    c.mode = PP_MODE_STRETCH;
    c.width = c.height = 224;
    c.interp = PP_INTERP_LINEAR;
    c.shorter = 256;
    c.pad_value = 114;
    c.scaleup = 1;
    c.scale = 1.0f / 255.0f;
    for (int i = 0; i < 3; i++) {
        c.mean[i] = 0.0f;
        c.std[i] = 1.0f;
    }
    return c;
}

size_t pp_tensor_floats(const pp_config *c)
{
    return (size_t)3 * (size_t)c->width * (size_t)c->height;
}

static const char *const interp_names[] = {"linear", "pil-bilinear", "nearest", "area"};
static const char *const mode_names[] = {"stretch", "letterbox", "shorter-crop", "height-pad"};

const char *pp_interp_name(pp_interp i)
{
    return (unsigned)i < 4 ? interp_names[i] : "?";
}

const char *pp_mode_name(pp_mode m)
{
    return (unsigned)m < 4 ? mode_names[m] : "?";
}

int pp_interp_parse(const char *s, pp_interp *out)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, interp_names[i]) == 0) {
            *out = (pp_interp)i;
            return 0;
        }
    return -1;
}

int pp_mode_parse(const char *s, pp_mode *out)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, mode_names[i]) == 0) {
            *out = (pp_mode)i;
            return 0;
        }
    return -1;
}

ptq_status pp_validate(const pp_config *c)
{
    if (c->width < 1 || c->height < 1 || c->width > 16384 || c->height > 16384) {
        ptq_error("preprocessing: size %dx%d out of range (1 to 16384)", c->width, c->height);
        return PTQ_ERR_ARG;
    }
    if (c->mode == PP_MODE_SHORTER_CROP && (c->shorter < 1 || c->shorter > 16384)) {
        ptq_error("preprocessing: shorter side %d out of range", c->shorter);
        return PTQ_ERR_ARG;
    }
    if (c->stride != 0) {
        ptq_error("preprocessing: letterbox stride %d: only full-size letterboxing (stride 0) gives the fixed shape "
                  "a calibration batch needs",
                  c->stride);
        return PTQ_ERR_UNSUPPORTED;
    }
    if (c->pad_value < 0 || c->pad_value > 255) {
        ptq_error("preprocessing: pad value %d is not in 0..255", c->pad_value);
        return PTQ_ERR_ARG;
    }
    for (int i = 0; i < 3; i++)
        if (!(c->std[i] != 0.0f) || !isfinite(c->std[i]) || !isfinite(c->mean[i])) {
            ptq_error("preprocessing: std[%d] = %g, mean[%d] = %g (std must be finite and non-zero)", i, (double)c->std[i], i,
                      (double)c->mean[i]);
            return PTQ_ERR_ARG;
        }
    if (!isfinite(c->scale) || c->scale == 0.0f) {
        ptq_error("preprocessing: scale %g must be finite and non-zero", (double)c->scale);
        return PTQ_ERR_ARG;
    }
    return PTQ_OK;
}

/* Python's round(): to nearest, ties to even. */
static int py_round(double v)
{
    return (int)nearbyint(v);
}

/* Writes canvas pixels (ch 3, width cw) into the float tensor at (x0, y0), normalised. */
static void emit(const uint8_t *canvas, int cw, int chh, int x0, int y0, const pp_config *c, float *out)
{
    int W = c->width, H = c->height;
    for (int y = 0; y < chh; y++) {
        int ty = y + y0;
        if (ty < 0 || ty >= H) continue;
        for (int x = 0; x < cw; x++) {
            int tx = x + x0;
            if (tx < 0 || tx >= W) continue;
            const uint8_t *px = canvas + ((size_t)y * (size_t)cw + (size_t)x) * 3;
            for (int k = 0; k < 3; k++) {
                int src = c->bgr ? 2 - k : k;
                float v = ((float)px[src] * c->scale - c->mean[k]) / c->std[k];
                if (c->nhwc) out[((size_t)ty * (size_t)W + (size_t)tx) * 3 + (size_t)k] = v;
                else out[((size_t)k * (size_t)H + (size_t)ty) * (size_t)W + (size_t)tx] = v;
            }
        }
    }
}

static void fill(const pp_config *c, float *out, int k, float v)
{
    size_t plane = (size_t)c->width * (size_t)c->height;
    if (c->nhwc)
        for (size_t i = 0; i < plane; i++) out[i * 3 + (size_t)k] = v;
    else
        for (size_t i = 0; i < plane; i++) out[(size_t)k * plane + i] = v;
}

/* Fills columns x0..width-1 of every row of channel k with v (the right padding). */
static void fill_right(const pp_config *c, float *out, int k, int x0, float v)
{
    size_t W = (size_t)c->width, H = (size_t)c->height;
    for (size_t y = 0; y < H; y++)
        for (size_t x = (size_t)x0; x < W; x++) {
            if (c->nhwc) out[(y * W + x) * 3 + (size_t)k] = v;
            else out[((size_t)k * H + y) * W + x] = v;
        }
}

ptq_status pp_image_to_tensor(const io_image *img, const pp_config *c, float *out, pp_meta *meta)
{
    ptq_status st = PTQ_OK;
    uint8_t *canvas = NULL;
    int w = img->width, h = img->height, W = c->width, H = c->height;
    pp_meta m;
    memset(&m, 0, sizeof m);
    m.src_w = w;
    m.src_h = h;
    TRY(pp_validate(c));
    if (w < 1 || h < 1 || !img->data) FAIL(PTQ_ERR_ARG, "preprocessing: empty image");
    switch (c->mode) {
    case PP_MODE_STRETCH:
        canvas = malloc((size_t)W * (size_t)H * 3);
        CHECK_ALLOC(canvas);
        TRY(pp_resize_u8(img->data, w, h, canvas, W, H, 3, c->interp));
        m.resized_w = W;
        m.resized_h = H;
        emit(canvas, W, H, 0, 0, c, out);
        break;
    case PP_MODE_LETTERBOX: {
        double r = fmin((double)H / h, (double)W / w);
        if (!c->scaleup && r > 1.0) r = 1.0;
        int nw = py_round(w * r), nh = py_round(h * r);
        if (nw < 1) nw = 1;
        if (nh < 1) nh = 1;
        double dw = (W - nw) / 2.0, dh = (H - nh) / 2.0;
        int top = py_round(dh - 0.1), left = py_round(dw - 0.1);
        canvas = malloc((size_t)nw * (size_t)nh * 3);
        CHECK_ALLOC(canvas);
        TRY(pp_resize_u8(img->data, w, h, canvas, nw, nh, 3, c->interp));
        for (int k = 0; k < 3; k++) fill(c, out, k, ((float)c->pad_value * c->scale - c->mean[k]) / c->std[k]);
        emit(canvas, nw, nh, left, top, c, out);
        m.resized_w = nw;
        m.resized_h = nh;
        m.pad_left = left;
        m.pad_top = top;
        break;
    }
    case PP_MODE_SHORTER_CROP: {
        int nw, nh;
        if (w <= h) {
            nw = c->shorter;
            nh = (int)((double)c->shorter * h / w);
        } else {
            nh = c->shorter;
            nw = (int)((double)c->shorter * w / h);
        }
        if (nw < 1) nw = 1;
        if (nh < 1) nh = 1;
        canvas = malloc((size_t)nw * (size_t)nh * 3);
        CHECK_ALLOC(canvas);
        TRY(pp_resize_u8(img->data, w, h, canvas, nw, nh, 3, c->interp));
        int top = py_round((nh - H) / 2.0), left = py_round((nw - W) / 2.0);
        /* torchvision pads a crop larger than the image with zeros */
        for (int k = 0; k < 3; k++) fill(c, out, k, (0.0f - c->mean[k]) / c->std[k]);
        emit(canvas, nw, nh, -left, -top, c, out);
        m.resized_w = nw;
        m.resized_h = nh;
        m.pad_left = -left;
        m.pad_top = -top;
        break;
    }
    case PP_MODE_HEIGHT_PAD: {
        double ratio = (double)w / h;
        int rw = (int)ceil(H * ratio);
        if (rw > W) rw = W;
        if (rw < 1) rw = 1;
        canvas = malloc((size_t)rw * (size_t)H * 3);
        CHECK_ALLOC(canvas);
        TRY(pp_resize_u8(img->data, w, h, canvas, rw, H, 3, c->interp));
        for (int k = 0; k < 3; k++) fill_right(c, out, k, rw, c->pad_float); /* emit writes the rest */
        emit(canvas, rw, H, 0, 0, c, out);
        m.resized_w = rw;
        m.resized_h = H;
        break;
    }
    default:
        FAIL(PTQ_ERR_ARG, "preprocessing: unknown mode %d", (int)c->mode);
    }
    m.scale_x = (float)m.resized_w / (float)w;
    m.scale_y = (float)m.resized_h / (float)h;
    if (meta) *meta = m;
done:
    free(canvas);
    return st;
}
