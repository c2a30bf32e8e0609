"""ptq: post-training quantization of ONNX image models for TensorRT, from Python.

A thin ctypes layer over libptq.so.0 (include/ptq.h): the same engine as the `ptq` command, so
the same bytes for the same options. numpy arrays in and out; every handle is freed by close(),
a `with` block or the garbage collector.

    import ptq
    r = ptq.quantize("cls.onnx", "photos/", preset="paddleocr-cls", output="cls.qdq.onnx", cache="cls.cache")
    print(r["activations"], r["ranges"]["x"])
    with ptq.Session("cls.onnx") as s:
        y = s.run({"x": batch})["softmax_0.tmp_0"]
    for batch in ptq.Dataset("photos/", preset="paddleocr-cls", size="192x48"): ...

Options mirror the command's long options with underscores (--exclude-nodes -> exclude_nodes,
--channel-order -> channel_order); preprocessing overrides take strings or sequences
(mean=(0.5, 0.5, 0.5), size=(192, 48)). Failures raise ptq.Error with ptq's message.
Messages (skipped images, all-zero tensors) go to the `logging` logger "ptq" unless log= is given.
"""
import ctypes
import json as _json
import logging
import math
import os
import tempfile

import numpy as np

from . import _capi

__all__ = ["Error", "Model", "Dataset", "Session", "quantize", "calibrate", "compare", "translate", "version",
           "library_path"]

_lib = _capi.load()
_logger = logging.getLogger("ptq")


def _source_tree_presets():
    """A library built in a source tree (build/libptq.so.0) finds its presets in ../configs."""
    if os.environ.get("PTQ_CONFIGS"):
        return
    libdir = os.path.dirname(os.path.abspath(_lib._ptq_path))
    if os.path.isdir(os.path.join(libdir, "..", "share", "ptq", "configs")):
        return  # make install's layout: the library finds them itself
    for d in (os.path.join(libdir, "..", "configs"), os.path.join(os.path.dirname(__file__), "configs")):
        if os.path.isfile(os.path.join(d, "paddleocr-cls.yaml")):
            os.environ["PTQ_CONFIGS"] = os.path.normpath(d)
            return


_source_tree_presets()

__version__ = _lib.ptq_version().decode()

_ERRORS = {1: "PTQ_E_ARG", 2: "PTQ_E_NOMEM", 3: "PTQ_E_IO", 4: "PTQ_E_FORMAT", 5: "PTQ_E_UNSUPPORTED",
           6: "PTQ_E_SHAPE", 7: "PTQ_E_INTERNAL"}


class Error(Exception):
    """A ptq failure: str(e) is ptq's message (ptq_error_message()), e.code the ptq_err number,
    e.name its name (PTQ_E_IO, ...)."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.message = message
        self.code = code
        self.name = _ERRORS.get(code, "PTQ_E_%d" % code)


def version():
    """The library's version, e.g. "0.1"."""
    return __version__


def library_path():
    """The libptq.so.0 this package loaded."""
    return _lib._ptq_path


def _check(rc):
    if rc:
        raise Error(_lib.ptq_error_message().decode("utf-8", "replace"), rc)


def _path(p):
    return None if p is None else os.fsencode(os.fspath(p))


def _text(v):
    return None if v is None else str(v).encode()


def _names(v):
    """A list of names from a string (comma-separated, or @FILE: one per line, '#' comments),
    or a sequence of such strings; as the command's repeatable options read them."""
    if v is None:
        return []
    items = [v] if isinstance(v, (str, os.PathLike)) else list(v)
    out = []
    for it in items:
        it = os.fspath(it)
        if it.startswith("@"):
            try:
                with open(it[1:], encoding="utf-8") as f:
                    for line in f:
                        line = line.strip(" \t\r\n")
                        if line and not line.startswith("#"):
                            out.append(line)
            except OSError as e:
                raise Error("cannot read '%s': %s" % (it, e.strerror), 3) from None
        else:
            out.extend(t for t in it.split(",") if t)
    return out


def _c_strings(items):
    """(char **, n) for a list of str; the array keeps its bytes alive."""
    if not items:
        return None, 0
    arr = (ctypes.c_char_p * len(items))(*[s.encode() for s in items])
    return ctypes.cast(arr, _capi.c_char_p_p), len(items)


def _nan_none(x):
    return None if isinstance(x, float) and math.isnan(x) else x


# ---- logging ----

class _Log:
    """A ptq_log whose callbacks live as long as this object (keep it until the call returns)."""

    def __init__(self, log=None, progress=None):
        def on_message(level, text, user):
            t = text.decode("utf-8", "replace")
            if log is not None:
                log("warning" if level == 1 else "info", t)
            else:
                _logger.log(logging.WARNING if level == 1 else logging.INFO, t)

        def on_progress(label, done, total, seconds, last, user):
            progress(label.decode("utf-8", "replace"), done, total, seconds, bool(last))

        self.message = _capi.MESSAGE(on_message)
        self.progress = _capi.PROGRESS(on_progress) if progress is not None else _capi.PROGRESS()
        self.struct = _capi.Log(self.progress, self.message, None)


# ---- options ----

# the preprocessing overrides every image command takes (the command's --size, --mean, ...)
OVERRIDES = ("size", "mode", "resize", "shorter", "mean", "std", "scale", "channel_order", "layout", "pad_value",
             "max_width", "limit_side", "limit_type", "multiple", "max_side")
# the image-source options (--batch --limit --shuffle --seed --strict --exif --threads --shard --memory)
SOURCE = ("batch", "limit", "shuffle", "seed", "strict", "exif", "threads", "shard", "memory")


def _override_value(key, v):
    if isinstance(v, str):
        return v
    if isinstance(v, (tuple, list)):
        return ("x" if key == "size" else ",").join(str(x) for x in v)
    return str(v)


def _split_source(options):
    """Pops the image-source options and overrides out of options."""
    src = {k: options.pop(k) for k in SOURCE if k in options}
    ov = {k: options.pop(k) for k in OVERRIDES if k in options}
    return src, ov


def _unknown(fn, options):
    if options:
        raise TypeError("%s() got unexpected option%s: %s" % (fn, "s" if len(options) > 1 else "",
                                                              ", ".join(sorted(options))))


class _Closing:
    """close() at the end of a `with` block and when collected."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class _DatasetHandle(_Closing):
    """An open ptq_dataset (owned)."""

    def __init__(self, images, preset, src, overrides, log):
        o = _capi.DatasetOptions()
        _lib.ptq_dataset_defaults(ctypes.byref(o))
        o.preset = _text(preset) if preset is None or isinstance(preset, str) else _path(preset)
        ov = ["%s=%s" % (k.replace("_", "-"), _override_value(k, v)) for k, v in overrides.items() if v is not None]
        o.overrides, o.n_overrides = _c_strings(ov)
        if src.get("batch") is not None:
            o.batch = int(src["batch"])
        if src.get("limit") is not None:
            o.limit = int(src["limit"])
        if src.get("shuffle") is not None:
            o.shuffle = int(bool(src["shuffle"]))
        if src.get("seed") is not None:
            o.seed = int(src["seed"])
        if src.get("strict") is not None:
            o.strict = int(bool(src["strict"]))
        exif = src.get("exif")
        if exif is not None:
            if isinstance(exif, str) and exif not in ("on", "off"):
                raise Error("exif takes on or off (or a bool), not '%s'" % exif, 1)
            o.exif = int(exif != "off") if isinstance(exif, str) else int(bool(exif))
        if src.get("threads") is not None:
            o.threads = int(src["threads"])
        if src.get("memory") is not None:  # MB, as the CLI's --memory
            o.memory_mb = int(src["memory"])
        shard = src.get("shard")
        if shard is not None:  # "I/N" as the CLI's --shard, or (I, N)
            try:
                i, n = (int(x) for x in (shard.split("/") if isinstance(shard, str) else shard))
            except (ValueError, TypeError):
                raise Error("shard takes I/N (e.g. '0/4') or (I, N), not %r" % (shard,), 1) from None
            o.shard_index, o.shard_count = i, n
        self.log = log
        o.log = log.struct
        self.images = os.fspath(images)
        self.preset, self.src, self.overrides = preset, dict(src), dict(overrides)
        self.o = o  # keeps the overrides' strings and the callbacks alive for the handle's life
        self.h = ctypes.c_void_p()
        _check(_lib.ptq_dataset_open(_path(images), ctypes.byref(o), ctypes.byref(self.h)))

    def reopen(self):
        """The same dataset from its first image (a pass left unfinished is dropped)."""
        self.close()
        h = ctypes.c_void_p()
        _check(_lib.ptq_dataset_open(_path(self.images), ctypes.byref(self.o), ctypes.byref(h)))
        self.h = h

    def counts(self):
        used, skipped = ctypes.c_int(), ctypes.c_int()
        _lib.ptq_dataset_counts(self.h, ctypes.byref(used), ctypes.byref(skipped))
        return used.value, skipped.value

    def close(self):
        h, self.h = getattr(self, "h", None), None
        if h:
            _lib.ptq_dataset_free(h)


def _dataset_for(fn, images, preset, src, overrides, log, required=True):
    """(handle, owned) for images: a path or a ptq.Dataset."""
    if isinstance(images, Dataset):
        if preset is not None or src or overrides:
            raise TypeError("%s(): preprocessing and image options belong to the ptq.Dataset given" % fn)
        images._check_open()
        return images._ds, False
    if images is None:
        if preset is not None or overrides:
            raise Error("%s: preprocessing options need images" % fn, 1)
        if required:
            raise Error("%s: no images" % fn, 1)
        return None, False
    return _DatasetHandle(images, preset, src, overrides, log), True


class _Handles:
    """Frees what it holds, last first, at the end of a `with` block."""

    def __init__(self):
        self.items = []

    def add(self, obj, free=None):
        self.items.append((obj, free))
        return obj

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        while self.items:
            obj, free = self.items.pop()
            if free is not None:
                if obj:
                    free(obj)
            elif obj is not None:
                obj.close()


# ---- models ----

class Model(_Closing):
    """An ONNX model loaded by ptq (ptq_model). Model("m.onnx").inputs / .outputs: the names."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._h = ctypes.c_void_p()
        _check(_lib.ptq_model_load(_path(path), ctypes.byref(self._h)))
        self.inputs = [_lib.ptq_model_input_name(self._h, i).decode()
                       for i in range(_lib.ptq_model_num_inputs(self._h))]
        self.outputs = [_lib.ptq_model_output_name(self._h, i).decode()
                        for i in range(_lib.ptq_model_num_outputs(self._h))]

    def _check_open(self):
        if not self._h:
            raise Error("%s: the model is closed" % self.path, 1)

    def close(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _lib.ptq_model_free(h)


    def __repr__(self):
        return "ptq.Model(%r, inputs=%r, outputs=%r)" % (self.path, self.inputs, self.outputs)


def _model_for(m, hs):
    if isinstance(m, Model):
        m._check_open()
        return m
    return hs.add(Model(m))


# ---- datasets ----

class Dataset(_Closing):
    """A folder of images (recursive) or a list file, preprocessed by a preset and overrides into
    float32 batches: iterating yields numpy arrays (N, C, H, W) or (N, H, W, C) by the preset's
    layout, copies that stay valid. Each iteration is a full pass from the first image.

        for x in ptq.Dataset("photos", preset="paddleocr-cls", size="192x48", batch=4): ...

    Options: batch (the model's when quantizing: the most, up to 8, that memory holds; 8 when iterated
    alone), memory (the budget in MB, as --memory: 512), limit, shuffle, seed, strict, exif (True | "on" |
    "off"), threads, shard ("I/N"), and the
    overrides (size, mode, resize, shorter, mean, std, scale, channel_order, layout, pad_value,
    max_width, limit_side, limit_type, multiple, max_side). A Dataset can also be given as the
    images of quantize(), calibrate() and compare()."""

    def __init__(self, images, preset=None, batch=None, log=None, progress=None, **options):
        src, ov = _split_source(options)
        _unknown("Dataset", options)
        src["batch"] = batch
        self.images = os.fspath(images)
        self.preset = preset
        self._log = _Log(log, progress)
        self._ds = _DatasetHandle(images, preset, src, ov, self._log)
        self._mid_pass = False

    def _check_open(self):
        if self._ds is None or not self._ds.h:
            raise Error("%s: the dataset is closed" % self.images, 1)

    def __iter__(self):
        self._check_open()
        if self._mid_pass:  # a pass left unfinished: start again from the first image
            self._ds.reopen()
        self._mid_pass = True
        data = _capi.FP()
        shape = (ctypes.c_int64 * 4)()
        n = ctypes.c_int()
        while True:
            self._check_open()
            _check(_lib.ptq_dataset_next(self._ds.h, ctypes.byref(data), shape, ctypes.byref(n)))
            if n.value == 0:
                self._mid_pass = False
                return
            out = np.empty(tuple(shape), dtype=np.float32)
            ctypes.memmove(out.ctypes.data, data, out.nbytes)
            yield out

    @property
    def counts(self):
        """(used, skipped) images of the last complete pass (or so far)."""
        self._check_open()
        return self._ds.counts()

    def close(self):
        ds, self._ds = getattr(self, "_ds", None), None
        if ds is not None:
            ds.close()

    def __repr__(self):
        return "ptq.Dataset(%r, preset=%r)" % (self.images, self.preset)


# ---- sessions ----

class Session(_Closing):
    """A model run on float inputs (ptq_session): run({"x": array}) -> {output name: array},
    run([a, b]) or run(a) -> [arrays] (inputs in the model's order). Outputs are float32 copies,
    valid after the next run. A plan is made for each new set of input shapes."""

    def __init__(self, model, threads=0):
        self._owned = not isinstance(model, Model)
        self.model = Model(model) if self._owned else model
        self.model._check_open()
        self._h = ctypes.c_void_p()
        try:
            _check(_lib.ptq_session_create(self.model._h, int(threads), ctypes.byref(self._h)))
        except Exception:
            self.close()
            raise

    @property
    def inputs(self):
        return self.model.inputs

    @property
    def outputs(self):
        return self.model.outputs

    def run(self, inputs):
        if not self._h:
            raise Error("the session is closed", 1)
        self.model._check_open()  # the C session reads the model: closing it first would free it under us
        by_name = isinstance(inputs, dict)
        if by_name:
            names, arrays = list(inputs.keys()), list(inputs.values())
        elif isinstance(inputs, (list, tuple)):
            names, arrays = None, list(inputs)
        else:
            names, arrays = None, [inputs]
        arrays = [np.ascontiguousarray(a, dtype=np.float32) for a in arrays]
        n = len(arrays)
        c_names = (ctypes.c_char_p * max(n, 1))(*[str(k).encode() for k in names]) if names is not None else None
        data = (_capi.FP * max(n, 1))(*[a.ctypes.data_as(_capi.FP) for a in arrays])
        dims = [(ctypes.c_int64 * max(a.ndim, 1))(*a.shape) for a in arrays]
        shapes = (_capi.I64P * max(n, 1))(*[ctypes.cast(d, _capi.I64P) for d in dims])
        ranks = (ctypes.c_int * max(n, 1))(*[a.ndim for a in arrays])
        _check(_lib.ptq_session_run(self._h, n, ctypes.cast(c_names, _capi.c_char_p_p) if c_names else None,
                                    data, shapes, ranks))
        out = {}
        for i in range(len(self.model.outputs)):
            name, ptr, shape, rank = ctypes.c_char_p(), _capi.FP(), _capi.I64P(), ctypes.c_int()
            _check(_lib.ptq_session_output(self._h, i, ctypes.byref(name), ctypes.byref(ptr), ctypes.byref(shape),
                                           ctypes.byref(rank)))
            y = np.empty(tuple(shape[k] for k in range(rank.value)), dtype=np.float32)
            ctypes.memmove(y.ctypes.data, ptr, y.nbytes)
            out[name.value.decode()] = y
        return out if by_name else list(out.values())

    def close(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _lib.ptq_session_free(h)
        if getattr(self, "_owned", False) and getattr(self, "model", None) is not None:
            self.model.close()



# ---- calibrate ----

ALL_METHODS = ["max", "percentile:99.9", "percentile:99.99", "percentile:99.999", "entropy", "mse"]


def _methods(v, default):
    if v is None:
        return list(default)
    if isinstance(v, str):
        return list(ALL_METHODS) if v == "all" else [m for m in v.split(",") if m]
    return list(v)


def _per_method_path(path, tag):
    """OUT.cache -> OUT.<tag>.cache, as `ptq calibrate` names one file per method."""
    path = os.fspath(path)
    dot, slash = path.rfind("."), path.rfind("/")
    return "%s.%s%s" % (path[:dot], tag, path[dot:]) if dot >= 0 and dot > slash else "%s.%s" % (path, tag)


def _ranges_dict(r):
    return {r.contents.names[i].decode(): float(r.contents.amax[i]) for i in range(r.contents.n)}


def calibrate(model, images=None, preset=None, methods=None, cache=None, json=None, stats=None, *, method=None,
              from_stats=None, tensors=None, trt_version=None, trt_algorithm=None, log=None, progress=None, **options):
    """`ptq calibrate`: one pass over the images (or saved statistics), then each method's ranges.

    methods: a list, "max,entropy" or "all" (default percentile:99.99; method= is the same). cache, json:
    written as the command writes them (one file per method, OUT.<method>.cache, with several).
    stats: also save the statistics; from_stats: ranges from saved statistics, without images.
    tensors: fnmatch globs ("*": every float activation; default: the tensors quantize gives a
    Q/DQ pair). Returns {"images", "skipped", "tensors", "methods", "warnings",
    "ranges": {method: {tensor: amax}}, "cache": [paths], "json": [paths]}."""
    if method is not None and methods is not None:
        raise TypeError("calibrate(): give methods or method, not both")
    tags_in = _methods(methods if methods is not None else method, ["percentile:99.99"])
    src, ov = _split_source(options)
    _unknown("calibrate", options)
    lg = _Log(log, progress)
    if from_stats is not None and (images is not None or stats is not None or tensors):
        raise Error("calibrate: from_stats replaces images (and stats, tensors)", 1)
    with _Handles() as hs:
        m = _model_for(model, hs)
        c = hs.add(ctypes.c_void_p(), _lib.ptq_calibration_free)
        skipped = None
        if from_stats is not None:
            if preset is not None or src or ov:
                raise Error("calibrate: preprocessing options do not apply to from_stats", 1)
            _check(_lib.ptq_calibration_load(m._h, _path(from_stats), ctypes.byref(c)))
        else:
            ds, owned = _dataset_for("calibrate", images, preset, src, ov, lg)
            if owned:
                hs.add(ds)
            o = _capi.CalibrateOptions()
            _lib.ptq_calibrate_defaults(ctypes.byref(o))
            o.tensors, o.n_tensors = _c_strings([tensors] if isinstance(tensors, str) else list(tensors or []))
            o.stats_out = _path(stats)
            o.log = lg.struct
            _check(_lib.ptq_calibrate(m._h, ds.h, ctypes.byref(o), ctypes.byref(c)))
            skipped = ds.counts()[1]
        result = {"images": _lib.ptq_calibration_images(c), "skipped": skipped, "tensors": 0, "methods": [],
                  "warnings": 0, "ranges": {}, "cache": [], "json": []}
        for k, tag in enumerate(tags_in):
            r = ctypes.POINTER(_capi.Ranges)()
            _check(_lib.ptq_calibration_ranges(c, tag.encode(), ctypes.byref(r)))
            hs.add(r, _lib.ptq_ranges_free)
            name = r.contents.method.decode()
            if k == 0:  # a tensor all zeros or never finite is one warning whatever the methods
                result["tensors"], result["warnings"] = r.contents.n, r.contents.n_warnings
            result["warnings"] += r.contents.n_clipped  # each method's clipped tensors are named
            result["methods"].append(name)
            result["ranges"][name] = _ranges_dict(r)
            if cache is not None:
                p = cache if len(tags_in) == 1 else _per_method_path(cache, name)
                _check(_lib.ptq_ranges_write_cache(r, _path(p), int(trt_version or 0), _text(trt_algorithm)))
                result["cache"].append(os.fspath(p))
            if json is not None:
                p = json if len(tags_in) == 1 else _per_method_path(json, name)
                _check(_lib.ptq_ranges_write_json(r, _path(p)))
                result["json"].append(os.fspath(p))
        return result


# ---- quantize ----

def _read_ranges_json(path):
    with open(path, encoding="utf-8") as f:
        d = _json.load(f)
    # 9 significant digits: exactly the float32 amax, given as the double calibrate() returns
    return d.get("method"), {k: float(np.float32(v["amax"])) for k, v in d["tensors"].items()}


def _float_fp32(float_part):
    """float_part ("fp16" or "fp32") as the options' float_fp32 flag."""
    if float_part not in ("fp16", "fp32"):
        raise Error("float_part takes fp16 or fp32", 1)
    return int(float_part == "fp32")


def quantize(model, images=None, preset=None, output=None, cache=None, json=None, method=None, *, recipe=None,
             refine_check=True, float_part="fp16", float_dtype="fp32", stats=None,
             from_stats=None, from_cache=None, exclude_nodes=None, exclude_op_types=None, weights="int8",
             dedicated_qdq=False, bias_correction=False, adaround=None, refine_images=None, equalize=False, auto_exclude=None,
             eval_images=None, eval_limit=None, labels=None, metric=None, target=None, target_cosine=None,
             target_top1_drop=None, trt_version=None, trt_algorithm=None, log=None, progress=None, **options):
    """`ptq quantize`: calibration (images, from_stats or from_cache), exclusions, Q/DQ insertion and
    refinements; writes output (the QDQ model), cache and json when given.

    method: max, percentile[:P] (default percentile:99.99), entropy, mse, output-mse. recipe: "fast",
    "balanced" or "best", as --recipe (refine_check=False: --no-refine-check). float_part: "fp16" or
    "fp32", the float part in the measurements (--float); float_dtype: "fp32" or "fp16", the float
    part as written (--float-dtype). weights: "int8" or "qdq-fp32".
    adaround: True (500 iterations) or a number. equalize: activation equalization in front of
    depthwise Convs before calibration (needs images). seed (0) also draws the refinements' samples
    (output-mse's positions, AdaRound's batches), as --seed does. Auto-exclusion: eval_images and target_cosine,
    target_top1_drop or metric + target (auto_exclude=True as on the command line is optional).
    Returns {"images", "skipped", "method", "activations", "weights", "quantized_nodes",
    "excluded_nodes", "warnings", "auto_excluded": [nodes], "reached_cosine", "ranges":
    {tensor: amax}, "output", "cache", "json"}."""
    src, ov = _split_source(options)
    _unknown("quantize", options)
    if weights not in ("int8", "qdq-fp32"):
        raise Error("weights takes int8 or qdq-fp32", 1)
    has_target = any(t is not None for t in (target, target_cosine, target_top1_drop))
    if auto_exclude and (eval_images is None or not has_target):
        raise Error("auto_exclude needs images, eval_images and target_cosine, target_top1_drop or metric + target", 1)
    if auto_exclude is False and (eval_images is not None or has_target):
        raise Error("eval_images and target* go with auto_exclude", 1)
    lg = _Log(log, progress)
    with _Handles() as hs:
        m = _model_for(model, hs)
        ds = None
        if images is not None or from_stats is None and from_cache is None:
            ds, owned = _dataset_for("quantize", images, preset, src, ov, lg)
            if owned:
                hs.add(ds)
        elif preset is not None or src or ov:
            raise Error("preprocessing options do not apply to from_%s" % ("stats" if from_stats else "cache"), 1)
        o = _capi.QuantizeOptions()
        _lib.ptq_quantize_defaults(ctypes.byref(o))
        o.method = _text(method)
        o.recipe = _text(recipe)
        o.no_refine_check = int(not refine_check)
        o.float_fp32 = _float_fp32(float_part)
        if float_dtype not in ("fp32", "fp16"):
            raise Error("float_dtype takes fp32 or fp16", 1)
        o.write_float16 = int(float_dtype == "fp16")
        o.from_stats, o.from_cache, o.stats_out = _path(from_stats), _path(from_cache), _path(stats)
        o.exclude_nodes, o.n_exclude_nodes = _c_strings(_names(exclude_nodes))
        o.exclude_op_types, o.n_exclude_op_types = _c_strings(_names(exclude_op_types))
        o.weights_fp32 = int(weights == "qdq-fp32")
        o.dedicated_qdq = int(bool(dedicated_qdq))
        o.bias_correction = int(bool(bias_correction))
        o.equalize = int(bool(equalize))
        if adaround is not None and adaround is not False:
            o.adaround_iters = 500 if adaround is True else int(adaround)
        if refine_images is not None:
            o.refine_images = int(refine_images)
        o.eval_images, o.labels, o.metric = _path(eval_images), _path(labels), _text(metric)
        if eval_limit is not None:
            o.eval_limit = int(eval_limit)
        for field, v in (("target", target), ("target_cosine", target_cosine), ("target_top1_drop", target_top1_drop)):
            if v is not None:
                setattr(o, field, float(v))
        o.log = lg.struct
        q = hs.add(ctypes.c_void_p(), _lib.ptq_quantized_free)
        _check(_lib.ptq_quantize(m._h, ds.h if ds is not None else None, ctypes.byref(o), ctypes.byref(q)))
        info = _capi.QuantizeInfo()
        _lib.ptq_quantized_info(q, ctypes.byref(info))
        header = trt_version is not None or trt_algorithm is not None
        _check(_lib.ptq_quantized_write(q, _path(output), None if header else _path(cache), _path(json)))
        if header and cache is not None:
            _check(_lib.ptq_quantized_write_cache(q, _path(cache), int(trt_version or 0), _text(trt_algorithm)))
        if json is not None:
            tag, ranges = _read_ranges_json(json)
        else:
            with tempfile.TemporaryDirectory(prefix="ptq-") as tmp:
                p = os.path.join(tmp, "ranges.json")
                _check(_lib.ptq_quantized_write(q, None, None, p.encode()))
                tag, ranges = _read_ranges_json(p)
        return {"images": info.images if ds is not None else None, "skipped": info.skipped if ds is not None else None,
                "method": tag, "activations": info.activations, "weights": info.weights,
                "quantized_nodes": info.quantized_nodes, "excluded_nodes": info.excluded_nodes,
                "warnings": info.warnings,
                "auto_excluded": [_lib.ptq_quantized_excluded(q, i).decode() for i in range(info.auto_excluded)],
                "reached_cosine": _nan_none(info.reached_cosine), "ranges": ranges,
                "output": None if output is None else os.fspath(output),
                "cache": None if cache is None else os.fspath(cache), "json": None if json is None else os.fspath(json)}


# ---- compare ----

_METRICS = ("cosine", "sqnr_db", "max_abs", "top1_agree", "top1_acc", "seq_top1", "seq_chars", "seq_exact", "mask_iou", "box_f1")


def compare(model, images, eval_images, preset=None, methods=None, metric=None, *, labels=None, exclude_nodes=None,
            exclude_op_types=None, layers=True, json=None, html=None, eval_preset=None, eval_limit=None, log=None,
            progress=None, float_part="fp16", **options):
    """`ptq compare`: every method's QDQ model against FP32 on held-out images.

    methods: a list, "max,entropy" or "all" (default max, percentile:99.99, percentile:99.999,
    entropy, mse). metric: cosine, sqnr, top1, seq-top1[:AXIS], seq-chars[:AXIS], seq-exact[:AXIS],
    mask-iou:T, box-f1 (default: top1 for
    classifiers, else cosine). eval_preset: the evaluation images' preprocessing (default
    preset; the overrides apply to both). json, html: the command's reports.
    Returns {"calib_images", "eval_images", "best", "criterion", "methods": {method: {cosine,
    sqnr_db, max_abs, top1_agree, top1_acc, seq_top1, seq_chars, seq_exact, mask_iou, box_f1 (None where not
    applicable)}},
    "layers_method", "layers": [the JSON report's rows, worst first as printed]}."""
    src, ov = _split_source(options)
    _unknown("compare", options)
    lg = _Log(log, progress)
    with _Handles() as hs:
        m = _model_for(model, hs)
        calib, owned = _dataset_for("compare", images, preset, src, ov, lg)
        if owned:
            hs.add(calib)
        if isinstance(eval_images, Dataset):
            if eval_preset is not None or eval_limit is not None:
                raise TypeError("compare(): eval_preset and eval_limit belong to the ptq.Dataset given")
            ev = eval_images._ds
        else:
            esrc = {}
            if eval_limit is not None:
                esrc["limit"] = eval_limit
            esrc.update({k: v for k, v in calib.src.items() if k in ("batch", "exif", "threads", "strict", "memory")})
            ev = hs.add(_DatasetHandle(eval_images, eval_preset if eval_preset is not None else calib.preset, esrc,
                                       calib.overrides, lg))
        o = _capi.CompareOptions()
        _lib.ptq_compare_defaults(ctypes.byref(o))
        if methods is not None:
            o.methods = ",".join(_methods(methods, [])).encode()
        o.metric, o.labels = _text(metric), _path(labels)
        o.exclude_nodes, o.n_exclude_nodes = _c_strings(_names(exclude_nodes))
        o.exclude_op_types, o.n_exclude_op_types = _c_strings(_names(exclude_op_types))
        o.layers = int(bool(layers))
        o.float_fp32 = _float_fp32(float_part)
        o.log = lg.struct
        r = hs.add(ctypes.POINTER(_capi.CompareResult)(), _lib.ptq_compare_free)
        _check(_lib.ptq_compare(m._h, calib.h, ev.h, ctypes.byref(o), ctypes.byref(r)))
        res = r.contents
        table = {}
        for k in range(res.n_methods):
            mm = res.methods[k]
            table[mm.method.decode()] = {f: _nan_none(getattr(mm, f)) for f in _METRICS}
        out = {"calib_images": res.calib_images, "eval_images": res.eval_images,
               "best": res.methods[res.best].method.decode(), "criterion": res.criterion.decode(), "methods": table,
               "layers_method": None, "layers": []}
        if html is not None:
            _check(_lib.ptq_compare_write_html(r, _path(html)))
        if json is not None:
            _check(_lib.ptq_compare_write_json(r, _path(json)))
        if layers:
            if json is not None:
                report = _read_json(json)
            else:
                with tempfile.TemporaryDirectory(prefix="ptq-") as tmp:
                    p = os.path.join(tmp, "compare.json")
                    _check(_lib.ptq_compare_write_json(r, p.encode()))
                    report = _read_json(p)
            out["layers_method"] = report.get("layers_method")
            out["layers"] = report.get("layers") or []
        return out


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return _json.load(f)


# ---- translate ----

def translate(qdq_model, prefix=None, *, output=None, propagate_concat=False, propagate_pool=False,
              propagate_mul=False, dla=False, trt_version=None, trt_algorithm=None):
    """`ptq translate`: a QDQ model -> PREFIX_noqdq.onnx, PREFIX_precision_config.json,
    PREFIX_precision_config_calib.cache and PREFIX_precision_config_layer_arg.txt for TensorRT's
    implicit quantization (prefix, or output as the command's -o; default: the model path
    without .onnx). Returns the four paths and {"int8_tensors": {tensor: scale}, "fp16_nodes": [...]}
    from the precision config."""
    if prefix is not None and output is not None:
        raise TypeError("translate(): give prefix or output, not both")
    prefix = output if prefix is None else prefix
    o = _capi.TranslateOptions()
    _lib.ptq_translate_defaults(ctypes.byref(o))
    o.propagate_concat, o.propagate_pool = int(bool(propagate_concat)), int(bool(propagate_pool))
    o.propagate_mul, o.dla = int(bool(propagate_mul)), int(bool(dla))
    if trt_version is not None:
        o.trt_version = int(trt_version)
    o.trt_algorithm = _text(trt_algorithm)
    _check(_lib.ptq_translate(_path(qdq_model), _path(prefix), ctypes.byref(o)))
    if prefix is None:
        prefix = os.fspath(qdq_model)
        if len(prefix) > 5 and prefix.endswith(".onnx"):
            prefix = prefix[:-5]
    prefix = os.fspath(prefix)
    out = {"model": prefix + "_noqdq.onnx", "precision_config": prefix + "_precision_config.json",
           "cache": prefix + "_precision_config_calib.cache",
           "layer_arg": prefix + "_precision_config_layer_arg.txt"}
    cfg = _read_json(out["precision_config"])
    out["int8_tensors"] = cfg.get("int8_tensor_scales", {})
    out["fp16_nodes"] = cfg.get("fp16_nodes", [])
    return out
