"""test_ptq.py: the Python package against the `ptq` command, byte for byte.

Each test runs the same job through ptq (the package) and through the CLI on the PaddleOCR cls
model and a few photos, and compares the files written, the numbers returned and the arrays.
Run by tests/e2e/python.sh (which builds libptq and installs the package first); by hand:

    PTQ_LIBRARY=build/libptq.so.0 PYTHONPATH=python python3 -m pytest -q python/tests

Environment: PTQ_BIN (the CLI, default build/ptq), PTQ_TEST_MODEL, PTQ_TEST_PHOTOS, PTQ_TEST_LIMIT (4).
"""
import json
import os
import re
import subprocess

import numpy as np
import pytest

import ptq

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.environ.get("PTQ_BIN", os.path.join(ROOT, "build", "ptq"))
MODEL = os.path.abspath(os.environ.get("PTQ_TEST_MODEL",
                                       os.path.join(ROOT, "build", "models", "ch_ppocr_mobile_v2.0_cls_infer.onnx")))
PHOTOS = os.path.abspath(os.environ.get("PTQ_TEST_PHOTOS", os.path.join(ROOT, "build", "photos")))
LIMIT = int(os.environ.get("PTQ_TEST_LIMIT", "4"))
PRESET = "paddleocr-cls"

pytestmark = pytest.mark.skipif(not (os.path.exists(MODEL) and os.path.isdir(PHOTOS) and os.access(BIN, os.X_OK)),
                                reason="needs build/ptq, the cls model and build/photos (make deps ptq)")


def cli(*args, check=True):
    """Runs the ptq command; returns (exit status, stdout, stderr)."""
    p = subprocess.run([BIN] + [str(a) for a in args], capture_output=True, text=True)
    if check and p.returncode:
        raise AssertionError("ptq %s: exit %d\n%s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p.returncode, p.stdout, p.stderr


def same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        da, db = fa.read(), fb.read()
    assert da == db, "%s (%d bytes) differs from %s (%d bytes)" % (a, len(da), b, len(db))


def bitwise_equal(a, b):
    assert a.dtype == b.dtype == np.float32 and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    d = tmp_path_factory.mktemp("ptq")
    (d / "py").mkdir()
    (d / "cli").mkdir()
    return d


@pytest.fixture(scope="module")
def quantized(tmp):
    """One quantize through each side: (the dict, the CLI's stderr)."""
    r = ptq.quantize(MODEL, PHOTOS, preset=PRESET, output=tmp / "py" / "q.onnx", cache=tmp / "py" / "q.cache",
                     json=tmp / "py" / "q.json", limit=LIMIT, method="entropy")
    _, _, err = cli("quantize", MODEL, "--images", PHOTOS, "--preset", PRESET, "--limit", LIMIT, "--method", "entropy",
                    "-o", tmp / "cli" / "q.onnx", "--cache", tmp / "cli" / "q.cache", "--json", tmp / "cli" / "q.json")
    return r, err


@pytest.fixture(scope="module")
def calibrated(tmp):
    """One calibrate of two methods with statistics through each side."""
    seen = {"progress": [], "messages": []}
    r = ptq.calibrate(MODEL, PHOTOS, PRESET, methods=["max", "entropy"], cache=tmp / "py" / "c.cache",
                      json=tmp / "py" / "c.json", stats=tmp / "py" / "c.ptqstats", limit=LIMIT,
                      progress=lambda *a: seen["progress"].append(a),
                      log=lambda level, text: seen["messages"].append((level, text)))
    _, _, err = cli("calibrate", MODEL, "--images", PHOTOS, "--preset", PRESET, "--limit", LIMIT,
                    "--method", "max,entropy", "--cache", tmp / "cli" / "c.cache", "--json", tmp / "cli" / "c.json",
                    "--stats", tmp / "cli" / "c.ptqstats")
    return r, err, seen


# ---- quantize ----

def test_quantize_files_equal_cli(quantized, tmp):
    for f in ("q.onnx", "q.cache", "q.json"):
        same_file(tmp / "py" / f, tmp / "cli" / f)


def test_quantize_counts_equal_cli(quantized):
    r, err = quantized
    m = re.search(r"(\d+) images used, (\d+) skipped;(?: fed as [^;]*;)? method (\S+); (\d+) activation tensors and (\d+) weights "
                  r"quantized in (\d+) nodes; (\d+) nodes excluded;.* (\d+) warnings;", err)
    assert m, err
    want = dict(zip(("images", "skipped", "method", "activations", "weights", "quantized_nodes", "excluded_nodes",
                     "warnings"), m.groups()))
    got = {k: str(r[k]) for k in want}
    assert got == want
    assert r["auto_excluded"] == [] and r["reached_cosine"] is None


def test_quantize_ranges_are_the_json(quantized, calibrated, tmp):
    r, _ = quantized
    calib = calibrated[0]["ranges"]["entropy"]
    with open(tmp / "cli" / "q.json") as f:
        j = json.load(f)
    assert r["ranges"] == {k: float(np.float32(v["amax"])) for k, v in j["tensors"].items()}
    assert len(r["ranges"]) >= 60 and r["ranges"] == calib  # the same images: the same entropy ranges


def test_quantize_float16_equals_cli(calibrated, tmp):
    """float_dtype="fp16" is --float-dtype fp16 (Convs kept float so the float part is not empty);
    bad values are refused."""
    ptq.quantize(MODEL, from_stats=tmp / "py" / "c.ptqstats", method="mse", exclude_op_types="Conv",
                 float_dtype="fp16", output=tmp / "py" / "f16.onnx")
    cli("quantize", MODEL, "--from-stats", tmp / "cli" / "c.ptqstats", "--method", "mse", "--exclude-op-types", "Conv",
        "--float-dtype", "fp16", "-o", tmp / "cli" / "f16.onnx")
    same_file(tmp / "py" / "f16.onnx", tmp / "cli" / "f16.onnx")
    with pytest.raises(ptq.Error):
        ptq.quantize(MODEL, from_stats=tmp / "py" / "c.ptqstats", float_dtype="fp8", output=tmp / "py" / "x.onnx")
    with pytest.raises(ptq.Error):
        ptq.quantize(MODEL, from_stats=tmp / "py" / "c.ptqstats", float_part="half", output=tmp / "py" / "x.onnx")


def test_quantize_from_stats_equals_cli(calibrated, tmp):
    r = ptq.quantize(MODEL, from_stats=tmp / "py" / "c.ptqstats", method="percentile:99.99",
                     output=tmp / "py" / "fs.onnx", cache=tmp / "py" / "fs.cache", exclude_op_types="GlobalAveragePool",
                     trt_version=101401)
    cli("quantize", MODEL, "--from-stats", tmp / "cli" / "c.ptqstats", "--method", "percentile:99.99",
        "-o", tmp / "cli" / "fs.onnx", "--cache", tmp / "cli" / "fs.cache", "--exclude-op-types", "GlobalAveragePool",
        "--trt-version", 101401)
    same_file(tmp / "py" / "fs.onnx", tmp / "cli" / "fs.onnx")
    same_file(tmp / "py" / "fs.cache", tmp / "cli" / "fs.cache")
    assert r["method"] == "percentile-99.99" and r["images"] is None and r["excluded_nodes"] > 0
    with open(tmp / "py" / "fs.cache") as f:
        assert f.readline().startswith("TRT-101401-EntropyCalibration2")


def test_quantize_equalize_equals_cli(tmp):
    """equalize=True is --equalize: the same model; a cache (it would fit only the translated model) and
    statistics instead of images are refused."""
    ptq.quantize(MODEL, PHOTOS, preset=PRESET, limit=LIMIT, method="mse", equalize=True, output=tmp / "py" / "eq.onnx")
    _, _, err = cli("quantize", MODEL, "--images", PHOTOS, "--preset", PRESET, "--limit", LIMIT, "--method", "mse",
                    "--equalize", "-o", tmp / "cli" / "eq.onnx")
    same_file(tmp / "py" / "eq.onnx", tmp / "cli" / "eq.onnx")
    assert "equalized 3 depthwise inputs" in err
    with pytest.raises(ptq.Error, match="ptq translate"):
        ptq.quantize(MODEL, PHOTOS, preset=PRESET, limit=LIMIT, equalize=True, output=tmp / "py" / "x.onnx",
                     cache=tmp / "py" / "x.cache")
    assert not (tmp / "py" / "x.cache").exists()
    with pytest.raises(ptq.Error):
        ptq.quantize(MODEL, from_stats=tmp / "none.ptqstats", equalize=True, output=tmp / "py" / "y.onnx")


def test_quantize_seed_draws_the_refinement_as_cli(tmp):
    """seed=7 is --seed 7: the refinements' samples too (AdaRound's codes differ from seed 0's)."""
    for seed in (0, 7):
        ptq.quantize(MODEL, PHOTOS, preset=PRESET, limit=LIMIT, method="mse", adaround=20, refine_images=2, seed=seed,
                     output=tmp / "py" / f"s{seed}.onnx")
        cli("quantize", MODEL, "--images", PHOTOS, "--preset", PRESET, "--limit", LIMIT, "--method", "mse",
            "--adaround", 20, "--refine-images", 2, "--seed", seed, "-o", tmp / "cli" / f"s{seed}.onnx")
        same_file(tmp / "py" / f"s{seed}.onnx", tmp / "cli" / f"s{seed}.onnx")
    assert (tmp / "py" / "s0.onnx").read_bytes() != (tmp / "py" / "s7.onnx").read_bytes()


def test_quantize_auto_exclude_refined_equals_cli(tmp):
    """auto-exclusion, bias correction and exclusions from a @FILE: the files and what the CLI prints."""
    (tmp / "exclude.txt").write_text("# kept in float\np2o.Conv.0\n")
    r = ptq.quantize(MODEL, PHOTOS, preset=PRESET, limit=LIMIT, auto_exclude=True, eval_images=PHOTOS,
                     eval_limit=LIMIT, target_cosine=0.995, bias_correction=True, refine_images=LIMIT,
                     exclude_nodes="@%s" % (tmp / "exclude.txt"), output=tmp / "py" / "ae.onnx",
                     cache=tmp / "py" / "ae.cache")
    _, _, err = cli("quantize", MODEL, "--images", PHOTOS, "--preset", PRESET, "--limit", LIMIT, "--auto-exclude",
                    "--eval-images", PHOTOS, "--eval-limit", LIMIT, "--target-cosine", 0.995, "--bias-correction",
                    "--refine-images", LIMIT, "--exclude-nodes", "@%s" % (tmp / "exclude.txt"),
                    "-o", tmp / "cli" / "ae.onnx", "--cache", tmp / "cli" / "ae.cache")
    same_file(tmp / "py" / "ae.onnx", tmp / "cli" / "ae.onnx")
    same_file(tmp / "py" / "ae.cache", tmp / "cli" / "ae.cache")
    m = re.search(r"auto-exclude: (\d+) nodes? in float, cosine ([0-9.]+) on \d+ evaluation images:? ?(\S*)", err)
    assert m, err
    assert len(r["auto_excluded"]) == int(m.group(1)) and ",".join(r["auto_excluded"]) == m.group(3)
    assert "%.6f" % r["reached_cosine"] == m.group(2) and r["reached_cosine"] >= 0.995
    assert "p2o.Conv.0" not in r["auto_excluded"]
    assert "%d nodes excluded" % r["excluded_nodes"] in err


# ---- calibrate ----

def test_calibrate_files_equal_cli(calibrated, tmp):
    for f in ("c.max.cache", "c.entropy.cache", "c.max.json", "c.entropy.json", "c.ptqstats"):
        same_file(tmp / "py" / f, tmp / "cli" / f)


def test_calibrate_result(calibrated, tmp):
    r, err, seen = calibrated
    m = re.search(r"(\d+) images used, (\d+) skipped, \d+ batches of \d+, (\d+) tensors calibrated, 2 methods, (\d+) warning",
                  err)
    assert m, err
    assert (r["images"], r["skipped"], r["tensors"], r["warnings"]) == tuple(int(g) for g in m.groups())
    assert r["methods"] == ["max", "entropy"]
    assert r["cache"] == [str(tmp / "py" / "c.max.cache"), str(tmp / "py" / "c.entropy.cache")]
    for meth in ("max", "entropy"):
        with open(tmp / "cli" / ("c.%s.json" % meth)) as f:
            j = json.load(f)
        assert r["ranges"][meth] == {k: float(np.float32(v["amax"])) for k, v in j["tensors"].items()}
    label, done, total, seconds, last = seen["progress"][-1]
    assert (label, done, total) == ("calibration", LIMIT, LIMIT) and seconds >= 0 and last in (True, False)
    assert all(level in ("info", "warning") for level, _ in seen["messages"])


def test_calibrate_from_stats(calibrated, tmp):
    r, _, _ = calibrated
    s = ptq.calibrate(MODEL, from_stats=tmp / "cli" / "c.ptqstats", method="entropy",
                      cache=tmp / "py" / "fs.entropy.cache")
    same_file(tmp / "py" / "fs.entropy.cache", tmp / "cli" / "c.entropy.cache")
    assert s["ranges"]["entropy"] == r["ranges"]["entropy"] and s["images"] == r["images"]


# ---- compare ----

def test_compare_equals_cli_json(tmp):
    r = ptq.compare(MODEL, PHOTOS, PHOTOS, PRESET, methods="max,entropy", limit=LIMIT, eval_limit=LIMIT,
                    json=tmp / "py" / "cmp.json")
    cli("compare", MODEL, "--images", PHOTOS, "--eval-images", PHOTOS, "--preset", PRESET, "--methods", "max,entropy",
        "--limit", LIMIT, "--eval-limit", LIMIT, "--json", tmp / "cli" / "cmp.json")
    same_file(tmp / "py" / "cmp.json", tmp / "cli" / "cmp.json")
    with open(tmp / "cli" / "cmp.json") as f:
        j = json.load(f)
    assert (r["calib_images"], r["eval_images"], r["best"], r["criterion"]) == \
        (j["n_calib"], j["n_eval"], j["best_method"], j["criterion"])
    assert list(r["methods"]) == [m["method"] for m in j["methods"]]
    for m in j["methods"]:
        got = r["methods"][m["method"]]
        assert got == {k: m[k] for k in got}, m["method"]  # exact doubles; None where the JSON has null
    assert r["layers_method"] == j["layers_method"] and r["layers"] == j["layers"]


# ---- translate ----

def test_translate_equals_cli(quantized, tmp):
    r = ptq.translate(tmp / "cli" / "q.onnx", prefix=tmp / "py" / "t")
    _, _, err = cli("translate", tmp / "cli" / "q.onnx", "-o", tmp / "cli" / "t")
    for suffix in ("_noqdq.onnx", "_precision_config.json", "_precision_config_calib.cache",
                   "_precision_config_layer_arg.txt"):
        same_file(tmp / "py" / ("t" + suffix), tmp / "cli" / ("t" + suffix))
    assert r["model"] == str(tmp / "py" / "t_noqdq.onnx") and os.path.exists(r["layer_arg"])
    n = int(re.search(r"(\d+) INT8 tensors", err).group(1))
    assert len(r["int8_tensors"]) == n and r["fp16_nodes"] == []


def test_translate_default_prefix(quantized, tmp):
    import shutil
    shutil.copy(tmp / "cli" / "q.onnx", tmp / "py" / "d.onnx")
    r = ptq.translate(str(tmp / "py" / "d.onnx"), propagate_concat=True, propagate_pool=True)
    assert r["model"] == str(tmp / "py" / "d_noqdq.onnx") and os.path.exists(r["cache"])


# ---- Session ----

def test_session_equals_cli_run(tmp):
    x = next(iter(ptq.Dataset(PHOTOS, preset=PRESET, batch=3, limit=3)))
    np.save(tmp / "x.npy", x)
    for name, model in (("fp32", MODEL), ("qdq", None)):
        if model is None:  # the QDQ model too (written by the CLI in its own test, or here)
            model = str(tmp / "py" / "s.qdq.onnx")
            cli("quantize", MODEL, "--from-stats", _stats(tmp), "-o", model)
        cli("run", model, "--input", tmp / "x.npy", "--output", tmp / ("y_%s.npy" % name))
        want = np.load(tmp / ("y_%s.npy" % name))
        with ptq.Session(model, threads=1) as s:
            assert s.inputs == ["x"] and s.outputs == ["softmax_0.tmp_0"]
            y = s.run({"x": x})
            bitwise_equal(y["softmax_0.tmp_0"], want)
            first = y["softmax_0.tmp_0"].copy()
            ys = s.run([x[:1]])  # another shape, positional: a list back; the first result is untouched
            assert isinstance(ys, list) and ys[0].shape[0] == 1
            bitwise_equal(y["softmax_0.tmp_0"], first)
            bitwise_equal(s.run(x.astype(np.float64))[0], want)  # converted to float32


def _stats(tmp):
    p = tmp / "cli" / "c.ptqstats"
    if not p.exists():
        cli("calibrate", MODEL, "--images", PHOTOS, "--preset", PRESET, "--limit", LIMIT, "--stats", p,
            "--cache", tmp / "cli" / "stats-only.cache")
    return p


def test_session_shares_a_model():
    with ptq.Model(MODEL) as m:
        a, b = ptq.Session(m), ptq.Session(m, threads=2)
        x = np.zeros((1, 3, 48, 192), np.float32)
        bitwise_equal(a.run([x])[0], b.run([x])[0])
        a.close()
        assert m.inputs == ["x"]
    with pytest.raises(ptq.Error, match="closed"):
        a.run([x])
    with pytest.raises(ptq.Error, match="the model is closed"):  # b outlived its model's `with`
        b.run([x])
    b.close()


def test_session_bad_input():
    with ptq.Session(MODEL) as s:
        with pytest.raises(ptq.Error, match="input 'x' not given"):
            s.run({"y": np.zeros((1, 3, 48, 192), np.float32)})
        with pytest.raises(ptq.Error) as e:
            s.run({"x": np.zeros((1, 5, 48, 192), np.float32)})
        assert str(e.value) and e.value.code != 0


# ---- Dataset ----

def test_dataset_equals_preprocess_dump(tmp):
    n = LIMIT + 1
    cli("preprocess", "--images", PHOTOS, "--preset", PRESET, "--size", "160x32", "--mean", "0.5,0.4,0.3",
        "--limit", n, "--dump", tmp / "dump.npy")
    want = np.load(tmp / "dump.npy")
    ds = ptq.Dataset(PHOTOS, preset=PRESET, batch=2, limit=n, size=(160, 32), mean=(0.5, 0.4, 0.3))
    batches = list(ds)
    assert [b.shape for b in batches] == [(2, 3, 32, 160), (2, 3, 32, 160), (1, 3, 32, 160)][:len(batches)]
    bitwise_equal(np.concatenate(batches), want)
    assert ds.counts == (n, 0)
    bitwise_equal(np.concatenate(list(ds)), want)  # a second pass: the same
    it = iter(ds)
    next(it)  # a pass left unfinished: the next one starts from the first image
    bitwise_equal(np.concatenate(list(ds)), want)
    batches[0][:] = 0  # copies: writing one changes nothing else
    bitwise_equal(np.concatenate(list(ds)), want)
    ds.close()
    with pytest.raises(ptq.Error, match="closed"):
        list(ds)


def test_dataset_as_images(quantized, tmp):
    with ptq.Dataset(PHOTOS, preset=PRESET, limit=LIMIT) as ds:
        r = ptq.quantize(MODEL, ds, output=tmp / "py" / "qd.onnx", method="entropy")
    same_file(tmp / "py" / "qd.onnx", tmp / "cli" / "q.onnx")
    assert r["images"] == LIMIT


# ---- errors ----

def _cli_message(*args):
    rc, _, err = cli(*args, check=False)
    assert rc != 0
    line = err.strip().splitlines()[-1]
    assert line.startswith("ptq: "), err
    return line[len("ptq: "):]


def test_missing_model_message(tmp):
    missing = str(tmp / "no-such.onnx")
    want = _cli_message("quantize", missing, "--images", PHOTOS, "--preset", PRESET, "-o", tmp / "py" / "bad.onnx")
    with pytest.raises(ptq.Error) as e:
        ptq.quantize(missing, PHOTOS, preset=PRESET, output=tmp / "py" / "bad.onnx")
    assert str(e.value) == want and e.value.name == "PTQ_E_IO" and "no-such.onnx" in want
    assert not (tmp / "py" / "bad.onnx").exists()
    with pytest.raises(ptq.Error, match="no-such.onnx"):
        ptq.Session(missing)


def test_unknown_preset_message(tmp):
    want = _cli_message("calibrate", MODEL, "--images", PHOTOS, "--preset", "no-such-preset",
                        "--cache", tmp / "py" / "bad.cache")
    assert "preset 'no-such-preset' not found" in want
    with pytest.raises(ptq.Error) as e:
        ptq.calibrate(MODEL, PHOTOS, "no-such-preset", cache=tmp / "py" / "bad.cache")
    assert str(e.value) == want and e.value.name == "PTQ_E_ARG"
    with pytest.raises(ptq.Error) as e:
        ptq.Dataset(PHOTOS, preset="no-such-preset")
    assert str(e.value) == want


def test_bad_options():
    with pytest.raises(ptq.Error, match="bad method 'nope'"):
        ptq.quantize(MODEL, PHOTOS, preset=PRESET, method="nope", limit=1)
    with pytest.raises(ptq.Error, match="bad value 'banana'"):
        ptq.Dataset(PHOTOS, preset=PRESET, size="banana")
    with pytest.raises(TypeError, match="no_such_option"):
        ptq.quantize(MODEL, PHOTOS, preset=PRESET, no_such_option=1)
    with pytest.raises(ptq.Error, match="no images"):
        ptq.calibrate(MODEL)


def test_version_and_library():
    assert ptq.version() == "0.1" and ptq.__version__ == "0.1"
    assert os.path.exists(ptq.library_path())


def test_shards_equal_the_cli(tmp):
    """shard="I/N" slices the list as the CLI's --shard: the same statistics files and batches (shard.sh merges them)."""
    n = 3
    for i in range(n):
        ptq.calibrate(MODEL, PHOTOS, PRESET, stats=tmp / "py" / ("s%d.ptqstats" % i), limit=2, shard="%d/%d" % (i, n))
        cli("calibrate", MODEL, "--images", PHOTOS, "--preset", PRESET, "--limit", 2, "--shard", "%d/%d" % (i, n),
            "--stats", tmp / "cli" / ("s%d.ptqstats" % i))
        same_file(tmp / "py" / ("s%d.ptqstats" % i), tmp / "cli" / ("s%d.ptqstats" % i))
    cli("preprocess", "--images", PHOTOS, "--preset", PRESET, "--shard", "1/3", "--limit", 2, "--dump", tmp / "shard.npy")
    bitwise_equal(np.concatenate(list(ptq.Dataset(PHOTOS, preset=PRESET, limit=2, shard=(1, 3)))),
                  np.load(tmp / "shard.npy"))
    for bad in ("3/3", "-1/2", "x"):
        with pytest.raises(ptq.Error, match="shard"):
            ptq.Dataset(PHOTOS, preset=PRESET, shard=bad)


def test_memory_budget_reaches_the_library(tmp):
    """memory= is the CLI's --memory: the same files at a 64 MB budget, and a budget out of range refused."""
    ptq.quantize(MODEL, PHOTOS, preset=PRESET, limit=LIMIT, method="max", memory=64, output=tmp / "py" / "m64.onnx",
                 cache=tmp / "py" / "m64.cache")
    cli("quantize", MODEL, "--images", PHOTOS, "--preset", PRESET, "--limit", LIMIT, "--method", "max", "--memory", 64,
        "-o", tmp / "cli" / "m64.onnx", "--cache", tmp / "cli" / "m64.cache")
    for f in ("m64.onnx", "m64.cache"):
        same_file(tmp / "py" / f, tmp / "cli" / f)
    with pytest.raises(ptq.Error, match="memory_mb 10"):
        ptq.quantize(MODEL, PHOTOS, preset=PRESET, limit=LIMIT, memory=10, output=tmp / "py" / "m10.onnx")
