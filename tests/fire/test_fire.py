"""FIRE (issue 12, part): the normalized distance with its threshold, certified golden values, the
fast mode's bound, identities, the FIRE-module example in every dtype and one diagnosis per
mistake."""

from __future__ import annotations

from pathlib import Path

import mpmath
import numpy as np
import pytest

from conformance import run_conformance
from reference import fire
from reference.fire import oracle
from reference.golden.certify import is_certified
from reference.identities import load_all, run_identities

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "fire"


def weights(heads=3, hidden=8, seed=5, lm=1.0):
    rng = np.random.default_rng(seed)
    return {"c": 0.1, "L_multiplier": lm, "W1": rng.uniform(-1, 1, (hidden, 1)), "b1": rng.uniform(-1, 1, hidden),
            "W2": rng.uniform(-0.2, 0.2, (heads, hidden)), "b2": rng.uniform(-0.2, 0.2, heads)}


def test_threshold_interpolates_below_L_and_normalizes_by_i_above():
    x = fire.normalized_distance(np.array([3, 10]), np.array([0]), 0.1, 4.0, 1e-6)
    assert x[0, 0] == np.log1p(0.3) / (np.log1p(0.4) + 1e-6)  # i = 3 < L = 4: psi(L)
    assert x[1, 0] == np.log1p(1.0) / (np.log1p(1.0) + 1e-6)  # i = 10 >= L: psi(i)


@pytest.mark.parametrize("qp, kp, lm", [
    (np.arange(6), np.arange(6), 1.0), (np.array([4095]), np.array([0, 3, 4094, 4095]), 1.0),
    (np.arange(6), np.arange(6), 2.0**-8)])
def test_golden_is_faithful_and_fast_within_its_bound(qp, kp, lm):
    w = weights(lm=lm)
    golden = fire.bias(qp, kp, w, mode="golden")
    with mpmath.workprec(200):
        exact = oracle.bias_exact(qp, kp, w["c"], lm, w["W1"], w["b1"], w["W2"], w["b2"], 512.0, 1e-6)
    assert all(is_certified(g, e, "faithful") for g, e in zip(golden.reshape(-1), exact.reshape(-1)))
    bound = fire.fast_bound(qp, kp, w)
    for backend in ("numpy", "cpu"):
        assert np.all(np.abs(fire.bias(qp, kp, w, backend=backend) - golden) <= bound), backend


def test_relu_kink_is_decided_on_the_exact_pre_activation():
    """A hidden unit whose pre-activation is exactly 0 at distance 0 (b1 = 0) and negative after:
    the golden value keeps only the other units."""
    w = weights(heads=1, hidden=2)
    w["W1"], w["b1"] = np.array([[-1.0], [1.0]]), np.array([0.0, 0.5])
    w["W2"], w["b2"] = np.array([[3.0, 1.0]]), np.zeros(1)
    g = fire.bias(np.array([2]), np.array([0, 1, 2]), w, mode="golden")[0, 0]
    x = fire.normalized_distance(np.array([2]), np.array([0, 1, 2]), 0.1, 512.0, 1e-6)[0]
    assert g[2] == 0.5 and np.allclose(g[:2], x[:2] + 0.5, rtol=1e-15)


@pytest.mark.parametrize("bad, match", [
    ({"W1": np.ones((8, 2))}, "W1"), ({"W2": np.ones((3, 7))}, "W2"), ({"c": float("inf")}, "c"),
    ({"b1": np.full(8, np.nan)}, "b1")])
def test_bad_weights_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        fire.bias(np.arange(3), np.arange(3), {**weights(), **bad})


def test_negative_positions_are_refused():
    with pytest.raises(ValueError, match="q_positions"):
        fire.bias(np.array([-1]), np.arange(3), weights())


def test_identities_hold():
    load_all()
    rows = run_identities("fire")
    assert len(rows) == 4 and all(r["verdict"] == "holds" for r in rows)
    assert rows[-1]["id"] == "fire.backward-adjoint"


def test_fire_style_passes_in_every_dtype():
    report = run_conformance(f"{EXAMPLES / 'fire_style.py'}:bias", "fire.bias", seed=3, timeout=60.0,
                             dtypes=("float32", "bfloat16", "float16", "float64"))
    assert report.summary()["overall"] == "pass"


def test_the_threshold_bug_is_named_in_half_precision_too():
    """A candidate formula explains a bfloat16 output when the output is within the budget of that
    formula computed correctly (not within a fixed 1 %): the prefill cases, where the threshold
    matters, are named."""
    report = run_conformance(f"{EXAMPLES / 'buggy' / 'threshold_missing'}.py:bias", "fire.bias", fresh=False,
                             identities=False, dtypes=("bfloat16", "float16"), cases="fire.bias/prefill/*")
    assert report.cases and all("fire-threshold-missing" in {d.code for d in c.diagnoses} for c in report.cases)


@pytest.mark.parametrize("name, code", [
    ("threshold_missing", "fire-threshold-missing"), ("plus_one_missing", "fire-plus-one-missing"),
    ("one_based_positions", "fire-one-based-positions")])
def test_mistakes_are_named(name, code):
    report = run_conformance(f"{EXAMPLES / 'buggy' / name}.py:bias", "fire.bias", fresh=False, timeout=60.0,
                             dtypes=("float32",))
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing and all(code in [d.code for d in c.diagnoses] for c in failing)
