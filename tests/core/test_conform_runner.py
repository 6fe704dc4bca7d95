"""Verdicts for everything an adapter can do: Unsupported, exceptions, bad outputs, mutation."""

import math

import pytest

from conformance import Unsupported, run_conformance
from conformance.runner import repro_snippet, Options
from support import (  # noqa: F401
    by_id,
    detected_layout,
    mutates_input,
    raises,
    reference_adapter,
    returns_float32,
    returns_list,
    returns_nan,
    returns_wrong_shape,
    style,
    style_target,
    unsupported_above_4096,
)

CASES = "rope.apply/llama2-d128/prefill-8,rope.apply/llama2-d128/decode-8191"


def run(fn, **kw):
    kw.setdefault("dtypes", ("float32",))
    kw.setdefault("cases", CASES)
    return run_conformance(fn, "rope.apply", identities=False, **kw)


def test_unsupported_skips_the_case_with_the_reason():
    report = run(unsupported_above_4096)
    results = by_id(report)
    assert results[("rope.apply/llama2-d128/prefill-8", "float32")].verdict == "pass"
    skipped = results[("rope.apply/llama2-d128/decode-8191", "float32")]
    assert skipped.verdict == "skip"
    assert "positions above 4096" in skipped.notes[0]
    assert report.summary()["overall"] == "pass"


def test_exception_is_an_error_with_code_raised():
    report = run(raises)
    for case in report.cases:
        assert case.verdict == "error"
        assert case.diagnoses[0].code == "raised"
        assert "kernel not built" in case.diagnoses[0].message
    assert report.summary()["overall"] == "fail"


@pytest.mark.parametrize(
    "fn, code",
    [
        (returns_nan, "non-finite"),
        (returns_wrong_shape, "shape-changed"),
        (returns_list, "shape-changed"),
        (returns_float32, "dtype-changed"),
        (mutates_input, "input-mutated"),
    ],
)
def test_bad_outputs_fail_with_their_code(fn, code):
    report = run(fn, dtypes=("bfloat16",), cases="rope.apply/llama2-d128/prefill-8")
    case = report.cases[0]
    assert case.verdict == "fail"
    assert code in [d.code for d in case.diagnoses]


def test_nan_output_keeps_the_report_numbers_finite():
    case = run(returns_nan, cases="rope.apply/llama2-d128/prefill-8").cases[0]
    assert case.max_abs_error is not None and math.isfinite(case.max_abs_error)
    assert case.worst_index == [0, 0, 0, 0]


def test_case_result_fields():
    case = run(reference_adapter, dtypes=("bfloat16",), cases="rope.apply/llama2-d128/row-offsets").cases[0]
    assert case.verdict == "pass"
    assert 0 < case.budget_ratio <= 1
    assert len(case.worst_index) == 4
    assert case.max_abs_error > 0
    positions = [p for p, *_ in case.curve]
    assert positions == sorted(positions) and {3, 100, 4093} <= set(positions)  # the row starts
    assert all(e <= b and r <= 1.0 for _, e, b, r in case.curve)
    assert case.duration_s > 0
    assert "rope.apply/llama2-d128/row-offsets" in case.repro


def test_repro_is_a_command_line_for_a_target():
    opts = Options(protocol="rope.apply", layout="half", dtypes=("bfloat16",))
    line = repro_snippet("rope.apply/llama2-d128/decode-4095", "bfloat16", opts, "pkg.mod:fn")
    assert line == (
        "posref conform pkg.mod:fn --protocol rope.apply --cases rope.apply/llama2-d128/decode-4095 "
        "--dtype bfloat16 --layout half"
    )


def test_repro_reproduces_the_case(capsys):
    from conformance.cli import main

    report = run(style_target("bf16_angles"), dtypes=("bfloat16",), cases="rope.apply/llama2-d128/decode-4095")
    case = report.cases[0]
    assert case.verdict == "fail"
    argv = case.repro.split()[1:]
    assert main(argv) == 1
    assert "decode-4095" in capsys.readouterr().out


@pytest.mark.parametrize("dtypes", [("float64",), ("float16", "float32")])
def test_every_requested_dtype_is_graded(dtypes):
    report = run(reference_adapter, dtypes=dtypes)
    assert sorted({c.dtype for c in report.cases}) == sorted(dtypes)
    assert len(report.cases) == 2 * len(dtypes)


def test_bad_options_raise_value_error_naming_them():
    with pytest.raises(ValueError, match="dtype"):
        run_conformance(reference_adapter, "rope.apply", dtypes=("int8",))
    with pytest.raises(ValueError, match="profile"):
        run_conformance(reference_adapter, "rope.apply", profile="loose")
    with pytest.raises(ValueError, match="layout"):
        run_conformance(reference_adapter, "rope.apply", layout="diagonal")
    with pytest.raises(ValueError, match="cases"):
        run_conformance(reference_adapter, "rope.apply", cases="rope.apply/no-such-group/*")


def test_cuda_without_a_gpu_is_a_usage_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the check applies only without one")
    with pytest.raises(ValueError, match="cuda"):
        run_conformance(reference_adapter, "rope.apply", device="cuda")


def test_cache_protocol():
    import torch

    report = run_conformance(style("hf_cache"), "rope.cache", identities=False)
    assert report.summary()["overall"] == "pass"
    assert {c.dtype for c in report.cases} == {"float32"}  # dtype-free: graded in the returned dtype
    assert detected_layout(report) is None

    def bf16_angle_cache(positions, spec):
        inv = 1.0 / spec.base ** (torch.arange(0, spec.rotary_dim, 2).float() / spec.rotary_dim)
        ang = positions.to(torch.bfloat16)[..., None] * inv.to(torch.bfloat16)
        return ang.cos(), ang.sin()

    bad = run_conformance(bf16_angle_cache, "rope.cache", identities=False, cases="rope.cache/llama2-d128/*")
    assert bad.summary()["overall"] == "fail"
    assert by_id(bad)[("rope.cache/llama2-d128/decode-4095", "bfloat16")].verdict == "fail"

    def wrong_arity(positions, spec):
        return torch.zeros(3)

    bad = run_conformance(wrong_arity, "rope.cache", identities=False, cases="rope.cache/llama2-d128/prefill-8")
    assert bad.cases[0].verdict == "fail" and bad.cases[0].diagnoses[0].code == "shape-changed"


def test_frequencies_protocol():
    import torch

    report = run_conformance(style("hf_frequencies"), "rope.frequencies", identities=False, fresh=False)
    assert report.summary()["overall"] == "pass"
    graded = [c for c in report.cases if c.verdict != "skip"]  # the style does default RoPE only
    assert graded and all(c.verdict == "acceptable" for c in graded)  # float32 inv_freq: not strict

    def exact(spec, seq_len):
        from reference import rope

        scaling = None if spec.scaling is None else dict(spec.scaling)
        inv, factor = rope.frequencies(spec.rotary_dim, spec.base, scaling, spec.seq_len or None)
        return torch.from_numpy(inv), factor

    assert all(c.verdict == "pass" for c in run_conformance(exact, "rope.frequencies", identities=False).cases)

    def wrong_exponent(spec, seq_len):  # base ** (-i / d) instead of base ** (-2i / d)
        return 1.0 / spec.base ** (torch.arange(0, spec.rotary_dim // 2).double() / spec.rotary_dim), 1.0

    def wrong_factor(spec, seq_len):
        return exact(spec, seq_len)[0], 1.1

    for fn, index in ((wrong_exponent, None), (wrong_factor, "factor")):
        case = run_conformance(fn, "rope.frequencies", identities=False,
                               cases="rope.frequencies/llama2-d128/inv-freq").cases[0]
        assert case.verdict == "fail"
        if index == "factor":
            assert case.worst_index == [64]  # past inv_freq: the attention factor


def test_isolation_turns_a_crash_into_a_verdict(tmp_path):
    target = tmp_path / "crashy.py"
    target.write_text(
        "import os\n"
        "from support import reference_adapter\n"
        "def fn(x, positions, spec):\n"
        "    if int(positions.max()) > 4096:\n"
        "        os.abort()\n"
        "    return reference_adapter(x, positions, spec)\n"
    )
    report = run_conformance(f"{target}:fn", "rope.apply", isolate=True, dtypes=("float32",), identities=False,
                             cases=CASES, timeout=60)
    results = by_id(report)
    assert results[("rope.apply/llama2-d128/prefill-8", "float32")].verdict == "pass"
    crashed = results[("rope.apply/llama2-d128/decode-8191", "float32")]
    assert crashed.verdict == "error" and crashed.diagnoses[0].code == "crashed"


def test_unreadable_outputs_are_verdicts_not_crashes():
    import torch

    def meta_tensor(x, positions, spec):
        return torch.empty_like(x, device="meta")

    def generator(x, positions, spec):
        return (v for v in x)

    for fn in (meta_tensor, generator):
        report = run(fn, cases="rope.apply/llama2-d128/prefill-8")
        assert detected_layout(report) is None
        case = report.cases[0]
        assert case.verdict == "fail"
        assert case.diagnoses[0].code in ("dtype-changed", "shape-changed")


def test_identities_run_once_per_dtype():
    report = run_conformance(reference_adapter, "rope.apply", dtypes=("float32", "bfloat16"),
                             cases="rope.apply/llama2-d128/prefill-8")
    keys = [(i.id, i.dtype) for i in report.identities]
    assert len(keys) == len(set(keys))
    assert {i.dtype for i in report.identities} == {"float32", "bfloat16"}
    cache = run_conformance(style("hf_cache"), "rope.cache", dtypes=("float32", "bfloat16"),
                            cases="rope.cache/llama2-d128/prefill-8")
    ids = [i.id for i in cache.identities]
    assert ids and len(ids) == len(set(ids))  # dtype-free: one round of checks
    assert len({i.dtype for i in cache.identities}) == 1


def test_partial_rotary_tail_must_pass_through():
    def rotates_the_tail_too(x, positions, spec):
        from dataclasses import replace

        out = reference_adapter(x, positions, replace(spec, rotary_dim=spec.head_dim))
        return out.to(x.dtype)

    case = run(rotates_the_tail_too, cases="rope.apply/gpt-neox-20b/prefill-8").cases[0]
    assert case.verdict == "fail"
    assert case.worst_index[-1] >= 24  # the worst element is past rotary_dim = 24


def test_timeout_is_an_error_with_code_timeout():
    import time as _time

    def hangs(x, positions, spec):
        _time.sleep(1.5)
        return x

    report = run(hangs, cases="rope.apply/llama2-d128/prefill-8", timeout=0.3)
    case = report.cases[0]
    assert case.verdict == "error" and case.diagnoses[0].code == "timeout"


def test_nan_inputs_must_propagate():
    import numpy as np

    from reference.golden import store

    base = store.get_case("rope.apply/llama2-d128/prefill-8")
    x = np.array(base.arrays["x"])
    x[0, 3, 1, 5] = np.nan
    arrays = dict(base.arrays, x=x)
    case = store.GoldenCase(base.id, base.protocol, base.group, base.params, base.comment, base.flags, arrays)

    def hides_nan(x, positions, spec):
        return torch_nan_to_num(reference_adapter(x, positions, spec))

    def torch_nan_to_num(t):
        return t.nan_to_num(0.0)

    good = run_conformance(reference_adapter, "rope.apply", dtypes=("float32",), identities=False, golden_cases=[case])
    assert good.cases[0].verdict == "pass"
    bad = run_conformance(hides_nan, "rope.apply", dtypes=("float32",), identities=False, golden_cases=[case])
    assert bad.cases[0].verdict == "fail"


def test_a_case_whose_right_answer_is_an_exception(monkeypatch):
    """Protocol.expected_error: raising passes, returning fails with the protocol's diagnosis,
    a crash or an Unsupported keeps its usual verdict (a generic hook, used by learned.lookup)."""
    from conformance.core import registry
    from conformance.results import Diagnosis
    from reference.golden import store

    wall = Diagnosis("raised", "returned a value where an error was required")
    proto = registry.get("rope.apply")
    monkeypatch.setattr(type(proto), "expected_error",
                        lambda self, case, spec: wall if "decode" in case.id else None)
    cases = [store.get_case(f"rope.apply/llama2-d128/{t}") for t in ("prefill-8", "decode-4095")]

    def raises_on_decode(x, positions, spec):
        if positions.shape[1] == 1:
            raise IndexError("position past the last row")
        return reference_adapter(x, positions, spec)

    def unsupported_on_decode(x, positions, spec):
        if positions.shape[1] == 1:
            raise Unsupported("no decode")
        return reference_adapter(x, positions, spec)

    opts = dict(dtypes=("float32",), identities=False, golden_cases=cases)
    verdicts = {c.id.rsplit("/", 1)[1]: c for c in run_conformance(raises_on_decode, "rope.apply", **opts).cases}
    assert verdicts["prefill-8"].verdict == "pass"
    assert verdicts["decode-4095"].verdict == "pass" and "raised as required" in verdicts["decode-4095"].notes[0]
    returned = run_conformance(reference_adapter, "rope.apply", **opts).cases[1]
    assert returned.verdict == "fail" and returned.diagnoses == [wall]
    assert run_conformance(unsupported_on_decode, "rope.apply", **opts).cases[1].verdict == "skip"
