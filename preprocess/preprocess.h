/* preprocess.h: an 8-bit RGB image to the float tensor a model was trained on, with
 * each step reproducing the library it is named after (see docs/preprocessing.md).
 *
 *   pp_config c = pp_defaults();            // or io_preset_load("configs/yolo-letterbox-640.yaml", &c)
 *   float *x = malloc(pp_tensor_floats(&c) * sizeof *x);
 *   pp_meta m;
 *   TRY(pp_image_to_tensor(&img, &c, x, &m)); // x: C*H*W (or H*W*C), m: scale and padding used
 *
 * Pure functions: buffers in, buffers out; nothing here reads files or keeps state. */
#ifndef PTQ_PREPROCESS_H
#define PTQ_PREPROCESS_H

#include <stddef.h>
#include <stdint.h>

#include "io/image.h"
#include "runtime/status.h"

typedef enum {
    PP_INTERP_LINEAR = 0,   /* OpenCV cv2.resize INTER_LINEAR (half-pixel centres, clamped edges) */
    PP_INTERP_PIL_BILINEAR, /* PIL Image.resize(BILINEAR): antialiased triangle filter, as torchvision uses */
    PP_INTERP_NEAREST,      /* OpenCV INTER_NEAREST: floor(dst * src/dst) */
    PP_INTERP_AREA          /* OpenCV INTER_AREA when shrinking (pixel-area average); linear when enlarging */
} pp_interp;

typedef enum {
    PP_MODE_STRETCH = 0,    /* resize to width x height, ignoring the aspect ratio */
    PP_MODE_LETTERBOX,      /* Ultralytics LetterBox: keep ratio, centre, pad with pad_value */
    PP_MODE_SHORTER_CROP,   /* torchvision Resize(shorter) + CenterCrop(height, width) */
    PP_MODE_HEIGHT_PAD,     /* PaddleOCR rec/cls: resize to height keeping ratio (width capped), pad right after normalising */
    PP_MODE_LIMIT_SIDE      /* PaddleOCR det DetResizeForTest(limit_side_len, limit_type): the size follows the image */
} pp_mode;

typedef struct {
    pp_mode mode;
    int width, height;      /* the tensor's spatial size */
    pp_interp interp;
    int shorter;            /* SHORTER_CROP: the shorter side after resizing (e.g. 256) */
    int pad_value;          /* LETTERBOX: 0-255 padding (114) */
    int stride;             /* LETTERBOX: must be 0. Ultralytics' auto=True (pad to a multiple of stride) gives
                             * every image its own shape, which a fixed-shape engine cannot take */
    int scaleup;            /* LETTERBOX: allow enlarging (1) */
    float pad_float;        /* HEIGHT_PAD: value of the right padding, in normalised units (0) */
    int bgr;                /* channel order of the tensor: 1 = BGR (OpenCV), 0 = RGB */
    int gray;               /* 0: three channels; PP_GRAY_PIL, PP_GRAY_CV: one, the image's luma, converted
                             * before the geometry; normalised with mean[0], std[0] */
    float scale;            /* the 0-255 value is multiplied by scale first (1/255) */
    float mean[3], std[3];  /* then (v - mean[c]) / std[c], c in the tensor's channel order */
    int nhwc;               /* layout: 0 = CHW, 1 = HWC */
    /* Dims that follow the image (pp_tensor_shape; a dataset batch then holds one shape): */
    int max_width;          /* HEIGHT_PAD: 0 = the fixed width; > 0: PaddleOCR resize_norm_img with a batch of
                             * one, width int(height * max(width/height, w/h)) capped at max_width (3200) */
    int limit_side;         /* LIMIT_SIDE: limit_side_len (960) */
    int limit_min;          /* LIMIT_SIDE: limit_type 0 = max (longer side at most limit_side), 1 = min */
    int multiple;           /* LIMIT_SIDE: each side rounded to a multiple of this (32) */
    int max_side;           /* LIMIT_SIDE: an image whose tensor would have a side above this is refused (4096) */
} pp_config;

/* Where the image landed in the tensor (to map boxes back): resized size and offset. */
typedef struct {
    int src_w, src_h, resized_w, resized_h, pad_left, pad_top;
    float scale_x, scale_y;
} pp_meta;

/* Luma conventions: PIL convert("L"), (r*19595 + g*38470 + b*7471 + 0x8000) >> 16;
 * OpenCV 4 COLOR_RGB2GRAY, (r*9798 + g*19235 + b*3735 + (1 << 14)) >> 15 (its 8-bit path). */
enum { PP_GRAY_PIL = 1, PP_GRAY_CV = 2 };

pp_config pp_defaults(void);
/* Channels of the tensor: 1 (gray) or 3. */
int pp_channels(const pp_config *c);
/* An interleaved RGB image (n pixels) to one luma byte per pixel by convention PP_GRAY_*. */
void pp_rgb_to_gray(const uint8_t *rgb, size_t n, int convention, uint8_t *out);
/* Floats of one image's tensor; with dims that follow the image, the most any image gives. */
size_t pp_tensor_floats(const pp_config *c);
/* Which tensor dims follow the image: PP_DYN_WIDTH | PP_DYN_HEIGHT, 0 for a fixed size. */
enum { PP_DYN_WIDTH = 1, PP_DYN_HEIGHT = 2 };
int pp_dynamic(const pp_config *c);
/* The tensor's width and height for a src_w x src_h image (the preset's for a fixed size);
 * fails past max_side. */
ptq_status pp_tensor_shape(const pp_config *c, int src_w, int src_h, int *w, int *h);
/* Checks sizes and values; one message naming the bad field. */
ptq_status pp_validate(const pp_config *c);
ptq_status pp_image_to_tensor(const io_image *img, const pp_config *c, float *out, pp_meta *meta);

/* Resizes an 8-bit image with `ch` interleaved channels (dst is dw*dh*ch bytes). */
ptq_status pp_resize_u8(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh, int ch, pp_interp interp);

const char *pp_interp_name(pp_interp i);
const char *pp_mode_name(pp_mode m);
int pp_interp_parse(const char *s, pp_interp *out);
int pp_mode_parse(const char *s, pp_mode *out);

#endif
