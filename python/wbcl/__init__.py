"""wbcl from Python: the OpenCL engine of white-box deep networks, thin over its C API (ctypes).

    import numpy as np, wbcl
    print(wbcl.devices())
    with wbcl.Context() as ctx:                      # $WBCL_DEVICE or the default device
        y = ctx.tssa(w, temp)                        # w (B, K, N, p) float32 -> y (B, K, N, p)
        out = ctx.run("attn.tssa", x, weights="w.safetensors", heads=5)   # any wbcl-run module

Arrays: NumPy arrays (or anything with .numpy(), e.g. PyTorch CPU tensors) in, NumPy float32 out.
Float inputs are copied to C-contiguous float32 where needed; labels and token ids are integer arrays.
Device tensors (ctx.tensor(array), Tensor.numpy()) keep data on the device between calls.
Errors: wbcl.Error (.status: the status name, e.g. "WBCL_ERROR_SHAPE"; str(): the library's message);
TypeError for arguments of the wrong Python type or dtype. The library prints nothing.
A Context owns everything made from it: close() (or leaving the with block) frees them, and any
later use raises wbcl.Error, never crashes. Contexts still open when the interpreter exits are closed
then (an atexit handler), so no work is left running on the device while the process tears down."""
import atexit
import ctypes
import os
import tempfile
import weakref

import numpy as np

from . import _lib
from ._lib import lib

__all__ = ["Error", "Context", "Tensor", "TSSAState", "ReduNet", "LM", "CRATE", "ToST", "ShiftInvariantReduNet", "devices", "modules"]
__version__ = "0.1.0"


class Error(Exception):
    """A failed wbcl call: .status is the status name, .message the library's full message."""

    def __init__(self, status, message):
        super().__init__("%s: %s" % (status, message))
        self.status, self.message = status, message


def _status_name(st):
    return lib.wbcl_status_name(st).decode()


def _as_array(a, what):
    """NumPy view of a (torch tensors through .numpy()); TypeError for anything else."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "numpy") and callable(a.numpy) and not isinstance(a, Tensor):
        return np.asarray(a.numpy())
    raise TypeError("%s: expected a NumPy array (or an object with .numpy()), got %s" % (what, type(a).__name__))


def _f32(a, what, ndim=None):
    a = _as_array(a, what)
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)) or a.dtype == np.bool_:
        raise TypeError("%s: expected a float array, got dtype %s" % (what, a.dtype))
    if ndim is not None and a.ndim not in (ndim if isinstance(ndim, tuple) else (ndim,)):
        raise Error("WBCL_ERROR_SHAPE", "%s: expected %s dimensions, got shape %s" % (what, ndim, a.shape))
    return np.ascontiguousarray(a, dtype=np.float32)


def _labels(y, n, what="labels"):
    y = _as_array(y, what)
    if not np.issubdtype(y.dtype, np.integer):
        raise TypeError("%s: expected an integer array, got dtype %s" % (what, y.dtype))
    if y.ndim != 1 or y.shape[0] != n:
        raise Error("WBCL_ERROR_SHAPE", "%s: expected shape (%d,), got %s" % (what, n, y.shape))
    return np.ascontiguousarray(y, dtype=np.intc)


def devices():
    """Every OpenCL device, as wbcl-info lists them: a list of dicts (index, name, type, vendor,
    platform, driver, opencl, compute_units, global_mem, fp16, fp64)."""
    infos = ctypes.POINTER(_lib.DeviceInfo)()
    n = ctypes.c_size_t()
    err = ctypes.create_string_buffer(1024)
    st = lib.wbcl_device_list(ctypes.byref(infos), ctypes.byref(n), err, len(err))
    if st:
        raise Error(_status_name(st), err.value.decode(errors="replace"))
    try:
        return [_device_dict(infos[i]) for i in range(n.value)]
    finally:
        lib.wbcl_device_list_free(infos)


def _device_dict(d):
    return {"index": d.index, "name": d.name.decode(), "type": lib.wbcl_device_type_name(d.type).decode(),
            "vendor": d.vendor.decode(), "platform": d.platform_name.decode(), "driver": d.driver_version.decode(),
            "opencl": d.device_version.decode(), "compute_units": d.compute_units,
            "global_mem": d.global_mem_size, "fp16": bool(d.has_fp16), "fp64": bool(d.has_fp64)}


def modules():
    """The wbcl-run modules: a list of dicts (name, summary, usage, params, min_inputs, max_inputs,
    weights: 0 none / 1 optional / 2 required, output: the same)."""
    r = _runlib()
    out = []
    for i in range(r.wbcl_run_module_count()):
        m = _lib.RunModule.from_address(r.wbcl_run_module_at(i))
        params = []
        j = 0
        while m.params and m.params[j]:
            params.append(m.params[j].decode())
            j += 1
        out.append({"name": m.name.decode(), "summary": m.summary.decode(), "usage": m.usage.decode(),
                    "params": params, "min_inputs": m.min_inputs, "max_inputs": m.max_inputs,
                    "weights": m.weights, "output": m.output})
    return out


def _runlib():
    if _lib.runlib is None:
        raise Error("WBCL_ERROR_UNSUPPORTED", "libwbcl_run (the wbcl-run module registry) was not found beside libwbcl")
    return _lib.runlib


class _Owned:
    """Something a Context owns (freed when it is closed)."""
    _free = None

    def _attach(self, ctx, handle):
        self._ctx, self._handle = ctx, handle
        ctx._owned.add(self)

    def _h(self):
        if self._handle is None:
            raise Error("WBCL_ERROR_INVALID_ARGUMENT", "%s is closed (or its context is)" % type(self).__name__)
        self._ctx._h()
        return self._handle

    def close(self):
        if getattr(self, "_handle", None) is not None:
            type(self)._free(self._handle)
            self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Tensor(_Owned):
    """A float32 tensor in a context's device memory. .shape; .numpy() reads it back."""
    _free = staticmethod(lib.wbcl_tensor_destroy)

    def __init__(self, ctx, shape, data=None):
        shape = tuple(int(s) for s in shape)
        if not 1 <= len(shape) <= 4:
            raise Error("WBCL_ERROR_SHAPE", "a tensor has 1 to 4 dimensions, got shape %s" % (shape,))
        h = ctypes.c_void_p()
        sh = (ctypes.c_size_t * len(shape))(*shape)
        ptr = data.ctypes.data_as(_lib.FP) if data is not None else None
        ctx._call(lib.wbcl_tensor_create(ctx._h(), len(shape), sh, 0, ptr, ctypes.byref(h)))
        self.shape = shape
        self._attach(ctx, h.value)

    def numpy(self):
        out = np.empty(self.shape, dtype=np.float32)
        self._ctx._call(lib.wbcl_tensor_read(self._ctx._h(), self._h(), out.ctypes.data_as(_lib.FP), out.size))
        return out

    def write(self, array):
        a = _f32(array, "Tensor.write")
        if a.shape != self.shape:
            raise Error("WBCL_ERROR_SHAPE", "Tensor.write: array of shape %s into a tensor of shape %s"
                        % (a.shape, self.shape))
        self._ctx._call(lib.wbcl_tensor_write(self._ctx._h(), self._h(), a.ctypes.data_as(_lib.FP), a.size))

    def __repr__(self):
        return "wbcl.Tensor(shape=%s%s)" % (self.shape, "" if self._handle else ", closed")


class TSSAState(_Owned):
    """Causal TSSA's recurrent state (S, Q, P per head) for `batch` sequences of `heads` heads of
    dimension p: pass it to Context.tssa_causal to continue a sequence (constant memory)."""
    _free = staticmethod(lib.wbcl_tssa_state_destroy)

    def __init__(self, ctx, batch, heads, p):
        h = ctypes.c_void_p()
        ctx._call(lib.wbcl_tssa_state_create(ctx._h(), batch, heads, p, ctypes.byref(h)))
        self.batch, self.heads, self.p = batch, heads, p
        self._attach(ctx, h.value)

    def reset(self):
        self._ctx._call(lib.wbcl_tssa_state_reset(self._ctx._h(), self._h()))


_open_contexts = weakref.WeakSet()


@atexit.register
def _close_open_contexts():
    # Before the interpreter's teardown: each close waits for the context's queue (wbcl_context_destroy).
    # An OpenCL runtime still running work (PoCL compiling a kernel in a worker thread) while the
    # process's exit handlers run can crash in them.
    for c in list(_open_contexts):
        try:
            c.close()
        except Exception:
            pass


class Context:
    """An OpenCL device opened for wbcl. device: a selector as in C and wbcl-run (an index, P:D, a
    name substring, "cpu" or "gpu"); None: $WBCL_DEVICE, else the default. Use as a context manager,
    or call close()."""

    def __init__(self, device=None):
        if device is not None and not isinstance(device, (str, int)):
            raise TypeError("device: expected a selector string or an index, got %s" % type(device).__name__)
        self._owned = weakref.WeakSet()
        h = ctypes.c_void_p()
        err = ctypes.create_string_buffer(4096)
        sel = None if device is None else str(device).encode()
        st = lib.wbcl_context_create(sel, ctypes.byref(h), err, len(err))
        if st:
            raise Error(_status_name(st), err.value.decode(errors="replace") or "cannot open a context")
        self._handle = h.value
        _open_contexts.add(self)

    # ---- lifetime ------------------------------------------------------------------------------
    def _h(self):
        if self._handle is None:
            raise Error("WBCL_ERROR_INVALID_ARGUMENT", "the context is closed")
        return self._handle

    def close(self):
        """Frees every tensor, state and model made from this context, then the context."""
        if self._handle is None:
            return
        for o in list(self._owned):
            o.close()
        lib.wbcl_context_destroy(self._handle)
        self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _call(self, st):
        if st:
            msg = lib.wbcl_context_last_error(self._handle) if self._handle else None
            raise Error(_status_name(st), msg.decode(errors="replace") if msg else "")

    @property
    def device(self):
        """The device as a dict (see devices()), plus the kernel variant in use."""
        d = _device_dict(lib.wbcl_context_device(self._h()).contents)
        d["variant"] = lib.wbcl_variant_name(lib.wbcl_context_variant(self._h())).decode()
        return d

    _BACKENDS = {"packed": 1, "clblast": 2, "tiled": 3}

    @property
    def gemm_backend(self):
        """The GEMM backend in use: "packed" (wbcl's CPU-shaped kernel, the default on CPUs),
        "tiled" (wbcl's GPU-shaped kernel, the default on GPUs that take it) or "clblast" (the
        default elsewhere). Settable; "auto" restores the device's default."""
        b = lib.wbcl_context_gemm_backend(self._h())
        return {v: k for k, v in self._BACKENDS.items()}.get(b, str(b))

    @gemm_backend.setter
    def gemm_backend(self, name):
        if name != "auto" and name not in self._BACKENDS:
            raise ValueError("gemm_backend: 'packed', 'clblast', 'tiled' or 'auto', not %r" % (name,))
        self._call(lib.wbcl_context_set_gemm_backend(self._h(), self._BACKENDS.get(name, 0)))

    def param(self, key):
        """The value in use of a kernel parameter ("gemm.mr", "attention.p64.tiled", ...; the keys
        of include/wbcl/tuning.h, which wbcl-info lists)."""
        v = ctypes.c_long()
        self._call(lib.wbcl_context_param_get(self._h(), key.encode(), ctypes.byref(v), None))
        return v.value

    def set_param(self, key, value):
        """Sets a kernel parameter on this context (validated against the device; an Error names
        what is wrong). Kernels built afterwards use it."""
        self._call(lib.wbcl_context_set_param(self._h(), key.encode(), int(value)))

    def set_weight_cache(self, max_bytes):
        """Limits the packed copies of models' weights this context keeps between calls (the packed
        GEMM backend; default a quarter of the device's memory). Lowering it frees kept copies until
        it holds; 0 frees them all. The results are the same either way (include/wbcl/context.h)."""
        if int(max_bytes) < 0:
            raise ValueError("set_weight_cache: max_bytes must be >= 0, not %r" % (max_bytes,))
        self._call(lib.wbcl_context_set_weight_cache(self._h(), int(max_bytes)))

    @property
    def weight_cache_bytes(self):
        """Bytes of packed weight copies kept now (set_weight_cache)."""
        return lib.wbcl_context_weight_cache_bytes(self._h())

    def finish(self):
        """Waits for the device's queued work."""
        self._call(lib.wbcl_context_finish(self._h()))

    # ---- tensors -------------------------------------------------------------------------------
    def tensor(self, array):
        """A device tensor holding a float32 copy of array (1 to 4 dimensions)."""
        a = _f32(array, "tensor")
        return Tensor(self, a.shape, a)

    def _in(self, x, what, ndim=None):
        if isinstance(x, Tensor):
            if x._ctx is not self:
                raise Error("WBCL_ERROR_CONTEXT_MISMATCH", "%s belongs to another context" % what)
            if ndim is not None and len(x.shape) not in (ndim if isinstance(ndim, tuple) else (ndim,)):
                raise Error("WBCL_ERROR_SHAPE", "%s: expected %s dimensions, got shape %s" % (what, ndim, x.shape))
            return x
        return self.tensor(_f32(x, what, ndim))

    @staticmethod
    def _out(t, keep):
        return t if keep else t.numpy()

    # ---- the module catalogue --------------------------------------------------------------------
    def run(self, module, *inputs, weights=None, verify=False, options=None, **params):
        """Runs a wbcl-run module by name on this context: ctx.run("attn.tssa", x,
        weights="w.safetensors", heads=5) is `wbcl-run attn.tssa --input x.npy --weights
        w.safetensors --param heads=5 --output y.npy`, with the same checks and messages. inputs:
        arrays (float or integer; saved as .npy) or paths of .npy files; params: NAME=VALUE;
        options: the module's own options ({"labels": y}: an array or a path). Returns the output as a NumPy
        array (None for modules that write none). wbcl.modules() lists the modules."""
        r = _runlib()
        if not isinstance(module, str):
            raise TypeError("module: expected a name, got %s" % type(module).__name__)
        info = next((m for m in modules() if m["name"] == module), None)
        with tempfile.TemporaryDirectory(prefix="wbcl_run_") as tmp:
            paths = []
            for i, x in enumerate(inputs):
                if isinstance(x, (str, os.PathLike)):
                    paths.append(os.fspath(x))
                    continue
                a = _as_array(x, "input %d" % i)
                if a.dtype == np.bool_ or not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
                    raise TypeError("input %d: expected a float or integer array, got dtype %s" % (i, a.dtype))
                if a.dtype not in (np.float32, np.float64, np.float16, np.int32, np.int64):
                    a = a.astype(np.int64 if np.issubdtype(a.dtype, np.integer) else np.float32)
                p = os.path.join(tmp, "in%d.npy" % i)
                np.save(p, np.ascontiguousarray(a))
                paths.append(p)
            out = os.path.join(tmp, "out.npy") if info is not None and info["output"] else None
            enc = lambda s: str(s).encode()
            ins = (ctypes.c_char_p * max(1, len(paths)))(*[enc(p) for p in paths])
            pn = list(params.keys())
            pv = [("1" if v else "0") if isinstance(v, bool) else v for v in params.values()]
            names = (ctypes.c_char_p * max(1, len(pn)))(*[enc(n) for n in pn])
            values = (ctypes.c_char_p * max(1, len(pv)))(*[enc(v) for v in pv])
            options = dict(options or {})
            for i, (k, v) in enumerate(options.items()):  # arrays (labels, kernels) go through .npy files too
                if isinstance(v, os.PathLike):
                    options[k] = os.fspath(v)
                elif not isinstance(v, (str, int, float)):
                    a = _as_array(v, "option %s" % k)
                    p = os.path.join(tmp, "opt%d.npy" % i)
                    np.save(p, np.ascontiguousarray(a))
                    options[k] = p
            on = (ctypes.c_char_p * max(1, len(options)))(*[enc(k) for k in options])
            ov = (ctypes.c_char_p * max(1, len(options)))(*[enc(v) for v in options.values()])
            err = ctypes.create_string_buffer(4096)
            rc = r.wbcl_run_exec(self._h(), module.encode(), len(paths), ins,
                                 enc(os.fspath(weights)) if weights is not None else None,
                                 out.encode() if out else None, len(pn), names, values, len(options), on, ov,
                                 1 if verify else 0, err, len(err))
            if rc:
                raise Error("WBCL_RUN_FAILED", err.value.decode(errors="replace"))
            return np.load(out) if out and os.path.exists(out) else None

    # ---- operators ---------------------------------------------------------------------------
    def gemm(self, A, B, alpha=1.0, beta=0.0, C=None, trans_a=False, trans_b=False, keep=False):
        """C = alpha op(A) op(B) + beta C, op = transpose where asked. A (m, k), B (k, n) as
        stored before op; C (m, n) or None (zeros). Returns C (a Tensor with keep=True)."""
        A, B = self._in(A, "A", 2), self._in(B, "B", 2)
        m = A.shape[1] if trans_a else A.shape[0]
        n = B.shape[0] if trans_b else B.shape[1]
        Ct = self._in(C, "C", 2) if C is not None else Tensor(self, (m, n), np.zeros((m, n), np.float32))
        self._call(lib.wbcl_gemm(self._h(), int(bool(trans_a)), int(bool(trans_b)), alpha, A._h(), B._h(), beta,
                                 Ct._h()))
        return self._out(Ct, keep)

    def attention(self, q, k, v, scale=None, causal=False, keep=False):
        """Softmax attention per head: o = softmax(q kᵀ scale (+ causal mask)) v. q (B, K, n_q, p),
        k and v (B, K, n_k, p); scale defaults to p^-1/2. Returns o (B, K, n_q, p)."""
        q, k, v = self._in(q, "q", 4), self._in(k, "k", 4), self._in(v, "v", 4)
        s = q.shape[3] ** -0.5 if scale is None else float(scale)
        o = Tensor(self, q.shape)
        self._call(lib.wbcl_attention_softmax_heads(self._h(), q._h(), k._h(), v._h(), s, int(bool(causal)), o._h()))
        return self._out(o, keep)

    def mssa(self, w, scale=None, causal=False, keep=False):
        """CRATE's multi-head subspace self-attention per head: q = k = v = w (B, K, N, p),
        o = softmax(w wᵀ scale) w, scale p^-1/2 by default. Returns o (B, K, N, p)."""
        w = self._in(w, "w", 4)
        s = w.shape[3] ** -0.5 if scale is None else float(scale)
        o = Tensor(self, w.shape)
        self._call(lib.wbcl_attention_mssa_heads(self._h(), w._h(), s, int(bool(causal)), o._h()))
        return self._out(o, keep)

    def tssa(self, w, temp, keep=False):
        """ToST's token-statistics self-attention per head (SPEC 1.4): w (B, K, N, p), temp (K)
        -> y (B, K, N, p), y = -w Pi / (1 + dots), Pi the softmax over heads."""
        w, t = self._in(w, "w", 4), self._in(temp, "temp", (1, 2))
        y = Tensor(self, w.shape)
        self._call(lib.wbcl_tssa_heads(self._h(), w._h(), t._h(), y._h(), None))
        return self._out(y, keep)

    def tssa_state(self, batch, heads, p):
        """A zeroed causal-TSSA state (TSSAState) for tssa_causal."""
        return TSSAState(self, int(batch), int(heads), int(p))

    def tssa_causal(self, w, temp, denom_bias, state=None, keep=False):
        """Causal TSSA (SPEC 1.5) per head: w (B, K, N, p), temp (K), denom_bias (K, Tmax).
        With a TSSAState the N tokens continue its sequence (decode: N = 1) and advance it."""
        w, t, db = self._in(w, "w", 4), self._in(temp, "temp", (1, 2)), self._in(denom_bias, "denom_bias", (2, 3))
        if state is not None and not isinstance(state, TSSAState):
            raise TypeError("state: expected a wbcl.TSSAState, got %s" % type(state).__name__)
        y = Tensor(self, w.shape)
        self._call(lib.wbcl_tssa_causal_heads(self._h(), w._h(), t._h(), db._h(),
                                              state._h() if state is not None else None, y._h(), None))
        return self._out(y, keep)

    def xca(self, q, k, v, temperature, keep=False):
        """XCiT's cross-covariance attention per head (SPEC 1.6): q, k, v (B, K, N, p), temperature
        (K): o = v A with A = softmax(q̂ᵀ k̂ · temperature) (p × p), q̂, k̂ L2-normalized over tokens."""
        q, k, v = self._in(q, "q", 4), self._in(k, "k", 4), self._in(v, "v", 4)
        t = self._in(np.reshape(_f32(temperature, "temperature"), -1), "temperature", 1)
        o = Tensor(self, q.shape)
        self._call(lib.wbcl_xca_heads(self._h(), q._h(), k._h(), v._h(), t._h(), o._h()))
        return self._out(o, keep)

    def ista(self, x, W, eta=0.1, lambd=0.1, z=None, threshold="relu", keep=False):
        """One ISTA step y = θ(z − η (z Wᵀ − x) W), θ the ReLU (CRATE) or soft threshold at η λ.
        x (..., d), W (d, m), z (..., m) or None (z = x: CRATE's block, m = d)."""
        if threshold not in ("relu", "soft"):
            raise Error("WBCL_ERROR_INVALID_ARGUMENT", "threshold must be 'relu' or 'soft', got %r" % (threshold,))
        x, W = self._in(x, "x"), self._in(W, "W", 2)
        zt = self._in(z, "z") if z is not None else None
        y = Tensor(self, x.shape[:-1] + (W.shape[1],))
        self._call(lib.wbcl_ista(self._h(), x._h(), zt._h() if zt else None, W._h(), eta, lambd,
                                 0 if threshold == "relu" else 1, y._h()))
        return self._out(y, keep)

    def aot(self, w, tau=None, keep=False):
        """The attention-only denoiser's per-head step (SPEC 1.3, book 5.3.2): o = φ(w wᵀ) w per
        (batch, head), φ the row softmax, or with tau in (1/2, 1] the Theorem 5.1 threshold
        h_τ(softmax). w (B, K, N, p)."""
        w = self._in(w, "w", 4)
        o = Tensor(self, w.shape)
        self._call(lib.wbcl_aot_heads(self._h(), w._h(), 0 if tau is None else 1, 0.0 if tau is None else float(tau),
                                      o._h()))
        return self._out(o, keep)

    def energy(self, y, v=None, rho="exp", c=1.0, alpha=1.0, keep=False):
        """One energy-descent step per head (SPEC 1.7): γ_uv = ρ'(½‖y_u − y_v‖²) (rho "exp": ρ = −e^{−z};
        "log": ρ = log(z + c)), out_u = (1 − α) v_u + α Σ_v γ_uv v_v / Σ_v γ_uv; y (B, K, N, p),
        v (B, K, N, pv) or None (v = y)."""
        if rho not in ("exp", "log"):
            raise Error("WBCL_ERROR_INVALID_ARGUMENT", "rho must be 'exp' or 'log', got %r" % (rho,))
        y = self._in(y, "y", 4)
        vt = self._in(v, "v", 4) if v is not None else None
        o = Tensor(self, vt.shape if vt else y.shape)
        self._call(lib.wbcl_energy_heads(self._h(), y._h(), vt._h() if vt else None, 0 if rho == "exp" else 1,
                                         float(c), float(alpha), o._h()))
        return self._out(o, keep)

    def _per_sample(self, Z):
        Z = self._in(Z, "Z", (2, 3, 4))
        return Z, int(np.prod(Z.shape[:-2]))

    def coding_rate(self, Z, eps2=0.1):
        """R(Z) = ½ logdet(I + d/(N ε²) ZᵀZ) per sample: Z (..., N, d) -> array of the leading shape
        (a float for a 2-D Z). Natural logs."""
        Z, nb = self._per_sample(Z)
        out = np.zeros(nb)
        self._call(lib.wbcl_coding_rate(self._h(), Z._h(), float(eps2), out.ctypes.data_as(_lib.DP)))
        return out.reshape(Z.shape[:-2]) if len(Z.shape) > 2 else float(out[0])

    def rate_reduction(self, Z, U, heads, eps2=0.1, transposed=False):
        """(ΔR, R, Rc) per sample against the subspaces U = [U_1 … U_K] (d, K p), or (K p, d) with
        transposed=True (CRATE's and ToST's qkv.weight)."""
        Z, nb = self._per_sample(Z)
        Ut = self._in(U, "U", 2)
        dR, R, Rc = np.zeros(nb), np.zeros(nb), np.zeros(nb)
        self._call(lib.wbcl_rate_reduction(self._h(), Z._h(), Ut._h(), int(bool(transposed)), int(heads), float(eps2),
                                           dR.ctypes.data_as(_lib.DP), R.ctypes.data_as(_lib.DP),
                                           Rc.ctypes.data_as(_lib.DP)))
        sh = Z.shape[:-2]
        return tuple(a.reshape(sh) if sh else float(a[0]) for a in (dR, R, Rc))

    def sparsity(self, Z, threshold=0.0):
        """#{|Z_ij| > threshold} / (N d) per sample of Z (..., N, d)."""
        Z, nb = self._per_sample(Z)
        out = np.zeros(nb)
        self._call(lib.wbcl_sparsity(self._h(), Z._h(), float(threshold), out.ctypes.data_as(_lib.DP)))
        return out.reshape(Z.shape[:-2]) if len(Z.shape) > 2 else float(out[0])


def _fit_progress(progress):
    """A C progress callback around a Python one; exceptions are kept and raised after the call."""
    errors = []

    def cb(layer, dR, R, Rc, user):
        if progress is not None and not errors:
            try:
                progress(layer, dR, R, Rc)
            except BaseException as e:
                errors.append(e)

    return _lib.PROGRESS_FN(cb), errors


class _Constructed(_Owned):
    """A network constructed forward from data (ReduNet, ShiftInvariantReduNet): save / load, and the
    parts of fit that both share. Subclasses set _free, _save, _load."""

    def __init__(self, ctx, handle):
        self._attach(ctx, handle)

    @staticmethod
    def _params(defaults, layers, eta, eps2, lam):
        for name, v in (("layers", layers), ("eta", eta), ("eps2", eps2), ("lambda_", lam)):
            if v is not None:
                setattr(defaults, name, v)
        return defaults

    @classmethod
    def _fitted(cls, ctx, st, handle, errors, Z):
        """The fit's outcome: an exception from progress() first, then the library's status."""
        if errors:
            if handle.value:
                cls._free(handle.value)
            raise errors[0]
        ctx._call(st)
        net = cls(ctx, handle.value)
        return (net, Z.numpy()) if Z is not None else net

    def save(self, path):
        self._ctx._call(type(self)._save(self._ctx._h(), self._h(), os.fspath(path).encode()))

    @classmethod
    def load(cls, ctx, path):
        h = ctypes.c_void_p()
        ctx._call(cls._load(ctx._h(), os.fspath(path).encode(), ctypes.byref(h)))
        return cls(ctx, h.value)


class ReduNet(_Constructed):
    """ReduNet (book Algorithm 5.1), constructed forward from data: ReduNet.fit(ctx, X, y, ...)."""
    _free = staticmethod(lib.wbcl_redunet_destroy)
    _save = staticmethod(lib.wbcl_redunet_save)
    _load = staticmethod(lib.wbcl_redunet_load)

    @classmethod
    def fit(cls, ctx, X, y, layers=None, eta=None, eps2=None, lam=None, progress=None, return_features=False):
        """Constructs the layers from X (m, d) and integer labels y (m) in [0, classes).
        Defaults: book Example 5.1 (eta 0.5, eps2 0.1, lambda 500) with `layers` layers (2000).
        progress(layer, dR, R, Rc) is called once per layer. Returns the ReduNet, or
        (ReduNet, Z) with return_features (Z: the training features after the last layer)."""
        if not isinstance(ctx, Context):
            raise TypeError("ctx: expected a wbcl.Context, got %s" % type(ctx).__name__)
        Xt = ctx._in(X, "X", 2)
        lab = _labels(y, Xt.shape[0], "y")
        classes = int(lab.max()) + 1 if lab.size else 0
        p = cls._params(lib.wbcl_redunet_default_params(), layers, eta, eps2, lam)
        fn, errors = _fit_progress(progress)  # an exception in progress() is raised after the C call
        Z = Tensor(ctx, Xt.shape) if return_features else None
        h = ctypes.c_void_p()
        st = lib.wbcl_redunet_fit(ctx._h(), Xt._h(), lab.ctypes.data_as(_lib.IP), classes, ctypes.byref(p), fn, None,
                                  Z._h() if Z else None, ctypes.byref(h))
        return cls._fitted(ctx, st, h, errors, Z)

    def apply(self, X, keep=False):
        """The layers applied to X (m, d): Z (m, d)."""
        Xt = self._ctx._in(X, "X", 2)
        Z = Tensor(self._ctx, Xt.shape)
        self._ctx._call(lib.wbcl_redunet_apply(self._ctx._h(), self._h(), Xt._h(), Z._h()))
        return Context._out(Z, keep)


class ShiftInvariantReduNet(_Constructed):
    """The shift-invariant ReduNet (book 5.1.2; SPEC 5): multi-channel 1-D signals (m, C, T) or 2-D
    images (m, C, H, W), its operators diagonalized by the FFT (lengths with prime factors <= 13)."""
    _free = staticmethod(lib.wbcl_circulant_destroy)
    _save = staticmethod(lib.wbcl_circulant_save)
    _load = staticmethod(lib.wbcl_circulant_load)

    @classmethod
    def fit(cls, ctx, X, y, lift=None, layers=None, eta=None, eps2=None, lam=None, progress=None,
            return_features=False):
        """Constructs the layers from X and integer labels y (m). lift: a lifting kernel (C, Cin, k)
        / (C, Cin, kh, kw) applied first (circular cross-correlation + ReLU; kept in the model), X then
        the raw signals. Defaults: SPEC 5 (10 layers, eta 0.5, eps2 0.1, lambda 500)."""
        if not isinstance(ctx, Context):
            raise TypeError("ctx: expected a wbcl.Context, got %s" % type(ctx).__name__)
        Xt = ctx._in(X, "X", (3, 4))
        lab = _labels(y, Xt.shape[0], "y")
        Wt = ctx._in(lift, "lift", (3, 4)) if lift is not None else None
        p = cls._params(lib.wbcl_circulant_default_params(), layers, eta, eps2, lam)
        fn, errors = _fit_progress(progress)
        zshape = (Xt.shape[0], Wt.shape[0]) + Xt.shape[2:] if Wt else Xt.shape
        Z = Tensor(ctx, zshape) if return_features else None
        h = ctypes.c_void_p()
        st = lib.wbcl_circulant_fit(ctx._h(), Xt._h(), Wt._h() if Wt else None, lab.ctypes.data_as(_lib.IP),
                                    int(lab.max()) + 1, ctypes.byref(p), fn, None, Z._h() if Z else None,
                                    ctypes.byref(h))
        return cls._fitted(ctx, st, h, errors, Z)

    def apply(self, X, keep=False):
        """The stored layers (lifting first, if the model has a kernel) applied to X (m, Cin, ...):
        Z (m, C, ...), C the model's channels."""
        Xt = self._ctx._in(X, "X", (3, 4))
        Z = Tensor(self._ctx, (Xt.shape[0], lib.wbcl_circulant_channels(self._h())) + Xt.shape[2:])
        self._ctx._call(lib.wbcl_circulant_apply(self._ctx._h(), self._h(), Xt._h(), Z._h(), None, None))
        return Context._out(Z, keep)


def _ids_array(ids, what):
    a = _as_array(ids, what)
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError("%s: expected an integer array of token ids, got dtype %s" % (what, a.dtype))
    a = np.ascontiguousarray(a, dtype=np.int64)
    arr = _lib.Array()
    arr.elem, arr.ndim = 5, a.ndim  # WBCL_ELEM_I64
    for i, s in enumerate(a.shape):
        arr.shape[i] = s
    arr.data, arr.nbytes = a.ctypes.data, a.nbytes
    return a, arr


class LM(_Owned):
    """A causal language model (gpt2, tost_lm or crate_lm, include/wbcl/lm.h) from a safetensors
    file with the reference state_dict keys; every size comes from the weights, heads is given."""
    _free = staticmethod(lib.wbcl_lm_destroy)

    def __init__(self, ctx, kind, path, heads):
        if not isinstance(ctx, Context):
            raise TypeError("ctx: expected a wbcl.Context, got %s" % type(ctx).__name__)
        k = ctypes.c_int()
        ctx._call(lib.wbcl_lm_kind_from_name(str(kind).encode(), ctypes.byref(k)))
        h = ctypes.c_void_p()
        ctx._call(lib.wbcl_lm_load_file(ctx._h(), os.fspath(path).encode(), k.value, int(heads), ctypes.byref(h)))
        self._attach(ctx, h.value)
        i = lib.wbcl_lm_get_info(h.value).contents
        self.vocab, self.block_size, self.dim, self.depth, self.heads = i.vocab, i.block_size, i.dim, i.depth, i.heads

    def forward(self, ids):
        """Logits (B, T, V) (or (T, V) for 1-D ids) of whole sequences of integer ids."""
        a, arr = _ids_array(ids, "ids")
        shape = a.shape + (self.vocab,)
        lg = Tensor(self._ctx, (int(np.prod(shape)),))
        self._ctx._call(lib.wbcl_lm_forward(self._ctx._h(), self._h(), ctypes.byref(arr), lg._h()))
        out = lg.numpy().reshape(shape)
        lg.close()
        return out

    def generate(self, prompt, tokens, temperature=0.0, top_k=0, seed=1):
        """Yields `tokens` new ids, one array of B ids per step (B = 1 for a 1-D prompt: plain
        ints), after one prefill of the prompt (T0) or (B, T0); decoding keeps the model's state
        (ToST: constant memory). temperature 0: greedy; else sampling as wbcl_lm_pick."""
        a, arr = _ids_array(prompt, "prompt")
        B = 1 if a.ndim == 1 else a.shape[0]
        ctx = self._ctx
        st = ctypes.c_void_p()
        ctx._call(lib.wbcl_lm_state_create(ctx._h(), self._h(), B, ctypes.byref(st)))
        lg = None
        try:
            lg = Tensor(ctx, (B, self.vocab))
            ctx._call(lib.wbcl_lm_prefill(ctx._h(), st.value, ctypes.byref(arr), lg._h()))
            smp = _lib.LMSampling(float(temperature), int(top_k), int(seed))
            rng = ctypes.c_uint64(int(seed))
            tok = (ctypes.c_int64 * B)()
            for step in range(int(tokens)):
                logits = lg.numpy()
                for b in range(B):
                    tok[b] = lib.wbcl_lm_pick(logits[b].ctypes.data_as(_lib.FP), self.vocab, ctypes.byref(smp),
                                              ctypes.byref(rng))
                ids = np.array(tok[:], dtype=np.int64)
                yield int(ids[0]) if a.ndim == 1 else ids
                if step + 1 < int(tokens):
                    ctx._call(lib.wbcl_lm_step(ctx._h(), st.value, tok, lg._h()))
        finally:
            if ctx._handle is not None:
                lib.wbcl_lm_state_destroy(st.value)
                if lg is not None:
                    lg.close()


class _Vision(_Owned):
    def forward(self, images, features=False, keep=False):
        """images (B, C, H, W) -> logits (B, classes), or with features=True the final features
        (CRATE: tokens (B, N+1, d); ToST: the normed CLS token (B, d))."""
        x = self._ctx._in(images, "images", 4)
        B = x.shape[0]
        if features:
            shape = (B, (x.shape[2] // self.patch) * (x.shape[3] // self.patch) + 1, self.dim) \
                if isinstance(self, CRATE) else (B, self.dim)
        else:
            shape = (B, self.num_classes)
        out = Tensor(self._ctx, shape)
        self._ctx._call(self._forward(self._ctx._h(), self._h(), x._h(), 1 if features else 0, out._h(), None))
        return Context._out(out, keep)


class CRATE(_Vision):
    """CRATE (Ma-Lab-Berkeley/CRATE crate.py) from a safetensors file with its state_dict keys;
    every size comes from the weights but the heads (the weights do not fix the split)."""
    _free = staticmethod(lib.wbcl_crate_destroy)
    _forward = staticmethod(lib.wbcl_crate_forward)

    def __init__(self, ctx, path, heads, eta=0.1, lambd=0.1):
        cfg = _lib.CrateConfig(heads=int(heads), eta=eta, lambd=lambd, ln_eps=1e-5)
        h = ctypes.c_void_p()
        ctx._call(lib.wbcl_crate_load_file(ctx._h(), os.fspath(path).encode(), ctypes.byref(cfg), ctypes.byref(h)))
        self._attach(ctx, h.value)
        c = lib.wbcl_crate_get_config(h.value).contents
        self.dim, self.depth, self.heads, self.patch, self.num_classes = c.dim, c.depth, c.heads, c.patch, c.num_classes


class ToST(_Vision):
    """ToST (RobinWu218/ToST tost_cab.py) from a safetensors file; every size from the weights."""
    _free = staticmethod(lib.wbcl_tost_destroy)
    _forward = staticmethod(lib.wbcl_tost_forward)

    def __init__(self, ctx, path):
        cfg = _lib.ToSTConfig(ln_eps=1e-6, bn_eps=1e-5)
        h = ctypes.c_void_p()
        ctx._call(lib.wbcl_tost_load_file(ctx._h(), os.fspath(path).encode(), ctypes.byref(cfg), ctypes.byref(h)))
        self._attach(ctx, h.value)
        c = lib.wbcl_tost_get_config(h.value).contents
        self.dim, self.depth, self.heads, self.patch, self.num_classes = c.dim, c.depth, c.heads, c.patch, c.num_classes
