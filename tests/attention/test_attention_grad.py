"""--grad on attention.forward (issue 15): the SDPA example's gradients of hidden, the four
weights and the learned biases' parameters (T5's table, FIRE's MLP) pass, a backward without the
logit scale gets backward-scale, a bias cut off from the graph gets backward-missing, gradcheck
holds for the right backward and fails for the wrong one, and the budgets are not vacuous."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from conformance import run_conformance
from conformance.attention import backward
from conformance.loader import load_target
from reference.golden import store
from reference.golden.fresh import is_fresh

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "attention"
SDPA = f"{EXAMPLES / 'sdpa_rope.py'}:forward"
BUGGY = f"{EXAMPLES / 'buggy' / 'backward_scale.py'}:forward"
GRADCHECK = "attention.forward.gradcheck"


def _gradcheck(report):
    return next(i for i in report.identities if i.id == GRADCHECK)


def test_sdpa_example_passes_with_grad():
    report = run_conformance(SDPA, "attention.forward", seed=3, grad=True, timeout=60.0)
    summary = report.summary()
    assert summary["overall"] == "pass" and summary["pass"] >= 20, summary
    graded = [c for c in report.cases if c.grad]
    assert len(graded) == summary["pass"]
    extra = {"t5": ("rel_bias",), "fire": ("c", "L_multiplier", "W1", "b1", "W2", "b2")}
    encodings = {c.id: store.get_case(c.id).params["encoding"] for c in graded if not is_fresh(c.id)}
    for case in graded:
        want = set(backward.ROLES + extra.get(encodings.get(case.id), ()))
        got = set(case.grad["inputs"])
        assert case.grad["verdict"] == "pass" and (got >= want if is_fresh(case.id) else got == want), case.id
    assert set(encodings.values()) >= set(extra)
    assert _gradcheck(report).verdict == "pass"


def test_a_backward_without_the_logit_scale_is_backward_scale():
    report = run_conformance(BUGGY, "attention.forward", grad=True, fresh=False, dtypes=("float32",), timeout=60.0)
    failing = [c for c in report.cases if c.verdict == "fail"]
    # every case fails but those of a layer without a logit scale (T5's: 1), where omitting it is right
    unscaled = [c for c in report.cases if store.get_case(c.id).params.get("logit_scale") == 1.0]
    assert unscaled and all(c.verdict == "pass" for c in unscaled)
    assert failing and len(failing) + len(unscaled) == len([c for c in report.cases if c.verdict != "skip"])
    for case in failing:
        assert case.budget_ratio <= 1.0, case.id  # the forward is right
        inputs = case.grad["inputs"]
        assert {r for r, e in inputs.items() if e["verdict"] == "fail"} == {"hidden", "wq", "wk"}, case.id
        assert [d.code for d in case.diagnoses] == ["backward-scale"], case.id
    gradcheck = _gradcheck(report)
    assert gradcheck.verdict == "fail" and "Jacobian mismatch" in gradcheck.message


def test_a_weight_detached_from_the_graph_is_backward_missing():
    correct = load_target(SDPA)

    def detached(hidden, weights, positions, spec):
        return correct(hidden, dict(weights, wo=weights["wo"].detach()), positions, spec)

    report = run_conformance(detached, "attention.forward", grad=True, fresh=False, dtypes=("float32",),
                             cases="attention.forward/rope-llama-causal/prefill-8", timeout=60.0)
    (case,) = report.cases
    assert case.verdict == "fail" and "backward-missing" in [d.code for d in case.diagnoses]
    assert case.grad["inputs"]["hidden"]["verdict"] == "pass"


def test_a_small_error_in_the_value_gradient_fails_its_float32_budget():
    """The budget is derived for float32 arithmetic: a backward that perturbs dV by 2^-12
    relative (a bfloat16-like rounding) must fail it, while the forward still passes."""
    correct = load_target(SDPA)

    class Nudge(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            return v.clone()

        @staticmethod
        def backward(ctx, g):
            return g * (1 + 2.0**-12)

    def nudged(hidden, weights, positions, spec):
        return correct(hidden, dict(weights, wv=Nudge.apply(weights["wv"])), positions, spec)

    report = run_conformance(nudged, "attention.forward", grad=True, fresh=False, dtypes=("float32",),
                             cases="attention.forward/rope-llama-causal/prefill-8", timeout=60.0)
    (case,) = report.cases
    assert case.budget_ratio <= 1.0
    assert case.grad["inputs"]["wv"]["verdict"] == "fail", case.grad
    assert case.grad["inputs"]["wo"]["verdict"] == "pass", case.grad


def test_the_conformance_reference_is_the_reference_backward():
    """grade_gradients' reference = reference.attention.backward.vjp on the same float64 inputs."""
    from reference.attention import Config
    from reference.attention import backward as ref_backward
    from reference.attention.core import stages

    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (1, 4, 8))
    W = {"wq": rng.uniform(-.5, .5, (8, 8)), "wk": rng.uniform(-.5, .5, (4, 8)), "wv": rng.uniform(-.5, .5, (4, 8)),
         "wo": rng.uniform(-.5, .5, (8, 8))}
    pos = np.array([[0, 1, 2, 9]])
    g = rng.uniform(-1, 1, (1, 4, 8))
    spec = backward.gradcheck_case("cpu")[0][3]
    st = stages(X, W, pos, Config(2, 1, 4, True, "rope"))
    st["positions"] = pos
    got = backward.reference_gradients(st, g, spec)
    want = ref_backward.vjp(g, X, W, pos, Config(2, 1, 4, True, "rope"))
    assert all(np.array_equal(got[r], want[r]) for r in backward.ROLES)


def test_a_rope_backward_that_reuses_the_forward_rotation_is_backward_transposed():
    """RoPE as a custom Function whose backward rotates by R_m again (sin with the wrong sign)."""
    sdpa = _sdpa_copy("grad_sdpa_rope")

    class Rope(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, cos, sin):
            ctx.save_for_backward(cos, sin)
            return x * cos + sdpa.rotate_half(x) * sin

        @staticmethod
        def backward(ctx, g):
            cos, sin = ctx.saved_tensors
            return g * cos + sdpa.rotate_half(g) * sin, None, None  # BUG: R_m, not R_m^T

    def apply_rope(x, cos, sin, spec):
        cos, sin = cos[:, None].to(x.dtype), sin[:, None].to(x.dtype)
        return Rope.apply(x, cos, sin)

    sdpa.apply_rope = apply_rope
    report = run_conformance(sdpa.forward, "attention.forward", grad=True, fresh=False, dtypes=("float32",),
                             cases="attention.forward/rope-llama-causal/*", timeout=60.0)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing and all(c.budget_ratio <= 1.0 for c in failing)
    assert all([d.code for d in c.diagnoses] == ["backward-transposed"] for c in failing), \
        [(c.id, [d.code for d in c.diagnoses]) for c in failing]


BIAS_BUGGY = f"{EXAMPLES / 'buggy' / 'backward_bias_missing.py'}:forward"
FIRE_ROLES = ("c", "L_multiplier", "W1", "b1", "W2", "b2")


def test_a_bias_built_without_grad_is_backward_missing():
    """The example's bias under torch.no_grad(): forward and the five gradients right, nothing
    reaches rel_bias (T5) or FIRE's MLP."""
    report = run_conformance(BIAS_BUGGY, "attention.forward", grad=True, fresh=False, dtypes=("float32",),
                             cases="attention.forward/t5/*,attention.forward/fire-causal/*", identities=False,
                             timeout=60.0)
    assert len(report.cases) == 5
    for case in report.cases:
        assert case.verdict == "fail" and case.budget_ratio <= 1.0, case.id
        inputs = case.grad["inputs"]
        assert all(inputs[r]["verdict"] == "pass" for r in backward.ROLES), case.id
        assert "backward-missing" in [d.code for d in case.diagnoses], case.id
        if "/t5/" in case.id:
            assert inputs["rel_bias"]["verdict"] == "fail", case.id
        else:  # b2's right gradient is exactly 0 (a constant per row): None is not wrong there
            assert inputs["b2"]["verdict"] == "pass" and inputs["c"]["verdict"] == "fail", case.id


def _nudged(role, factor):
    correct = load_target(SDPA)

    class Nudge(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g * factor

    def nudged(hidden, weights, positions, spec):
        return correct(hidden, dict(weights, **{role: Nudge.apply(weights[role])}), positions, spec)

    return nudged


def test_small_errors_in_the_bias_gradients_fail_their_float32_budgets():
    """A 2^-10 relative error on T5's table gradient fails every T5 case; FIRE's c gradient 10%
    off is backward-scale; the forward and the other gradients still pass."""
    report = run_conformance(_nudged("rel_bias", 1 + 2.0**-10), "attention.forward", grad=True, fresh=False,
                             dtypes=("float32",), cases="attention.forward/t5/*", identities=False, timeout=60.0)
    assert len(report.cases) == 3
    for case in report.cases:
        assert case.budget_ratio <= 1.0 and case.grad["inputs"]["rel_bias"]["verdict"] == "fail", case.id
        assert all(case.grad["inputs"][r]["verdict"] == "pass" for r in backward.ROLES), case.id
    report = run_conformance(_nudged("c", 1.1), "attention.forward", grad=True, fresh=False, dtypes=("float32",),
                             cases="attention.forward/fire-causal/*", identities=False, timeout=60.0)
    assert len(report.cases) == 2
    for case in report.cases:
        assert [r for r in FIRE_ROLES if case.grad["inputs"][r]["verdict"] == "fail"] == ["c"], case.id
        assert [d.code for d in case.diagnoses] == ["backward-scale"], case.id


def _sdpa_copy(name):
    import importlib.util

    spec_ = importlib.util.spec_from_file_location(name, EXAMPLES / "sdpa_rope.py")
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module


def test_gradcheck_covers_the_t5_table():
    """torch.autograd.gradcheck in float64 on the SDPA example with a tiny causal T5 case (8
    buckets, positions 0, 1, 5, 9: exact and logarithmic buckets), every input including rel_bias.
    The example casts its biases to float32 (then to the dtype), which finite differences in
    float64 cannot see through: here the table is read in its own dtype, as HF's T5 does."""
    import torch.nn.functional as F

    from conformance.attention.spec import AttentionSpec

    sdpa = _sdpa_copy("grad_sdpa_t5")

    def t5_bias(q_positions, k_positions, weights, spec):
        rel = k_positions[:, None, :] - q_positions[:, :, None]
        return F.embedding(sdpa.t5_bucket(rel, spec), weights["rel_bias"]).permute(0, 3, 1, 2)

    sdpa.t5_bias = t5_bias
    forward = sdpa.forward
    gen = torch.Generator().manual_seed(15)

    def draw(*shape, scale=1.0):
        return ((torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1) * scale).requires_grad_()

    names = ("wq", "wk", "wv", "wo", "rel_bias")
    tensors = (draw(1, 4, 8), draw(8, 8, scale=0.5), draw(4, 8, scale=0.5), draw(4, 8, scale=0.5),
               draw(8, 8, scale=0.5), draw(8, 2))
    positions = torch.tensor([[0, 1, 5, 9]])
    spec = AttentionSpec(num_heads=2, num_kv_heads=1, head_dim=4, causal=True, encoding="t5", num_buckets=8,
                         max_distance=16)

    def fn(hidden, *weights):
        return forward(hidden, dict(zip(names, weights)), positions, spec)

    assert torch.autograd.gradcheck(fn, tensors)

    def detached(hidden, *weights):
        w = dict(zip(names, weights))
        return forward(hidden, dict(w, rel_bias=w["rel_bias"] * 2 - w["rel_bias"].detach()), positions, spec)

    with pytest.raises(Exception, match="Jacobian mismatch"):
        torch.autograd.gradcheck(detached, tensors)
