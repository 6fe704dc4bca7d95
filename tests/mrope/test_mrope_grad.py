"""--grad on mrope.apply: the VJP the runner grades against, the correct example, a wrong backward,
each backward diagnosis on the reference's mutants, gradcheck, and a detached output."""

from pathlib import Path

import numpy as np
import pytest
import torch

from conformance import run_conformance
from conformance.mrope import backward
from conformance.mrope.spec import MropeSpec
from reference import mrope
from support import load_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "mrope"
QWEN = f"{EXAMPLES / 'qwen_vl.py'}:apply"
BUG = EXAMPLES / "buggy" / "backward_transposed.py"
SPECS = [MropeSpec(16, 12, 10000.0, "half", (2, 2, 2), "qwen2"), MropeSpec(16, 16, 10000.0, "interleaved", (4, 2, 2),
                                                                            "qwen3")]


def positions(rng):
    return rng.integers(0, 3000, size=(3, 2, 5))


@pytest.mark.parametrize("spec", SPECS, ids=["qwen2-tail", "qwen3-interleaved"])
def test_vjp_is_the_transpose_of_the_forward(spec):
    """<R^T g, x> = <g, R x> for the forward reference.mrope.apply."""
    rng = np.random.default_rng(15)
    x, g, pos = rng.standard_normal((2, 5, 3, 16)), rng.standard_normal((2, 5, 3, 16)), positions(rng)
    fwd = mrope.apply(x, pos, mrope_section=spec.mrope_section, variant=spec.variant, rotary_dim=spec.rotary_dim,
                      base=spec.base, layout=spec.layout, backend="numpy")
    back = backward.vjp(g, pos, spec)
    assert np.vdot(back, x) == pytest.approx(np.vdot(g, fwd), rel=1e-12)
    assert np.array_equal(back[..., spec.rotary_dim:], g[..., spec.rotary_dim:])
    assert not np.allclose(back, mrope.apply(g, pos, mrope_section=spec.mrope_section, variant=spec.variant,
                                             rotary_dim=spec.rotary_dim, base=spec.base, layout=spec.layout,
                                             backend="numpy"))


@pytest.mark.parametrize("spec", SPECS, ids=["qwen2-tail", "qwen3-interleaved"])
def test_each_mutant_gets_its_code_and_the_right_gradient_none(spec):
    rng = np.random.default_rng(7)
    g, pos = rng.standard_normal((2, 5, 3, 16)), positions(rng)
    assert backward.diagnose_gradient(spec, "float32", g, pos, backward.vjp(g, pos, spec)) == []
    for code, message, wrong, _ in backward.candidates(g, pos, spec):
        found = backward.diagnose_gradient(spec, "float32", g, pos, wrong)
        assert code in {d.code for d in found}, (code, message, found)
    third = backward.diagnose_gradient(spec, "float32", g, pos, backward.vjp(g, pos, spec) / 3)
    assert [d.code for d in third] == ["backward-scale"] and "0.333333 times" in third[0].message


def test_qwen_vl_passes_with_grad():
    report = run_conformance(QWEN, "mrope.apply", dtypes=("float32", "bfloat16"), fresh=False, grad=True)
    assert report.summary()["overall"] == "pass"
    graded = [c for c in report.cases if c.verdict != "skip"]
    # Qwen2-VL, Qwen3-VL and Qwen3.5 (partial rotary) graded, and the zoo's three Qwen-VL models'
    # committed cases; GLM-4V's interleaved pairs refused
    assert len(graded) == 18 + 2 * 12 and {c.id.split("/")[1] for c in report.cases if c.verdict == "skip"} == {"glm-4v"}
    for case in graded:
        grad = case.grad["inputs"]["x"]
        assert 0.0 < grad["budget_ratio"] <= 1.0 and grad["dtype"] == case.dtype
    (check,) = [i for i in report.identities if i.id == "mrope.apply.gradcheck"]
    assert check.verdict == "pass" and check.dtype == "float64"




def test_transposed_backward_gets_its_code_and_only_the_gradient_fails():
    module = load_file(BUG)
    plain = run_conformance(f"{BUG}:apply", "mrope.apply", dtypes=("float32",), fresh=False, identities=False)
    assert plain.summary()["overall"] == "pass"  # its forward is right
    report = run_conformance(f"{BUG}:apply", "mrope.apply", dtypes=("float32",), **module.OPTIONS)
    graded = [c for c in report.cases if c.verdict != "skip"]  # GLM-4V's interleaved pairs: Unsupported
    assert all(c.verdict == "fail" for c in graded) and len(graded) == 9 + 12  # the catalog's and the zoo's
    for case in graded:
        assert case.budget_ratio <= 1.0 and case.grad["verdict"] == "fail"
        assert module.CODE in {d.code for d in case.diagnoses}, (case.id, case.diagnoses)
        assert case.grad["inputs"]["x"]["worst_location"].startswith("batch row 0, token ")
    (check,) = [i for i in report.identities if i.id == "mrope.apply.gradcheck"]
    assert check.verdict == "fail" and "Jacobian mismatch" in check.message


def detached(x, positions, spec):
    from conformance.loader import load_target

    with torch.no_grad():
        return load_target(QWEN)(x, positions, spec)


def test_a_detached_output_is_backward_missing():
    report = run_conformance(detached, "mrope.apply", dtypes=("float32",), cases="mrope.apply/qwen2-vl/text-8",
                             fresh=False, grad=True, identities=False)
    (case,) = report.cases
    assert case.verdict == "fail" and case.budget_ratio <= 1.0 and case.grad["verdict"] == "fail"
    assert "backward-missing" in {d.code for d in case.diagnoses}
