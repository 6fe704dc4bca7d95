"""RoPE scaling types (issue 10): parameters, HF's published numbers, golden values against the
independent oracle, the conformance protocols with spec.scaling, and diagnosis."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import mpmath
import numpy as np
import pytest
import torch

from conformance import RopeSpec, run_conformance
from reference import rope
from reference.golden.certify import nearest_double
from reference.numerics import scaling_oracle
from reference.rope import oracle
from reference.numerics.scaling import TYPES, resolve

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = json.loads((Path(__file__).parent / "data" / "hf_rope_snapshots.json").read_text())

EXAMPLES = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "ntk": {"rope_type": "ntk", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4096},
    "length": {"rope_type": "length", "original_max_position_embeddings": 8192},
    "yarn": {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192},
    "longrope": {"rope_type": "longrope", "short_factor": [1.0 + i / 64 for i in range(32)],
                 "long_factor": [1.0 + i for i in range(32)], "original_max_position_embeddings": 4096,
                 "factor": 32.0},
}


def test_every_type_has_an_example_here():
    assert set(EXAMPLES) == set(TYPES)


@pytest.mark.parametrize("case", SNAPSHOTS["cases"], ids=[c["name"] for c in SNAPSHOTS["cases"]])
def test_reference_matches_hf_published_inverse_frequencies(case):
    """HF's numerical snapshots (tests/utils/test_modeling_rope_utils.py, source in the data file),
    printed to 5 significant digits from float32: the reference agrees to that precision."""
    inv, _ = rope.frequencies(128, 1e4, case["scaling"], case["seq_len"])
    expected = np.array(case["expected"])
    assert np.all(np.abs(inv - expected) <= 5.0001e-5 * expected + 2.0**-24 * expected)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("seq_len", [None, 1000, 50000])
def test_golden_values_are_correctly_rounded_against_the_independent_oracle(name, seq_len):
    scaling = EXAMPLES[name]
    positions = np.array([0, 1, 4097, 131071, 2**24 + 3])
    c, s = rope.cos_sin(positions, 64, 1e4, scaling=scaling, seq_len=seq_len, mode="golden")
    ce, se = oracle.cos_sin_exact(positions, 64, 1e4, scaling=scaling, seq_len=seq_len)
    assert all(nearest_double(ce[t][i]) == c[t, i] and nearest_double(se[t][i]) == s[t, i]
               for t in range(len(positions)) for i in range(32))
    inv, factor = rope.frequencies(64, 1e4, scaling, seq_len)
    with mpmath.workprec(200):
        thetas, f = scaling_oracle.exact(scaling, 64, 1e4, seq_len)
    assert [nearest_double(t) for t in thetas] == inv.tolist() and nearest_double(f) == factor


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_scaled_apply_golden_is_correctly_rounded(backend):
    x = np.random.default_rng(3).standard_normal((1, 3, 2, 96))
    positions = np.array([[0, 5000, 131071]])
    scaling = EXAMPLES["yarn"]  # attention factor 1.277: the golden path that multiplies by it
    out = rope.apply(x, positions, rotary_dim=64, scaling=scaling, backend=backend, mode="golden")
    exact = oracle.apply_exact(x, positions, 64, 1e4, "half", scaling=scaling)
    assert all(nearest_double(e) == o for e, o in zip(exact.reshape(-1), out.reshape(-1)))
    fast = rope.apply(x, positions, rotary_dim=64, scaling=scaling, backend=backend)
    assert np.max(np.abs(fast - out)) <= 8 * 2.0**-53 * np.max(np.abs(x)) * 2
    assert np.array_equal(out[..., 64:], x[..., 64:])  # the tail passes through, unscaled


@pytest.mark.parametrize("scaling, message", [
    ({"rope_type": "warp", "factor": 2.0}, "unknown rope_type 'warp'"),
    ({"rope_type": "yarn", "factor": 2.0}, "needs original_max_position_embeddings"),
    ({"rope_type": "linear", "factor": 2.0, "beta_fast": 3}, "does not take beta_fast"),
    ({"rope_type": "linear", "factor": 0.5}, "factor must be >= 1"),
    ({"rope_type": "linear", "factor": float("nan")}, "factor must be a positive finite number"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0,
      "original_max_position_embeddings": 8192}, "high_freq_factor (1.0) must exceed"),
    ({"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0],
      "original_max_position_embeddings": 4096}, "short_factor has 1 entries"),
    ("yarn", "must be None or a dict"),
])
def test_bad_scaling_is_one_line_value_error(scaling, message):
    with pytest.raises(ValueError, match="scaling: .*" + message.replace("(", r"\(").replace(")", r"\)")):
        rope.frequencies(64, 1e4, scaling, None)


def test_legacy_type_key_and_default():
    assert resolve({"type": "linear", "factor": 2.0}) == ("linear", {"factor": 2.0})
    assert resolve(None) == resolve({"rope_type": "default"}) == ("default", {})


# --------------------------------------------------------------------------------------------
# Conformance: the protocols with spec.scaling, and diagnosis


def reference_cache(mutate=None):
    """rope.cache adapter from the reference itself, with the scaling dict optionally changed."""

    def cache(positions, spec):
        scaling = None if spec.scaling is None else dict(spec.scaling)
        seq_len = spec.seq_len or None
        if mutate is not None:
            scaling, seq_len = mutate(scaling, seq_len)
        c, s = rope.cos_sin(positions.numpy(), spec.rotary_dim, spec.base, scaling=scaling, seq_len=seq_len,
                            backend="numpy")
        return torch.from_numpy(c).float(), torch.from_numpy(s).float()

    return cache


def _codes_and_messages(report):
    return {(d.code, d.message) for c in report.cases if c.verdict == "fail" for d in c.diagnoses}


def test_reference_adapter_passes_every_scaled_cache_case():
    report = run_conformance(reference_cache(), "rope.cache", dtypes=("float32",), identities=False, fresh=False)
    assert report.summary()["overall"] == "pass"
    from reference.rope.vectors import SCALED_MODELS

    scaled = [c for c in report.cases if c.id.split("/")[1] in SCALED_MODELS]
    assert len(scaled) >= 2 * len(SCALED_MODELS) and all(c.verdict == "pass" for c in scaled)


@pytest.mark.parametrize("group, mutate, code, words", [
    ("qwen2.5-yarn4", lambda sc, n: (None, n), "scaling-mismatch", "the case's yarn scaling is not applied"),
    ("qwen2.5-yarn4", lambda sc, n: ({**sc, "attention_factor": 1.0}, n), "attention-factor",
     "attention factor 1.139 not applied"),
    ("qwen2.5-yarn4", lambda sc, n: ({**sc, "attention_factor": 1.1386294361119891 ** 2}, n), "attention-factor",
     "applied twice"),
    ("llama2-dynamic2", lambda sc, n: ({"rope_type": "ntk", "factor": sc["factor"]}, n), "scaling-mismatch",
     "static NTK (factor 2.0) used where dynamic NTK is expected"),
    ("llama3.1-d128", lambda sc, n: ({**sc, "original_max_position_embeddings": 65536}, n), "scaling-mismatch",
     "original_max_position_embeddings read as 65536"),
    ("phi3-128k-longrope", lambda sc, n: (sc, 4096), "scaling-mismatch", "LongRoPE's short factors used"),
])
def test_scaling_mistakes_are_diagnosed(group, mutate, code, words):
    report = run_conformance(reference_cache(mutate), "rope.cache", dtypes=("float32",), identities=False,
                             fresh=False, cases=f"rope.cache/{group}/*")
    found = _codes_and_messages(report)
    assert any(c == code and words in m for c, m in found), found


def test_attention_factor_is_graded_in_the_cos_sin_form():
    """HF multiplies cos and sin by the attention factor; an implementation that leaves it to the
    softmax (returns plain cos/sin) fails rope.cache with attention-factor, as documented."""
    report = run_conformance(reference_cache(lambda sc, n: ({**sc, "attention_factor": 1.0}, n)), "rope.cache",
                             dtypes=("float32",), identities=False, fresh=False, cases="rope.cache/qwen2.5-yarn4/*")
    assert report.summary()["fail"] == len(report.cases) == 2


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed")
def test_hf_own_scaling_functions_pass_every_type_they_share():
    report = run_conformance(str(ROOT / "examples/rope/lib_transformers.py:frequencies"), "rope.frequencies",
                             identities=False, fresh=False)
    assert report.summary()["overall"] == "pass"
    graded = {c.id.split("/")[1] for c in report.cases if c.verdict in ("pass", "acceptable")}
    assert {"llama3.1-d128", "qwen2.5-yarn4", "deepseek-v3-yarn40", "gpt-oss-yarn32", "phi3-128k-longrope",
            "llama2-dynamic2", "llama2-linear4", "hf-snapshots"} <= graded
    skipped = {c.id.split("/")[1] for c in report.cases if c.verdict == "skip"}
    assert skipped == {"llama2-ntk4", "qwen3-length-8k"}  # types transformers does not have


def test_spec_carries_the_scaling_and_seq_len_to_the_adapter():
    seen = []

    def cache(positions, spec):
        seen.append((dict(spec.scaling or {}).get("rope_type"), spec.seq_len))
        return reference_cache()(positions, spec)

    run_conformance(cache, "rope.cache", dtypes=("float32",), identities=False, fresh=False,
                    cases="rope.cache/llama2-dynamic2/*")
    assert ("dynamic", 2048) in seen and ("dynamic", 16384) in seen


def test_a_spec_is_immutable_but_its_scaling_copy_is_the_adapters():
    spec = RopeSpec(head_dim=64, rotary_dim=64, scaling=dict(EXAMPLES["yarn"]), seq_len=10)
    with pytest.raises(FrozenInstanceError):
        spec.base = 3.0
    assert replace(spec, seq_len=20).scaling == spec.scaling
