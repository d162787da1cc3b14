"""Devices, contexts, tensors, errors and the module catalogue (ctx.run)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import wbcl


def test_devices_and_context(ctx):
    devs = wbcl.devices()
    assert devs and all({"index", "name", "type", "vendor", "opencl"} <= set(d) for d in devs)
    dev = ctx.device
    assert dev["name"] in [d["name"] for d in devs]
    assert dev["variant"] in ("cpu", "gpu")


def test_gemm_backend_is_selectable(ctx, rng):
    # All three backends give the float64 product to float32 rounding (k = 37 terms of O(1): ~1e-6).
    default = ctx.gemm_backend
    # packed on CPUs; on GPUs wbcl's tiled kernel where the device takes it (work-groups of 256 and
    # 4.25 KiB of local memory), else CLBlast; CLBlast on other devices
    kind = ctx.device["type"]
    expected = {"cpu": ("packed",), "gpu": ("tiled", "clblast")}.get(kind, ("clblast",))
    assert default in expected, (kind, default)
    a, b = rng.standard_normal((19, 37)), rng.standard_normal((37, 23))
    ref = a @ b
    try:
        for name in ("packed", "clblast", "tiled"):
            ctx.gemm_backend = name
            assert ctx.gemm_backend == name
            np.testing.assert_allclose(ctx.gemm(a, b), ref, rtol=0, atol=1e-4 * np.abs(ref).max())
        with pytest.raises(ValueError):
            ctx.gemm_backend = "cublas"
    finally:
        ctx.gemm_backend = "auto"
    assert ctx.gemm_backend == default


def test_kernel_parameters(ctx, rng):
    # A parameter set on the context is in use; a bad key or value is an Error naming it.
    old = ctx.param("attention.p64.g")
    q = rng.standard_normal((1, 2, 45, 64)).astype(np.float32)
    ref = ctx.attention(q, q, q)
    try:
        ctx.set_param("attention.p64.g", 1 if old != 1 else 2)
        assert ctx.param("attention.p64.g") != old
        np.testing.assert_allclose(ctx.attention(q, q, q), ref, rtol=0, atol=1e-5)  # another kernel build
        with pytest.raises(wbcl.Error) as e:
            ctx.set_param("attention.p64.g", 99)
        assert "attention.p64.g" in str(e.value)
        with pytest.raises(wbcl.Error) as e:
            ctx.set_param("no.such.key", 1)
        assert "no.such.key" in str(e.value)
    finally:
        ctx.set_param("attention.p64.g", old)


def test_bad_selector():
    with pytest.raises(wbcl.Error) as e:
        wbcl.Context("no-such-device-name-xyz")
    assert e.value.status == "WBCL_ERROR_NO_DEVICE" and "no-such-device-name-xyz" in str(e.value)
    with pytest.raises(TypeError):
        wbcl.Context(3.5)


@pytest.mark.parametrize("var,value", [("WBCL_LIBRARY", "/nonexistent/libwbcl.so"),
                                       ("WBCL_BUILD_DIR", "/nonexistent")])
def test_explicit_library_path_is_authoritative(var, value):
    # A library asked for by name must not be silently replaced by another build: the import fails
    # and names the variable and the path (a fresh interpreter: the library loads at import).
    env = dict(os.environ, **{var: value})
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(wbcl.__file__)))
    r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, %r); import wbcl" % pkg],
                       env=env, capture_output=True, text=True)
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "$" + var in r.stderr and "/nonexistent" in r.stderr


def test_open_contexts_are_closed_at_exit():
    # A script that leaves a context (and a tensor of it) open and exits: the package's atexit handler
    # closes them before the interpreter's teardown. The script registers its own check first, so it
    # runs after the package's handler (atexit runs last-registered first) and sees them closed.
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(wbcl.__file__)))
    script = """
import atexit, sys
sys.path.insert(0, %r)
held = {}
def check():
    print("context closed" if held["ctx"]._handle is None else "context open")
    print("tensor closed" if held["t"]._handle is None else "tensor open")
atexit.register(check)
import numpy as np, wbcl
held["ctx"] = wbcl.Context()
held["t"] = held["ctx"].tensor(np.ones((64, 64)))
held["ctx"].gemm(np.ones((64, 64)), np.ones((64, 64)))
""" % pkg
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["context closed", "tensor closed"], (r.stdout, r.stderr)


def test_tensor_round_trip(ctx, rng):
    a = rng.standard_normal((3, 5, 7))
    t = ctx.tensor(a)
    assert t.shape == (3, 5, 7)
    np.testing.assert_array_equal(t.numpy(), a.astype(np.float32))  # float32 rounding only
    t.write(np.ones((3, 5, 7)))
    assert (t.numpy() == 1).all()
    with pytest.raises(wbcl.Error) as e:
        t.write(np.ones((3, 5)))
    assert e.value.status == "WBCL_ERROR_SHAPE"
    with pytest.raises(wbcl.Error):
        ctx.tensor(np.ones((1, 1, 1, 1, 1)))


def test_closed_context_fails_cleanly():
    c = wbcl.Context()
    t = c.tensor(np.ones((2, 2)))
    with c:
        pass  # leaving the block closes it
    for call in (lambda: c.tensor(np.ones(3)), lambda: t.numpy(), lambda: c.gemm(np.ones((2, 2)), np.ones((2, 2))),
                 lambda: c.device, lambda: c.run("gelu", np.ones(3))):
        with pytest.raises(wbcl.Error) as e:
            call()
        assert "closed" in str(e.value)
    c.close()  # twice is fine


def test_bad_inputs(ctx):
    with pytest.raises(TypeError, match="dtype"):
        ctx.tensor(np.array(["a", "b"]))
    with pytest.raises(TypeError, match="NumPy"):
        ctx.gemm([[1.0]], [[1.0]])
    with pytest.raises(wbcl.Error) as e:
        ctx.gemm(np.ones((2, 3)), np.ones((4, 5)))
    assert e.value.status == "WBCL_ERROR_SHAPE" and e.value.message
    with pytest.raises(wbcl.Error) as e:
        ctx.gemm(np.ones((2, 3, 4)), np.ones((4, 5)))
    assert e.value.status == "WBCL_ERROR_SHAPE"


def test_torch_like_and_noncontiguous(ctx, rng):
    class FakeTorch:  # what a PyTorch CPU tensor offers: .numpy()
        def __init__(self, a):
            self.a = a

        def numpy(self):
            return self.a

    A = rng.standard_normal((8, 6))[:, ::2]  # non-contiguous (8, 3)
    B = rng.standard_normal((3, 4))
    want = A @ B
    for got in (ctx.gemm(A, B), ctx.gemm(FakeTorch(A), FakeTorch(B))):
        assert np.abs(got - want).max() < 1e-5


def test_modules_and_run(ctx, rng):
    names = [m["name"] for m in wbcl.modules()]
    assert {"gemm", "attn.tssa", "redunet.fit", "tost_lm.generate"} <= set(names)
    x = rng.standard_normal((4, 33))
    got = ctx.run("softmax", x)
    e = np.exp(x - x.max(-1, keepdims=True))
    assert np.abs(got - e / e.sum(-1, keepdims=True)).max() < 1e-6
    g = ctx.run("layernorm", x, eps=1e-5)
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    assert np.abs(g - want).max() < 1e-5
    with pytest.raises(wbcl.Error) as e:
        ctx.run("softmax", x, nonsense=3)
    assert "unknown param 'nonsense'" in str(e.value)
    with pytest.raises(wbcl.Error) as e:
        ctx.run("no.such.module", x)
    assert "unknown module" in str(e.value)
    with pytest.raises(wbcl.Error) as e:
        ctx.run("softmax")
    assert "takes 1 --input" in str(e.value)


def test_run_with_array_options(ctx, rng, tmp_path):
    X = rng.standard_normal((6, 2, 8))
    y = np.array([0, 1, 0, 1, 0, 1])
    log = tmp_path / "log.csv"
    Z = ctx.run("redunet1d.fit", X, options={"labels": y, "log": log}, layers=2, eps2=0.1)
    assert Z.shape == (6, 2, 8) and np.isfinite(Z).all()
    assert np.allclose(np.linalg.norm(Z.reshape(6, -1), axis=1), 1, atol=1e-5)  # normalized per sample
    rows = log.read_text().strip().splitlines()
    assert rows[0].startswith("layer") and len(rows) == 3
