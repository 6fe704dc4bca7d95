"""Axial 2-D RoPE (issue 11): certified golden values, identities, the protocol and its diagnoses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance import run_conformance
from reference import rope2d
from reference.golden.certify import nearest_double
from reference.identities import load_all, run_identities
from reference.rope2d import oracle

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "rope2d"


@pytest.mark.parametrize("base, layout, order, cls", [(100.0, "interleaved", ("x", "y"), 1),
                                                       (1e4, "half", ("y", "x"), 0)])
def test_golden_is_correctly_rounded_and_cls_passes_through(base, layout, order, cls):
    x = np.random.default_rng(4).standard_normal((1, 5, 2, 16))
    coords = np.array([[[-1, -1], [0, 0], [6, 1], [13, 13], [2**12, 3]]])
    out = rope2d.apply(x, coords, base=base, layout=layout, order=order, cls_tokens=cls, mode="golden")
    exact = oracle.apply_exact(x, coords, base, layout, order, cls)
    assert [nearest_double(e) for e in exact.reshape(-1)] == out.reshape(-1).tolist()
    assert np.array_equal(out[:, :cls], x[:, :cls])


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="multiple of 4"):
        rope2d.apply(np.ones((1, 1, 1, 6)), np.zeros((1, 1, 2), int))
    with pytest.raises(ValueError, match="coords"):
        rope2d.apply(np.ones((1, 2, 1, 8)), np.zeros((1, 2), int))


def test_identities_hold():
    load_all()
    assert all(r["verdict"] == "holds" for r in run_identities("rope2d"))


def _grade(name, **options):
    return run_conformance(f"{EXAMPLES / name}:apply", "rope2d.apply", timeout=60.0, **options)


def test_the_example_passes_both_configurations():
    report = _grade("rope_vit.py", dtypes=("float32", "bfloat16"), seed=6)
    assert report.summary()["overall"] == "pass"
    assert {c.id.split("/")[1] for c in report.cases} >= {"rope-vit-b16", "qwen2-vl-vision"}


@pytest.mark.parametrize("name, code", [("buggy/axes_swapped.py", "axes-swapped"),
                                        ("buggy/one_ladder.py", "axis-ladder"),
                                        ("buggy/cls_rotated.py", "cls-rotated")])
def test_axis_mistakes_are_named(name, code):
    report = _grade(name, dtypes=("float32",), fresh=False)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing and all(code in [d.code for d in c.diagnoses] for c in failing)


def test_mixed_form_golden_and_graded():
    from reference.rope2d.vectors import mixed_freqs

    x = np.random.default_rng(8).standard_normal((1, 3, 2, 16))
    coords = np.array([[[-1, -1], [2, 1], [11, 7]]])
    f = np.array(mixed_freqs())
    out = rope2d.apply(x, coords, freqs=f, cls_tokens=1, mode="golden")
    exact = oracle.mixed_exact(x, coords, f, "interleaved", 1)
    assert [nearest_double(e) for e in exact.reshape(-1)] == out.reshape(-1).tolist()
    report = _grade("rope_vit.py", dtypes=("float32",), fresh=False, cases="rope2d.apply/rope-mixed/*")
    assert report.cases and report.summary()["overall"] == "pass"
    swapped = _grade("buggy/axes_swapped.py", dtypes=("float32",), fresh=False, cases="rope2d.apply/rope-mixed/*")
    assert [d.code for d in swapped.cases[0].diagnoses] == ["axes-swapped"]
