"""The attention backward (reference/attention/backward.py, issue 15): golden gradients certified
faithful against the independent mpmath oracle, the fast gradients within their derived bound,
agreement with float64 central differences, the adjoint identity, and argument errors."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from reference.attention import Config, backward, forward, oracle
from reference.golden.certify import certify_arrays
from reference.identities import REGISTRY, load_all, run_identity

U = 2.0**-53
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}


def _case(seed, config, b=2, s=3, dm=8, past=2, padded=True):
    rng = np.random.default_rng(seed)
    hq, hkv, d = config.num_heads, config.num_kv_heads, config.head_dim
    X = rng.uniform(-1, 1, (b, s, dm))
    W = {"wq": rng.uniform(-0.5, 0.5, (hq * d, dm)), "wk": rng.uniform(-0.5, 0.5, (hkv * d, dm)),
         "wv": rng.uniform(-0.5, 0.5, (hkv * d, dm)), "wo": rng.uniform(-0.5, 0.5, (dm, hq * d))}
    pk, pv = rng.uniform(-1, 1, (b, hkv, past, d)), rng.uniform(-1, 1, (b, hkv, past, d))
    pos = np.tile(np.arange(past, past + s, dtype=np.int64), (b, 1))
    mask = np.ones((b, past + s), dtype=bool)
    if padded:
        mask[1, :2] = False
    g = rng.uniform(-1, 1, (b, s, dm))
    return g, X, W, pos, dict(attention_mask=mask, past_keys=pk, past_values=pv)


def _params(c):
    return {"num_heads": c.num_heads, "num_kv_heads": c.num_kv_heads, "head_dim": c.head_dim, "causal": c.causal,
            "encoding": c.encoding, "base": c.base, "rotary_dim": c.rot, "layout": c.layout, "scaling": c.scaling}


CONFIGS = [
    Config(4, 2, 4, True, "rope"),
    Config(4, 1, 4, False, "rope", layout="interleaved", rotary_dim=2, scaling=YARN),
    Config(4, 4, 4, True, "alibi"),
    Config(4, 2, 4, False, "none"),
]
IDS = ["rope-gqa-causal", "yarn-mqa-interleaved-partial", "alibi", "nope-bidirectional"]


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_golden_gradients_are_certified_faithful_by_the_oracle(config):
    g, X, W, pos, kw = _case(15, config)
    golden = backward.vjp(g, X, W, pos, config, **kw, mode="golden")
    with mpmath.workprec(240):
        exact = oracle.vjp_exact(g, X, W, pos, _params(config), kw["attention_mask"], kw["past_keys"],
                                 kw["past_values"])
    cert = certify_arrays(golden, exact, "faithful")
    assert cert.ok and cert.certified == sum(a.size for a in golden.values()), cert.examples


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_fast_gradients_are_within_their_derived_bound(config):
    """|fast - golden| <= fast_bound (golden is within 1 ulp of exact: the bound's u |grad| term
    covers it); and the bound is tight enough to mean something (below 2^-30 of the largest
    gradient element of each role)."""
    g, X, W, pos, kw = _case(16, config)
    fast = backward.vjp(g, X, W, pos, config, **kw)
    golden = backward.vjp(g, X, W, pos, config, **kw, mode="golden")
    bound = backward.fast_bound(g, X, W, pos, config, **kw)
    for role in backward.ROLES:
        err = np.abs(fast[role] - golden[role])
        assert np.all(err <= bound[role] + np.spacing(np.abs(golden[role]))), role
        assert np.max(bound[role]) < 2.0**-30 * np.max(np.abs(golden[role])), role


def _directional(config, X, W, pos, kw, g, role, direction, h):
    """Central difference of <g, forward> along ``direction`` in ``role``, step h (float64)."""
    def phi(t):
        x = X + t * direction if role == "hidden" else X
        w = dict(W, **{role: W[role] + t * direction}) if role != "hidden" else W
        return math.fsum((g * forward(x, w, pos, config, **kw)).ravel())

    return (phi(h) - phi(-h)) / (2 * h)


@pytest.mark.parametrize("config", CONFIGS[:3], ids=IDS[:3])
def test_gradients_agree_with_central_differences(config):
    """<grad_r, e> against the central difference D(h) of <g, forward> along a random direction e.
    Tolerance: truncation D(h) - phi'(0) = h^2 phi'''/6 + O(h^4), estimated by Richardson as
    |D(h) - D(2h)| / 3 (taken twice for safety), plus the rounding of the two forward calls: the
    cpu forward is within 4 u of max|out| per element (tests/attention/test_attention.py), so each
    phi errs by at most 4 u sum|g| max|out| (plus fsum's 1 ulp), divided by 2h, counted for both
    step sizes. A backward missing the logit scale (the conformance fault model) is far outside."""
    g, X, W, pos, kw = _case(17, config)
    grads = backward.vjp(g, X, W, pos, config, **kw)
    wrong = backward.vjp_from_stages(backward._stages(X, W, pos, config, kw["attention_mask"], kw["past_keys"],
                                                      kw["past_values"]), g, config, logit_scale=1.0)
    rng = np.random.default_rng(18)
    h = 2.0**-12
    out = forward(X, W, pos, config, **kw)
    rounding = 2 * (4 * U * np.sum(np.abs(g)) * np.max(np.abs(out)) + U * 10) / (2 * h)
    for role in backward.ROLES:
        e = rng.uniform(-1, 1, X.shape if role == "hidden" else W[role].shape)
        d1 = _directional(config, X, W, pos, kw, g, role, e, h)
        d2 = _directional(config, X, W, pos, kw, g, role, e, 2 * h)
        tol = 2 * abs(d1 - d2) / 3 + 2 * rounding
        got = math.fsum((grads[role] * e).ravel())
        assert abs(got - d1) <= tol, (role, got, d1, tol)
        if role != "wo" and role != "wv":  # the logit scale reaches q and k's gradients only
            bad = math.fsum((wrong[role] * e).ravel())
            assert abs(bad - d1) > 100 * tol, role


def test_the_adjoint_identity_holds_and_can_fail():
    load_all()
    row = run_identity(REGISTRY["attention.backward-adjoint"])
    assert row["verdict"] == "holds", row
    from reference.attention import identities

    residual = identities.adjoint_residual(vjp=lambda st, g, c: backward.vjp_from_stages(st, g, c, logit_scale=1.0))
    assert residual > 1e3


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_rows_without_a_visible_key_contribute_nothing(backend):
    """Causal, row 1 left-padded over its first query: that query sees no key, its output is 0
    whatever the inputs, so its cotangent changes no gradient."""
    c = Config(4, 2, 4, True, "none")
    g, X, W, pos, kw = _case(19, c, past=0, padded=False)
    kw["attention_mask"][1, :1] = False
    base = backward.vjp(g, X, W, pos, c, **kw, backend=backend)
    g2 = g.copy()
    g2[1, 0] = 100.0
    moved = backward.vjp(g2, X, W, pos, c, **kw, backend=backend)
    assert all(np.array_equal(base[r], moved[r]) for r in backward.ROLES)


def test_invalid_arguments_are_refused_with_the_argument_named():
    c = CONFIGS[0]
    g, X, W, pos, kw = _case(20, c)
    with pytest.raises(ValueError, match="^g:"):
        backward.vjp(g[:, :2], X, W, pos, c, **kw)
    with pytest.raises(ValueError, match="^g:"):
        backward.vjp(np.full_like(g, np.nan), X, W, pos, c, **kw)
    with pytest.raises(ValueError, match="^g:[^\n]*2\\*\\*400"):
        backward.vjp(g * 2.0**600, X, W, pos, c, **kw, backend="cpu")
    for mode in ("fast", "golden"):
        with pytest.raises(ValueError, match="^backend:[^\n]*$"):
            backward.vjp(g, X, W, pos, c, **kw, backend="gpu", mode=mode)
    from numba import cuda

    if not cuda.is_available():  # the cuda backend says why it cannot run, in one line
        with pytest.raises(ValueError, match="^backend: 'cuda' needs[^\n]*$"):
            backward.vjp(g, X, W, pos, c, **kw, backend="cuda")
    with pytest.raises(ValueError, match="mode"):
        backward.vjp(g, X, W, pos, c, **kw, mode="exact")


# ---- the bias's parameters: T5's table and FIRE's MLP (issue 15) ------------------------------

BIAS_CONFIGS = [
    Config(4, 2, 4, True, "t5", num_buckets=8, max_distance=16),
    Config(4, 2, 4, False, "t5", num_buckets=8, max_distance=16),
    Config(4, 2, 4, True, "fire"),
    Config(4, 4, 4, False, "fire"),
]
BIAS_IDS = ["t5-causal", "t5-bidirectional", "fire-causal", "fire-bidirectional"]


def _bias_case(seed, config, start=2):
    """_case's draw plus the bias's weights; the new tokens at start.. (T5 causal at 9.. reaches
    the logarithmic buckets); FIRE's L = 2.5, between the positions (no tie i = L)."""
    g, X, W, pos, kw = _case(seed, config)
    rng = np.random.default_rng(seed + 100)
    if config.encoding == "t5":
        W["rel_bias"] = rng.uniform(-2, 2, (config.num_buckets, config.num_heads))
    else:
        W.update(c=0.1, L_multiplier=2.5 / 512, W1=rng.uniform(-1, 1, (5, 1)), b1=rng.uniform(-1, 1, 5),
                 W2=rng.uniform(-0.5, 0.5, (config.num_heads, 5)), b2=rng.uniform(-0.5, 0.5, config.num_heads))
    return g, X, W, pos - pos[:, :1] + start, kw


def _bias_params(c):
    return dict(_params(c), num_buckets=c.num_buckets, max_distance=c.max_distance)


@pytest.mark.parametrize("config", BIAS_CONFIGS, ids=BIAS_IDS)
def test_bias_parameter_gradients_are_certified_faithful_by_the_oracle(config):
    """Golden gradients of every role, the bias's parameters included, certified faithful against
    oracle.vjp_exact (T5 by the oracle's buckets, FIRE by forward-mode derivatives of the bias
    written again); FIRE's b2 gradient is exactly 0 (the softmax ignores a constant per row)."""
    g, X, W, pos, kw = _bias_case(21, config, start=9 if config.encoding == "t5" else 2)
    golden = backward.vjp(g, X, W, pos, config, **kw, mode="golden")
    assert set(golden) == set(backward.roles(config)) and set(backward.bias_roles(config)) <= set(golden)
    with mpmath.workprec(240):
        exact = oracle.vjp_exact(g, X, W, pos, _bias_params(config), kw["attention_mask"], kw["past_keys"],
                                 kw["past_values"])
    cert = certify_arrays(golden, exact, "faithful")
    assert cert.ok and cert.certified == sum(a.size for a in golden.values()), cert.examples
    if config.encoding == "fire":
        assert not np.any(golden["b2"]) and np.count_nonzero(golden["W2"]) >= config.num_heads
    else:
        assert np.count_nonzero(golden["rel_bias"]) >= config.num_heads * 3


@pytest.mark.parametrize("config", BIAS_CONFIGS, ids=BIAS_IDS)
def test_fast_bias_parameter_gradients_are_within_their_derived_bound(config):
    g, X, W, pos, kw = _bias_case(22, config)
    fast = backward.vjp(g, X, W, pos, config, **kw)
    golden = backward.vjp(g, X, W, pos, config, **kw, mode="golden")
    bound = backward.fast_bound(g, X, W, pos, config, **kw)
    for role in backward.bias_roles(config):
        err = np.abs(fast[role] - golden[role])
        assert np.all(err <= bound[role] + np.spacing(np.abs(golden[role]))), role
        top = max(np.max(np.abs(golden[m])) for m in backward.bias_roles(config))
        assert np.max(bound[role]) < 2.0**-30 * top, role


@pytest.mark.parametrize("config", [BIAS_CONFIGS[0], BIAS_CONFIGS[3]], ids=["t5", "fire"])
def test_bias_parameter_gradients_agree_with_central_differences(config):
    """As test_gradients_agree_with_central_differences, along a random direction in each bias
    parameter (T5's table; FIRE's c, L_multiplier (L = 2.5: no tie), W1, b1, W2, b2; away from the
    ReLU's kink: no pre-activation within the steps' reach of 0). A gradient of the right shape but
    with the bias cotangent dS replaced by dZ (the logit scale applied) is far outside."""
    g, X, W, pos, kw = _bias_case(23, config)
    grads = backward.vjp(g, X, W, pos, config, **kw)
    rng = np.random.default_rng(24)
    h = 2.0**-12
    out = forward(X, W, pos, config, **kw)
    rounding = 2 * (64 * U * np.sum(np.abs(g)) * np.max(np.abs(out)) + U * 10) / (2 * h)
    for role in backward.bias_roles(config):
        e = rng.uniform(-1, 1, np.shape(W[role]))
        if role == "c":
            e = e * 0.05
        if role == "L_multiplier":
            e = e * 0.2 / 512

        def phi(t):
            return math.fsum((g * forward(X, dict(W, **{role: W[role] + t * e}), pos, config, **kw)).ravel())

        d1, d2 = (phi(h) - phi(-h)) / (2 * h), (phi(2 * h) - phi(-2 * h)) / (4 * h)
        tol = 2 * abs(d1 - d2) / 3 + 2 * rounding
        got = math.fsum(np.ravel(grads[role] * e))
        assert abs(got - d1) <= tol, (role, got, d1, tol)
        if role not in ("b2",):
            assert abs(got / math.sqrt(config.head_dim) - d1) > 100 * tol, role


def test_the_bias_adjoint_identity_holds_and_can_fail():
    """attention.bias-backward-adjoint holds; taking the bias's gradients from dZ (the logit scale
    applied to the bias's cotangent) breaks it on both encodings."""
    load_all()
    row = run_identity(REGISTRY["attention.bias-backward-adjoint"])
    assert row["verdict"] == "holds", row
    from reference.attention import identities

    def wrong(st, g, c):
        keep = {}
        out = backward.vjp_from_stages(st, g, c, keep=keep)
        out.update(backward.bias_gradients(st, keep["dZ"], c))
        return out

    assert identities.bias_adjoint_residual("t5", vjp=wrong) > 1e3
    assert identities.bias_adjoint_residual("fire", vjp=wrong) > 1e3


# ---- the Numba cpu backend (the cuda one: test_attention_cuda.py) -----------------------------

KERPLE = dict(kerple_r1=(1.0, 0.5, 2.0, 0.25), kerple_r2=(0.5, 1.5, 0.005, 0.75))
BACKEND_CASES = [  # (config, past, the first new position, a row that sees no key)
    (Config(4, 2, 4, True, "rope"), 2, None, True),
    (Config(4, 4, 4, False, "rope", scaling={"rope_type": "linear", "factor": 2.0}), 0, None, False),
    (Config(4, 1, 4, False, "rope", layout="interleaved", rotary_dim=2, scaling=YARN), 2, None, False),
    (Config(4, 4, 4, True, "alibi"), 2, None, True),
    (Config(4, 2, 4, False, "none"), 0, None, False),
    (Config(4, 2, 4, True, "kerple", kerple_variant="log", **KERPLE), 2, None, False),
    (BIAS_CONFIGS[0], 2, 9, True),
    (BIAS_CONFIGS[1], 2, 9, False),
    (BIAS_CONFIGS[2], 2, 2, True),
    (BIAS_CONFIGS[3], 0, 2, False),
]
BACKEND_IDS = ["rope-gqa-causal-decode-masked-row", "linear-mha-bidirectional", "yarn-mqa-interleaved-partial",
               "alibi-causal-masked-row", "none-gqa-bidirectional", "kerple-log", "t5-causal-masked-row",
               "t5-bidirectional", "fire-causal-masked-row", "fire-bidirectional"]


def _backend_case(seed, config, past, start, masked_row):
    """_case's draw (with the bias's weights for T5 and FIRE); masked_row: causal, batch row 1's
    keys masked up to its first query's own slot (that query sees no key); a zero cotangent row
    and a zero entry."""
    if config.encoding in ("t5", "fire"):
        g, X, W, pos, kw = _bias_case(seed, config, start=start)
        if past == 0:
            g, X, W, pos, kw = _strip_past(g, X, W, pos, kw)
    else:
        g, X, W, pos, kw = _case(seed, config, past=past)
    if masked_row:
        kw["attention_mask"][1, :past + 1] = False
    g[0, 1] = 0.0
    g[1, 2, 3] = 0.0
    return g, X, W, pos, kw


def _strip_past(g, X, W, pos, kw):
    b, hkv, _, d = kw["past_keys"].shape
    return g, X, W, pos, dict(attention_mask=kw["attention_mask"][:, 2:], past_keys=np.zeros((b, hkv, 0, d)),
                              past_values=np.zeros((b, hkv, 0, d)))


@pytest.mark.parametrize("config,past,start,masked_row", BACKEND_CASES, ids=BACKEND_IDS)
def test_cpu_backend_gradients_are_within_the_fast_bound(config, past, start, masked_row):
    """backend "cpu" (the Numba kernels) is within fast_bound of golden mode for every role (the
    bias's parameters included), as the NumPy path is; golden mode is the same whatever the
    backend; the cpu and NumPy gradients have the same roles and shapes."""
    g, X, W, pos, kw = _backend_case(31, config, past, start, masked_row)
    if masked_row:
        assert not backward._stages(X, W, pos, config, kw["attention_mask"], kw["past_keys"],
                                    kw["past_values"])["vis"][1, 0].any()
    cpu = backward.vjp(g, X, W, pos, config, **kw, backend="cpu")
    golden = backward.vjp(g, X, W, pos, config, **kw, mode="golden", backend="cuda")
    numpy = backward.vjp(g, X, W, pos, config, **kw)
    bound = backward.fast_bound(g, X, W, pos, config, **kw)
    assert set(cpu) == set(backward.roles(config)) == set(golden)
    for role in backward.roles(config):
        assert cpu[role].shape == numpy[role].shape == golden[role].shape and cpu[role].dtype == np.float64
        err = np.abs(cpu[role] - golden[role])
        assert np.all(err <= bound[role] + np.spacing(np.abs(golden[role]))), (role, np.max(err / bound[role]))


def test_cpu_backend_golden_mode_ignores_the_backend():
    c = CONFIGS[0]
    g, X, W, pos, kw = _case(32, c)
    ref = backward.vjp(g, X, W, pos, c, **kw, mode="golden")
    for backend in ("cpu", "cuda"):
        got = backward.vjp(g, X, W, pos, c, **kw, mode="golden", backend=backend)
        assert all(np.array_equal(ref[r], got[r]) for r in backward.ROLES), backend


def test_cpu_backend_separates_a_missing_logit_scale():
    """The cpu gradients of q and k are far closer to the NumPy path's than the NumPy path with
    the logit scale missing in the backward (the conformance fault model) is: the kernels apply
    the scale."""
    c = CONFIGS[0]
    g, X, W, pos, kw = _case(33, c)
    st = backward._stages(X, W, pos, c, kw["attention_mask"], kw["past_keys"], kw["past_values"])
    wrong = backward.vjp_from_stages(st, g, c, logit_scale=1.0)
    numpy = backward.vjp(g, X, W, pos, c, **kw)
    cpu = backward.vjp(g, X, W, pos, c, **kw, backend="cpu")
    for role in ("hidden", "wq", "wk"):
        near, far = np.max(np.abs(cpu[role] - numpy[role])), np.max(np.abs(wrong[role] - numpy[role]))
        assert near <= 64 * U * np.max(np.abs(numpy[role])) < 1e-6 * far, role


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("b,s", [(2, 0), (0, 3)])
def test_empty_batch_or_sequence_gives_zero_gradients(backend, b, s):
    c = CONFIGS[0]
    g, X, W, pos, kw = _case(34, c, b=max(b, 2), s=max(s, 1), past=2, padded=False)
    kw = dict(past_keys=kw["past_keys"][:b], past_values=kw["past_values"][:b])
    out = backward.vjp(g[:b, :s], X[:b, :s], W, pos[:b, :s], c, **kw, backend=backend)
    assert out["hidden"].shape == (b, s, X.shape[2])
    assert all(out[r].shape == W[r].shape and not np.any(out[r]) for r in ("wq", "wk", "wv", "wo"))
