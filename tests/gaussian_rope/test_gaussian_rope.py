"""Gaussian-kernel RoPE (issue 11, seed document 002): the reference, its certified values, the
identities (absolute shift invariance violated by design), the protocol and its diagnoses."""

from __future__ import annotations

from pathlib import Path

import mpmath
import numpy as np
import pytest

from conformance import run_conformance
from reference import gaussian_rope as g
from reference.gaussian_rope import oracle
from reference.golden.certify import nearest_double
from reference.identities import load_all, run_identities

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "gaussian_rope"
K = g.DOCUMENT_KERNEL


def test_kernel_golden_is_correctly_rounded_through_underflow():
    positions = np.array([0, 1, 5, 127, 600, 760, 768, 771, 772, 5000])
    golden = g.kernel(positions, K, mode="golden")
    with mpmath.workprec(200):
        exact = [nearest_double(oracle.kernel_exact(int(m), K)) for m in positions]
    assert golden.tolist() == exact
    assert 0 < golden[6] < 2.0**-1022 and golden[8] == golden[9] == 0.0  # subnormal, then exactly 0
    fast = g.kernel(positions, K)
    assert np.all(np.abs(fast - golden) <= 8 * np.spacing(np.maximum(golden, 2.0**-1074)))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_golden_is_correctly_rounded_tail_included(layout):
    x = np.random.default_rng(7).standard_normal((1, 4, 1, 12))
    positions = np.array([[0, 3, 127, 765]])
    out = g.apply(x, positions, kernel=K, rotary_dim=8, layout=layout, mode="golden")
    exact = oracle.apply_exact(x, positions, 8, 1e4, layout, K)
    assert [nearest_double(e) for e in exact.reshape(-1)] == out.reshape(-1).tolist()
    k = g.kernel(positions, K, mode="golden")
    assert np.allclose(out[..., 8:], x[..., 8:] * k[:, :, None, None], rtol=2**-52, atol=0)  # tail scaled


@pytest.mark.parametrize("kernel, message", [
    ({"a1": 1.0}, "must be a dict with keys a1, a2, s1, s2"),
    ({"a1": -1.0, "a2": 0.3, "s1": 5.0, "s2": 20.0}, "a1 must be >= 0"),
    ({"a1": 0.7, "a2": 0.3, "s1": 0.0, "s2": 20.0}, "s1 must be > 0"),
    ({"a1": 0.7, "a2": float("nan"), "s1": 5.0, "s2": 20.0}, "a2 must be a finite number"),
])
def test_bad_kernel_is_one_line_value_error(kernel, message):
    with pytest.raises(ValueError, match="kernel: " + message):
        g.kernel(np.array([1]), kernel)


def test_identities_in_the_matrix_with_absolute_shift_invariance_violated_by_design():
    load_all()
    rows = {r["id"]: r for r in run_identities("gaussian_rope")}
    assert rows["gaussian_rope.absolute-shift-invariance"]["verdict"] == "violated-by-design"
    assert rows["gaussian_rope.absolute-shift-invariance"]["residual"] > 1e-3  # the measured violation
    for name in ("norm-scales-by-kernel", "score-factors", "score-shift-invariance"):
        assert rows[f"gaussian_rope.{name}"]["verdict"] == "holds"


def _grade(name, **options):
    return run_conformance(f"{EXAMPLES / name}:apply", "gaussian_rope.apply", timeout=60.0, **options)


def test_the_correct_example_passes_every_case_and_dtype_underflow_included():
    report = _grade("gaussian_rope_torch.py", dtypes=("float32", "bfloat16", "float16"), seed=5)
    assert report.summary()["overall"] == "pass", [(c.id, c.dtype, c.budget_ratio) for c in report.cases
                                                     if c.verdict == "fail"]
    assert any(c.id.endswith("underflow/around-772") for c in report.cases)


def test_the_seed_document_style_code_fails_with_the_named_pair_mismatch():
    report = _grade("buggy/seed_style.py", dtypes=("float32",), fresh=False)
    prefill = [c for c in report.cases if c.id.endswith("prefill-16")]
    assert prefill and all(c.verdict == "fail" and [d.code for d in c.diagnoses] == ["pair-angle-mismatch"]
                           for c in prefill)
    # where its kernel is also wrong (decode, offsets) both mistakes are named
    offsets = [c for c in report.cases if c.id.endswith("row-offsets")]
    assert all({"kernel-mismatch", "pair-angle-mismatch"} <= {d.code for d in c.diagnoses} for c in offsets)


def test_kernel_of_the_token_index_is_a_kernel_mismatch():
    report = _grade("buggy/kernel_of_index.py", dtypes=("float32",), fresh=False)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing and all([d.code for d in c.diagnoses] == ["kernel-mismatch"] for c in failing)
    assert any("token index" in d.message for c in failing for d in c.diagnoses)
    passing = {c.id for c in report.cases if c.verdict in ("pass", "acceptable")}
    assert any(i.endswith("prefill-16") for i in passing)  # index == position there


def test_score_golden_is_correctly_rounded_and_shift_invariant():
    rng = np.random.default_rng(11)
    q, k = rng.standard_normal((1, 2, 1, 10)), rng.standard_normal((1, 3, 1, 10))
    qp, kp = np.array([[0, 5]]), np.array([[0, 3, 9]])
    out = g.score(q, k, qp, kp, kernel=K, rotary_dim=8, mode="golden")
    exact = oracle.score_exact(q, k, qp, kp, 8, 1e4, "half", K)
    assert [nearest_double(e) for e in exact.reshape(-1)] == out.reshape(-1).tolist()
    shifted = g.score(q, k, qp + 2**20, kp + 2**20, kernel=K, rotary_dim=8, mode="golden")
    assert np.max(np.abs(shifted - out)) <= 4 * 2.0**-53 * np.max(np.abs(out))


def test_score_protocol_passes_the_correct_example_and_names_the_absolute_kernels():
    good = run_conformance(f"{EXAMPLES / 'gaussian_rope_torch.py'}:score", "gaussian_rope.score",
                           dtypes=("float32", "bfloat16", "float16"), seed=3, timeout=60.0)
    assert good.summary()["overall"] == "pass"
    assert any("/fresh/" in c.id for c in good.cases)
    bad = run_conformance(f"{EXAMPLES / 'buggy' / 'absolute_kernels_in_score.py'}:score", "gaussian_rope.score",
                          dtypes=("float32",), fresh=False, timeout=60.0)
    failing = [c for c in bad.cases if c.verdict == "fail"]
    assert failing and all(any("K(m) K(n)" in d.message for d in c.diagnoses) for c in failing)
    assert all("n - m = " in c.worst_location for c in failing)  # the worst score named by its distance
