"""--grad on nope.apply: the gradient of the identity is the cotangent itself, exactly."""

import importlib.util
from pathlib import Path

import numpy as np
import torch

from conformance import run_conformance
from conformance.nope import backward

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "nope"
LLAMA4 = f"{EXAMPLES / 'llama4_style.py'}:apply"
BUG = EXAMPLES / "buggy" / "backward_detached.py"


def test_llama4_style_passes_with_grad():
    report = run_conformance(LLAMA4, "nope.apply", dtypes=("float32", "bfloat16"), fresh=False, grad=True)
    assert report.summary()["overall"] == "pass"
    assert len(report.cases) == 4
    for case in report.cases:
        grad = case.grad["inputs"]["x"]
        assert grad["budget_ratio"] == 0.0 and grad["dtype"] == case.dtype and grad["max_abs_error"] == 0.0
    (check,) = [i for i in report.identities if i.id == "nope.apply.gradcheck"]
    assert check.verdict == "pass" and check.dtype == "float64"


def test_a_detached_output_is_backward_missing():
    spec = importlib.util.spec_from_file_location("grad_backward_detached", BUG)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plain = run_conformance(f"{BUG}:apply", "nope.apply", dtypes=("float32",), fresh=False, identities=False)
    assert plain.summary()["overall"] == "pass"  # the values are x
    report = run_conformance(f"{BUG}:apply", "nope.apply", dtypes=("float32",), **module.OPTIONS)
    assert len(report.cases) == 2
    for case in report.cases:
        assert case.verdict == "fail" and case.budget_ratio == 0.0 and case.grad["verdict"] == "fail"
        (d,) = [d for d in case.diagnoses if d.code == module.CODE]
        assert "does not require grad" in d.message
    (check,) = [i for i in report.identities if i.id == "nope.apply.gradcheck"]
    assert check.verdict == "fail"


def halved(x, positions, spec):
    return HalfGrad.apply(x)


class HalfGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * 0.5


def test_a_scaled_gradient_is_backward_scale_and_fails_gradcheck():
    report = run_conformance(halved, "nope.apply", dtypes=("bfloat16",), fresh=False, grad=True)
    assert len(report.cases) == 2
    for case in report.cases:
        assert case.verdict == "fail" and case.budget_ratio == 0.0
        assert case.grad["inputs"]["x"]["budget_ratio"] == 2.0
        (d,) = [d for d in case.diagnoses if d.code == "backward-scale"]
        assert "0.5 times" in d.message
    (check,) = [i for i in report.identities if i.id == "nope.apply.gradcheck"]
    assert check.verdict == "fail" and "Jacobian mismatch" in check.message


def test_diagnosis_of_zero_and_of_one_changed_element():
    g = np.random.default_rng(15).standard_normal((2, 3, 2, 8))
    assert [d.code for d in backward.diagnose_gradient("float32", g, np.zeros_like(g))] == ["backward-missing"]
    assert backward.diagnose_gradient("float32", g, g) == []
    one = g.copy()
    one[1, 2, 0, 5] += 1.0
    assert backward.diagnose_gradient("float32", g, one) == []  # no pattern to name: the verdict says it
