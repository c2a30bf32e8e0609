#!/usr/bin/env bash
# The docs cannot rot: every `ptq ...` command line in a fenced ```sh, ```bash or ```console block
# of README.md and docs/*.md runs here, one check per command, so a renamed option, a changed
# default that a command relies on or a file name that no longer appears fails `make test`.
#
# Rules for writers of the docs:
#  - Commands run in a work folder holding the docs' example names (below); write examples with
#    these names. Each page starts from a fresh copy of the folder and runs its commands in page
#    order, so a page may use files an earlier command of the same page wrote.
#      photos/     4 photos (calibration images)       val/   3 photos in 2 class folders (a/, b/)
#      crops/      3 images read as text-line crops    val-crops/  2 more (held out)
#      labels.csv  'image,class' lines for val/
#      model.onnx  a classifier: images [N,3,224,224] -> logits [N,10], nodes conv1, relu1, conv2,
#                  relu2, gap, flatten, fc (always this stand-in)
#      cls.onnx    a classifier of the same signature
#      yolo.onnx   a YOLO-style detector: images [1,3,640,640] -> output0 [1,84,6400]
#      seg.onnx    a segmenter: images [N,3,256,256] -> out [N,21,256,256]
#      det.onnx, rec.onnx, textcls.onnx   PaddleOCR's PP-OCRv4 det, rec and the mobile v2.0 cls
#    cls.onnx and seg.onnx are the zoo's mobilenet_v3_small and lraspp_mobilenet_v3_large
#    (scripts/zoo.py, build/zoo/) when those exist with that signature, else stand-ins made here
#    with onnx.helper (no torch needed); yolo.onnx is always a stand-in.
#  - In ```sh/```bash blocks every line starting with `ptq ` (or `VAR=value ptq `) is a command; in
#    ```console blocks, lines starting with `$ ptq `. A trailing `\` continues the line.
#    `mkdir -p DIR` and `cmp A B` lines run too. Lines starting with `trtexec` are listed as
#    skipped (TensorRT is not here); other lines (make, pip, cc, python) are not run. Synopses
#    with placeholders belong in ```text blocks; there, every `--option` of a line starting with
#    `ptq CMD` (and its indented continuation lines) must be one the command accepts.
#  - A ```yaml block whose first line is `# NAME.yaml...` is written to the work folder as NAME.yaml
#    when the page reaches it, so the docs' config and preset examples are tested too.
#  - After a command, the files it names with -o (quantize, convert, stats merge), --html, --report,
#    --exclusions and --stats must exist.
#  - DOCS_PAGES="docs/a.md docs/b.md" runs those pages only.
#  - Each command gets DOCS_TIMEOUT seconds (default 600: the limit catches a hang, not a slow or
#    loaded machine; hitting it says "timed out after 600 s: a hang, not slowness"). A command whose comment says it takes
#    minutes (`ptq quantize ... # minutes ...`) is checked, unless DOCS_SLOW=1, by its options alone:
#    each `--option` it uses must be one `ptq CMD --list-options` names.
. "$(dirname "$0")/lib.sh"
T0=$(date +%s)
BASE=$TMP/base
rm -rf "$TMP"/base "$TMP"/page-* "$TMP/bin"
mkdir -p "$BASE/photos" "$BASE/val/a" "$BASE/val/b" "$BASE/crops" "$TMP/bin"
ln -sf "$PTQ" "$TMP/bin/ptq"
P=$ROOT/build/photos
for f in chelsea.png text.png page.png rocket.jpg; do ln -s "$P/$f" "$BASE/photos/$f"; done
ln -s "$P/coffee.png" "$BASE/val/a/coffee.png"; ln -s "$P/bw_text.png" "$BASE/val/a/bw_text.png"
ln -s "$P/coins.png" "$BASE/val/b/coins.png"
for f in page.png text.png bw_text.png; do ln -s "$P/$f" "$BASE/crops/$f"; done
mkdir -p "$BASE/val-crops"; for f in clock_motion.png coins.png; do ln -s "$P/$f" "$BASE/val-crops/$f"; done
printf 'coffee.png,0\nbw_text.png,0\ncoins.png,1\n' > "$BASE/labels.csv"
ln -s "$MODELS/ch_PP-OCRv4_det_infer.onnx" "$BASE/det.onnx"
ln -s "$MODELS/ch_PP-OCRv4_rec_infer.onnx" "$BASE/rec.onnx"
ln -s "$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx" "$BASE/textcls.onnx"

# the example models: the zoo's exports where they fit the signature, stand-ins otherwise
"$PY" - "$BASE" "$ROOT/build/zoo" <<'EOF' || { echo "FAIL cannot make the example models"; exit 1; }
import os, sys
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
out, zoo = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)

def W(name, shape, s=0.3):
    return nh.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)

def zoo_model(name, side, output):
    p = os.path.join(zoo, name + ".op13.onnx")
    if not os.path.exists(p):
        return None
    try:
        m = onnx.load(p, load_external_data=False)
        d = [x.dim_value for x in m.graph.input[0].type.tensor_type.shape.dim]
        if d[1:] == [3, side, side] and m.graph.output[0].name == output:
            return p
    except Exception:
        pass
    return None

def save(name, nodes, inits, ins, outs, zoo_name=None, side=None, also=None):
    dst = os.path.join(out, name + ".onnx")
    m = h.make_model(h.make_graph(nodes, name, ins, outs, inits),
                     opset_imports=[h.make_opsetid("", 13)], producer_name="tests/e2e/docs.sh")
    m.ir_version = 7
    onnx.checker.check_model(m)
    if also:  # always the stand-in: examples that name its nodes use it
        onnx.save(m, os.path.join(out, also + ".onnx"))
    z = zoo_name and zoo_model(zoo_name, side, outs[0].name)
    if z:
        os.symlink(z, dst)
        print(f"{name}.onnx: {z}")
        return
    onnx.save(m, dst)
    print(f"{name}.onnx: stand-in")

save("cls", [
    h.make_node("Conv", ["images", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], strides=[4, 4], pads=[1, 1, 1, 1]),
    h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    h.make_node("Relu", ["c2"], ["r2"], name="relu2"),
    h.make_node("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
    h.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
    h.make_node("Gemm", ["flat", "w3", "b3"], ["logits"], name="fc", transB=1)],
    [W("w1", [8, 3, 3, 3]), W("b1", [8], 0.1), W("w2", [16, 8, 3, 3]), W("b2", [16], 0.1),
     W("w3", [10, 16]), W("b3", [10], 0.1)],
    [h.make_tensor_value_info("images", T.FLOAT, ["N", 3, 224, 224])],
    [h.make_tensor_value_info("logits", T.FLOAT, ["N", 10])], "mobilenet_v3_small", 224, also="model")
save("yolo", [
    h.make_node("Conv", ["images", "w1", "b1"], ["c1"], name="stem", kernel_shape=[3, 3], strides=[4, 4], pads=[1, 1, 1, 1]),
    h.make_node("Sigmoid", ["c1"], ["s1"], name="sig1"),
    h.make_node("Mul", ["c1", "s1"], ["a1"], name="silu1"),
    h.make_node("Conv", ["a1", "w2", "b2"], ["c2"], name="head", kernel_shape=[2, 2], strides=[2, 2]),
    h.make_node("Reshape", ["c2", "shape"], ["output0"], name="reshape")],
    [W("w1", [8, 3, 3, 3]), W("b1", [8], 0.1), W("w2", [84, 8, 2, 2]), W("b2", [84], 0.1),
     nh.from_array(np.array([1, 84, 6400], np.int64), "shape")],
    [h.make_tensor_value_info("images", T.FLOAT, [1, 3, 640, 640])],
    [h.make_tensor_value_info("output0", T.FLOAT, [1, 84, 6400])])
save("seg", [
    h.make_node("Conv", ["images", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    h.make_node("Conv", ["r1", "w2", "b2"], ["out"], name="classifier", kernel_shape=[1, 1])],
    [W("w1", [4, 3, 3, 3]), W("b1", [4], 0.1), W("w2", [21, 4, 1, 1]), W("b2", [21], 0.1)],
    [h.make_tensor_value_info("images", T.FLOAT, ["N", 3, 256, 256])],
    [h.make_tensor_value_info("out", T.FLOAT, ["N", 21, 256, 256])], "lraspp_mobilenet_v3_large", 256)
EOF

# extract: one record per action, fields separated by \x1f, records by \0:
#   cmd <line> <command>      yaml <line> <file name> <content>      skip <line> <command>
extract() {
  "$PY" - "$1" <<'EOF'
import re, shlex, sys
path = sys.argv[1]

def writes(text):
    """The files a command says it writes (-o of quantize/convert/stats merge, --html, --report,
    --exclusions, --stats): checked to exist after it ran."""
    try:
        w = shlex.split(text, comments=True)
    except ValueError:
        return ""
    while w and "=" in w[0] and not w[0].startswith("-"):
        w = w[1:]
    out = []
    for i, t in enumerate(w[:-1]):
        if t in ("-o", "--output") and (w[1] in ("quantize", "convert") or w[1:3] == ["stats", "merge"]):
            out.append(w[i + 1])
        elif t in ("--html", "--report", "--exclusions", "--stats") and not w[i + 1].startswith("-"):
            out.append(w[i + 1])
    return " ".join(out)
lines = open(path, encoding="utf-8").read().split("\n")
out = sys.stdout
def emit(*f):
    out.write("\x1f".join(f) + "\0")
lang, block, start = None, [], 0
for i, line in enumerate(lines, 1):
    m = re.match(r"^\s*```\s*([A-Za-z]*)", line)
    if m and lang is None:
        lang, block, start = (m.group(1) or "text").lower(), [], i
        continue
    if m and lang is not None:
        if lang == "yaml" and block:
            n = re.match(r"^#\s*([A-Za-z0-9._-]+\.ya?ml)\b", block[0][1])
            if n:
                emit("yaml", str(block[0][0]), n.group(1), "\n".join(t for _, t in block) + "\n")
        elif lang == "text":  # synopses: their options must exist
            j = 0
            while j < len(block):
                no, text = block[j]
                j += 1
                if not text.startswith("ptq "):
                    continue
                while j < len(block) and block[j][1][:1].isspace() and block[j][1].strip():
                    text += " " + block[j][1].strip()
                    j += 1
                emit("opts", str(no), text)
        elif lang in ("sh", "bash", "console"):
            j = 0
            while j < len(block):
                no, text = block[j]
                if lang == "console":
                    if not text.startswith("$ "):
                        j += 1
                        continue
                    text = text[2:]
                text = text.strip()
                while text.endswith("\\") and j + 1 < len(block):
                    j += 1
                    text = text[:-1].rstrip() + " " + block[j][1].strip()
                j += 1
                if re.match(r"^([A-Z_][A-Z0-9_]*=\S*\s+)*ptq\s", text) or re.match(r"^(mkdir -p [\w./ -]+|cmp \S+ \S+)$", text):
                    emit("cmd", str(no), text, writes(text))
                elif text.startswith("trtexec"):
                    emit("skip", str(no), text)
        lang = None
        continue
    if lang is not None:
        block.append((i, line))
EOF
}

options_exist() { # a command line or synopsis: every --option it names is one its command accepts
  local line=${1%% #*} sub opts o n=0
  sub=$(echo "$line" | awk '{print $2}')
  # --list-options, and --help for options parsed before the others (--config is not listed)
  opts=$("$PTQ" "$sub" --list-options; "$PTQ" "$sub" --help | grep -oE -- '--[a-z][a-z0-9-]*') || return 1
  for o in $(echo "$line" | grep -oE -- '(^|[^a-z0-9-])--[a-z][a-z0-9-]*' | grep -oE -- '--[a-z0-9-]+'); do
    echo "$opts" | grep -qx -- "$o" || { echo "ptq $sub has no option $o"; return 1; }
    n=$((n + 1))
  done
  echo "$n options known"
}

# every relative link of the docs names a file that exists, and an #anchor a heading of it
check "links between the docs and their #anchors" "$PY" - "$ROOT" <<'PYEOF'
import os, re, sys
root = sys.argv[1]
pages = [os.path.join(root, "README.md")] + sorted(
    os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
def slugs(path):
    out, fence = set(), False
    for line in open(path, encoding="utf-8"):
        if line.lstrip().startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if m:  # GitHub's anchors: lower case, punctuation dropped, spaces to '-'
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-"))
    return out
bad, n = [], 0
for page in pages:
    text = re.sub(r"```.*?```", "", open(page, encoding="utf-8").read(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        n += 1
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(dest):
            bad.append(f"{os.path.relpath(page, root)}: {target}: no such file")
        elif anchor and dest.endswith(".md") and anchor not in slugs(dest):
            bad.append(f"{os.path.relpath(page, root)}: {target}: no such heading")
print("\n".join(bad) if bad else f"{n} links")
sys.exit(1 if bad else 0)
PYEOF

N=0
: > "$TMP/times"
PAGES=("$ROOT/README.md" "$ROOT"/docs/*.md)
[ -n "${DOCS_PAGES:-}" ] && read -r -a PAGES <<< "$DOCS_PAGES"   # e.g. DOCS_PAGES=docs/api.md while writing one
for page in "${PAGES[@]}"; do
  [[ $page == /* ]] || page=$ROOT/$page
  rel=${page#$ROOT/}
  work=$TMP/page-$(basename "$page" .md)
  cp -a "$BASE" "$work"
  while IFS=$'\x1f' read -r -d '' kind line a b; do
    case $kind in
      yaml) printf '%s' "$b" > "$work/$a"; echo "     ($rel:$line: wrote $a)";;
      skip) skip "$rel:$line: $a" "TensorRT is not here";;
      opts) check "$rel:$line: (synopsis) ${a:0:60}..." options_exist "$a";;
      cmd)
        N=$((N + 1))
        if [ "${DOCS_SLOW:-0}" != 1 ] && [[ "$a" =~ \#.*minutes ]]; then
          check "$rel:$line: (options only) $a" options_exist "$a"; continue
        fi
        t=$(date +%s%N)
        check "$rel:$line: $a" hang_limit "${DOCS_TIMEOUT:-600}" env PATH="$TMP/bin:$PATH" \
          bash -c "cd '$work' && $a && for f in $b; do test -s \"\$f\" || { echo \"wrote no \$f\"; exit 1; }; done"
        echo "$(( ($(date +%s%N) - t) / 1000000 )) ms  $rel:$line" >> "$TMP/times" ;;
    esac
  done < <(extract "$page")
done
echo "     $N commands from the docs in $(( $(date +%s) - T0 )) s; the slowest:"
sort -rn "$TMP/times" | head -n 5 | sed 's/^/       /'
[ "$N" -gt 0 ] || { FAILED=$((FAILED + 1)); echo "FAIL no ptq command found in the docs"; }
finish
