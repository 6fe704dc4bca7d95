"""--grad on xpos.apply: the gradients of q and k are graded against reference.xpos.backward at
the forward's centring, with the forward's budget on the cotangent; a backward whose key scale is
not inverted gets backward-scale, and the float64 gradcheck tells the two apart."""

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance.core import registry  # noqa: E402
from conformance.core.protocol import Prepared  # noqa: E402
from conformance.xpos import backward  # noqa: E402
from conformance.xpos.spec import XposSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "xpos"
CASES = "xpos.apply/half-d128/*,xpos.apply/torchscale-d64/prefill-16,xpos.apply/torchscale-d64/offsets"
PROTOCOL = registry.get("xpos.apply")


def _gradcheck(report):
    (check,) = [i for i in report.identities if i.id == "xpos.apply.gradcheck"]
    return check


def test_the_vjp_transposes_the_rotation_but_not_the_scale():
    """grad_q = s R_{-m} g_q: pair norms scale by s (like the forward), the direction turns back."""
    spec = XposSpec(head_dim=8, rotary_dim=8, layout="half", scale_base=64.0)
    rng = np.random.default_rng(2)
    gq, gk = rng.standard_normal((2, 1, 3, 1, 8))
    pos = np.array([[0, 5, 200]])
    dq, dk = backward.vjp(gq, gk, pos, spec, centre=3.0)
    from conformance.xpos.rotation import pair_norms, reference

    fq, fk = reference(gq, gk, pos, spec, 3.0)  # the forward on the cotangents: same pair norms
    assert np.allclose(pair_norms(dq, spec), pair_norms(fq, spec)) and np.allclose(pair_norms(dk, spec),
                                                                                    pair_norms(fk, spec))
    assert not np.allclose(dq[0, 2], fq[0, 2])  # ... but the rotation is transposed


def test_correct_example_passes_with_gradients_and_gradcheck():
    report = run_conformance(f"{EXAMPLES / 'autograd_function.py'}:apply", "xpos.apply",
                             dtypes=("float32", "bfloat16"), cases=CASES, fresh=False, grad=True)
    assert report.summary()["overall"] == "pass"
    for case in report.cases:
        assert set(case.grad["inputs"]) == {"q", "k"}
        for role in ("q", "k"):
            assert 0.0 < case.grad["inputs"][role]["budget_ratio"] <= 1.0
        # the gradients' own notes reach the report
        assert any(n.startswith("gradients graded at the forward's centring") for n in case.notes)
    assert _gradcheck(report).verdict == "pass"


def test_torchscale_style_passes_gradcheck_at_float32_resolution_only():
    """torchscale_style.py rounds q and k to float32 in every dtype: its gradients meet the
    float32 / bfloat16 budgets; float64 finite differences see the float32 rounding, those at
    float32 resolution pass, and the check says which."""
    report = run_conformance(f"{EXAMPLES / 'torchscale_style.py'}:apply", "xpos.apply", dtypes=("float32",),
                             cases=CASES, fresh=False, grad=True)
    assert all(c.grad["verdict"] in ("pass", "acceptable") for c in report.cases)
    check = _gradcheck(report)
    assert check.verdict == "pass" and "at float32 resolution" in check.message


def test_key_scale_not_inverted_is_backward_scale():
    report = run_conformance(f"{EXAMPLES / 'buggy' / 'backward_scale_not_inverted.py'}:apply", "xpos.apply",
                             dtypes=("float32",), cases=CASES, fresh=False, grad=True)
    assert report.summary()["overall"] == "fail"
    for case in report.cases:
        assert case.verdict == "fail" and case.budget_ratio <= 1.0  # the forward is right
        assert case.grad["inputs"]["q"]["verdict"] in ("pass", "acceptable")
        assert case.grad["inputs"]["k"]["verdict"] == "fail"
        assert [d.code for d in case.diagnoses] == ["backward-scale"], case.diagnoses
        assert "instead of its inverse" in case.diagnoses[0].message
        assert "worst at key, batch row" in case.diagnoses[0].message  # located in the forward's words
    assert _gradcheck(report).verdict == "fail"


def _swapped(q, k, positions, spec):
    """The query's and the key's backward scales swapped (each output's forward right)."""
    from conformance.loader import load_target

    correct = load_target(f"{EXAMPLES / 'autograd_function.py'}:apply")
    qd, kd = correct(q.detach(), k.detach(), positions, spec)
    # The inputs handed over exchanged: k_like_q = s R_m k, q_like_k = s^-1 R_m q. Adding them with
    # their values subtracted leaves the forward right and routes each gradient through the other
    # scale: grad_q = s^-1 R_{-m} g_q, grad_k = s R_{-m} g_k.
    k_like_q, q_like_k = correct(k, q, positions, spec)
    return qd + (q_like_k - q_like_k.detach()), kd + (k_like_q - k_like_q.detach())


def test_swapped_scales_are_backward_scale_on_both():
    report = run_conformance(_swapped, "xpos.apply", dtypes=("float32",), cases="xpos.apply/torchscale-d64/offsets",
                             fresh=False, grad=True)
    (case,) = report.cases
    assert case.budget_ratio <= 1.0
    assert {d.code for d in case.diagnoses} == {"backward-scale"}, case.diagnoses
    assert any(d.message.startswith("q: the q and k scales are swapped") for d in case.diagnoses)


def test_without_a_forward_centring_it_is_fitted_from_the_gradients():
    """grade() with no centring recorded (the forward not gradable) fits c from the gradients."""
    spec = XposSpec(head_dim=8, rotary_dim=8, layout="interleaved", scale_base=64.0)
    rng = np.random.default_rng(9)
    q, k = rng.standard_normal((2, 1, 4, 1, 8))
    pos = np.array([[10, 20, 30, 40]])
    prepared = Prepared((), {"q": q, "k": k, "positions": pos}, {}, "float32", "cpu")
    cots = tuple(torch.from_numpy(rng.uniform(-2, 2, q.shape).astype(np.float32)) for _ in range(2))
    gs = [c.double().numpy() for c in cots]
    right = backward.vjp(gs[0], gs[1], pos, spec, centre=25.0)
    grads = {"q": torch.from_numpy(right[0]).float(), "k": torch.from_numpy(right[1]).float()}
    graded = backward.grade(PROTOCOL, spec, prepared, cots, grads)
    assert all(graded[r].ratio["standard"] <= 1.0 for r in ("q", "k"))
    prepared.xpos_centre = 0.0  # a forward centred elsewhere: the same gradients are now wrong
    graded = backward.grade(PROTOCOL, spec, prepared, cots, grads)
    assert all(graded[r].ratio["standard"] > 100 for r in ("q", "k"))
