"""--grad and --autocast on rope.apply: the reference VJP, correct examples, one buggy example per
backward diagnosis, gradcheck, and autocast's bf16 angles."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from conformance import run_conformance
from conformance.rope import backward
from conformance.rope.spec import RopeSpec
from reference.rope import backward as reference_backward

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "rope"
LLAMA = "rope.apply/llama2-d128/prefill-8,rope.apply/llama2-d128/decode-4095,rope.apply/llama2-d128/around-2p16"


def target(path, name="apply"):
    return f"{path}:{name}"


def load(path):
    spec = importlib.util.spec_from_file_location(f"grad_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("spec", [
    RopeSpec(head_dim=16, rotary_dim=16),
    RopeSpec(head_dim=16, rotary_dim=12, layout="interleaved"),
    RopeSpec(head_dim=16, rotary_dim=16, scaling={"rope_type": "yarn", "factor": 8.0,
                                                  "original_max_position_embeddings": 64}),
    RopeSpec(head_dim=16, rotary_dim=16, scaling={"rope_type": "dynamic", "factor": 2.0,
                                                  "original_max_position_embeddings": 64}, seq_len=200),
])
def test_rope_vjp_is_the_reference_backward_bit_for_bit(spec):
    """The transposed rotation from the forward's table = reference.rope.backward.apply_vjp (the
    forward at -m; a dynamic scaling keeps its seq_len, the sign of m does not change it)."""
    rng = np.random.default_rng(15)
    g = rng.standard_normal((2, 5, 3, 16))
    positions = np.array([[0, 1, 2, 63, 199], [7, 100, 150, 180, 190]], dtype=np.int64)
    got = backward.rope_vjp(g, positions, spec, spec.layout)
    want = reference_backward.apply_vjp(g, positions, rotary_dim=spec.rotary_dim, base=spec.base,
                                        layout=spec.layout, scaling=spec.scaling,
                                        seq_len=spec.seq_len or None, backend="numpy")
    f = backward.reference.tables(positions, spec).attention_factor
    if f == 1.0:
        assert np.array_equal(got, want)
    else:
        # f inside the table vs f after the rotation: identity rope.backward-scaled-inverse-rotation's
        # bound, 14 u relative to f (|a| + |b|) <= 2 f max|g|.
        bound = 14 * 2.0**-53 * f * 2 * np.abs(g).max()
        assert 0 < np.abs(got - want).max() <= bound
    # ... and not the forward applied to g (which is what backward-transposed looks for).
    assert not np.allclose(got, backward.forward_on(g, positions, spec, spec.layout))


def test_plain_autograd_through_hf_rotate_half_passes():
    report = run_conformance(target(EXAMPLES / "hf_rotate_half.py"), "rope.apply", dtypes=("float32", "bfloat16"),
                             cases=LLAMA + ",rope.apply/gpt-neox-20b/around-2p16", fresh=False, grad=True)
    assert report.summary()["overall"] == "pass"
    for case in report.cases:
        grad = case.grad["inputs"]["x"]
        assert grad["verdict"] in ("pass", "acceptable") and 0.0 < grad["budget_ratio"] <= 1.0
        assert grad["dtype"] == case.dtype  # autograd returns the gradient in x's dtype
    (check,) = [i for i in report.identities if i.id == "rope.apply.gradcheck"]
    assert check.verdict == "pass" and check.dtype == "float64"


def test_a_hand_written_autograd_function_passes_in_both_layouts():
    report = run_conformance(target(EXAMPLES / "hf_autograd_function.py"), "rope.apply", dtypes=("float32",),
                             cases=LLAMA + ",rope.apply/gpt-j-6b/*", fresh=False, grad=True)
    assert report.summary()["overall"] == "pass"
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert any("gpt-j" in c.id for c in graded) and all(c.grad is not None for c in graded)


def test_without_grad_nothing_changes():
    report = run_conformance(target(EXAMPLES / "buggy" / "backward_transposed.py"), "rope.apply",
                             dtypes=("float32",), cases=LLAMA, fresh=False)
    assert report.summary()["overall"] == "pass"  # its forward is right
    assert all(c.grad is None for c in report.cases)
    assert not any(i.id.endswith("gradcheck") for i in report.identities)


BACKWARD_BUGS = sorted((EXAMPLES / "buggy").glob("backward_*.py"))


@pytest.mark.parametrize("path", BACKWARD_BUGS, ids=lambda p: p.stem)
def test_each_backward_bug_gets_its_code_and_only_the_gradient_fails(path):
    module = load(path)
    report = run_conformance(target(path), "rope.apply", dtypes=("float32",), identities=False, **module.OPTIONS)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing
    for case in failing:
        assert case.budget_ratio is not None and case.budget_ratio <= 1.0  # the forward is within budget
        assert case.grad["verdict"] == "fail"
        assert module.CODE in {d.code for d in case.diagnoses}, (case.id, case.diagnoses)


def test_the_four_backward_codes_have_examples():
    assert {load(p).CODE for p in BACKWARD_BUGS} == {"backward-transposed", "backward-layout",
                                                     "backward-missing", "backward-scale"}


def test_gradcheck_catches_a_transposed_backward():
    report = run_conformance(target(EXAMPLES / "buggy" / "backward_transposed.py"), "rope.apply",
                             dtypes=("float32",), cases="rope.apply/llama2-d128/prefill-8", fresh=False, grad=True)
    (check,) = [i for i in report.identities if i.id == "rope.apply.gradcheck"]
    assert check.verdict == "fail" and "Jacobian mismatch" in check.message


def computed_in_float32(x, positions, spec):
    from conformance.loader import load_target

    return load_target(target(EXAMPLES / "hf_rotate_half.py"))(x.float(), positions, spec).to(x.dtype)


def test_gradcheck_at_float32_resolution_passes_float32_internals_and_says_so():
    """A right backward computed in float32 inside a float64 call fails float64 finite differences
    (eps 1e-6 turns float32 rounding into O(0.1) errors) and passes at float32 resolution, with
    a message that says which; a transposed backward fails both (previous test)."""
    report = run_conformance(computed_in_float32, "rope.apply", dtypes=("float32",),
                             cases="rope.apply/llama2-d128/prefill-8", fresh=False, grad=True, layout="half")
    (check,) = [i for i in report.identities if i.id == "rope.apply.gradcheck"]
    assert check.verdict == "pass"
    assert "at float32 resolution" in check.message and "Jacobian mismatch" in check.message


def computed_under_no_grad(x, positions, spec):
    from conformance.loader import load_target

    with torch.no_grad():
        return load_target(target(EXAMPLES / "hf_rotate_half.py"))(x, positions, spec)


def test_a_detached_output_is_backward_missing():
    report = run_conformance(computed_under_no_grad, "rope.apply", dtypes=("float32",),
                             cases="rope.apply/llama2-d128/prefill-8", fresh=False, grad=True, identities=False)
    (case,) = report.cases
    assert case.verdict == "fail" and case.grad["verdict"] == "fail"
    (d,) = [d for d in case.diagnoses if d.code == "backward-missing"]
    assert "detached" in d.message


def test_isolated_grad_grades_the_wrapped_target():
    report = run_conformance(target(EXAMPLES / "buggy" / "backward_transposed.py"), "rope.apply",
                             dtypes=("float32",), cases="rope.apply/llama2-d128/prefill-8", fresh=False,
                             grad=True, isolate=True, identities=False)
    (case,) = report.cases
    assert case.verdict == "fail" and "backward-transposed" in {d.code for d in case.diagnoses}


AROUND_2P16 = "rope.apply/llama2-d128/around-2p16"


def test_bf16_angles_under_autocast_fail_with_angle_precision():
    bug = target(EXAMPLES / "buggy" / "autocast_bf16_angles.py")
    plain = run_conformance(bug, "rope.apply", dtypes=("float32",), cases=AROUND_2P16, fresh=False, identities=False)
    assert plain.summary()["overall"] == "pass"  # float32 angles without autocast
    report = run_conformance(bug, "rope.apply", dtypes=("float32",), cases=AROUND_2P16, fresh=False,
                             identities=False, autocast="bfloat16")
    (case,) = report.cases
    assert case.verdict == "fail" and case.output_dtype == "float32"
    assert "angle-precision" in {d.code for d in case.diagnoses}
    assert any("graded with the float32 budget" in n for n in case.notes)


def test_hf_rotate_half_passes_under_autocast_with_grad():
    report = run_conformance(target(EXAMPLES / "hf_rotate_half.py"), "rope.apply", dtypes=("float32", "bfloat16"),
                             cases=AROUND_2P16, fresh=False, identities=False, autocast="bfloat16", grad=True)
    assert report.summary()["overall"] == "pass"
    assert [c.output_dtype for c in report.cases] == ["float32", "bfloat16"]


# ------------------------------------------------------------------------------------------
# rope.apply_qk: q and k each graded as rope.apply's x (conformance/rope/apply_qk.py's hooks).

QK_CASES = "rope.apply_qk/llama3-d128/*,rope.apply_qk/llama2-d128-meta/prefill-gqa4"


def qk_adapters():
    good = load(EXAMPLES / "hf_autograd_function.py").apply
    bad = load(EXAMPLES / "buggy" / "backward_transposed.py").apply

    def right(q, k, positions, spec):
        return good(q, positions, spec), good(k, positions, spec)

    def k_transposed(q, k, positions, spec):
        return good(q, positions, spec), bad(k, positions, spec)

    return right, k_transposed


def test_apply_qk_gradients_of_q_and_k():
    right, k_transposed = qk_adapters()
    ok = run_conformance(right, "rope.apply_qk", dtypes=("float32", "bfloat16"), cases=QK_CASES, fresh=False, grad=True)
    assert ok.summary()["overall"] == "pass"
    graded = [c for c in ok.cases if c.verdict != "skip"]
    assert len(graded) == 8
    for case in graded:
        assert set(case.grad["inputs"]) == {"q", "k"}
        for role, entry in case.grad["inputs"].items():
            assert 0.0 < entry["budget_ratio"] <= 1.0 and entry["dtype"] == case.dtype
            assert entry["worst_location"].startswith(f"{role}: batch row ")
    (check,) = [i for i in ok.identities if i.id == "rope.apply_qk.gradcheck"]
    assert check.verdict == "pass" and check.dtype == "float64"

    wrong = run_conformance(k_transposed, "rope.apply_qk", dtypes=("float32",), cases=QK_CASES, fresh=False,
                            grad=True)
    failing = [c for c in wrong.cases if c.verdict == "fail"]
    assert len(failing) == 4
    for case in failing:
        assert case.budget_ratio <= 1.0  # the forward of q and k is right
        assert case.grad["inputs"]["q"]["verdict"] in ("pass", "acceptable")
        assert case.grad["inputs"]["k"]["verdict"] == "fail"
        assert [d.message.split(":")[0] for d in case.diagnoses if d.code == "backward-transposed"] == ["k"]
    (check,) = [i for i in wrong.identities if i.id == "rope.apply_qk.gradcheck"]
    assert check.verdict == "fail" and "Jacobian mismatch" in check.message


def test_apply_qk_gradient_of_an_inplace_case_is_not_graded():
    from conformance.core import registry

    proto = registry.get("rope.apply_qk")
    assert proto.differentiable
    assert proto.grad_inputs(None, RopeSpec(head_dim=8, rotary_dim=8, inplace=True), None) == {}
    assert proto.grad_inputs(None, RopeSpec(head_dim=8, rotary_dim=8), None) == {"q": 0, "k": 1}


def projected_qk(q, k, positions, spec):
    """HF's apply_qk followed by an identity projection: under autocast the matmul (and so the
    output) runs in the autocast dtype."""
    from examples.rope import hf_rotate_half as hf

    q_rot, k_rot = hf.apply_qk(q, k, positions, spec)
    eye = torch.eye(q.shape[-1], dtype=q.dtype, device=q.device)
    return q_rot @ eye, k_rot @ eye


def test_apply_qk_under_autocast_is_graded_with_the_dtype_it_arrives_in():
    plain = run_conformance(projected_qk, "rope.apply_qk", dtypes=("float32",), cases=QK_CASES, fresh=False,
                            identities=False)
    assert plain.summary()["overall"] == "pass"
    assert {c.output_dtype for c in plain.cases if c.verdict != "skip"} == {"float32"}
    report = run_conformance(projected_qk, "rope.apply_qk", dtypes=("float32",), cases=QK_CASES, fresh=False,
                             identities=False, autocast="bfloat16", grad=True)
    assert report.summary()["overall"] == "pass", [(c.id, c.diagnoses) for c in report.cases]
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert len(graded) == 3  # the interleaved case is skipped: HF's rotate_half is half-layout only
    for case in graded:
        # q_rot and k_rot in bfloat16 (not dtype-changed), graded with bfloat16's budget
        assert case.output_dtype == "bfloat16" and not case.diagnoses
        assert any("graded with the bfloat16 budget" in n for n in case.notes)
        assert {e["dtype"] for e in case.grad["inputs"].values()} == {"float32"}  # the leaves' dtype
        # bfloat16-sized errors (float32's are below 1e-6 here): float32's budget could not pass them.
        assert case.max_abs_error > 1e-4 and 0.0 < case.budget_ratio <= 1.0
