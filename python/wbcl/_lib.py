"""Loading libwbcl (and libwbcl_run, the wbcl-run module registry) and the C signatures used here.

Where the libraries are looked for, in order:
  1. $WBCL_LIBRARY: the path of libwbcl.so itself (libwbcl_run.so is then looked for beside it
     and in its tools/ subdirectory);
  2. $WBCL_BUILD_DIR: a CMake build tree of wbcl (libwbcl.so at its top, libwbcl_run.so in tools/);
  3. the build tree of the checkout this package was installed from (recorded by setup.py);
  4. the system's loader path (an installed wbcl: libwbcl.so.0, libwbcl_run.so.0).
An explicitly set $WBCL_LIBRARY or $WBCL_BUILD_DIR that does not load is an ImportError naming it (no
silent fallback to another build); otherwise ImportError names every place tried when none works."""
import ctypes
import ctypes.util
import os

c_size_p = ctypes.POINTER(ctypes.c_size_t)
vp = ctypes.c_void_p


def _candidates():
    env = os.environ.get("WBCL_LIBRARY")
    if env:
        d = os.path.dirname(os.path.abspath(env))
        yield "$WBCL_LIBRARY", env, [os.path.join(d, "libwbcl_run.so"), os.path.join(d, "tools", "libwbcl_run.so")]
    for label, d in (("$WBCL_BUILD_DIR", os.environ.get("WBCL_BUILD_DIR")), ("install-time build dir", _recorded())):
        if d:
            yield label, os.path.join(d, "libwbcl.so"), [os.path.join(d, "tools", "libwbcl_run.so"),
                                                         os.path.join(d, "libwbcl_run.so")]
    yield "system loader", ctypes.util.find_library("wbcl") or "libwbcl.so.0", \
        [ctypes.util.find_library("wbcl_run") or "libwbcl_run.so.0"]


def _recorded():
    try:
        from . import _build_dir  # written by setup.py at install time
        return _build_dir.BUILD_DIR
    except ImportError:  # running from the source tree: python/wbcl -> ../../build
        return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build")


def _load():
    tried = []
    for label, path, run_paths in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s: %s (%s)" % (label, path, e))
            if label.startswith("$"):  # asked for explicitly: never fall back silently to another build
                raise ImportError("wbcl: %s is set but libwbcl cannot be loaded from it: %s (%s)"
                                  % (label, path, e)) from None
            continue
        run = None
        for rp in run_paths:
            try:
                run = ctypes.CDLL(rp)
                break
            except OSError as e:
                tried.append("%s: %s (%s)" % (label, rp, e))
        return lib, run
    raise ImportError("wbcl: libwbcl not found; build it (cmake -S . -B build && cmake --build build) or set "
                      "WBCL_LIBRARY / WBCL_BUILD_DIR. Tried: " + "; ".join(tried))


lib, runlib = _load()


def _sig(f, res, *args):
    fn = getattr(lib, f)
    fn.restype = res
    fn.argtypes = list(args)


I = ctypes.c_int
S = ctypes.c_size_t
F = ctypes.c_float
D = ctypes.c_double
CP = ctypes.c_char_p
FP = ctypes.POINTER(ctypes.c_float)
IP = ctypes.POINTER(ctypes.c_int)
I64P = ctypes.POINTER(ctypes.c_int64)
U64P = ctypes.POINTER(ctypes.c_uint64)


class DeviceInfo(ctypes.Structure):
    _fields_ = [("index", S), ("platform_index", ctypes.c_uint), ("device_index", ctypes.c_uint),
                ("type", I), ("name", ctypes.c_char * 128), ("vendor", ctypes.c_char * 128),
                ("platform_name", ctypes.c_char * 128), ("platform_version", ctypes.c_char * 128),
                ("driver_version", ctypes.c_char * 128), ("device_version", ctypes.c_char * 128),
                ("opencl_c_version", ctypes.c_char * 128), ("cl_major", I), ("cl_minor", I),
                ("compute_units", ctypes.c_uint), ("max_work_group_size", S), ("max_work_item_sizes", S * 3),
                ("local_mem_size", ctypes.c_uint64), ("local_mem_is_global", I), ("global_mem_size", ctypes.c_uint64),
                ("max_alloc_size", ctypes.c_uint64), ("has_fp16", I), ("has_fp64", I), ("has_profiling", I),
                ("native_vector_width_float", ctypes.c_uint), ("has_nv_compiler_options", I)]


class Array(ctypes.Structure):  # wbcl_array (io.h)
    _fields_ = [("elem", I), ("ndim", I), ("shape", S * 8), ("data", vp), ("nbytes", S)]


class RedunetParams(ctypes.Structure):  # wbcl_redunet_params (redunet.h)
    _fields_ = [("layers", I), ("eta", F), ("eps2", F), ("lambda_", F), ("impl", I), ("report_every", I)]


class LMInfo(ctypes.Structure):  # wbcl_lm_info (lm.h)
    _fields_ = [("kind", I), ("vocab", S), ("block_size", S), ("dim", S), ("depth", S), ("heads", S),
                ("dim_head", S), ("mlp_hidden", S), ("bias", I), ("tied", I)]


class LMSampling(ctypes.Structure):  # wbcl_lm_sampling (lm.h)
    _fields_ = [("temperature", D), ("top_k", S), ("seed", ctypes.c_uint64)]


PROGRESS_FN = ctypes.CFUNCTYPE(None, I, D, D, D, vp)

_sig("wbcl_status_name", CP, I)
_sig("wbcl_device_list", I, ctypes.POINTER(ctypes.POINTER(DeviceInfo)), c_size_p, CP, S)
_sig("wbcl_device_list_free", None, ctypes.POINTER(DeviceInfo))
_sig("wbcl_device_type_name", CP, I)
_sig("wbcl_context_create", I, CP, ctypes.POINTER(vp), CP, S)
_sig("wbcl_context_destroy", None, vp)
_sig("wbcl_context_last_error", CP, vp)
_sig("wbcl_context_device", ctypes.POINTER(DeviceInfo), vp)
_sig("wbcl_context_finish", I, vp)
_sig("wbcl_context_variant", I, vp)
_sig("wbcl_context_gemm_backend", I, vp)
_sig("wbcl_context_set_gemm_backend", I, vp, I)
_sig("wbcl_context_set_param", I, vp, CP, ctypes.c_long)
_sig("wbcl_context_set_weight_cache", I, vp, S)
_sig("wbcl_context_weight_cache_bytes", S, vp)
_sig("wbcl_context_param_get", I, vp, CP, ctypes.POINTER(ctypes.c_long), IP)
_sig("wbcl_variant_name", CP, I)
_sig("wbcl_tensor_create", I, vp, I, c_size_p, I, FP, ctypes.POINTER(vp))
_sig("wbcl_tensor_destroy", None, vp)
_sig("wbcl_tensor_read", I, vp, vp, FP, S)
_sig("wbcl_tensor_write", I, vp, vp, FP, S)
_sig("wbcl_gemm", I, vp, I, I, F, vp, vp, F, vp)
_sig("wbcl_attention_softmax_heads", I, vp, vp, vp, vp, F, I, vp)
_sig("wbcl_attention_mssa_heads", I, vp, vp, F, I, vp)
_sig("wbcl_tssa_heads", I, vp, vp, vp, vp, vp)
_sig("wbcl_tssa_state_create", I, vp, S, S, S, ctypes.POINTER(vp))
_sig("wbcl_tssa_state_destroy", None, vp)
_sig("wbcl_tssa_state_reset", I, vp, vp)
_sig("wbcl_tssa_causal_heads", I, vp, vp, vp, vp, vp, vp, vp)
_sig("wbcl_xca_heads", I, vp, vp, vp, vp, vp, vp)
_sig("wbcl_ista", I, vp, vp, vp, vp, F, F, I, vp)
DP = ctypes.POINTER(ctypes.c_double)
_sig("wbcl_coding_rate", I, vp, vp, D, DP)
_sig("wbcl_rate_reduction", I, vp, vp, vp, I, S, D, DP, DP, DP)
_sig("wbcl_sparsity", I, vp, vp, F, DP)


class CrateConfig(ctypes.Structure):  # wbcl_crate_config (models.h)
    _fields_ = [("dim", S), ("depth", S), ("heads", S), ("dim_head", S), ("patch", S), ("channels", S),
                ("num_classes", S), ("eta", F), ("lambd", F), ("ln_eps", F), ("weight_dtype", I)]


class ToSTConfig(ctypes.Structure):  # wbcl_tost_config (models.h)
    _fields_ = [("dim", S), ("depth", S), ("heads", S), ("mlp_hidden", S), ("patch", S), ("cls_layers", S),
                ("num_classes", S), ("ln_eps", F), ("bn_eps", F), ("weight_dtype", I)]


_sig("wbcl_crate_load_file", I, vp, CP, ctypes.POINTER(CrateConfig), ctypes.POINTER(vp))
_sig("wbcl_crate_forward", I, vp, vp, vp, I, vp, vp)
_sig("wbcl_crate_get_config", ctypes.POINTER(CrateConfig), vp)
_sig("wbcl_crate_destroy", None, vp)
_sig("wbcl_tost_load_file", I, vp, CP, ctypes.POINTER(ToSTConfig), ctypes.POINTER(vp))
_sig("wbcl_tost_forward", I, vp, vp, vp, I, vp, vp)
_sig("wbcl_tost_get_config", ctypes.POINTER(ToSTConfig), vp)
_sig("wbcl_tost_destroy", None, vp)
_sig("wbcl_aot_heads", I, vp, vp, I, F, vp)
_sig("wbcl_energy_heads", I, vp, vp, vp, I, F, F, vp)


class CirculantParams(ctypes.Structure):  # wbcl_circulant_params (circulant.h)
    _fields_ = [("layers", I), ("eta", F), ("eps2", F), ("lambda_", F)]


_sig("wbcl_circulant_default_params", CirculantParams)
_sig("wbcl_circulant_fit", I, vp, vp, vp, IP, I, ctypes.POINTER(CirculantParams), PROGRESS_FN, vp, vp,
     ctypes.POINTER(vp))
_sig("wbcl_circulant_apply", I, vp, vp, vp, vp, IP, FP)
_sig("wbcl_circulant_save", I, vp, vp, CP)
_sig("wbcl_circulant_load", I, vp, CP, ctypes.POINTER(vp))
_sig("wbcl_circulant_destroy", None, vp)
_sig("wbcl_circulant_channels", S, vp)
_sig("wbcl_redunet_default_params", RedunetParams)
_sig("wbcl_redunet_fit", I, vp, vp, IP, I, ctypes.POINTER(RedunetParams), PROGRESS_FN, vp, vp, ctypes.POINTER(vp))
_sig("wbcl_redunet_apply", I, vp, vp, vp, vp)
_sig("wbcl_redunet_save", I, vp, vp, CP)
_sig("wbcl_redunet_load", I, vp, CP, ctypes.POINTER(vp))
_sig("wbcl_redunet_destroy", None, vp)
_sig("wbcl_lm_kind_from_name", I, CP, IP)
_sig("wbcl_lm_load_file", I, vp, CP, I, S, ctypes.POINTER(vp))
_sig("wbcl_lm_get_info", ctypes.POINTER(LMInfo), vp)
_sig("wbcl_lm_destroy", None, vp)
_sig("wbcl_lm_forward", I, vp, vp, ctypes.POINTER(Array), vp)
_sig("wbcl_lm_state_create", I, vp, vp, S, ctypes.POINTER(vp))
_sig("wbcl_lm_state_destroy", None, vp)
_sig("wbcl_lm_prefill", I, vp, vp, ctypes.POINTER(Array), vp)
_sig("wbcl_lm_step", I, vp, vp, I64P, vp)
_sig("wbcl_lm_pick", ctypes.c_int64, FP, S, ctypes.POINTER(LMSampling), U64P)

if runlib is not None:
    runlib.wbcl_run_module_count.restype = S
    runlib.wbcl_run_module_count.argtypes = []
    runlib.wbcl_run_module_at.restype = vp
    runlib.wbcl_run_module_at.argtypes = [S]
    runlib.wbcl_run_exec.restype = I
    runlib.wbcl_run_exec.argtypes = [vp, CP, I, ctypes.POINTER(CP), CP, CP, I, ctypes.POINTER(CP),
                                     ctypes.POINTER(CP), I, ctypes.POINTER(CP), ctypes.POINTER(CP), I, CP, S]


class RunModule(ctypes.Structure):  # the leading fields of wbcl_run_module (tools/run/registry.h)
    _fields_ = [("name", CP), ("summary", CP), ("usage", CP), ("params", ctypes.POINTER(CP)),
                ("options", ctypes.POINTER(CP)), ("min_inputs", I), ("max_inputs", I), ("weights", I),
                ("output", I), ("can_verify", I)]
