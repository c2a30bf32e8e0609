"""_capi.py: ctypes declarations of include/ptq.h (libptq.so.0) and how the library is found.

The structs below mirror ptq.h field for field; the library fills them with their defaults
(ptq_*_defaults) before Python sets what it needs. Nothing here allocates a ptq handle.

Library search order (first hit wins):
  1. $PTQ_LIBRARY (a path to libptq.so.0)
  2. beside this package (ptq/libptq.so.0), then the install prefix's lib dir
     (PREFIX/lib for a package under PREFIX/lib/pythonX.Y/..., then sys.prefix/lib)
  3. a ptq source tree this package sits in (python/ptq -> build/libptq.so.0)
  4. ctypes.util.find_library("ptq") (the linker cache: /usr/local/lib after `make install; ldconfig`)
"""
import ctypes
import ctypes.util
import os
import sys

SONAME = "libptq.so.0"

c_char_p_p = ctypes.POINTER(ctypes.c_char_p)

PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_double, ctypes.c_int,
                            ctypes.c_void_p)
MESSAGE = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class Log(ctypes.Structure):
    _fields_ = [("progress", PROGRESS), ("message", MESSAGE), ("user", ctypes.c_void_p)]


class DatasetOptions(ctypes.Structure):
    _fields_ = [("preset", ctypes.c_char_p), ("overrides", c_char_p_p), ("n_overrides", ctypes.c_int),
                ("batch", ctypes.c_int), ("limit", ctypes.c_int), ("shuffle", ctypes.c_int),
                ("seed", ctypes.c_uint64), ("strict", ctypes.c_int), ("exif", ctypes.c_int),
                ("threads", ctypes.c_int), ("shard_index", ctypes.c_int), ("shard_count", ctypes.c_int),
                ("log", Log), ("memory_mb", ctypes.c_int)]


class CalibrateOptions(ctypes.Structure):
    _fields_ = [("tensors", c_char_p_p), ("n_tensors", ctypes.c_int), ("stats_out", ctypes.c_char_p), ("log", Log)]


class Ranges(ctypes.Structure):
    _fields_ = [("method", ctypes.c_char * 64), ("n", ctypes.c_int), ("names", c_char_p_p),
                ("amax", ctypes.POINTER(ctypes.c_float)), ("n_warnings", ctypes.c_int),
                ("n_clipped", ctypes.c_int)]


class QuantizeOptions(ctypes.Structure):
    _fields_ = [("method", ctypes.c_char_p), ("from_stats", ctypes.c_char_p), ("from_cache", ctypes.c_char_p),
                ("stats_out", ctypes.c_char_p),
                ("exclude_nodes", c_char_p_p), ("n_exclude_nodes", ctypes.c_int),
                ("exclude_op_types", c_char_p_p), ("n_exclude_op_types", ctypes.c_int),
                ("weights_fp32", ctypes.c_int), ("dedicated_qdq", ctypes.c_int), ("bias_correction", ctypes.c_int),
                ("adaround_iters", ctypes.c_int), ("refine_images", ctypes.c_int),
                ("eval_images", ctypes.c_char_p), ("labels", ctypes.c_char_p), ("eval_limit", ctypes.c_int),
                ("metric", ctypes.c_char_p), ("target", ctypes.c_double), ("target_cosine", ctypes.c_double),
                ("target_top1_drop", ctypes.c_double), ("log", Log), ("equalize", ctypes.c_int),
                ("recipe", ctypes.c_char_p), ("no_refine_check", ctypes.c_int), ("float_fp32", ctypes.c_int),
                ("write_float16", ctypes.c_int)]


class QuantizeInfo(ctypes.Structure):
    _fields_ = [("activations", ctypes.c_int), ("weights", ctypes.c_int), ("quantized_nodes", ctypes.c_int),
                ("excluded_nodes", ctypes.c_int), ("warnings", ctypes.c_int), ("images", ctypes.c_int),
                ("skipped", ctypes.c_int), ("auto_excluded", ctypes.c_int), ("reached_cosine", ctypes.c_double)]


class CompareOptions(ctypes.Structure):
    _fields_ = [("methods", ctypes.c_char_p), ("metric", ctypes.c_char_p), ("labels", ctypes.c_char_p),
                ("exclude_nodes", c_char_p_p), ("n_exclude_nodes", ctypes.c_int),
                ("exclude_op_types", c_char_p_p), ("n_exclude_op_types", ctypes.c_int),
                ("layers", ctypes.c_int), ("log", Log), ("float_fp32", ctypes.c_int)]


class MethodMetrics(ctypes.Structure):
    _fields_ = [("method", ctypes.c_char * 64), ("cosine", ctypes.c_double), ("sqnr_db", ctypes.c_double),
                ("max_abs", ctypes.c_double), ("top1_agree", ctypes.c_double), ("top1_acc", ctypes.c_double),
                ("seq_top1", ctypes.c_double), ("mask_iou", ctypes.c_double), ("seq_chars", ctypes.c_double),
                ("seq_exact", ctypes.c_double), ("box_f1", ctypes.c_double)]


class CompareResult(ctypes.Structure):
    _fields_ = [("n_methods", ctypes.c_int), ("methods", ctypes.POINTER(MethodMetrics)), ("best", ctypes.c_int),
                ("criterion", ctypes.c_char_p), ("calib_images", ctypes.c_int), ("eval_images", ctypes.c_int),
                ("internal", ctypes.c_void_p)]


class TranslateOptions(ctypes.Structure):
    _fields_ = [("propagate_concat", ctypes.c_int), ("propagate_pool", ctypes.c_int),
                ("propagate_mul", ctypes.c_int), ("dla", ctypes.c_int), ("trt_version", ctypes.c_long),
                ("trt_algorithm", ctypes.c_char_p)]


P = ctypes.c_void_p  # opaque handles
PP = ctypes.POINTER(ctypes.c_void_p)
I64P = ctypes.POINTER(ctypes.c_int64)
FP = ctypes.POINTER(ctypes.c_float)

# name: (restype, argtypes); ptq_err is an int
_PROTOTYPES = {
    "ptq_error_message": (ctypes.c_char_p, []),
    "ptq_version": (ctypes.c_char_p, []),
    "ptq_model_load": (ctypes.c_int, [ctypes.c_char_p, PP]),
    "ptq_model_free": (None, [P]),
    "ptq_model_num_inputs": (ctypes.c_int, [P]),
    "ptq_model_input_name": (ctypes.c_char_p, [P, ctypes.c_int]),
    "ptq_model_num_outputs": (ctypes.c_int, [P]),
    "ptq_model_output_name": (ctypes.c_char_p, [P, ctypes.c_int]),
    "ptq_dataset_defaults": (None, [ctypes.POINTER(DatasetOptions)]),
    "ptq_dataset_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(DatasetOptions), PP]),
    "ptq_dataset_next": (ctypes.c_int, [P, ctypes.POINTER(FP), ctypes.c_int64 * 4, ctypes.POINTER(ctypes.c_int)]),
    "ptq_dataset_counts": (None, [P, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]),
    "ptq_dataset_free": (None, [P]),
    "ptq_calibrate_defaults": (None, [ctypes.POINTER(CalibrateOptions)]),
    "ptq_calibrate": (ctypes.c_int, [P, P, ctypes.POINTER(CalibrateOptions), PP]),
    "ptq_calibration_load": (ctypes.c_int, [P, ctypes.c_char_p, PP]),
    "ptq_calibration_images": (ctypes.c_int, [P]),
    "ptq_calibration_free": (None, [P]),
    "ptq_calibration_ranges": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.POINTER(ctypes.POINTER(Ranges))]),
    "ptq_ranges_write_cache": (ctypes.c_int, [ctypes.POINTER(Ranges), ctypes.c_char_p, ctypes.c_long, ctypes.c_char_p]),
    "ptq_ranges_write_json": (ctypes.c_int, [ctypes.POINTER(Ranges), ctypes.c_char_p]),
    "ptq_ranges_free": (None, [ctypes.POINTER(Ranges)]),
    "ptq_quantize_defaults": (None, [ctypes.POINTER(QuantizeOptions)]),
    "ptq_quantize": (ctypes.c_int, [P, P, ctypes.POINTER(QuantizeOptions), PP]),
    "ptq_quantized_info": (None, [P, ctypes.POINTER(QuantizeInfo)]),
    "ptq_quantized_write": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]),
    "ptq_quantized_write_cache": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_long, ctypes.c_char_p]),
    "ptq_quantized_excluded": (ctypes.c_char_p, [P, ctypes.c_int]),
    "ptq_quantized_free": (None, [P]),
    "ptq_compare_defaults": (None, [ctypes.POINTER(CompareOptions)]),
    "ptq_compare": (ctypes.c_int, [P, P, P, ctypes.POINTER(CompareOptions),
                                   ctypes.POINTER(ctypes.POINTER(CompareResult))]),
    "ptq_compare_write_json": (ctypes.c_int, [ctypes.POINTER(CompareResult), ctypes.c_char_p]),
    "ptq_compare_write_html": (ctypes.c_int, [ctypes.POINTER(CompareResult), ctypes.c_char_p]),
    "ptq_compare_free": (None, [ctypes.POINTER(CompareResult)]),
    "ptq_translate_defaults": (None, [ctypes.POINTER(TranslateOptions)]),
    "ptq_translate": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(TranslateOptions)]),
    "ptq_session_create": (ctypes.c_int, [P, ctypes.c_int, PP]),
    "ptq_session_run": (ctypes.c_int, [P, ctypes.c_int, c_char_p_p, ctypes.POINTER(FP), ctypes.POINTER(I64P),
                                       ctypes.POINTER(ctypes.c_int)]),
    "ptq_session_output": (ctypes.c_int, [P, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(FP),
                                          ctypes.POINTER(I64P), ctypes.POINTER(ctypes.c_int)]),
    "ptq_session_free": (None, [P]),
}


def candidates():
    """Where the library is looked for, in order (see the module's docstring)."""
    out = []
    env = os.environ.get("PTQ_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.join(here, SONAME))
    # PREFIX/lib/pythonX.Y/{site,dist}-packages/ptq -> PREFIX/lib
    parts = here.split(os.sep)
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] == "lib" and i + 1 < len(parts) and parts[i + 1].startswith("python"):
            out.append(os.path.join(os.sep.join(parts[:i + 1]) or os.sep, SONAME))
            break
    for prefix in (sys.prefix, sys.base_prefix, "/usr/local"):
        out.append(os.path.join(prefix, "lib", SONAME))
    # a source tree: python/ptq/ -> build/
    out.append(os.path.join(here, "..", "..", os.environ.get("BUILD", "build"), SONAME))
    return [os.path.normpath(p) for p in out]


def load():
    """The CDLL with prototypes set; raises OSError naming every place looked at."""
    tried = []
    path = None
    for c in candidates():
        tried.append(c)
        if os.path.exists(c):
            path = c
            break
    if path is None and not os.environ.get("PTQ_LIBRARY"):
        found = ctypes.util.find_library("ptq")
        tried.append('find_library("ptq")')
        if found:
            path = found
    if path is None:
        raise OSError("ptq: cannot find %s (set PTQ_LIBRARY; looked at: %s)" % (SONAME, ", ".join(tried)))
    lib = ctypes.CDLL(path)
    for name, (res, args) in _PROTOTYPES.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    lib._ptq_path = path
    return lib
