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
    c.limit_side = 960;
    c.multiple = 32;
    c.max_side = 4096;
    for (int i = 0; i < 3; i++) {
        c.mean[i] = 0.0f;
        c.std[i] = 1.0f;
    }
    return c;
}

int pp_channels(const pp_config *c)
{
    return c->gray ? 1 : 3;
}

void pp_rgb_to_gray(const uint8_t *rgb, size_t n, int convention, uint8_t *out)
{
    for (size_t i = 0; i < n; i++) {
        unsigned r = rgb[3 * i], g = rgb[3 * i + 1], b = rgb[3 * i + 2];
        out[i] = convention == PP_GRAY_CV ? (uint8_t)((r * 9798u + g * 19235u + b * 3735u + (1u << 14)) >> 15)
                                          : (uint8_t)((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
    }
}

/* Python's round(): to nearest, ties to even. */
static int py_round(double v)
{
    return (int)nearbyint(v);
}

/* DetResizeForTest's rounding of a side: max(int(round(v / m) * m), m). */
static int round_multiple(int v, int m)
{
    int r = py_round((double)v / m) * m;
    return r > m ? r : m;
}

int pp_dynamic(const pp_config *c)
{
    if (c->mode == PP_MODE_LIMIT_SIDE) return PP_DYN_WIDTH | PP_DYN_HEIGHT;
    if (c->mode == PP_MODE_HEIGHT_PAD && c->max_width > 0) return PP_DYN_WIDTH;
    return 0;
}

size_t pp_tensor_floats(const pp_config *c)
{
    size_t w = (size_t)c->width, h = (size_t)c->height;
    if (c->mode == PP_MODE_HEIGHT_PAD && c->max_width > 0) w = (size_t)c->max_width;
    if (c->mode == PP_MODE_LIMIT_SIDE) { /* limit_type max: no side above limit_side rounded */
        int m = c->limit_min ? c->max_side : round_multiple(c->limit_side, c->multiple);
        w = h = (size_t)(m < c->max_side ? m : c->max_side);
    }
    return (size_t)pp_channels(c) * w * h;
}

ptq_status pp_tensor_shape(const pp_config *c, int src_w, int src_h, int *w, int *h)
{
    *w = c->width;
    *h = c->height;
    if (src_w < 1 || src_h < 1) {
        ptq_error("preprocessing: empty image (%dx%d)", src_w, src_h);
        return PTQ_ERR_ARG;
    }
    if (c->mode == PP_MODE_HEIGHT_PAD && c->max_width > 0) {
        /* resize_norm_img: max_wh_ratio = max(imgW / imgH, w / h); imgW = int(imgH * max_wh_ratio) */
        double r = fmax((double)c->width / c->height, (double)src_w / src_h), W = c->height * r;
        *w = W >= c->max_width ? c->max_width : (int)W;
    } else if (c->mode == PP_MODE_LIMIT_SIDE) {
        /* DetResizeForTest.resize_image_type0 */
        int L = c->limit_side;
        double ratio = 1.0;
        if (!c->limit_min && (src_h > src_w ? src_h : src_w) > L) ratio = src_h > src_w ? (double)L / src_h : (double)L / src_w;
        if (c->limit_min && (src_h < src_w ? src_h : src_w) < L) ratio = src_h < src_w ? (double)L / src_h : (double)L / src_w;
        double rh = src_h * ratio, rw = src_w * ratio;
        if (rh > 1e6 || rw > 1e6) rh = rw = 1e6; /* refused below; keeps the int conversion defined */
        *h = round_multiple((int)rh, c->multiple);
        *w = round_multiple((int)rw, c->multiple);
        if (*w > c->max_side || *h > c->max_side) {
            ptq_error("preprocessing: a %dx%d image gives a %dx%d tensor, larger than max_side %d", src_w, src_h, *w, *h,
                      c->max_side);
            return PTQ_ERR_ARG;
        }
    }
    return PTQ_OK;
}

static const char *const interp_names[] = {"linear", "pil-bilinear", "nearest", "area"};
static const char *const mode_names[] = {"stretch", "letterbox", "shorter-crop", "height-pad", "limit-side"};

const char *pp_interp_name(pp_interp i)
{
    return (unsigned)i < 4 ? interp_names[i] : "?";
}

const char *pp_mode_name(pp_mode m)
{
    return (unsigned)m < 5 ? mode_names[m] : "?";
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
    for (int i = 0; i < 5; i++)
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
    if (c->max_width != 0 && (c->mode != PP_MODE_HEIGHT_PAD || c->max_width < c->width || c->max_width > 16384)) {
        ptq_error("preprocessing: max_width %d: only for mode height-pad, from width %d up to 16384", c->max_width, c->width);
        return PTQ_ERR_ARG;
    }
    if (c->mode == PP_MODE_LIMIT_SIDE &&
        (c->limit_side < 1 || c->limit_side > 16384 || c->multiple < 1 || c->multiple > 1024 ||
         c->max_side < c->multiple || c->max_side > 16384 || (unsigned)c->limit_min > 1)) {
        ptq_error("preprocessing: limit_side %d, multiple %d, max_side %d out of range (limit_side 1 to 16384, "
                  "multiple 1 to 1024, max_side from multiple to 16384)",
                  c->limit_side, c->multiple, c->max_side);
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

/* Writes canvas pixels (pp_channels(c) interleaved, width cw) into the float tensor at (x0, y0), normalised. */
static void emit(const uint8_t *canvas, int cw, int chh, int x0, int y0, const pp_config *c, float *out)
{
    int W = c->width, H = c->height, nc = pp_channels(c);
    for (int y = 0; y < chh; y++) {
        int ty = y + y0;
        if (ty < 0 || ty >= H) continue;
        for (int x = 0; x < cw; x++) {
            int tx = x + x0;
            if (tx < 0 || tx >= W) continue;
            const uint8_t *px = canvas + ((size_t)y * (size_t)cw + (size_t)x) * (size_t)nc;
            for (int k = 0; k < nc; k++) {
                int src = c->bgr && nc == 3 ? 2 - k : k;
                float v = ((float)px[src] * c->scale - c->mean[k]) / c->std[k];
                if (c->nhwc) out[((size_t)ty * (size_t)W + (size_t)tx) * (size_t)nc + (size_t)k] = v;
                else out[((size_t)k * (size_t)H + (size_t)ty) * (size_t)W + (size_t)tx] = v;
            }
        }
    }
}

static void fill(const pp_config *c, float *out, int k, float v)
{
    size_t plane = (size_t)c->width * (size_t)c->height, nc = (size_t)pp_channels(c);
    if (c->nhwc)
        for (size_t i = 0; i < plane; i++) out[i * nc + (size_t)k] = v;
    else
        for (size_t i = 0; i < plane; i++) out[(size_t)k * plane + i] = v;
}

/* Fills columns x0..width-1 of every row of channel k with v (the right padding). */
static void fill_right(const pp_config *c, float *out, int k, int x0, float v)
{
    size_t W = (size_t)c->width, H = (size_t)c->height, nc = (size_t)pp_channels(c);
    for (size_t y = 0; y < H; y++)
        for (size_t x = (size_t)x0; x < W; x++) {
            if (c->nhwc) out[(y * W + x) * nc + (size_t)k] = v;
            else out[((size_t)k * H + y) * W + x] = v;
        }
}

ptq_status pp_image_to_tensor(const io_image *img, const pp_config *c, float *out, pp_meta *meta)
{
    ptq_status st = PTQ_OK;
    uint8_t *canvas = NULL, *luma = NULL;
    int w = img->width, h = img->height, W, H, nc = pp_channels(c);
    const uint8_t *src;
    pp_config shaped;
    pp_meta m;
    memset(&m, 0, sizeof m);
    m.src_w = w;
    m.src_h = h;
    TRY(pp_validate(c));
    if (w < 1 || h < 1 || !img->data) FAIL(PTQ_ERR_ARG, "preprocessing: empty image");
    TRY(pp_tensor_shape(c, w, h, &W, &H));
    src = img->data;
    if (c->gray) { /* converted first, as cv2.cvtColor / PIL convert("L") before the resize */
        luma = malloc((size_t)w * (size_t)h);
        CHECK_ALLOC(luma);
        pp_rgb_to_gray(img->data, (size_t)w * (size_t)h, c->gray, luma);
        src = luma;
    }
    shaped = *c; /* the helpers below read the tensor's size from the config */
    shaped.width = W;
    shaped.height = H;
    c = &shaped;
    switch (c->mode) {
    case PP_MODE_STRETCH:
    case PP_MODE_LIMIT_SIDE: /* the size came from pp_tensor_shape; cv2.resize stretches to it */
        canvas = malloc((size_t)W * (size_t)H * (size_t)nc);
        CHECK_ALLOC(canvas);
        TRY(pp_resize_u8(src, w, h, canvas, W, H, nc, c->interp));
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
        canvas = malloc((size_t)nw * (size_t)nh * (size_t)nc);
        CHECK_ALLOC(canvas);
        TRY(pp_resize_u8(src, w, h, canvas, nw, nh, nc, c->interp));
        for (int k = 0; k < nc; k++) fill(c, out, k, ((float)c->pad_value * c->scale - c->mean[k]) / c->std[k]);
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
        canvas = malloc((size_t)nw * (size_t)nh * (size_t)nc);
        CHECK_ALLOC(canvas);
        TRY(pp_resize_u8(src, w, h, canvas, nw, nh, nc, c->interp));
        int top = py_round((nh - H) / 2.0), left = py_round((nw - W) / 2.0);
        /* torchvision pads a crop larger than the image with zeros */
        for (int k = 0; k < nc; k++) fill(c, out, k, (0.0f - c->mean[k]) / c->std[k]);
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
        canvas = malloc((size_t)rw * (size_t)H * (size_t)nc);
        CHECK_ALLOC(canvas);
        TRY(pp_resize_u8(src, w, h, canvas, rw, H, nc, c->interp));
        for (int k = 0; k < nc; k++) fill_right(c, out, k, rw, c->pad_float); /* emit writes the rest */
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
    free(luma);
    return st;
}
