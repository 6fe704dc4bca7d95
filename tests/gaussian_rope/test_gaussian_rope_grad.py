"""--grad on gaussian_rope.apply and gaussian_rope.score: the gradients are graded against the
float64 reference backward (reference.gaussian_rope.backward) with derived budgets, a wrong
backward gets its core code, and the float64 gradcheck black-box check tells them apart."""

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance.core import registry  # noqa: E402
from conformance.gaussian_rope import backward  # noqa: E402
from conformance.gaussian_rope.spec import GaussianRopeSpec  # noqa: E402
from reference.gaussian_rope import backward as reference_backward  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "gaussian_rope"
APPLY_CASES = ("gaussian_rope.apply/document-half/*,gaussian_rope.apply/document-interleaved/prefill-16,"
               "gaussian_rope.apply/underflow/*,gaussian_rope.apply/wide-kernel/long")
KERNEL = {"a1": 0.7, "a2": 0.3, "s1": 5.0, "s2": 20.0}


def _gradcheck(report, name):
    (check,) = [i for i in report.identities if i.id == name]
    return check


def test_both_protocols_are_differentiable():
    assert registry.get("gaussian_rope.apply").differentiable
    assert registry.get("gaussian_rope.score").differentiable


def test_the_apply_vjp_carries_the_kernel():
    """The graded reference is K(m) R_{-m} g: the forward at -m (K is even), not RoPE's VJP."""
    spec = GaussianRopeSpec(head_dim=8, rotary_dim=6, layout="interleaved", kernel=KERNEL)
    g = np.random.default_rng(15).standard_normal((1, 3, 2, 8))
    pos = np.array([[0, 4, 9]])
    got = backward.apply_vjp(g, pos, spec, spec.layout)
    from reference import gaussian_rope

    want = gaussian_rope.apply(g, -pos, kernel=KERNEL, rotary_dim=6, layout="interleaved", backend="numpy")
    assert np.array_equal(got, want)
    k9 = gaussian_rope.kernel(np.array([9]), KERNEL)[0]
    assert np.allclose(got[0, 2, :, 6:], k9 * g[0, 2, :, 6:])  # the tail is K(m) g


def test_correct_apply_passes_with_gradients_and_gradcheck():
    report = run_conformance(f"{EXAMPLES / 'autograd_function.py'}:apply", "gaussian_rope.apply",
                             dtypes=("float32", "bfloat16"), cases=APPLY_CASES, fresh=False, grad=True)
    assert report.summary()["overall"] == "pass"
    for case in report.cases:
        grad = case.grad["inputs"]["x"]
        assert grad["verdict"] in ("pass", "acceptable") and grad["budget_ratio"] <= 1.0
        assert grad["dtype"] == case.dtype
    # Where K(m) has decayed the gradient is far below 1: still graded (the ratio is not 0 only
    # because the budget is tiny there too).
    assert _gradcheck(report, "gaussian_rope.apply.gradcheck").verdict == "pass"


def test_plain_autograd_of_the_float32_example_passes_gradcheck_at_float32_resolution():
    """gaussian_rope_torch.py computes in float32 whatever x's dtype: its gradients meet the
    float32 and bfloat16 budgets; float64 finite differences of a float64 x rounded to float32 do
    not match its Jacobian, those at float32 resolution do, and the check says so."""
    report = run_conformance(f"{EXAMPLES / 'gaussian_rope_torch.py'}:apply", "gaussian_rope.apply",
                             dtypes=("float32", "bfloat16"), cases="gaussian_rope.apply/document-half/*",
                             fresh=False, grad=True)
    assert all(c.grad["inputs"]["x"]["verdict"] in ("pass", "acceptable") for c in report.cases)
    check = _gradcheck(report, "gaussian_rope.apply.gradcheck")
    assert check.verdict == "pass" and "at float32 resolution" in check.message


def test_kernel_missing_in_the_backward_is_backward_scale():
    report = run_conformance(f"{EXAMPLES / 'buggy' / 'backward_kernel_missing.py'}:apply", "gaussian_rope.apply",
                             dtypes=("float32",), cases=APPLY_CASES, fresh=False, grad=True)
    assert report.summary()["overall"] == "fail"
    for case in report.cases:
        assert case.verdict == "fail"
        assert case.budget_ratio <= 1.0  # the forward is right: only the gradient fails
        assert case.grad["inputs"]["x"]["budget_ratio"] > 100
        assert [d.code for d in case.diagnoses] == ["backward-scale"], case.diagnoses
        assert "K(m) is missing" in case.diagnoses[0].message
    assert _gradcheck(report, "gaussian_rope.apply.gradcheck").verdict == "fail"


def test_score_passes_with_gradients_of_q_and_k():
    report = run_conformance(f"{EXAMPLES / 'autograd_function.py'}:score", "gaussian_rope.score",
                             dtypes=("float32", "bfloat16"), fresh=False, grad=True)
    assert report.summary()["overall"] == "pass"
    for case in report.cases:
        assert set(case.grad["inputs"]) == {"q", "k"}
        for role in ("q", "k"):
            assert 0.0 < case.grad["inputs"][role]["budget_ratio"] <= 1.0
    assert _gradcheck(report, "gaussian_rope.score.gradcheck").verdict == "pass"


def _score_kernel_forward_only(q, k, q_positions, k_positions, spec):
    """K(n - m) in the forward only: out = plain + (K - 1) plain.detach(), so autograd sees the
    unscaled score and the gradients lack K."""
    from conformance.loader import load_target

    plain_score = load_target(f"{EXAMPLES / 'autograd_function.py'}:score")
    unit = GaussianRopeSpec(head_dim=spec.head_dim, rotary_dim=spec.rotary_dim, base=spec.base, layout=spec.layout,
                            kernel={"a1": 1.0, "a2": 0.0, "s1": 1.0e150, "s2": 1.0})
    plain = plain_score(q, k, q_positions, k_positions, unit)
    kern = load_target(f"{EXAMPLES / 'autograd_function.py'}:kernel")
    dist = k_positions[:, None, :] - q_positions[:, :, None]
    factor = kern(dist, spec.kernel)[:, None].to(q.dtype)
    return plain + (factor - 1) * plain.detach()


def test_score_without_the_kernel_in_the_backward_is_backward_scale():
    report = run_conformance(_score_kernel_forward_only, "gaussian_rope.score", dtypes=("float32",),
                             cases="gaussian_rope.score/document-score/square-8", fresh=False, grad=True)
    (case,) = report.cases
    assert case.verdict == "fail" and case.budget_ratio <= 1.0
    assert {d.code for d in case.diagnoses} == {"backward-scale"}, case.diagnoses
    assert all("K(n - m) is missing" in d.message for d in case.diagnoses)
    assert {d.message.split(":")[0] for d in case.diagnoses} == {"q", "k"}
    assert "worst at gradient of the query, batch row 0, position" in case.diagnoses[0].message
    assert _gradcheck(report, "gaussian_rope.score.gradcheck").verdict == "fail"


def test_score_budget_is_a_bound_on_the_float32_vjp():
    """The reference VJP computed by numpy in float32 stays within the float32 budget, and a
    relative change of 1e-3 in grad_q does not."""
    rng = np.random.default_rng(4)
    spec = GaussianRopeSpec(head_dim=8, rotary_dim=8, kernel=KERNEL)
    q, k = rng.standard_normal((1, 3, 2, 8)), rng.standard_normal((1, 5, 2, 8))
    qp, kp = np.array([[0, 7, 300]]), np.array([[1, 2, 3, 290, 1000]])
    G = rng.uniform(-2, 2, (1, 2, 3, 5))
    ref_q, _ = reference_backward.score_vjp(G, q, k, qp, kp, kernel=KERNEL, rotary_dim=8)
    f32 = reference_backward.score_vjp(G.astype(np.float32), q.astype(np.float32), k.astype(np.float32), qp, kp,
                                       kernel=KERNEL, rotary_dim=8)[0].astype(np.float32).astype(np.float64)
    budget = backward.score_budget(G, q.astype(np.float32), k.astype(np.float32), qp, kp, spec, "float32", "standard",
                                   "q")
    assert np.all(np.abs(f32 - ref_q) <= budget)
    assert np.any(np.abs(ref_q * 1e-3) > budget)
