"""Attention (issue 12, part): the float64 reference against the mpmath oracle, identities, the
budget, the SDPA and HF examples, and every fault's diagnosis."""

from __future__ import annotations

from pathlib import Path

import mpmath
import numpy as np
import pytest

from conformance import run_conformance
from reference import attention
from reference.attention import Config, oracle
from reference.golden.certify import certify_arrays
from reference.identities import load_all, run_identities

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "attention"


def _inputs(seed, b=2, s=4, dm=16, hq=4, hkv=2, d=4, past=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (b, s, dm))
    W = {"wq": rng.uniform(-0.5, 0.5, (hq * d, dm)), "wk": rng.uniform(-0.5, 0.5, (hkv * d, dm)),
         "wv": rng.uniform(-0.5, 0.5, (hkv * d, dm)), "wo": rng.uniform(-0.5, 0.5, (dm, hq * d))}
    pk, pv = rng.uniform(-1, 1, (b, hkv, past, d)), rng.uniform(-1, 1, (b, hkv, past, d))
    pos = np.tile(np.arange(past, past + s, dtype=np.int64), (b, 1))
    mask = np.ones((b, past + s), dtype=bool)
    mask[1, :2] = False
    return X, W, pos, dict(attention_mask=mask, past_keys=pk, past_values=pv)


CONFIGS = [
    Config(4, 2, 4, True, "rope"),
    Config(4, 1, 4, False, "rope", layout="interleaved", rotary_dim=2),
    Config(4, 2, 4, True, "rope", scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}),
    Config(4, 4, 4, True, "alibi"),
    Config(4, 2, 4, False, "none"),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.encoding}-{c.causal}-{c.layout}-{bool(c.scaling)}")
def test_golden_is_certified_and_fast_backends_agree(config):
    X, W, pos, kw = _inputs(5, hkv=config.num_kv_heads)
    golden = attention.forward(X, W, pos, config, **kw, mode="golden")
    params = {"num_heads": config.num_heads, "num_kv_heads": config.num_kv_heads, "head_dim": config.head_dim,
              "causal": config.causal, "encoding": config.encoding, "base": config.base,
              "rotary_dim": config.rot, "layout": config.layout, "scaling": config.scaling}
    with mpmath.workprec(240):
        exact = oracle.forward_exact(X, W, pos, params, kw["attention_mask"], kw["past_keys"], kw["past_values"])
    cert = certify_arrays({"expected": golden}, {"expected": exact}, "faithful")
    assert cert.ok and cert.certified == golden.size, cert.examples
    bound = attention.fast_bound(X, W, pos, config, **kw) + 2.0**-52 * np.abs(golden)  # golden: faithful
    for backend in ("cpu", "numpy"):
        fast = attention.forward(X, W, pos, config, **kw, backend=backend)
        assert np.all(np.abs(fast - golden) <= bound), backend


def test_invalid_inputs_are_refused_with_the_argument_named():
    X, W, pos, kw = _inputs(6)
    c = Config(4, 2, 4)
    with pytest.raises(ValueError, match="num_kv_heads"):
        attention.forward(X, W, pos, Config(4, 3, 4))
    with pytest.raises(ValueError, match="weights"):
        attention.forward(X, {"wq": W["wq"]}, pos, c)
    with pytest.raises(ValueError, match="attention_mask"):
        attention.forward(X, W, pos, c, attention_mask=np.ones((2, 3), dtype=bool))
    with pytest.raises(ValueError, match="past_keys"):
        attention.forward(X, W, pos, c, past_keys=kw["past_keys"])
    with pytest.raises(ValueError, match="encoding"):
        attention.forward(X, W, pos, Config(4, 2, 4, encoding="xpos"))


def test_identities_hold():
    load_all()
    rows = run_identities("attention")
    assert len(rows) == 8 and all(r["verdict"] == "holds" for r in rows), rows


def test_sdpa_example_passes():
    report = run_conformance(f"{EXAMPLES / 'sdpa_rope.py'}:forward", "attention.forward", seed=3, timeout=60.0)
    summary = report.summary()
    assert summary["overall"] == "pass" and summary["pass"] >= 20, summary


def test_hf_llama_example_passes():
    pytest.importorskip("transformers")
    report = run_conformance(f"{EXAMPLES / 'hf_llama_attention.py'}:forward", "attention.forward", seed=4,
                             dtypes=("float32",), timeout=120.0)
    summary = report.summary()
    assert summary["overall"] == "pass" and summary["pass"] >= 8, summary


def test_budget_separates_a_float16_detour():
    """A float32 run whose q projection goes through float16 (u = 2^-11) must fail: the budget is
    derived for float32 arithmetic, and 2^-11 relative on q is far above it."""
    import torch

    from conformance.loader import load_target

    correct = load_target(f"{EXAMPLES / 'sdpa_rope.py'}:forward")

    def detour(hidden, weights, positions, spec):
        w = dict(weights, wq=weights["wq"].half().float() * (1 + 2.0**-9))
        return correct(hidden, w, positions, spec)

    report = run_conformance(detour, "attention.forward", dtypes=("float32",), fresh=False, timeout=60.0)
    assert report.summary()["fail"] > 0
    del torch


@pytest.mark.parametrize("name, code", [
    ("scale_missing", "attention-scale-missing"),
    ("factor_twice", "attention-factor-twice"),
    ("causal_off_by_one", "attention-causal-off-by-one"),
    ("padding_ignored", "attention-padding-ignored"),
    ("encoding_offset", "attention-encoding"),
    ("heads_permuted", "attention-heads-permuted"),
])
def test_each_fault_is_named_on_every_failing_case(name, code):
    report = run_conformance(f"{EXAMPLES / 'buggy' / (name + '.py')}:forward", "attention.forward", fresh=False,
                             dtypes=("float32",), timeout=60.0)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing and all(code in [d.code for d in c.diagnoses] for c in failing), \
        [(c.id, [d.code for d in c.diagnoses]) for c in failing]


def test_writing_into_the_cache_is_reported():
    from conformance.loader import load_target

    correct = load_target(f"{EXAMPLES / 'sdpa_rope.py'}:forward")

    def writes_cache(hidden, weights, positions, spec):
        out = correct(hidden, weights, positions, spec)
        if spec.past_keys is not None:
            spec.past_keys.mul_(2)
        return out

    report = run_conformance(writes_cache, "attention.forward", dtypes=("float32",), fresh=False, timeout=60.0)
    failing = [c for c in report.cases if c.verdict == "fail"]
    with_cache = ("rope-decode-cache/", "alibi-causal/decode", "kerple/log-decode", "fire-causal/decode",
                  "t5/causal-decode", "t5-unscaled/decoder-decode", "rope-gqa-groups/8-over-2-decode", "rope-gqa-groups/32-over-4-decode")
    assert failing and all(any(k in c.id for k in with_cache) for c in failing), [c.id for c in failing]
    assert all([d.code for d in c.diagnoses] == ["input-mutated"] for c in failing)
