"""Attention with the additive-bias encodings KERPLE, FIRE and T5 (issue 12): the float64
reference against the mpmath oracle (each bias from its family's own oracle), the backward
through the bias (its learned parameters' gradients too), the SDPA example on the new groups,
wrong biases failing, and the diagnosis of a causal mask off by one on KERPLE cases."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import mpmath
import numpy as np
import pytest
from cuda_support import TARGETS, assert_cuda_matches_cpu

from conformance import run_conformance
from conformance.loader import load_target
from reference import attention
from reference.attention import Config, backward, oracle
from reference.golden.certify import certify_arrays

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "attention"
SDPA = f"{EXAMPLES / 'sdpa_rope.py'}:forward"
NEW_GROUPS = "attention.forward/kerple/*,attention.forward/fire-causal/*,attention.forward/t5/*"
U = 2.0**-53

KERPLE_R1, KERPLE_R2 = (1.0, 0.5, 2.0, 0.001), (0.3, 1.5, 0.005, 4.0)  # one r1 and one r2 under the clamp


def _inputs(seed, config, b=2, s=4, dm=16, past=3, hidden=6, start=None):
    rng = np.random.default_rng(seed)
    hq, hkv, d = config.num_heads, config.num_kv_heads, config.head_dim
    X = rng.uniform(-1, 1, (b, s, dm))
    W = {"wq": rng.uniform(-0.5, 0.5, (hq * d, dm)), "wk": rng.uniform(-0.5, 0.5, (hkv * d, dm)),
         "wv": rng.uniform(-0.5, 0.5, (hkv * d, dm)), "wo": rng.uniform(-0.5, 0.5, (dm, hq * d))}
    if config.encoding == "fire":
        W.update(c=0.1, L_multiplier=2.0**-8, W1=rng.uniform(-1, 1, (hidden, 1)), b1=rng.uniform(-1, 1, hidden),
                 W2=rng.uniform(-0.5, 0.5, (hq, hidden)), b2=rng.uniform(-0.5, 0.5, hq))
    if config.encoding == "t5":
        W["rel_bias"] = rng.uniform(-2, 2, (config.num_buckets, hq))
    pk, pv = rng.uniform(-1, 1, (b, hkv, past, d)), rng.uniform(-1, 1, (b, hkv, past, d))
    first = past if start is None else start
    pos = np.tile(np.arange(first, first + s, dtype=np.int64), (b, 1))
    mask = np.ones((b, past + s), dtype=bool)
    mask[1, :2] = False
    return X, W, pos, dict(attention_mask=mask, past_keys=pk, past_values=pv)


def _params(c):
    return {"num_heads": c.num_heads, "num_kv_heads": c.num_kv_heads, "head_dim": c.head_dim, "causal": c.causal,
            "encoding": c.encoding, "base": c.base, "rotary_dim": c.rot, "layout": c.layout, "scaling": c.scaling,
            "kerple_variant": c.kerple_variant, "kerple_r1": list(c.kerple_r1), "kerple_r2": list(c.kerple_r2),
            "num_buckets": c.num_buckets, "max_distance": c.max_distance}


CONFIGS = [
    Config(4, 2, 4, True, "kerple", kerple_variant="log", kerple_r1=KERPLE_R1, kerple_r2=KERPLE_R2),
    Config(4, 1, 4, False, "kerple", kerple_variant="power", kerple_r1=KERPLE_R1, kerple_r2=KERPLE_R2),
    Config(4, 2, 4, True, "fire"),
    Config(4, 4, 4, False, "fire"),
    Config(4, 2, 4, True, "t5"),
    Config(4, 2, 4, False, "t5", num_buckets=8, max_distance=20),
]
IDS = ["kerple-log-causal", "kerple-power-bidirectional", "fire-causal", "fire-bidirectional", "t5-causal",
       "t5-bidirectional-8-buckets"]
# FIRE's L = 2 sits inside the positions 3..6; T5 causal at 40.. reaches the logarithmic buckets
STARTS = {"t5-causal": 40}


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_golden_is_certified_by_the_oracle_and_fast_backends_agree(config, request):
    X, W, pos, kw = _inputs(5, config, start=STARTS.get(request.node.callspec.id))
    golden = attention.forward(X, W, pos, config, **kw, mode="golden")
    with mpmath.workprec(240):
        exact = oracle.forward_exact(X, W, pos, _params(config), kw["attention_mask"], kw["past_keys"],
                                     kw["past_values"])
    cert = certify_arrays({"expected": golden}, {"expected": exact}, "faithful")
    assert cert.ok and cert.certified == golden.size, cert.examples
    scale = np.max(np.abs(golden))
    for backend in ("cpu", "numpy"):
        fast = attention.forward(X, W, pos, config, **kw, backend=backend)
        assert np.max(np.abs(fast - golden)) <= (4 if backend == "cpu" else 64) * U * scale, backend


def test_the_bias_matters_and_is_its_familys():
    """Each encoding's output differs from NoPE's, and the stages' bias is the family's own bias
    (KERPLE after its clamps, FIRE's MLP, T5's table at HF's bucket of j - i)."""
    from reference import fire, kerple, t5

    for config in CONFIGS[:1] + CONFIGS[2:3] + CONFIGS[4:5]:
        X, W, pos, kw = _inputs(6, config)
        st = attention.stages(X, W, pos, config, **kw)
        kpos = st["kpos"][0]
        if config.encoding == "kerple":
            want = kerple.bias(pos[0], kpos, "log", KERPLE_R1, KERPLE_R2, backend="numpy")
        elif config.encoding == "fire":
            want = fire.bias(pos[0], kpos, {n: W[n] for n in fire.ROLES}, backend="numpy")
        else:
            want = np.moveaxis(W["rel_bias"][t5.bucket(kpos[None, :] - pos[0][:, None], bidirectional=False)], -1, 0)
        assert np.array_equal(st["bias"][0], want), config.encoding
        none = attention.forward(X, {n: W[n] for n in ("wq", "wk", "wv", "wo")}, pos,
                                 replace(config, encoding="none"), **kw)
        assert np.max(np.abs(st["out"] - none)) > 1e-3, config.encoding


@pytest.mark.parametrize("config", [CONFIGS[0], CONFIGS[3], CONFIGS[4]], ids=["kerple", "fire", "t5"])
def test_backward_through_the_bias_is_certified_and_bounded(config):
    """Golden gradients of hidden, wq..wo and the bias's learned parameters (FIRE's MLP, T5's table;
    KERPLE's r1, r2 are configuration: none) certified faithful against oracle.vjp_exact (which adds
    the family oracle's bias), and the fast gradients within backward.fast_bound of them."""
    rng = np.random.default_rng(9)
    X, W, pos, kw = _inputs(9, config, b=2, s=3, dm=8, past=2)
    g = rng.uniform(-1, 1, X.shape)
    golden = backward.vjp(g, X, W, pos, config, **kw, mode="golden")
    with mpmath.workprec(240):
        exact = oracle.vjp_exact(g, X, W, pos, _params(config), kw["attention_mask"], kw["past_keys"],
                                 kw["past_values"])
    cert = certify_arrays(golden, exact, "faithful")
    assert cert.ok and cert.certified == sum(a.size for a in golden.values()), cert.examples
    fast = backward.vjp(g, X, W, pos, config, **kw)
    bound = backward.fast_bound(g, X, W, pos, config, **kw)
    assert set(golden) == set(backward.roles(config)) == set(fast)
    for role in backward.roles(config):
        assert np.all(np.abs(fast[role] - golden[role]) <= bound[role] + 2 * U * np.abs(golden[role])), role


def test_invalid_bias_inputs_are_refused_with_the_argument_named():
    kc, fc, tc = CONFIGS[0], CONFIGS[2], CONFIGS[4]
    X, W, pos, kw = _inputs(7, kc)
    with pytest.raises(ValueError, match="kerple_r1"):
        attention.forward(X, W, pos, replace(kc, kerple_r1=(1.0, 1.0), kerple_r2=(1.0, 1.0)))
    with pytest.raises(ValueError, match="variant"):
        attention.forward(X, W, pos, replace(kc, kerple_variant="linear"))
    with pytest.raises(ValueError, match="weights"):
        attention.forward(X, W, pos, fc)  # FIRE's MLP missing from the weights dict
    Xf, Wf, posf, _ = _inputs(7, fc)
    with pytest.raises(ValueError, match="W2"):
        attention.forward(Xf, dict(Wf, W2=Wf["W2"][:3], b2=Wf["b2"][:3]), posf, fc)
    with pytest.raises(ValueError, match="positions"):
        attention.forward(Xf, Wf, posf - 10, fc)
    Xt, Wt, post, _ = _inputs(7, tc)
    with pytest.raises(ValueError, match="rel_bias"):
        attention.forward(Xt, dict(Wt, rel_bias=Wt["rel_bias"][:5]), post, tc)
    with pytest.raises(ValueError, match="num_buckets"):
        attention.forward(Xt, Wt, post, replace(tc, num_buckets=1))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_sdpa_example_passes_the_new_groups(dtype):
    report = run_conformance(SDPA, "attention.forward", cases=NEW_GROUPS, dtypes=(dtype,), fresh=False,
                             identities=False, timeout=60.0)
    summary = report.summary()
    assert summary["overall"] == "pass" and summary["pass"] == 8, summary


def _negated(weights, encoding):
    """FIRE's or T5's learned weights giving the bias with the opposite sign."""
    if encoding == "fire":
        return dict(weights, W2=-weights["W2"], b2=-weights["b2"])
    return dict(weights, rel_bias=-weights["rel_bias"])


@pytest.mark.parametrize("what", ["sign", "variant"])
def test_a_wrong_bias_fails(what):
    import torch

    kerple_bias = load_target(f"{EXAMPLES / 'sdpa_rope.py'}:kerple_bias")
    additive_mask = load_target(f"{EXAMPLES / 'sdpa_rope.py'}:additive_mask")
    part = {n: load_target(f"{EXAMPLES / 'sdpa_rope.py'}:{n}") for n in ("project", "with_cache", "allowed_keys",
                                                                          "output")}

    def forward(hidden, weights, positions, spec):
        b, s, _ = hidden.shape
        q, k, v = part["project"](hidden, weights, spec)
        k, v, past = part["with_cache"](k, v, spec)
        kpos = torch.cat((torch.arange(past).expand(b, past), positions), dim=1)
        allowed = part["allowed_keys"](b, s, past, spec, hidden.device)
        if spec.encoding == "kerple":
            dist = (positions[:, :, None] - kpos[:, None, :]).float()
            if what == "sign":
                bias = -kerple_bias(dist, spec)
            else:
                bias = kerple_bias(dist, replace(spec, kerple_variant="power" if spec.kerple_variant == "log"
                                                 else "log"))
            mask = torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf")) + bias
        elif what == "sign":  # FIRE, T5: the learned bias negated
            mask = additive_mask(allowed, positions, kpos, spec, q.dtype, _negated(weights, spec.encoding))
        else:
            mask = additive_mask(allowed, positions, kpos, spec, q.dtype, weights)
        return part["output"](q, k, v, mask.to(q.dtype), weights, spec)

    report = run_conformance(forward, "attention.forward", cases=NEW_GROUPS, dtypes=("float32",), fresh=False,
                             identities=False, timeout=60.0)
    verdicts = {c.id.split("/", 1)[1]: c.verdict for c in report.cases}
    kerple_cases = [k for k in verdicts if k.startswith("kerple/")]
    assert len(kerple_cases) == 3 and all(verdicts[k] == "fail" for k in kerple_cases), verdicts
    others = [k for k in verdicts if not k.startswith("kerple/")]
    expected = "fail" if what == "sign" else "pass"
    assert len(others) == 5 and all(verdicts[k] == expected for k in others), verdicts
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert all([d.code for d in c.diagnoses] == ["attention-encoding"] for c in failing), \
        [(c.id, [(d.code, d.message) for d in c.diagnoses]) for c in failing]


@pytest.mark.parametrize("name, code", [("causal_off_by_one", "attention-causal-off-by-one"),
                                        ("scale_missing", "attention-scale-missing")])
def test_existing_faults_are_named_on_the_bias_cases(name, code):
    """The buggy examples pass the weights to the example's additive_mask, so they run the KERPLE,
    FIRE and T5 cases too; the fault models recompute with the reference's bias."""
    report = run_conformance(f"{EXAMPLES / 'buggy' / (name + '.py')}:forward", "attention.forward", cases=NEW_GROUPS,
                             dtypes=("float32",), fresh=False, identities=False, timeout=60.0)
    hit = [c for c in report.cases if name != "causal_off_by_one" or "bidirectional" not in c.id]
    assert len(hit) == (6 if name == "causal_off_by_one" else 8), [c.id for c in hit]
    assert all(c.verdict == "fail" and code in [d.code for d in c.diagnoses] for c in hit), \
        [(c.id, c.verdict, [d.code for d in c.diagnoses]) for c in hit]


def test_sdpa_example_passes_the_gradients_of_the_new_groups():
    report = run_conformance(SDPA, "attention.forward", cases=NEW_GROUPS, dtypes=("float32",), fresh=False,
                             identities=False, grad=True, timeout=60.0)
    summary = report.summary()
    assert summary["overall"] == "pass" and summary["pass"] == 8, summary
    assert all(c.grad is not None and c.grad["verdict"] == "pass" for c in report.cases)


_CUDA_SETUP = """
from reference import attention
rng = np.random.default_rng(3)
b, s, D, hq, hkv, d, P = 2, 3, 8, 4, 2, 4, 2
X = rng.uniform(-1, 1, (b, s, D))
W = {"wq": rng.uniform(-.5, .5, (hq * d, D)), "wk": rng.uniform(-.5, .5, (hkv * d, D)),
     "wv": rng.uniform(-.5, .5, (hkv * d, D)), "wo": rng.uniform(-.5, .5, (D, hq * d))}
fire = dict(c=0.1, L_multiplier=2.0**-8, W1=rng.uniform(-1, 1, (4, 1)), b1=rng.uniform(-1, 1, 4),
            W2=rng.uniform(-.5, .5, (hq, 4)), b2=rng.uniform(-.5, .5, hq))
pos = np.tile(np.arange(P, P + s), (b, 1))
mask = np.ones((b, P + s), dtype=bool); mask[1, 0] = False
kw = dict(attention_mask=mask, past_keys=rng.uniform(-1, 1, (b, hkv, P, d)),
          past_values=rng.uniform(-1, 1, (b, hkv, P, d)))
cases = [(attention.Config(hq, hkv, d, True, "kerple", kerple_variant="power", kerple_r1=(1.0, .5, 2.0, .25),
                           kerple_r2=(.5, 1.5, 2.5, .75)), W),
         (attention.Config(hq, hkv, d, True, "fire"), {**W, **fire})]
def call(backend, mode="fast"):
    return np.stack([attention.forward(X, w, pos, c, **kw, backend=backend, mode=mode) for c, w in cases])
"""


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_forward_with_kerple_and_fire_matches_cpu(target):
    assert_cuda_matches_cpu(target, _CUDA_SETUP, tolerance=8 * U)
