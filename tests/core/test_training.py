"""The training mode of the runner (conformance.training): --grad and --autocast, family-free parts."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conformance import run_conformance
from conformance.runner import OptionError
from conformance.training import (
    TrainingCall,
    budget_dtype,
    cotangent,
    load_training_target,
    make_plan,
    split_plan,
    unpack,
)

ROOT = Path(__file__).resolve().parents[2]
HF = str(ROOT / "examples" / "rope" / "hf_rotate_half.py")
CASE = "rope.apply/llama2-d128/prefill-8"


def scale(x, w):
    return x * w


def test_an_argument_is_a_plan_only_with_its_tag():
    args = (torch.ones(2), {"grad_args": (0,)})
    assert split_plan(args) == (args, None)  # an adapter's own dict is never taken for a plan
    plan = make_plan((0,), (torch.ones(2),), None, "cuda:1")
    rest, got = split_plan(args + (plan,))
    assert rest == args and got is plan and got["device"] == "cuda"


def test_without_a_plan_the_call_is_the_adapters():
    x = torch.tensor([1.0, 2.0])
    assert torch.equal(TrainingCall(scale)(x, 3.0), x * 3.0)


def test_the_gradient_of_the_planned_inputs_comes_back_detached():
    x, w = torch.tensor([1.0, -2.0, 4.0]), torch.tensor([0.5, 3.0, -1.0])
    g = torch.tensor([1.0, 10.0, 100.0])
    value = TrainingCall(scale)(x, w, make_plan((0, 1), (g,)))
    out, info = unpack(value)
    assert torch.equal(out, x * w) and not out.requires_grad
    assert torch.equal(info["grads"][0], g * w) and torch.equal(info["grads"][1], g * x)
    assert info["problem"] is None and info["cotangent_dtypes"] == ("float32",)
    assert not x.requires_grad  # the caller's tensors are not turned into leaves


def test_an_input_the_output_ignores_gets_none():
    value = TrainingCall(lambda x, w: w * 2.0)(torch.ones(2), torch.ones(2), make_plan((0, 1), (torch.ones(2),)))
    assert value["grads"][0] is None and torch.equal(value["grads"][1], torch.full((2,), 2.0))


def test_a_detached_output_is_named():
    value = TrainingCall(lambda x: x.detach() * 2.0)(torch.ones(2), make_plan((0,), (torch.ones(2),)))
    assert value["grads"] == (None,) and "does not require grad" in value["problem"]


class Broken(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("backward kernel not compiled")


def test_a_backward_that_raises_is_one_line():
    value = TrainingCall(Broken.apply)(torch.ones(2), make_plan((0,), (torch.ones(2),)))
    assert value["problem"].startswith("the backward pass raised RuntimeError: backward kernel not compiled")
    assert torch.equal(value["output"], torch.full((2,), 2.0))  # the forward is still graded


def test_autocast_runs_the_adapter_inside_autocast():
    x = torch.ones(2, 2)
    eye = lambda a: a @ torch.eye(2)  # noqa: E731 - matmul autocasts on CPU
    assert TrainingCall(eye)(x, make_plan((), (), "bfloat16", "cpu")).dtype == torch.bfloat16
    assert TrainingCall(eye)(x).dtype == torch.float32
    value = TrainingCall(eye)(x, make_plan((0,), (torch.ones(2, 2),), "bfloat16", "cpu"))
    # The cotangent is cast to the output's dtype; the gradient arrives in the input's.
    assert value["cotangent_dtypes"] == ("bfloat16",) and value["grads"][0].dtype == torch.float32


def test_gradcheck_passes_and_fails():
    x = torch.randn(3, dtype=torch.float64)
    ok = TrainingCall(scale)(x, 2.0, make_plan((0,), gradcheck={"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3}))
    assert ok == {"gradcheck": True, "message": ""}

    class Wrong(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * 3.0

    bad = TrainingCall(lambda x: Wrong.apply(x))(x, make_plan((0,), gradcheck={"eps": 1e-6}))
    assert bad["gradcheck"] is False and "Jacobian mismatch" in bad["message"]


def test_budget_dtype_is_the_one_the_output_arrived_in_under_autocast():
    b16, f32 = torch.ones(1, dtype=torch.bfloat16), torch.ones(1)
    assert budget_dtype(b16, "float32", "bfloat16") == "bfloat16"
    assert budget_dtype(f32, "float32", "bfloat16") == "float32"
    assert budget_dtype((b16, f32), "float32", "bfloat16") == "float32"  # mixed: stays dtype-changed
    assert budget_dtype(b16, "float32", None) == "float32"  # no autocast: the input's dtype


def test_the_cotangent_is_drawn_from_the_case_and_representable():
    g = cotangent(CASE, (1, 8, 2, 4), "float32")
    assert np_equal(g, cotangent(CASE, (1, 8, 2, 4), "bfloat16"))
    assert not np_equal(g, cotangent(CASE, (1, 8, 2, 4), "float32", index=1))
    assert torch.equal(torch.from_numpy(g).to(torch.bfloat16).double(), torch.from_numpy(g))


def np_equal(a, b):
    import numpy as np

    return bool(np.array_equal(a, b))


def test_the_isolation_loader_wraps_the_target():
    fn = load_training_target(f"{HF}:apply")
    assert isinstance(fn, TrainingCall) and fn.fn.__name__ == "apply"


def test_grad_on_a_protocol_without_backward_is_one_usage_line():
    with pytest.raises(OptionError, match=r"^grad: rope.cache has no backward to grade \(protocols graded "
                                          r"with --grad: .*rope.apply"):
        run_conformance(f"{HF}:cache", "rope.cache", grad=True, fresh=False)
    with pytest.raises(OptionError, match="^autocast must be one of bfloat16, float16, got 'float64'"):
        run_conformance(f"{HF}:apply", "rope.apply", autocast="float64", fresh=False)


def matmul_identity(x, positions, spec):
    """HF's rotation followed by a projection by the identity: under autocast the output arrives in
    the autocast dtype (a linear layer's)."""
    from conformance.loader import load_target

    out = load_target(f"{HF}:apply")(x, positions, spec)
    return out @ torch.eye(out.shape[-1], dtype=out.dtype)


def test_an_output_in_the_autocast_dtype_gets_that_dtypes_budget():
    report = run_conformance(matmul_identity, "rope.apply", dtypes=("float32",), cases=CASE, fresh=False,
                             identities=False, autocast="bfloat16")
    (case,) = report.cases
    assert case.verdict in ("pass", "acceptable") and case.output_dtype == "bfloat16"
    assert "autocast bfloat16: the output arrived in bfloat16; graded with the bfloat16 budget" in case.notes
    # The same value without autocast arrives in float32: float32's budget, still passing.
    plain = run_conformance(matmul_identity, "rope.apply", dtypes=("float32",), cases=CASE, fresh=False,
                            identities=False)
    assert plain.cases[0].output_dtype == "float32" and plain.cases[0].grad is None


def test_cli_grad_and_autocast_write_a_valid_report(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "conform", f"{HF}:apply", "--protocol", "rope.apply",
         "--cases", CASE, "--no-fresh", "--dtype", "bfloat16", "--grad", "--autocast", "bfloat16",
         "--json", str(out), "-q"],
        capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())  # json_report validated it against the schema on writing
    (case,) = doc["cases"]
    assert case["output_dtype"] == "bfloat16" and case["grad"]["inputs"]["x"]["verdict"] in ("pass", "acceptable")
    assert "--grad --autocast bfloat16" in case["repro"]
    assert any(i["id"] == "rope.apply.gradcheck" and i["verdict"] == "pass" for i in doc["identities"])


def _weighted(x, weights):
    return x * weights["a"] + weights["b"]


def test_a_grad_arg_can_be_a_path_into_a_dict_argument():
    x, a, b = torch.tensor([1.0, -2.0]), torch.tensor([3.0, 0.5]), torch.tensor([4.0, 4.0])
    weights = {"a": a, "b": b}
    g = torch.tensor([1.0, 10.0])
    plan = make_plan((0, (1, "a"), [1, "b"]), (g,))
    assert plan["grad_args"] == (0, (1, "a"), (1, "b"))
    value = TrainingCall(_weighted)(x, weights, plan)
    out, info = unpack(value)
    assert torch.equal(out, x * a + b)
    assert torch.equal(info["grads"][0], g * a) and torch.equal(info["grads"][1], g * x)
    assert torch.equal(info["grads"][2], g)
    # The caller's dict keeps its own tensors, which never become leaves.
    assert weights["a"] is a and weights["b"] is b and not a.requires_grad
    with pytest.raises(ValueError, match="grad_args"):
        make_plan(((1, "a", 2),))


def test_gradcheck_through_a_path():
    x = torch.randn(3, dtype=torch.float64)
    weights = {"a": torch.randn(3, dtype=torch.float64), "b": torch.randn(3, dtype=torch.float64)}
    ok = TrainingCall(_weighted)(x, weights, make_plan((0, (1, "a")), gradcheck={"eps": 1e-6}))
    assert ok == {"gradcheck": True, "message": ""}

    class Wrong(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * 3.0

    bad = TrainingCall(lambda x, w: x * Wrong.apply(w["a"]))(x, weights, make_plan(((1, "a"),),
                                                                                    gradcheck={"eps": 1e-6}))
    assert bad["gradcheck"] is False and "Jacobian mismatch" in bad["message"]
