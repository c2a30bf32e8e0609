#!/usr/bin/env python3
"""check_points.py: judges the points of one fork-server sweep (tests/fault/failalloc.c, PTQ_FAIL_ALLOC=fork).

  check_points.py LOG GOLD_DIR GOLD_STDOUT --outputs "q.onnx q.cache" [--stdout] [--named] [--deferred FILE]

LOG: the sweep's points.log; GOLD_DIR: the folder the parent (the run without a failure) wrote its
outputs into (each pre-created as "old NAME\\n"); GOLD_STDOUT: its stdout. A point is good when it
  - exits 1 with exactly one stderr line saying "out of memory", that line the last one (with
    --named, naming what was being allocated: more than a bare "out of memory [at file.c:N]"), no
    heap damage, every output either its old content or the parent's complete file, no other file;
  - or exits 0 with every output byte-identical to the parent's (with --stdout, stdout too) and no
    other file.
Anything else (a signal, another status, heap damage) is a failure. Prints up to 20 failures, then
one summary line; the points met while another thread was alive go to --deferred (one a line) for
runs of their own. Exit status 1 when a point failed."""
import argparse, os, re, sys

def fnv(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h

def fnv_file(path):
    with open(path, "rb") as f:
        data = f.read()
    return len(data), "%016x" % fnv(data)

ap = argparse.ArgumentParser()
ap.add_argument("log")
ap.add_argument("gold_dir")
ap.add_argument("gold_stdout")
ap.add_argument("--outputs", default="")
ap.add_argument("--stdout", action="store_true")
ap.add_argument("--named", action="store_true")
ap.add_argument("--deferred")
ap.add_argument("--label", default="sweep")
a = ap.parse_args()

outs = a.outputs.split()
gold = {f: fnv_file(os.path.join(a.gold_dir, f)) for f in outs}
old = {f: (len(("old %s\n" % f).encode()), "%016x" % fnv(("old %s\n" % f).encode())) for f in outs}
gold_stdout = fnv_file(a.gold_stdout)
bare = re.compile(r"out of memory( at [\w/.]+:\d+)?$")

points = deferred = refused = exit0 = 0
bad = []
deferred_list = []
with open(a.log, errors="replace") as f:
    for line in f:
        parts = line.rstrip("\n").split("\t")
        if parts[0] == "T":
            deferred += 1
            deferred_list.append(parts[1])
            continue
        if parts[0] != "P" or len(parts) < 7:
            bad.append("malformed log line: " + line[:200])
            continue
        points += 1
        k, status, n_oom, heap, last = parts[1], int(parts[2]), int(parts[3]), int(parts[4]), parts[5]
        files = {}
        for item in filter(None, parts[6].split(",")):
            name, size, h = item.rsplit(":", 2)
            files[name] = (int(size), h)
        extra = sorted(set(files) - set(outs) - {".stdout"})
        why = None
        if status == 0:
            for o in outs:
                if files.get(o) != gold[o]:
                    why = "exit 0 with a different %s" % o
                    break
            if not why and a.stdout and files.get(".stdout") != gold_stdout:
                why = "exit 0 with another stdout"
            exit0 += 1
        elif status == 1:
            if heap:
                why = "heap damage: " + last
            elif n_oom != 1 or "out of memory" not in last:
                why = "not one last line reporting out of memory (%d such lines): %s" % (n_oom, last)
            elif a.named and bare.search(last):
                why = "out of memory without naming what was allocated: " + last
            else:
                for o in outs:
                    if files.get(o) not in (old[o], gold[o]):
                        why = "%s is neither the old file nor the complete new one" % o
                        break
            refused += 1
        elif status == -14:
            why = "still running after the time limit (SIGALRM): " + last
        elif status < 0:
            why = "killed by signal %d: %s" % (-status, last)
        else:
            why = "exit status %d: %s" % (status, last)
        if not why and extra:
            why = "left files: " + " ".join(extra)
        if why:
            bad.append("allocation %s: %s" % (k, why))

for b in bad[:20]:
    print("     %s: %s" % (a.label, b))
if a.deferred:
    with open(a.deferred, "w") as f:
        f.write("".join(p + "\n" for p in deferred_list))
print("     %s: %d points forked (%d refused as out of memory, %d exit 0), %d deferred to runs of their own, %d misbehaved"
      % (a.label, points, refused, exit0, deferred, len(bad)))
sys.exit(1 if bad or points == 0 else 0)
