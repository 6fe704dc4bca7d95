"""diffusers' ``get_timestep_embedding`` graded as a user would port it (issue 23, sec. 2): its
float32 exponent exp(fl(fl(fl(-ln base) * i) / h)) is rounded three times (1.17 budgets at seeds 3,
4 and 8 under the single-rounding allowance), and its odd-d_model table is i / floor(d/2) with a
zero last column, posref's odd-d rule for concatenated 2i/d tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance import run_conformance
from reference import sinusoidal

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sinusoidal"


def grade(seed, fresh=True):
    pytest.importorskip("diffusers")
    return run_conformance(f"{EXAMPLES / 'lib_diffusers.py'}:table", "sinusoidal.table", seed=seed, fresh=fresh,
                           identities=False, timeout=60.0)


def failures(report):
    return [(c.id, c.budget_ratio) for c in report.cases if c.verdict not in ("pass", "acceptable", "skip")]


def test_diffusers_passes_the_catalog_and_the_odd_d_case():
    report = grade(None, fresh=False)
    verdicts = {c.id: c.verdict for c in report.cases}
    assert failures(report) == []
    assert verdicts["sinusoidal.table/odd-d-model/timestep-d9"] in ("pass", "acceptable")
    assert verdicts["sinusoidal.table/odd-d-model/interleaved-d7"] == "skip"  # the adapter's word: [sin | cos] only
    assert sum(v != "skip" for v in verdicts.values()) >= 7


@pytest.mark.parametrize("seed", [3, 4, 8, 11])
def test_diffusers_passes_the_seeds_that_failed(seed):
    assert failures(grade(seed)) == []


@pytest.mark.slow
def test_diffusers_seed_sweep():
    bad = {seed: f for seed in range(60) if (f := failures(grade(seed)))}
    assert bad == {}


def test_odd_d_rule_of_concatenated_tables():
    """2i/d in [sin | cos] halves of an odd d: h = floor(d/2) frequencies base**(-i/h), a zero
    last column; interleaved keeps 2i/d over ceil(d/2) frequencies; even d is unchanged."""
    p = np.array([0, 1, 7, 1000])
    got = sinusoidal.table(p, 9, layout="concatenated", exponent="2i/d", backend="numpy")
    w = 10000.0 ** (-np.arange(4) / 4)
    want = np.concatenate([np.sin(p[:, None] * w), np.cos(p[:, None] * w), np.zeros((4, 1))], axis=1)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    inter = sinusoidal.table(p, 9, layout="interleaved", exponent="2i/d", backend="numpy")
    np.testing.assert_allclose(inter[:, 8], np.sin(p * 10000.0 ** (-8 / 9)), rtol=0, atol=1e-12)
    even = sinusoidal.table(p, 8, layout="concatenated", exponent="2i/d", backend="numpy")
    np.testing.assert_allclose(even[:, :4], np.sin(p[:, None] * 10000.0 ** (-2 * np.arange(4) / 8)), rtol=0, atol=1e-12)


def test_the_other_odd_d_convention_fails():
    """2i/d taken literally over floor(d/2) frequencies at an odd d (not what zero-padded code
    computes) is a different table: it fails the odd-d case."""
    import torch

    def literal(positions, spec):
        h = spec.d_model // 2
        w = spec.base ** (-2 * torch.arange(h, dtype=torch.float64) / spec.d_model)
        phi = positions.double()[:, None] * w
        return torch.cat([phi.sin(), phi.cos(), torch.zeros(len(positions), spec.d_model - 2 * h)], 1).float()

    report = run_conformance(literal, "sinusoidal.table", fresh=False, identities=False,
                             cases="sinusoidal.table/odd-d-model/timestep-d9", timeout=60.0)
    (case,) = report.cases
    assert case.verdict == "fail" and case.budget_ratio > 1e3
