#!/usr/bin/env bash
# Models as users ship them (scripts/variants.py edits of build/zoo exports), each quantized with
# nothing but `--images --preset` (or no preset at all):
#  - uint8 NHWC input normalised inside the graph: fed the preset's geometry as uint8 NHWC pixels,
#    said in one line; what it is fed equals torchvision's Resize + CenterCrop in python exactly;
#  - a gray (1-channel) model: PIL's luma, the preset's mean/std averaged, said; equal to PIL;
#    GRAY_PIL and GRAY_CV equal PIL convert("L") and OpenCV cvtColor to the pixel;
#  - a 320x320 segmenter with imagenet-torchvision: the crop scaled (shorter side 366), said, equal
#    to torchvision at 366/320; --size 320x320 alone scales the crop the same way (no black padding);
#  - a YOLO export with Ultralytics metadata and no --preset: yolo-letterbox-640 at its imgsz, said;
#  - no --preset otherwise: the assumed preprocessing said in one line, every run;
#  - ptq inspect: the data input's dtype, layout, channels and the preprocessing without --preset;
#  - inputs ptq cannot feed (int64, 4 channels, rank 3 without a channel dim, --mean on uint8,
#    fractional values for a uint8 input) refused in one line naming the input;
#  - ONNX Runtime: each QDQ model's outputs against its FP32 model's on 4 photos (cosine >= 0.99).
# Needs build/zoo's resnet18, yolov8n_like and lraspp (scripts/zoo.py --models
# resnet18,yolov8n_like,lraspp_mobilenet_v3_large,lraspp_mobilenet_v3_large_320 --opset 13).
. "$(dirname "$0")/lib.sh"
PHOTOS=$ROOT/build/photos
ZOO=$ROOT/build/zoo
SH=$ROOT/tests/oracle/shipped.py
VAR=$ROOT/scripts/variants.py
for m in resnet18 yolov8n_like lraspp_mobilenet_v3_large; do
  [ -f "$ZOO/$m.op13.onnx" ] || { skip "shipped inputs" "no $ZOO/$m.op13.onnx (scripts/zoo.py)"; finish; }
done
R18=$ZOO/resnet18.op13.onnx # [1, 3, 160, 160]
for v in uint8-nhwc gray; do $PY "$VAR" "$R18" "$TMP/r18_$v.onnx" --variant $v >/dev/null || exit 1; done
$PY "$VAR" "$ZOO/yolov8n_like.op13.onnx" "$TMP/yolo_meta.onnx" --variant ultralytics-meta >/dev/null || exit 1
SEG=$ZOO/lraspp_mobilenet_v3_large_320.op13.onnx
if [ ! -f "$SEG" ]; then # the 256 export with its input (and the sizes it baked in) set to 320
  SEG=$TMP/lraspp320.onnx
  $PY "$SH" variant "$ZOO/lraspp_mobilenet_v3_large.op13.onnx" "$SEG" size:320x320 || exit 1
fi
for k in int64 rgba rank3; do $PY "$SH" variant "$R18" "$TMP/bad_$k.onnx" $k || exit 1; done

# quantize MODEL NAME [options]: --images --limit 8, stderr kept in $TMP/NAME.err
quantize() {
  local model=$1 name=$2; shift 2
  "$PTQ" quantize "$model" --images "$PHOTOS" --limit 8 -o "$TMP/$name.qdq.onnx" "$@" 2> "$TMP/$name.err" &&
    grep -q "^ptq quantize: 8 images used" "$TMP/$name.err"
}
said() { # name, fixed text: the line is in the run's stderr exactly once
  [ "$(grep -cF -- "$2" "$TMP/$1.err")" = 1 ] || { cat "$TMP/$1.err"; return 1; }
  grep -F -- "$2" "$TMP/$1.err"
}

check "uint8 NHWC: quantize --preset imagenet-torchvision succeeds and says how it feeds the input" bash -c "
  $(declare -f quantize said); PTQ='$PTQ' PHOTOS='$PHOTOS' TMP='$TMP'
  quantize '$TMP/r18_uint8-nhwc.onnx' u8 --preset imagenet-torchvision &&
  said u8 \"input 'images' is uint8 [1, 160, 160, 3]: fed the preset's geometry as uint8 NHWC pixels, without its scale/mean/std (the graph normalises)\" &&
  said u8 'shorter side 183, crop 160x160'"
check "uint8 NHWC: the pixels fed equal torchvision Resize(183) + CenterCrop(160) in PIL, exactly" bash -c "
  '$PTQ' preprocess --images '$PHOTOS' --limit 6 --preset imagenet-torchvision --model '$TMP/r18_uint8-nhwc.onnx' --dump '$TMP/u8.npy' 2>/dev/null &&
  $PY '$SH' ref torchvision '$PHOTOS' '$TMP/u8_ref.npy' --shorter 183 --size 160 --limit 6 --nhwc --scale 1 2>/dev/null &&
  $PY '$SH' same '$TMP/u8.npy' '$TMP/u8_ref.npy'"
check "uint8 NHWC: ONNX Runtime's QDQ outputs against FP32, cosine >= 0.99" \
  $PY "$SH" ortcos "$TMP/r18_uint8-nhwc.onnx" "$TMP/u8.qdq.onnx" "$TMP/u8.npy" 0.99 --uint8

check "gray: quantize --preset imagenet-torchvision succeeds and says PIL's luma with the averaged mean/std" bash -c "
  $(declare -f quantize said); PTQ='$PTQ' PHOTOS='$PHOTOS' TMP='$TMP'
  quantize '$TMP/r18_gray.onnx' gray --preset imagenet-torchvision &&
  said gray \"input 'images' has one channel: fed the image's luma (GRAY_PIL: PIL's), normalised with mean 0.449, std 0.226 (the preset's three averaged)\""
check "gray: the tensor fed equals PIL convert(\"L\") + Resize(183) + CenterCrop(160), averaged mean/std, exactly" bash -c "
  '$PTQ' preprocess --images '$PHOTOS' --limit 6 --preset imagenet-torchvision --model '$TMP/r18_gray.onnx' --dump '$TMP/gray.npy' 2>/dev/null &&
  $PY '$SH' ref torchvision-gray '$PHOTOS' '$TMP/gray_ref.npy' --shorter 183 --size 160 --limit 6 2>/dev/null &&
  $PY '$SH' same '$TMP/gray.npy' '$TMP/gray_ref.npy'"
check "gray: ONNX Runtime's QDQ outputs against FP32, cosine >= 0.99" \
  $PY "$SH" ortcos "$TMP/r18_gray.onnx" "$TMP/gray.qdq.onnx" "$TMP/gray.npy" 0.99
check "--channel-order GRAY_PIL equals PIL convert(\"L\") + resize(BILINEAR) on every photo, exactly" bash -c "
  '$PTQ' preprocess --images '$PHOTOS' --mode stretch --size 70x50 --scale 1 --resize pil-bilinear --channel-order GRAY_PIL --dump '$TMP/pil.npy' 2>/dev/null &&
  $PY '$SH' ref pil-gray '$PHOTOS' '$TMP/pil_ref.npy' --size 70x50 2>/dev/null && $PY '$SH' same '$TMP/pil.npy' '$TMP/pil_ref.npy'"
check "--channel-order GRAY_CV equals cv2.cvtColor(BGR2GRAY) + INTER_NEAREST on every photo, exactly" bash -c "
  '$PTQ' preprocess --images '$PHOTOS' --mode stretch --size 70x50 --scale 1 --resize nearest --channel-order GRAY_CV --dump '$TMP/cv.npy' 2>/dev/null &&
  $PY '$SH' ref cv-gray '$PHOTOS' '$TMP/cv_ref.npy' --size 70x50 --nearest 2>/dev/null && $PY '$SH' same '$TMP/cv.npy' '$TMP/cv_ref.npy'"
check "--channel-order GRAY after a BGR preset is OpenCV's luma (GRAY_CV)" bash -c "
  '$PTQ' preprocess --images '$PHOTOS' --limit 4 --preset imagenet-caffe --mode stretch --size 70x50 --resize nearest --scale 1 --mean 0 --std 1 --channel-order GRAY --dump '$TMP/cv_gray.npy' 2>/dev/null &&
  '$PTQ' preprocess --images '$PHOTOS' --limit 4 --mode stretch --size 70x50 --resize nearest --scale 1 --channel-order GRAY_CV --dump '$TMP/cv4.npy' 2>/dev/null &&
  cmp '$TMP/cv_gray.npy' '$TMP/cv4.npy'"

check "320x320 segmenter: imagenet-torchvision's crop scaled to shorter side 366, said" bash -c "
  $(declare -f quantize said); PTQ='$PTQ' PHOTOS='$PHOTOS' TMP='$TMP'
  quantize '$SEG' seg --preset imagenet-torchvision &&
  said seg \"preset imagenet-torchvision's 224x224 crop of shorter side 256 scaled to it: shorter side 366, crop 320x320\""
check "320x320 segmenter: the tensor fed equals torchvision Resize(366) + CenterCrop(320), exactly" bash -c "
  '$PTQ' preprocess --images '$PHOTOS' --limit 4 --preset imagenet-torchvision --model '$SEG' --dump '$TMP/seg.npy' 2>/dev/null &&
  $PY '$SH' ref torchvision '$PHOTOS' '$TMP/seg_ref.npy' --shorter 366 --size 320 --limit 4 2>/dev/null &&
  $PY '$SH' same '$TMP/seg.npy' '$TMP/seg_ref.npy'"
check "--size 320x320 without --mode scales the crop the same way (shorter side 366, no black padding), said" bash -c "
  '$PTQ' preprocess --images '$PHOTOS' --limit 4 --preset imagenet-torchvision --size 320x320 --model '$SEG' --dump '$TMP/seg_size.npy' 2> '$TMP/seg_size.err' &&
  grep -F 'shorter side 366 (scaled from 256 for 224x224) so the crop is not padded' '$TMP/seg_size.err' &&
  cmp '$TMP/seg_size.npy' '$TMP/seg.npy'"
# the zoo's segmenter has untrained weights (BatchNorm statistics from the photos): its 21 logits
# quantize to a cosine of 0.93 whatever the preprocessing (the 256 export with its own stretch
# preset: 0.93 on the same photos; ptq compare of this one: 0.92 percentile, 0.94 mse)
check "320x320 segmenter: ONNX Runtime's QDQ outputs against FP32, cosine >= 0.88" \
  $PY "$SH" ortcos "$SEG" "$TMP/seg.qdq.onnx" "$TMP/seg.npy" 0.88

check "YOLO with Ultralytics metadata, no --preset: yolo-letterbox-640 at its imgsz, said" bash -c "
  $(declare -f quantize said); PTQ='$PTQ' PHOTOS='$PHOTOS' TMP='$TMP'
  quantize '$TMP/yolo_meta.onnx' yolo &&
  said yolo \"no --preset: the model's metadata (imgsz [320, 320]) names an Ultralytics export: preset yolo-letterbox-640 at 320x320\""
check "YOLO with metadata: the tensor fed equals --preset yolo-letterbox-640 --size 320x320's" bash -c "
  '$PTQ' preprocess --images '$PHOTOS' --limit 4 --model '$TMP/yolo_meta.onnx' --dump '$TMP/yolo.npy' 2>/dev/null &&
  '$PTQ' preprocess --images '$PHOTOS' --limit 4 --preset yolo-letterbox-640 --size 320x320 --dump '$TMP/yolo_ref.npy' 2>/dev/null &&
  cmp '$TMP/yolo.npy' '$TMP/yolo_ref.npy'"
check "YOLO with metadata: ONNX Runtime's QDQ outputs against FP32, cosine >= 0.99" \
  $PY "$SH" ortcos "$TMP/yolo_meta.onnx" "$TMP/yolo.qdq.onnx" "$TMP/yolo.npy" 0.99

check "no --preset and no metadata: the assumed preprocessing said in one line, on every run" bash -c "
  $(declare -f quantize said); PTQ='$PTQ' PHOTOS='$PHOTOS' TMP='$TMP'
  line='no --preset: assuming stretch to 160x160 (linear), RGB, x/255, no mean/std, NCHW; give --preset (ptq preprocess --list-presets) if the model was trained otherwise'
  quantize '$R18' nopreset && said nopreset \"\$line\" &&
  '$PTQ' run '$R18' --images '$PHOTOS' --limit 1 2> '$TMP/nopreset2.err' >/dev/null && said nopreset2 \"\$line\""

check "ptq inspect: the data input's dtype, layout, channels and the preprocessing without --preset" bash -c "
  '$PTQ' inspect '$TMP/r18_uint8-nhwc.onnx' > '$TMP/i1' && '$PTQ' inspect '$TMP/r18_gray.onnx' > '$TMP/i2' &&
  '$PTQ' inspect '$TMP/yolo_meta.onnx' > '$TMP/i3' &&
  grep -qx 'data input images: uint8, NHWC, 3 channels (pixels 0..255: the graph normalises)' '$TMP/i1' &&
  grep -qx 'without --preset: stretch to 160x160 (linear), RGB, x, no mean/std, NHWC' '$TMP/i1' &&
  grep -qx 'data input images: float32, NCHW, 1 channel' '$TMP/i2' &&
  grep -qx 'without --preset: stretch to 160x160 (linear), GRAY_PIL, x/255, no mean/std, NCHW' '$TMP/i2' &&
  grep -qx 'without --preset: preset yolo-letterbox-640 (the model.s metadata): letterbox to 320x320 (linear), RGB, x/255, no mean/std, NCHW' '$TMP/i3' &&
  grep -q '^presets whose geometry is scaled to its size: .*yolo-letterbox-640' '$TMP/i3' || { cat '$TMP/i1' '$TMP/i2' '$TMP/i3'; false; }"

check "refused: int64 pixels, named with what to do" refused \
  "input 'x' is int64 [1, 3, 32, 32]: ptq feeds images as float32 or uint8 pixels" \
  "$PTQ" quantize "$TMP/bad_int64.onnx" --images "$PHOTOS" --limit 2 -o "$TMP/no.onnx"
check "refused: 4 channels, naming the choices" refused \
  "input 'x' is float32 [1, 4, 32, 32]: 4 channels; ptq feeds 3 (--channel-order RGB or BGR) or 1 (GRAY, GRAY_PIL, GRAY_CV)" \
  "$PTQ" quantize "$TMP/bad_rgba.onnx" --images "$PHOTOS" --preset imagenet-torchvision --limit 2 -o "$TMP/no.onnx"
check "refused: rank 3 without a channel dim" refused \
  "input 'x' is float32 [?, ?, ?]: ptq cannot tell which dim holds the channels; give --layout NCHW or NHWC" \
  "$PTQ" quantize "$TMP/bad_rank3.onnx" --images "$PHOTOS" --limit 2 -o "$TMP/no.onnx"
check "refused: --mean for a uint8 input" refused \
  "input 'images' is uint8 [1, 160, 160, 3]: it takes pixels as they are, so --scale/--mean/--std cannot apply" \
  "$PTQ" quantize "$TMP/r18_uint8-nhwc.onnx" --images "$PHOTOS" --preset imagenet-torchvision --mean 0.5 --limit 2 -o "$TMP/no.onnx"
check "refused: float values that are not whole pixels fed to a uint8 input (never rounded)" refused \
  "input 'images' is uint8 but element 0 of the float32 tensor fed to it is 0.5, not a whole number in 0..255" \
  bash -c "$PY -c 'import numpy as np; np.save(\"$TMP/half.npy\", np.full((1, 160, 160, 3), 0.5, np.float32))' &&
    '$PTQ' run '$TMP/r18_uint8-nhwc.onnx' --input '$TMP/half.npy'"
check "a uint8 input takes float32 whole pixels through ptq run --input, as ONNX Runtime its uint8 array" bash -c "
  $PY -c 'import numpy as np; x = np.load(\"$TMP/u8.npy\")[:1]; np.save(\"$TMP/px.npy\", x); np.save(\"$TMP/px_u8.npy\", x.astype(np.uint8))' &&
  '$PTQ' run '$TMP/r18_uint8-nhwc.onnx' --input '$TMP/px.npy' --output-dir '$TMP/run_ptq' >/dev/null 2>&1 &&
  node '$ROOT/tests/oracle/ort.js' '$TMP/r18_uint8-nhwc.onnx' --input images='$TMP/px_u8.npy' --out-dir '$TMP/run_ort' >/dev/null &&
  $PY -c 'import numpy as np, sys; a = np.load(\"$TMP/run_ptq/logits.npy\"); b = np.load(\"$TMP/run_ort/logits.npy\"); d = float(np.abs(a - b).max()); print(\"max |ptq - ort|\", d); sys.exit(d > 1e-3 * (1 + float(np.abs(b).max())))'"
finish
