#!/usr/bin/env bash
# The HTML report of `ptq compare` (io/report.c) in a real browser: the unit test program writes a
# realistic sample (120 layers, 3 histograms, an exclusion, a name full of & < > " ') into $TMP;
# headless Chromium (Debian's `chromium`, installed by scripts/deps.sh) loads it from file:// with
# the network cut off, must log no console message, and its DOM must hold the charts with
# non-empty polylines, bars and threshold lines inside their viewBox; the escaped name must come
# back as text. The screenshot stays in $TMP/sample.png. Without Chromium the browser checks are
# counted as skipped, with the reason.
. "$(dirname "$0")/lib.sh"
SKIPPED=0
skip() { SKIPPED=$((SKIPPED + 1)); echo "skip $1: $2"; }
finish_skips() {
  echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
  [ "$FAILED" = 0 ]
  exit $?
}
UNIT=$ROOT/$BUILD/tests/test_report
HTML=$TMP/sample.html
rm -f "$HTML" "$TMP/sample.json" "$TMP/sample.png" "$TMP/dom.html"

check "the unit test program writes the sample report (JSON and HTML)" bash -c "
  cd '$ROOT' && PTQ_REPORT_SAMPLE_DIR='$TMP' '$UNIT' | tail -n 1 && test -s '$HTML' && test -s '$TMP/sample.json' &&
  $PY -c \"import json; d = json.load(open('$TMP/sample.json')); assert d['format'] == 'ptq-compare' and len(d['layers']) == 120, d.keys()\""
check "the page is self-contained: no URL, script, stylesheet link, image or import" bash -c "
  ! grep -Eio 'https?:|//[a-z0-9.-]+\.[a-z]{2,}/|<script|<link|<img|<iframe|src=|@import|url\(' '$HTML'"

BROWSER=$(command -v chromium || command -v chromium-browser || true)
chrome() { # runs the browser on the sample page with the network cut off
  hang_limit 600 "$BROWSER" --headless --disable-gpu --no-sandbox --no-first-run --no-default-browser-check \
    --hide-scrollbars --user-data-dir="$TMP/profile" --host-resolver-rules="MAP * ~NOTFOUND" \
    --disable-background-networking "$@" "file://$HTML"
}
if [ -z "$BROWSER" ]; then
  why="chromium is not installed (scripts/deps.sh installs Debian's chromium)"
  skip "Chromium loads the page with no console message" "$why"
  skip "the DOM Chromium built holds the charts" "$why"
  skip "screenshot" "$why"
  finish_skips
fi

load_page() {
  chrome --enable-logging=stderr --v=0 --dump-dom >"$TMP/dom.html" 2>"$TMP/chromium.log" || { tail -n 5 "$TMP/chromium.log"; return 1; }
  if grep -E ':CONSOLE|Uncaught|Refused to|Failed to load' "$TMP/chromium.log"; then return 1; fi
  test -s "$TMP/dom.html" && echo "DOM $(wc -c < "$TMP/dom.html") bytes"
}
check "Chromium loads the page with no console message ($("$BROWSER" --version 2>/dev/null | head -n 1))" load_page

check "the DOM Chromium built holds the charts: polylines, points, bars and threshold lines inside each viewBox" $PY - "$TMP/dom.html" <<'PYEOF'
import sys
from html.parser import HTMLParser

class Dom(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.svgs, self.cur, self.stack, self.text, self.tags = [], None, [], [], set()
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        if tag == "svg":
            vb = [float(v) for v in a.get("viewbox", "0 0 0 0").split()]
            self.cur = {"class": a.get("class", ""), "w": vb[2], "h": vb[3], "els": []}
            self.svgs.append(self.cur)
        elif self.cur is not None:
            self.cur["els"].append((tag, a))
    def handle_endtag(self, tag):
        if tag == "svg":
            self.cur = None
    def handle_data(self, data):
        self.text.append(data)

dom = Dom()
dom.feed(open(sys.argv[1], encoding="utf-8").read())
text = "".join(dom.text)

def inside(svg, x, y):
    return -0.5 <= x <= svg["w"] + 0.5 and -0.5 <= y <= svg["h"] + 0.5

layer = [s for s in dom.svgs if s["class"] == "chart layer-sqnr"]
hists = [s for s in dom.svgs if s["class"] == "chart hist"]
assert len(layer) == 1 and len(hists) == 3, (len(layer), len(hists), [s["class"] for s in dom.svgs])
s = layer[0]
lines = [a for t, a in s["els"] if t == "polyline"]
assert {a["class"] for a in lines} == {"acc", "iso"}, lines
npts = 0
for a in lines:
    pts = [tuple(map(float, p.split(","))) for p in a["points"].split()]
    assert len(pts) >= 2 and all(inside(s, x, y) for x, y in pts), a["class"]
    npts += len(pts)
circles = [a for t, a in s["els"] if t == "circle"]
assert npts == 239 and len(circles) == 239, (npts, len(circles))  # 120 x 2, one NaN
assert all(inside(s, float(a["cx"]), float(a["cy"])) for a in circles)
n_bars = 0
for h in hists:
    bars = [a for t, a in h["els"] if t == "rect" and a.get("class") == "bar"]
    ths = [a for t, a in h["els"] if t == "line" and a.get("class") == "threshold"]
    assert len(bars) > 50 and len(ths) == 4, (len(bars), len(ths))
    for a in bars:
        x, y, w, ht = (float(a[k]) for k in ("x", "y", "width", "height"))
        assert w > 0 and ht > 0 and inside(h, x, y) and inside(h, x + w, y + ht), a
    assert all(inside(h, float(a["x1"]), float(a["y2"])) for a in ths)
    n_bars += len(bars)
# the name with & < > " ' came back as text, not as markup
assert 'head/a&b<c>"d\'/e' in text, "escaped name not found as text"
assert "c" not in dom.tags, "a name was parsed as a tag"
assert "entropy \u2605" in text and "Layers to keep in float" in text
print(f"{npts} points, {n_bars} bars, 12 threshold lines")
PYEOF

screenshot() {
  chrome --window-size=1280,2600 --screenshot="$TMP/sample.png" >/dev/null 2>&1 || return 1
  [ "$(head -c 8 "$TMP/sample.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || { echo "not a PNG"; return 1; }
  local size=$(wc -c < "$TMP/sample.png")
  [ "$size" -gt 40000 ] || { echo "$size bytes: blank?"; return 1; }
  echo "$size bytes"
}
check "screenshot (kept as $BUILD/tmp/report_html/sample.png)" screenshot
rm -rf "$TMP/profile"
finish_skips
