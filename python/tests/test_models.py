"""ReduNet (against a NumPy double implementation of SPEC 4.1) and the causal language models
(against the golden logits and greedy ids that PyTorch produced, tests/golden/make_lm.py)."""
import numpy as np
import pytest

import wbcl
from conftest import read_safetensors, repo_path


def _normalize(Z):
    return Z / np.maximum(np.linalg.norm(Z, axis=1, keepdims=True), 1e-8)


def _logdet(M):
    return 2 * np.log(np.diag(np.linalg.cholesky(M))).sum()


def _redunet(X, y, K, layers, eta, eps2, lam):
    """SPEC 4.1 in double: construct each layer from the current features, apply it, log dR."""
    Z = _normalize(X.astype(np.float64))
    m, d = Z.shape
    dRs = []
    for _ in range(layers):
        a = d / (m * eps2)
        E = a * np.linalg.inv(np.eye(d) + a * Z.T @ Z)
        Cs, gam = [], []
        for j in range(K):
            Zj = Z[y == j]
            aj = d / (len(Zj) * eps2)
            Cs.append(aj * np.linalg.inv(np.eye(d) + aj * Zj.T @ Zj))
            gam.append(len(Zj) / m)
        c = np.stack([Z @ C.T for C in Cs], 1)                  # (m, K, d)
        nrm = np.maximum(np.linalg.norm(c, axis=2), 1e-8)
        s = -lam * nrm
        pi = np.exp(s - s.max(1, keepdims=True))
        pi /= pi.sum(1, keepdims=True)
        Z = _normalize(Z + eta * (Z @ E.T - (np.array(gam)[None, :, None] * pi[..., None] * c).sum(1)))
        yh = pi.argmax(1)
        R = 0.5 * _logdet(np.eye(d) + a * Z.T @ Z)
        Rc = sum((yh == j).sum() / m * 0.5 * _logdet(np.eye(d) + d / ((yh == j).sum() * eps2) * Z[yh == j].T @ Z[yh == j])
                 for j in range(K) if (yh == j).any())
        dRs.append(R - Rc)
    return Z, dRs


def test_redunet_fit_apply_save_load(ctx, rng, tmp_path):
    K, per, d, L = 3, 20, 4, 3
    centres = np.eye(d)[:K]
    X = np.concatenate([centres[j] + 0.3 * rng.standard_normal((per, d)) for j in range(K)])
    y = np.repeat(np.arange(K), per)
    seen = []
    net, Z = wbcl.ReduNet.fit(ctx, X, y, layers=L, eta=0.5, eps2=0.1, lam=10.0,
                              progress=lambda layer, dR, R, Rc: seen.append((layer, dR, R, Rc)),
                              return_features=True)
    Zref, dRs = _redunet(X, y, K, L, 0.5, 0.1, 10.0)
    # 3 layers of float32 solves (condition <= 1 + d/eps2 = 41) and normalizations: ~1e-5 relative
    assert np.abs(Z - Zref).max() < 2e-4
    assert [s[0] for s in seen] == [1, 2, 3]
    assert np.allclose([s[1] for s in seen], dRs, atol=2e-4)
    assert all(abs(s[1] - (s[2] - s[3])) < 1e-5 for s in seen)
    assert np.abs(net.apply(X) - Z).max() < 1e-5  # Algorithm 5.2 replays the same layers
    p = tmp_path / "net.redunet"
    net.save(p)
    assert np.abs(wbcl.ReduNet.load(ctx, p).apply(X) - Z).max() == 0


def test_redunet_bad_input(ctx):
    X = np.ones((6, 3))
    with pytest.raises(TypeError, match="integer"):
        wbcl.ReduNet.fit(ctx, X, np.zeros(6), layers=1)
    with pytest.raises(wbcl.Error) as e:
        wbcl.ReduNet.fit(ctx, X, np.zeros(5, dtype=int), layers=1)
    assert e.value.status == "WBCL_ERROR_SHAPE"
    with pytest.raises(ZeroDivisionError):  # an exception in progress() stops the fit and propagates
        wbcl.ReduNet.fit(ctx, np.random.default_rng(0).standard_normal((6, 3)), np.array([0, 1] * 3), layers=2,
                         progress=lambda *a: 1 / 0)


@pytest.mark.parametrize("kind", ["gpt2", "tost_lm", "crate_lm"])
def test_lm_forward_and_generate(ctx, kind):
    w = repo_path("tests", "golden", "lm_%s.safetensors" % kind)
    g = read_safetensors(repo_path("tests", "golden", "lm_%s_golden.safetensors" % kind))
    lm = wbcl.LM(ctx, kind, w, heads=3)
    assert (lm.vocab, lm.dim, lm.depth) == (97, 48, 2)
    for c in ("c0", "c1", "c2"):  # the tolerance against PyTorch float32 golden logits
        assert np.abs(lm.forward(g[c + ".ids"]) - g[c + ".logits"]).max() < 2e-5
    prompt, want = g["gen.prompt"], g["gen.ids"]
    steps = list(lm.generate(prompt, tokens=want.shape[1] - prompt.shape[1]))
    assert np.array_equal(np.concatenate([prompt, np.stack(steps, 1)], 1), want)
    one = list(lm.generate(prompt[0], tokens=4))  # a 1-D prompt yields plain ints
    assert one == [int(t) for t in want[0, prompt.shape[1]:prompt.shape[1] + 4]]
    # the same as wbcl-run's generate module, sampling included
    ids = ctx.run(kind + ".generate", prompt[0], weights=w, heads=3, tokens=5, temperature=0.8, top_k=10, seed=7)
    got = list(lm.generate(prompt[0], tokens=5, temperature=0.8, top_k=10, seed=7))
    assert list(ids[prompt.shape[1]:]) == got


def test_lm_bad_input(ctx):
    w = repo_path("tests", "golden", "lm_tost_lm.safetensors")
    lm = wbcl.LM(ctx, "tost_lm", w, heads=3)
    with pytest.raises(wbcl.Error) as e:
        lm.forward(np.array([[1, 2, 97]]))
    assert "97" in e.value.message
    with pytest.raises(TypeError):
        lm.forward(np.array([[1.0, 2.0]]))
    with pytest.raises(wbcl.Error):
        wbcl.LM(ctx, "nope", w, heads=3)
    with pytest.raises(wbcl.Error) as e:
        wbcl.LM(ctx, "tost_lm", repo_path("no_such_file.safetensors"), heads=3)
    assert "no_such_file" in e.value.message


def test_vision_models(ctx):
    g = read_safetensors(repo_path("tests", "golden", "crate_golden.safetensors"))
    m = wbcl.CRATE(ctx, repo_path("tests", "golden", "crate.safetensors"), heads=4)
    assert (m.dim, m.depth, m.num_classes) == (48, 2, 10)
    # float32 forward against the PyTorch golden logits: 2e-5, the bound of the C suite (test_models.c GOLD_TOL)
    assert np.abs(m.forward(g["image"]) - g["logits"]).max() < 2e-5
    assert m.forward(g["image"], features=True).shape == (2, 17, 48)
    g = read_safetensors(repo_path("tests", "golden", "tost16_golden.safetensors"))
    t = wbcl.ToST(ctx, repo_path("tests", "golden", "tost16.safetensors"))
    assert np.abs(t.forward(g["image"]) - g["logits"]).max() < 2e-5
    assert np.abs(t.forward(g["image"], features=True) - g["feature"]).max() < 2e-5
    with pytest.raises(wbcl.Error) as e:
        t.forward(np.ones((2, 3, 64)))
    assert e.value.status == "WBCL_ERROR_SHAPE"


def test_shift_invariant_redunet(ctx, rng, tmp_path):
    m, C, T = 8, 2, 8
    X = rng.standard_normal((m, 1, T))
    lift = rng.standard_normal((C, 1, 3))
    y = np.arange(m) % 2
    seen = []
    net, Z = wbcl.ShiftInvariantReduNet.fit(ctx, X, y, lift=lift, layers=2, lam=10.0, return_features=True,
                                            progress=lambda *a: seen.append(a))
    assert Z.shape == (m, C, T) and [s[0] for s in seen] == [1, 2]
    # the wbcl-run module on the same data gives the same features (one C implementation behind both)
    Zr = ctx.run("redunet1d.fit", X, options={"labels": y, "lift": lift}, layers=2, **{"lambda": 10.0})
    assert np.abs(Zr - Z).max() < 1e-6
    assert np.abs(net.apply(X) - Z).max() < 1e-5  # the replay on the training samples
    p = tmp_path / "si.safetensors"
    net.save(p)
    assert np.abs(wbcl.ShiftInvariantReduNet.load(ctx, p).apply(X) - Z).max() < 1e-6


def test_weight_cache():
    # A vision model keeps its weights' packed panels between forwards (packed backend) and gives the
    # same logits bit for bit with the cache off; closing it returns the bytes. Language models keep none
    # (include/wbcl/context.h: their decode steps read the weights in place). A context of its own: the
    # session's keeps its settings.
    g = read_safetensors(repo_path("tests", "golden", "crate_golden.safetensors"))
    w = repo_path("tests", "golden", "lm_gpt2.safetensors")
    gl = read_safetensors(repo_path("tests", "golden", "lm_gpt2_golden.safetensors"))
    with wbcl.Context() as ctx:
        ctx.gemm_backend = "packed"
        assert ctx.weight_cache_bytes == 0
        m = wbcl.CRATE(ctx, repo_path("tests", "golden", "crate.safetensors"), heads=4)
        kept = m.forward(g["image"])
        assert ctx.weight_cache_bytes > 0
        assert np.array_equal(m.forward(g["image"]), kept)  # on the kept panels
        assert np.abs(kept - g["logits"]).max() < 2e-5
        m.close()
        assert ctx.weight_cache_bytes == 0
        ctx.set_weight_cache(0)
        m = wbcl.CRATE(ctx, repo_path("tests", "golden", "crate.safetensors"), heads=4)
        assert np.array_equal(m.forward(g["image"]), kept)
        assert ctx.weight_cache_bytes == 0
        m.close()
        ctx.set_weight_cache(1 << 30)
        lm = wbcl.LM(ctx, "gpt2", w, heads=3)
        assert np.abs(lm.forward(gl["c0.ids"]) - gl["c0.logits"]).max() < 2e-5  # 32 rows: the packed GEMM
        assert ctx.weight_cache_bytes == 0
        lm.close()
        with pytest.raises(ValueError):
            ctx.set_weight_cache(-1)
