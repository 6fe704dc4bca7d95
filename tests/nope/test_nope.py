"""NoPE (issue 12, part): the identity map on every backend, certified vectors, the baseline
identities, and the two ways a NoPE layer goes wrong."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance import run_conformance
from reference import nope
from reference.identities import load_all, run_identities

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "nope"


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
def test_apply_returns_x_bit_for_bit(backend):
    x = np.random.default_rng(0).standard_normal((2, 3, 2, 8)).astype(np.float32)
    x[0, 0, 0, :2] = (-0.0, np.nan)
    out = nope.apply(x, np.array([[0, 1, 2], [5, 6, 7]]), backend=backend)
    assert out.dtype == np.float64 and np.array_equal(out.view(np.int64), x.astype(np.float64).view(np.int64))


def test_bad_input_is_refused_in_one_line():
    with pytest.raises(ValueError, match="positions"):
        nope.apply(np.zeros((1, 3, 1, 4)), np.zeros((1, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="backend"):
        nope.apply(np.zeros((1, 1, 1, 4)), np.zeros((1, 1), dtype=np.int64), backend="tpu")


def test_identities_hold_or_are_violated_by_design():
    load_all()
    verdicts = {r["id"]: r["verdict"] for r in run_identities("nope")}
    assert verdicts.pop("nope.causal-breaks-permutation") == "violated-by-design"
    assert verdicts and set(verdicts.values()) == {"holds"}


def test_a_nope_layer_passes():
    report = run_conformance(f"{EXAMPLES / 'llama4_style.py'}:apply", "nope.apply", seed=5, timeout=60.0)
    assert report.summary()["overall"] == "pass"


@pytest.mark.parametrize("name, code", [("rope_applied", "nope-rope-applied"),
                                        ("position_added", "nope-position-added")])
def test_mistakes_are_named(name, code):
    report = run_conformance(f"{EXAMPLES / 'buggy' / name}.py:apply", "nope.apply", fresh=False, timeout=60.0)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing and all(code in [d.code for d in c.diagnoses] for c in failing)
