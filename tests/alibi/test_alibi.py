"""ALiBi (issue 12, part): slopes by the authors' rule, the bias up to a per-row constant, certified
values, identities and diagnoses."""

from __future__ import annotations

from pathlib import Path

import mpmath
import numpy as np
import pytest

from conformance import run_conformance
from reference import alibi
from reference.alibi import oracle
from reference.golden.certify import nearest_double
from reference.identities import load_all, run_identities

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "alibi"


def test_slopes_rule_for_powers_and_non_powers():
    assert alibi.slopes(8).tolist() == [2.0**-k for k in range(1, 9)]
    s12 = alibi.slopes(12, mode="golden")
    assert s12[:8].tolist() == [2.0**-k for k in range(1, 9)]
    assert s12[8:].tolist() == [nearest_double(mpmath.power(2, -mpmath.mpf(k) / 2)) for k in (1, 3, 5, 7)]
    with mpmath.workprec(200):
        for n in (12, 20, 40, 80, 96, 7):
            assert alibi.slopes(n, mode="golden").tolist() == [nearest_double(v) for v in oracle.slopes_exact(n)]
    with pytest.raises(ValueError, match="num_heads"):
        alibi.slopes(0)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("causal", [True, False])
def test_bias_backends_agree_and_golden_is_certified(backend, causal):
    qp, kp = np.array([0, 5, 4095]), np.array([0, 1, 4094, 4095])
    fast = alibi.bias(12, qp, kp, causal=causal, backend=backend)
    assert np.array_equal(fast, alibi.bias(12, qp, kp, causal=causal, backend="numpy"))
    golden = alibi.bias(12, qp, kp, causal=causal, mode="golden")
    with mpmath.workprec(200):
        exact = oracle.bias_exact(12, qp, kp, causal)
    assert [nearest_double(v) for v in exact.reshape(-1)] == golden.reshape(-1).tolist()


def test_identities_hold():
    load_all()
    assert all(r["verdict"] == "holds" for r in run_identities("alibi"))


def test_fairseq_style_passes_both_protocols_with_its_per_row_constant():
    for adapter, protocol in (("slopes", "alibi.slopes"), ("bias", "alibi.bias")):
        report = run_conformance(f"{EXAMPLES / 'fairseq_style.py'}:{adapter}", protocol, seed=3, timeout=60.0)
        assert report.summary()["overall"] == "pass", protocol


@pytest.mark.parametrize("name, protocol, code", [
    ("buggy/power_of_two_rule.py:slopes", "alibi.slopes", "slopes-power-of-two-rule"),
    ("buggy/reversed_slopes.py:slopes", "alibi.slopes", "slopes-reversed"),
    ("buggy/sign_flipped.py:bias", "alibi.bias", "bias-sign"),
    ("buggy/causal_for_bidirectional.py:bias", "alibi.bias", "bias-varies-in-row"),
])
def test_mistakes_are_named(name, protocol, code):
    report = run_conformance(f"{EXAMPLES / name}", protocol, fresh=False, timeout=60.0)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing and all(code in [d.code for d in c.diagnoses] for c in failing)
