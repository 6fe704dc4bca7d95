"""KERPLE (issue 12, part): both variants after the code's clamps, certified golden values, the fast
mode's bound, identities, the Megatron-style example and one diagnosis per mistake."""

from __future__ import annotations

from pathlib import Path

import mpmath
import numpy as np
import pytest

from conformance import run_conformance
from reference import kerple
from reference.golden.certify import nearest_double
from reference.identities import load_all, run_identities
from reference.kerple import oracle

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "kerple"
QP, KP = np.array([0, 5, 4095]), np.array([0, 1, 4, 4094, 4095])
PARAMS = {"log": ([0.37, 1.21, 0.004, -0.3], [0.43, 0.07, 0.0005, 0.86]),
          "power": ([0.21, 0.0002, 0.64, 0.88], [0.61, 1.37, 3.5, -0.1])}


def test_clamps_follow_the_code():
    r1, r2 = kerple.clamp("log", [0.001, 0.5], [-1.0, 3.0])
    assert r1.tolist() == [0.01, 0.5] and r2.tolist() == [0.01, 3.0]
    r1, r2 = kerple.clamp("power", [0.001, 0.5], [-1.0, 3.0])
    assert r1.tolist() == [0.01, 0.5] and r2.tolist() == [0.01, 2.0]


@pytest.mark.parametrize("variant", ["log", "power"])
def test_golden_is_certified_and_fast_within_its_bound(variant):
    r1, r2 = PARAMS[variant]
    golden = kerple.bias(QP, KP, variant, r1, r2, mode="golden")
    with mpmath.workprec(200):
        exact = oracle.bias_exact(variant, r1, r2, QP, KP)
    assert [nearest_double(v) for v in exact.reshape(-1)] == golden.reshape(-1).tolist()
    bound = 2 * kerple.FAST_ULPS * 2.0**-53 * np.abs(golden)
    for backend in ("numpy", "cpu"):
        fast = kerple.bias(QP, KP, variant, r1, r2, backend=backend)
        assert np.all(np.abs(fast - golden) <= bound), backend


def test_log_is_log1p_accurate_at_small_arguments():
    """At r2 n = 0.01 * 1, log(1 + x) in float64 loses about u / x relative; the reference must not."""
    golden = kerple.bias(np.array([1]), np.array([0]), "log", [1.0], [0.01], mode="golden")
    fast = kerple.bias(np.array([1]), np.array([0]), "log", [1.0], [0.01], backend="cpu")
    assert abs(fast[0, 0, 0] - golden[0, 0, 0]) <= 2 * kerple.FAST_ULPS * 2.0**-53 * abs(golden[0, 0, 0])


@pytest.mark.parametrize("bad, match", [
    (dict(variant="cosine"), "variant"), (dict(r1=[0.1]), "r2"), (dict(r1=[float("nan"), 1.0]), "r1"),
    (dict(q_positions=np.array([0.5])), "q_positions")])
def test_bad_arguments_are_refused(bad, match):
    args = {"q_positions": QP, "k_positions": KP, "variant": "log", "r1": [0.1, 0.2], "r2": [0.3, 0.4]}
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        kerple.bias(args["q_positions"], args["k_positions"], args["variant"], args["r1"], args["r2"])


def test_identities_hold():
    load_all()
    rows = run_identities("kerple")
    assert len(rows) == 2 and all(r["verdict"] == "holds" for r in rows)


def test_megatron_style_passes():
    report = run_conformance(f"{EXAMPLES / 'kerple_megatron_style.py'}:bias", "kerple.bias", seed=3, timeout=60.0)
    assert report.summary()["overall"] == "pass"


@pytest.mark.parametrize("name, code", [
    ("clamp_missing", "kerple-clamp-missing"), ("variant_swapped", "kerple-variant-swapped"),
    ("sign_flipped", "kerple-sign")])
def test_mistakes_are_named(name, code):
    report = run_conformance(f"{EXAMPLES / 'buggy' / name}.py:bias", "kerple.bias", fresh=False, timeout=60.0)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing and all(code in [d.code for d in c.diagnoses] for c in failing)
