"""Reports of training runs (--grad, --autocast): the gradient's verdict, error / budget, the
failing gradient's input, mismatch and place, the output dtype under autocast, and the summary
line saying that gradients were graded. Runs without them are covered (unchanged) by the other
tests/core/test_reports_*.py.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from conformance.api import run_conformance
from conformance.reports import junit, markdown, summary_line
from conformance.reports._common import fmt_float, output_dtype_note
from conformance.reports.terminal import report_lines
from conformance.results import CaseResult, Report

CASES = "rope.apply/llama2-d128/prefill-8,rope.apply/llama2-d128/decode-4095"


def _run(target):
    return run_conformance(target, "rope.apply", grad=True, cases=CASES, dtypes=["float32"],
                           fresh=False, identities=False)


@pytest.fixture(scope="module")
def good():
    return _run("examples/rope/hf_rotate_half.py:apply")


@pytest.fixture(scope="module")
def bad():
    return _run("examples/rope/buggy/backward_transposed.py:apply")


def _terminal(report, verbosity=0) -> str:
    return "\n".join(text for text, _ in report_lines(report, verbosity=verbosity, width=400))


def test_the_runs_graded_gradients(good, bad):
    assert len(good.cases) == len(bad.cases) == 2
    assert all(c.grad and c.grad["verdict"] in ("pass", "acceptable") for c in good.cases)
    assert all(c.grad["verdict"] == "fail" and c.grad["budget_ratio"] > 1e3 for c in bad.cases)
    assert good.summary()["overall"] == "pass" and bad.summary()["overall"] == "fail"


def test_summary_line_says_gradients_were_graded(good, bad):
    for report in (good, bad):
        assert "gradients graded (--grad)" in summary_line(report)
    plain = Report("0.1.0", "sha256:" + "0" * 64, "rope.apply", "t", {}, "standard",
                   cases=[CaseResult("a/b", "float32", "pass", 0.0, 0.1)])
    assert "gradients" not in summary_line(plain)


def test_terminal_shows_a_passing_gradient_with_v(good):
    text = _terminal(good, verbosity=1)
    assert "gradients graded (--grad)" in text
    for c in good.cases:
        line = next(l for l in text.splitlines() if f"{c.id} [float32]" in l and "error/budget" in l)
        assert f"gradient {c.grad['verdict']}, error/budget {fmt_float(c.grad['budget_ratio'])}" in line


def test_terminal_shows_the_failing_gradient_code_ratio_and_place(bad):
    text = _terminal(bad)
    assert "FAIL backward-transposed: 2 cases" in text
    worst = max(c.grad["budget_ratio"] for c in bad.cases)
    # The cause's range is the cases' worse ratio (the gradient's), not the passing output's.
    assert fmt_float(worst) in next(l for l in text.splitlines() if "FAIL backward-transposed" in l)
    for c in bad.cases:
        x = c.grad["inputs"]["x"]
        assert f"gradient fail, error/budget {fmt_float(c.grad['budget_ratio'])}" in text
        assert f"gradient of x: fail, error/budget {fmt_float(x['budget_ratio'])}" in text
        m = x["mismatch"]
        assert f"gradient of x mismatched: {m['count']} of {m['total']} {m['unit']}" in text
        assert f"gradient of x worst: {x['worst_location']}" in text
        assert f"output mismatched: 0 of {c.mismatch['total']}" in text  # the forward passes


def test_markdown_shows_gradient_column_and_failing_gradients(good, bad):
    ok = markdown.render(good)
    assert "gradients graded (--grad)" in ok
    assert "(outputs and gradients)" in ok
    assert "gradients (--grad): 2 graded" in ok
    text = markdown.render(bad)
    assert "| case | dtype | verdict | error / budget | gradient | max abs error | diagnoses |" in text
    assert "### Failing gradients (2)" in text
    assert "backward-transposed" in text
    for c in bad.cases:
        x = c.grad["inputs"]["x"]
        assert f"| fail, {fmt_float(c.grad['budget_ratio'])} (x) |" in text
        assert (f"| x | fail | {fmt_float(x['budget_ratio'])} | {fmt_float(x['max_abs_error'])} | "
                f"{x['mismatch']['count']} of {x['mismatch']['total']} pairs | {x['worst_location']} |") in text


def test_junit_shows_gradient_verdict_code_and_ratio(good, bad):
    root = ET.fromstring(junit.dumps(bad))
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert "gradients graded (--grad)" in props["posref.summary"]
    assert props["posref.grad"].startswith("gradients (--grad): 2 graded: 2 failed")
    failures = list(root.iter("failure"))
    assert len(failures) == 2
    for el, c in zip(failures, bad.cases):
        assert el.get("type") == "backward-transposed"
        assert f"gradient fail, error/budget {fmt_float(c.grad['budget_ratio'])}" in el.text
        assert f"gradient of x worst: {c.grad['inputs']['x']['worst_location']}" in el.text
    # A passing case graded with --grad says so in its system-out.
    outs = [tc.find("system-out") for tc in ET.fromstring(junit.dumps(good)).iter("testcase")]
    assert all(o is not None and "gradient " in o.text and "error/budget" in o.text for o in outs)


def _autocast_report() -> Report:
    note = "autocast bfloat16: the output arrived in bfloat16; graded with the bfloat16 budget"
    cases = [
        CaseResult("rope.apply/x/a", "float32", "pass", 1e-3, 0.5, [0, 0, 0, 0], output_dtype="bfloat16",
                   notes=[note]),
        CaseResult("rope.apply/x/b", "float32", "fail", 1.0, 4.5e3, [0, 0, 0, 1], output_dtype="bfloat16",
                   notes=[note], worst_location="position 65536"),
        CaseResult("rope.apply/x/c", "float32", "fail", 1.0, 7.0, [0, 0, 0, 1], output_dtype="float16"),
    ]
    return Report("0.1.0", "sha256:" + "0" * 64, "rope.apply", "t", {}, "standard", cases=cases)


def test_output_dtype_shown_under_autocast_only():
    r = _autocast_report()
    a, b, c = r.cases
    assert output_dtype_note(a) == "output arrived in bfloat16 (inputs float32, autocast bfloat16)"
    # Without --autocast / --grad a changed dtype is the dtype-changed diagnosis's business: the
    # reports of such runs stay as they were.
    assert output_dtype_note(c) == ""
    assert "autocast bfloat16" in summary_line(r)
    text = _terminal(r, verbosity=1)
    assert "autocast bfloat16: 2 outputs arrived in bfloat16 (inputs float32)" in text
    assert "rope.apply/x/a [float32]  error/budget 0.5; output arrived in bfloat16" in text
    assert "output arrived in bfloat16 (inputs float32, autocast bfloat16)" in _terminal(r)  # failing b
    md = markdown.render(r)
    assert "| float32 (output arrived in bfloat16 (inputs float32, autocast bfloat16)) | fail |" in md
    assert "| `rope.apply/x/c` | float32 | fail |" in md
    assert "output arrived in bfloat16" in junit.dumps(r)


def test_a_real_autocast_run_is_named_in_the_report_and_its_notes_are_read_back():
    """The run's options travel in report.training, and the per-case autocast dtype the writers
    read back from the runner's own note (conformance.reports._common.autocast_dtype)."""
    from conformance.reports._common import autocast_dtype

    report = run_conformance("examples/rope/hf_rotate_half.py:apply", "rope.apply", autocast="bfloat16",
                             cases=CASES, dtypes=["float32"], fresh=False, identities=False)
    assert report.training == {"grad": False, "autocast": "bfloat16"}
    assert report.to_json()["training"] == report.training
    assert "autocast bfloat16" in summary_line(report) and "gradients graded" not in summary_line(report)
    assert all(autocast_dtype(c) == "bfloat16" for c in report.cases)
    plain = run_conformance("examples/rope/hf_rotate_half.py:apply", "rope.apply", cases=CASES,
                            dtypes=["float32"], fresh=False, identities=False)
    assert plain.training is None and "autocast" not in summary_line(plain)
