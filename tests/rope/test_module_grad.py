"""rope.module under --grad and --autocast (issue 15): every step of the script runs through the
run's invoker with the case's training plan, and each step's gradient of x is graded as
rope.apply's."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance.rope import module as module_protocol  # noqa: E402
from reference.golden import store  # noqa: E402
from reference.rope import module_vectors  # noqa: E402
from support import load_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "rope"
TORCH = f"{EXAMPLES / 'module_torch.py'}:module"
FUNCTION = f"{EXAMPLES / 'hf_autograd_function.py'}:module"
TRANSPOSED = f"{EXAMPLES / 'buggy' / 'module_backward_transposed.py'}:module"
AUTOCAST = f"{EXAMPLES / 'buggy' / 'module_autocast_bf16_angles.py'}:module"
TWO_OFFSETS = "rope.module/scripts-d32/same-length-two-offsets"
DYNAMIC = "rope.module/scripts-d32/dynamic-long-then-short"




_MODULE_TORCH = load_file(EXAMPLES / "module_torch.py")


def _run(target, cases=TWO_OFFSETS, dtypes=("float32",), **options):
    return run_conformance(target, "rope.module", dtypes=dtypes, cases=cases, **{"fresh": False, **options})


def _steps(case_id):
    (case,) = [c for c in store.iter_cases("rope.module") if c.id == case_id]
    return module_vectors.step_bounds(case.params["steps"])


def _gradcheck(report):
    return [i for i in report.identities if i.id == "rope.module.gradcheck"]


@pytest.mark.parametrize("target", [TORCH, FUNCTION], ids=["autograd", "autograd-function"])
def test_correct_modules_pass_with_every_step_gradient_graded(target):
    """A module traced by autograd and one whose rotation is a hand-written autograd.Function both
    pass --grad in float32 and bfloat16; the gradient's worst element is named by its step."""
    report = _run(target, cases=f"{TWO_OFFSETS},{DYNAMIC}", dtypes=("float32", "bfloat16"), grad=True)
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert graded and report.summary()["overall"] == "pass", [(c.id, c.dtype, c.diagnoses) for c in report.cases]
    for c in graded:
        x = c.grad["inputs"]["x"]
        assert c.grad["verdict"] in ("pass", "acceptable") and 0 < x["budget_ratio"] <= 1.0
        assert x["worst_location"].startswith("step ")
        assert x["mismatch"]["total"] == sum(b - a for a, b in _steps(c.id)) * 2 * 16  # heads x pairs
    (check,) = _gradcheck(report)
    assert check.verdict == "pass", check.message


def test_a_transposed_backward_is_diagnosed_at_its_step():
    report = _run(TRANSPOSED, grad=True)
    (case,) = report.cases
    assert case.verdict == "fail" and case.budget_ratio <= 1.0  # the forward is right
    assert case.grad["verdict"] == "fail" and case.grad["budget_ratio"] > 1e3
    (found,) = [d for d in case.diagnoses if d.code == "backward-transposed"]
    assert found.message.startswith("x at step 0 ")
    (check,) = _gradcheck(report)
    assert check.verdict == "fail"
    # Without --grad the same module passes: only the backward is wrong.
    assert _run(TRANSPOSED).summary()["overall"] == "pass"


def test_autocast_reaches_every_step():
    """The bf16 matmul of the angles happens only inside autocast: the steps must run in it."""
    (case,) = _run(AUTOCAST, autocast="bfloat16", identities=False).cases
    assert case.verdict == "fail" and "angle-precision" in {d.code for d in case.diagnoses}
    assert any("autocast bfloat16" in n for n in case.notes)
    (case,) = _run(AUTOCAST, identities=False).cases
    assert case.verdict in ("pass", "acceptable")


class _Tables(torch.nn.Module):
    """cos_sin form: tables in pair order, float32 angles."""

    posref_output = "cos_sin"

    def __init__(self, spec):
        super().__init__()
        self.inv = 1.0 / spec.base ** (torch.arange(0, spec.rotary_dim, 2, dtype=torch.float64) / spec.rotary_dim)

    def forward(self, x, positions):
        ang = positions[..., None].float() * self.inv.float()
        return ang.cos(), ang.sin()


def test_a_tables_module_has_no_gradient_and_says_so():
    report = _run(lambda spec: _Tables(spec), grad=True)
    (case,) = report.cases
    assert case.verdict in ("pass", "acceptable") and case.grad is None
    assert any("do not depend on x" in n for n in case.notes)
    (check,) = _gradcheck(report)
    assert check.verdict == "skip" and "(cos, sin)" in check.message


class _Scripted(torch.nn.Module):
    """Right at every step except the one numbered ``bad``, where it misbehaves as ``how`` says."""

    def __init__(self, spec, bad, how):
        super().__init__()
        self.spec, self.bad, self.how, self.calls = spec, bad, how, 0
        self.inner = _MODULE_TORCH.module(spec)

    def forward(self, x, positions):
        k, self.calls = self.calls, self.calls + 1
        if k == self.bad and self.how == "hang":
            time.sleep(30)
        out = self.inner(x, positions)
        if k == self.bad and self.how == "detached":
            return out.detach()
        if k == self.bad and self.how == "backward-raises":
            return _RaisesBackward.apply(out)
        return out


class _RaisesBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y):
        return y.clone()

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("no backward kernel for this shape")


def test_a_step_detached_from_x_is_backward_missing_at_that_step():
    (case,) = _run(lambda spec: _Scripted(spec, 1, "detached"), grad=True, identities=False).cases
    assert case.verdict == "fail" and case.grad["verdict"] == "fail"
    (missing,) = [d for d in case.diagnoses if d.code == "backward-missing"]
    assert "does not require grad" in missing.message and "(step 1 " in missing.message


def test_a_backward_that_raises_is_an_error_naming_the_step():
    (case,) = _run(lambda spec: _Scripted(spec, 0, "backward-raises"), grad=True, identities=False).cases
    assert case.verdict == "error" and case.grad["verdict"] == "error"
    (raised,) = [d for d in case.diagnoses if d.code == "raised"]
    assert "no backward kernel" in raised.message and "(step 0 " in raised.message


def test_a_hanging_step_times_out_under_the_run_timeout():
    """Steps go through the run's invoker: --timeout applies to each of them, not only to the factory."""
    start = time.perf_counter()
    report = _run(lambda spec: _Scripted(spec, 1, "hang"), timeout=1.0, identities=False)
    assert time.perf_counter() - start < 20
    (case,) = report.cases
    (timeout,) = [d for d in case.diagnoses if d.code == "timeout"]
    assert timeout.message.startswith("step 1 ")
    assert any("background" in n for n in report.notes)


def test_isolated_grad_runs_skip_the_module_and_its_gradcheck():
    report = _run(TORCH, grad=True, isolate=True)
    assert {c.verdict for c in report.cases} == {"skip"}
    (check,) = _gradcheck(report)
    assert check.verdict == "skip" and "--isolate" in check.message


def test_step_cotangents_are_slices_of_the_case_cotangent():
    """The gradient each step is graded against uses that step's slice of one cotangent drawn from
    the case id (so a step's gradient cannot be graded against another step's g)."""
    proto = module_protocol.PROTOCOL
    (case,) = [c for c in store.iter_cases("rope.module") if c.id == DYNAMIC]
    spec = proto.spec(case)
    prepared = proto.prepare(case, spec, "float32", "cpu")
    (g,) = proto.cotangents(case, spec, prepared)
    assert tuple(g.shape) == np.shape(case.arrays["x"])
    from conformance.training import make_plan

    prepared.plan = make_plan((0,), (g,), None, "cpu")
    prepared.form = "x"
    for step in prepared.steps:
        (plan,) = proto._step_plan(prepared, step)
        a, b = step.bounds
        assert torch.equal(plan["cotangents"][0], g[:, a:b])
