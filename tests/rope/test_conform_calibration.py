"""Tolerance calibration on real implementation styles (docs/design.md, tolerance model).

Correct mainstream styles (HF rotate_half, Meta complex freqs_cis, GPT-J rotate_every_two; all
with float32 angles) pass the standard profile in float32, float16 and bfloat16 on every golden
rope.apply case they can express; angles computed in bfloat16 or float16 fail it. Strict vs
standard: float32 angles are only "acceptable" once the angle is large, while the float64
reference passes strict.
"""

import pytest

from conformance import run_conformance
from support import by_id, reference_adapter, style, worst

DTYPES = ("float32", "float16", "bfloat16")


@pytest.mark.parametrize("name", ["hf_rotate_half", "meta_complex", "gptj_every_two", "spec_following"])
def test_correct_styles_pass_standard_on_the_whole_catalog(name):
    report = run_conformance(style(name), "rope.apply", dtypes=DTYPES, identities=False)
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert len(graded) >= 3 * 15  # every style expresses at least 15 cases per dtype
    bad = [(c.id, c.dtype, c.budget_ratio) for c in graded if c.verdict not in ("pass", "acceptable")]
    assert not bad
    for dtype in DTYPES:
        assert worst(report, dtype) < 0.9  # measured: at most 0.64 on the catalog
    assert report.summary()["overall"] == "pass"


@pytest.mark.parametrize("name", ["bf16_angles", "fp16_angles"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_low_precision_angles_fail_standard(name, dtype):
    report = run_conformance(style(name), "rope.apply", dtypes=(dtype,), identities=False,
                             cases="rope.apply/llama2-d128/*")
    assert report.summary()["overall"] == "fail"
    results = by_id(report)
    # Within the float16 range (no Inf involved) the error is already far over budget.
    decode = results[("rope.apply/llama2-d128/decode-4095", dtype)]
    assert decode.verdict == "fail"
    assert decode.budget_ratio is not None and decode.budget_ratio > 10


def test_standard_admits_float32_angles_strict_does_not():
    fn = style("hf_rotate_half")
    kwargs = dict(dtypes=("float32",), identities=False, cases="rope.apply/llama2-d128/decode-4095")
    standard = run_conformance(fn, "rope.apply", profile="standard", **kwargs).cases[0]
    strict = run_conformance(fn, "rope.apply", profile="strict", **kwargs).cases[0]
    assert standard.verdict == "acceptable"
    assert standard.budget_ratio < 1
    assert any("strict" in n for n in standard.notes)
    assert strict.verdict == "fail"
    assert strict.budget_ratio > 10


def test_small_positions_pass_strict_with_float32_angles():
    report = run_conformance(style("hf_rotate_half"), "rope.apply", dtypes=("bfloat16",), identities=False,
                             profile="strict", cases="rope.apply/llama2-d128/prefill-8")
    assert report.cases[0].verdict == "pass"


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_float64_reference_passes_strict(dtype):
    report = run_conformance(reference_adapter, "rope.apply", dtypes=(dtype,), identities=False,
                             profile="strict", cases="rope.apply/llama2-d128/*,rope.apply/gpt-j-6b/*")
    assert [c.verdict for c in report.cases] == ["pass"] * len(report.cases)
    assert worst(report) < 0.7


def test_budget_too_wide_for_neighbours_is_noted():
    report = run_conformance(style("hf_rotate_half"), "rope.apply", dtypes=("float32",), identities=False,
                             cases="rope.apply/llama2-d128/around-2p24,rope.apply/llama2-d128/prefill-8")
    results = by_id(report)
    far = results[("rope.apply/llama2-d128/around-2p24", "float32")]
    near = results[("rope.apply/llama2-d128/prefill-8", "float32")]
    assert any("off-by-one" in n and "16777216" in n for n in far.notes)
    assert not any("off-by-one" in n for n in near.notes)


def test_off_by_one_is_caught_at_short_positions_but_not_near_2p24():
    from support import shifted_positions

    report = run_conformance(shifted_positions, "rope.apply", dtypes=("float32",), identities=False,
                             cases="rope.apply/llama2-d128/prefill-8,rope.apply/llama2-d128/around-2p24")
    results = by_id(report)
    assert results[("rope.apply/llama2-d128/prefill-8", "float32")].verdict == "fail"
    assert results[("rope.apply/llama2-d128/around-2p24", "float32")].verdict in ("pass", "acceptable")
