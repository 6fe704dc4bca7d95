"""--grad on rope2d.apply: the VJP the runner grades against, the correct example, a wrong backward,
each backward diagnosis on the reference's mutants, gradcheck, and a detached output."""

from pathlib import Path

import numpy as np
import pytest
from support import load_file

from conformance import run_conformance
from conformance.rope2d import backward
from conformance.rope2d.spec import Rope2dSpec
from reference import rope2d
from reference.golden import store

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "rope2d"
VIT = f"{EXAMPLES / 'rope_vit.py'}:apply"
BUG = EXAMPLES / "buggy" / "backward_cls_dropped.py"
MIXED = tuple(tuple(tuple(float(v) for v in row) for row in axis)
              for axis in np.random.default_rng(3).uniform(-1, 1, size=(2, 3, 4)))
SPECS = [Rope2dSpec(16, 100.0, "interleaved", ("x", "y"), 1), Rope2dSpec(16, 10000.0, "half", ("y", "x"), 0),
         Rope2dSpec(8, 100.0, "interleaved", ("x", "y"), 2, MIXED)]
IDS = ["vit-cls", "qwen-vision", "rope-mixed"]


def draw(rng, spec):
    d = spec.head_dim
    coords = rng.integers(0, 40, size=(2, 5, 2))
    return rng.standard_normal((2, 5, 3, d)), rng.standard_normal((2, 5, 3, d)), coords


def forward(x, coords, spec):
    return rope2d.apply(x, coords, base=spec.base, layout=spec.layout, order=spec.order, cls_tokens=spec.cls_tokens,
                        freqs=None if spec.freqs is None else np.array(spec.freqs), backend="numpy")


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_vjp_is_the_transpose_of_the_forward(spec):
    """<R^T g, x> = <g, R x>; CLS tokens' gradient is g."""
    x, g, coords = draw(np.random.default_rng(15), spec)
    back = backward.vjp(g, coords, spec)
    assert np.vdot(back, x) == pytest.approx(np.vdot(g, forward(x, coords, spec)), rel=1e-12)
    assert np.array_equal(back[:, : spec.cls_tokens], g[:, : spec.cls_tokens])
    assert not np.allclose(back, forward(g, coords, spec))


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_each_mutant_gets_its_code_and_the_right_gradient_none(spec):
    _, g, coords = draw(np.random.default_rng(7), spec)
    assert backward.diagnose_gradient(spec, "float32", g, coords, backward.vjp(g, coords, spec)) == []
    cands = backward.candidates(g, coords, spec)
    assert len(cands) == 4 + (spec.cls_tokens > 0)
    for code, message, wrong, _ in cands:
        found = backward.diagnose_gradient(spec, "float32", g, coords, wrong)
        assert code in {d.code for d in found}, (code, message, found)
    third = backward.diagnose_gradient(spec, "float32", g, coords, -backward.vjp(g, coords, spec))
    assert [d.code for d in third] == ["backward-scale"] and "-1 times" in third[0].message


def test_rope_vit_passes_with_grad():
    report = run_conformance(VIT, "rope2d.apply", dtypes=("float32", "bfloat16"), fresh=False, grad=True)
    assert report.summary()["overall"] == "pass"
    assert len(report.cases) == 2 * len(list(store.iter_cases("rope2d.apply")))  # the catalog's and the zoo's
    for case in report.cases:
        grad = case.grad["inputs"]["x"]
        assert 0.0 < grad["budget_ratio"] <= 1.0 and grad["dtype"] == case.dtype
    (check,) = [i for i in report.identities if i.id == "rope2d.apply.gradcheck"]
    assert check.verdict == "pass" and check.dtype == "float64"




def test_dropped_cls_gradient_is_backward_missing_where_there_is_a_cls_token():
    module = load_file(BUG)
    plain = run_conformance(f"{BUG}:apply", "rope2d.apply", dtypes=("float32",), fresh=False, identities=False)
    assert plain.summary()["overall"] == "pass"  # its forward is right
    report = run_conformance(f"{BUG}:apply", "rope2d.apply", dtypes=("float32",), **module.OPTIONS)
    verdicts = {c.id.split("/")[1]: c.verdict for c in report.cases}
    assert verdicts["qwen2-vl-vision"] == "pass"  # no CLS token: the backward is right there
    failing = [c for c in report.cases if c.verdict == "fail"]
    with_cls = {c.id for c in store.iter_cases("rope2d.apply") if c.params["cls_tokens"] > 0}
    assert {c.id for c in failing} == with_cls and len(with_cls) == 5
    for case in failing:
        assert case.budget_ratio <= 1.0 and case.grad["verdict"] == "fail"
        assert module.CODE in {d.code for d in case.diagnoses}, (case.id, case.diagnoses)
        assert any("CLS tokens get no gradient" in d.message for d in case.diagnoses)
        assert "(CLS token)" in case.grad["inputs"]["x"]["worst_location"]
    (check,) = [i for i in report.identities if i.id == "rope2d.apply.gradcheck"]
    assert check.verdict == "fail" and "Jacobian mismatch" in check.message


def detached(x, coords, spec):
    from conformance.loader import load_target

    return load_target(VIT)(x.detach(), coords, spec)


def test_a_detached_output_is_backward_missing():
    report = run_conformance(detached, "rope2d.apply", dtypes=("float32",),
                             cases="rope2d.apply/rope-vit-b16/grid-4x7", fresh=False, grad=True, identities=False)
    (case,) = report.cases
    assert case.verdict == "fail" and case.budget_ratio <= 1.0 and case.grad["verdict"] == "fail"
    assert "backward-missing" in {d.code for d in case.diagnoses}
