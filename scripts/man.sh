#!/usr/bin/env bash
# man.sh PTQ > ptq.1: the man page, generated from the binary's own --help texts (ptq --help and
# every `ptq COMMAND --help`), so that the page and --help cannot disagree.
set -euo pipefail
ptq=$1
esc() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; } # roff: backslashes, leading . and '
version=$("$ptq" --version | sed -E 's/ \(.*//')
cat <<HEAD
.TH PTQ 1 "" "$version" "User Commands"
.SH NAME
ptq \\- calibration and post-training quantization of ONNX image models for TensorRT
.SH SYNOPSIS
.B ptq
.I command
[options]
.br
.B ptq --version
.SH DESCRIPTION
ptq reads an FP32 ONNX model and a folder of images, preprocesses them as the named
preset does, runs them through its own FP32 executor, calibrates every tensor TensorRT
quantizes (max, percentile, entropy, mse) and writes a QDQ ONNX model placed by TensorRT's
explicit-quantization rules, with a TensorRT calibration cache.
.SH COMMANDS
.nf
HEAD
"$ptq" --help | sed 1,2d | esc
echo ".fi"
for cmd in $("$ptq" --help | awk '/^  [a-z]/ {print $1}'); do
  echo ".SS ptq $cmd"
  echo ".nf"
  "$ptq" "$cmd" --help | esc
  echo ".fi"
done
cat <<'TAIL'
.SH FILES
.TP
.I PREFIX/share/ptq/configs/*.yaml
the preprocessing presets (also $PTQ_CONFIGS, ../configs beside the binary, ./configs)
.SH EXIT STATUS
0 on success, 1 on an error (one line on stderr naming the file and the reason), 2 on a usage error.
.SH SEE ALSO
.BR trtexec (1);
the README and docs/ of the ptq sources.
TAIL
