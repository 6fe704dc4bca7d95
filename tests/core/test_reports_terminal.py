"""Terminal report: table, identities, layout, digest and summary line; clean output in CI logs."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from conformance.reports.terminal import TerminalReporter
from conformance.results import CaseResult, Diagnosis
from test_reports_common import DIGEST, passing_report, sample_report

ANSI = re.compile(r"\x1b\[")


def _run(report, *, terminal_progress=False, width=200, verbosity=0):
    out, err = io.StringIO(), io.StringIO()
    console = Console(file=out, width=width, highlight=False)
    progress = Console(file=err, force_terminal=terminal_progress, width=120)
    rep = TerminalReporter(console, progress_console=progress, verbosity=verbosity)
    rep.start(len(report.cases))
    for case in report.cases:
        rep.advance(case)
    rep.finish(report)
    return out.getvalue(), err.getvalue()


SUMMARY = ("posref 0.1.0 rope.apply: 2 passed, 1 acceptable, 2 failed, 1 error, 1 skipped, "
           "1 identity failed (vectors sha256:0123456789abcdef...)")


def test_summary_first_then_causes_then_failures_only():
    r = sample_report()
    r.cases[2].first_failing_position = 4095
    out, err = _run(r)
    assert not ANSI.search(out) and err == ""  # not a terminal: no colours, no progress bar
    lines = out.splitlines()
    assert lines[0] == SUMMARY and lines[-1] == SUMMARY
    causes = lines.index("Causes (3 failing cases, by diagnosis code):")
    failures = lines.index("Failures: the worst of each cause (-v lists every case)")
    assert causes < failures
    # failures only: the passing cases are not listed, the failing and erroring ones are
    assert not any("prefill-0-15" in l for l in lines)
    assert "  FAIL rope.apply/llama2-d128/decode-4095 [bfloat16]  error/budget 812" in lines
    assert "  ERROR rope.apply/llama2-d128/left-pad [bfloat16]" in lines
    assert "      cause: positions shifted by +1" not in lines  # its cause's heading says it
    assert "      first failing position: 4095" in lines
    assert any("FAIL shift-invariance [bfloat16]" in l for l in lines)  # the failing identity
    assert "black-box identities: 1 passed, 1 failed, 1 skipped" in lines
    assert "  target examples/rope_buggy.py:apply_offset, profile standard; detected layout: half" in lines
    assert f"vectors {DIGEST}" in lines
    assert all(l == l.rstrip() for l in lines)  # no padding


def test_each_failure_says_where_it_fails_and_how_to_repeat_it():
    r = sample_report()
    bad = r.cases[2]
    bad.mismatch = {"count": 1020, "total": 1024, "unit": "pairs"}
    bad.worst_location = "batch row 0, position 4095 (token 0), head 7, dim 1 (pair 1: dims 1 and 65)"
    bad.repro = "posref conform pkg.mod:fn --protocol rope.apply --cases rope.apply/x --dtype bfloat16"
    out, _ = _run(r)
    lines = out.splitlines()
    assert "      mismatched: 1020 of 1024 pairs (99.6%)" in lines
    assert ("      worst: batch row 0, position 4095 (token 0), head 7, dim 1 (pair 1: dims 1 and 65) "
            "(|error| 1.37)") in lines
    assert "      $ " + bad.repro in lines


def test_eighty_columns_wrap_and_drop_nothing():
    r = sample_report()
    r.cases[2].repro = ("posref conform examples/rope/buggy/position_offset.py:apply --protocol rope.apply "
                        "--cases rope.apply/llama2-d128/decode-4095 --dtype bfloat16")
    out, _ = _run(r, width=80)
    lines = out.splitlines()
    assert lines[0] == lines[-1] == SUMMARY  # the verdict line is never wrapped (the terminal wraps it)
    assert max(len(l) for l in lines[1:-1]) <= 80
    flat = " ".join(l.strip() for l in lines)
    for c in r.cases:
        if c.verdict in ("fail", "error"):
            assert f"{c.id} [{c.dtype}]" in flat
            assert all(d.code in flat for d in c.diagnoses)
    assert "error/budget 812" in flat and "positions shifted by +1" in flat
    # the wrapped repro is still one shell command: every line but the last ends with " \"
    start = next(i for i, l in enumerate(lines) if l.lstrip().startswith("$ posref conform"))
    block = [lines[start]]
    while block[-1].endswith(" \\"):
        block.append(lines[start + len(block)])
    command = " ".join(l.strip().rstrip("\\").strip() for l in block).lstrip("$ ")
    assert command == r.cases[2].repro


def test_quiet_prints_the_summary_line_only_and_verbose_every_case():
    r = sample_report()
    quiet, _ = _run(r, verbosity=-1)
    assert quiet.splitlines() == [SUMMARY]
    loud, _ = _run(r, verbosity=1)
    lines = loud.splitlines()
    for c in r.cases:
        assert any(f"{c.verdict.upper()} {c.id} [{c.dtype}]" in l for l in lines), c.id
    assert any("PASS norm-per-pair [float32]" in l for l in lines)


def test_skip_reasons_and_acceptable_notes_are_said_once_with_counts():
    r = passing_report()
    skip = r.cases[-1]
    r.cases += [CaseResult(f"rope.apply/gptj-d256/other-{i}", "float32", "skip", notes=list(skip.notes))
                for i in range(37)]
    acc = [CaseResult(f"rope.apply/long/a-{i}", "float32", "acceptable", 0.1, 0.5, notes=[
        f"within the standard budget but {10.0 ** i:.3g} times the strict one (float32 angle rounding)"])
        for i in range(1, 7)]
    r.cases += acc
    out, _ = _run(r)
    lines = out.splitlines()
    assert "38 skipped:" in lines
    assert "  38 x Unsupported: partial rotary is not supported" in lines
    assert sum("partial rotary is not supported" in l for l in lines) == 1
    assert ("  6 x within the standard budget but 10 to 1e+06 times the strict one (float32 angle "
            "rounding)") in lines
    assert sum("angle rounding" in l for l in lines) <= 2  # the sample's acceptable case has another note
    assert "Failures:" not in lines and len(lines) <= 30


def test_case_ids_with_brackets_are_not_read_as_markup():
    r = passing_report()
    r.cases[0].id = "rope.apply/[bold]odd[/bold]/x"
    out, _ = _run(r, verbosity=1)
    assert "rope.apply/[bold]odd[/bold]/x" in out


def test_progress_bar_draws_on_a_terminal_and_is_transient():
    out, err = _run(sample_report(), terminal_progress=True)
    assert "grading" in err  # it was drawn on the progress console
    assert "grading" not in out and "posref 0.1.0" in out


def test_advance_without_start_and_close_are_harmless():
    rep = TerminalReporter(Console(file=io.StringIO()), progress_console=Console(file=io.StringIO()))
    rep.advance(sample_report().cases[0])
    rep.close()
    rep.close()


def test_context_manager_stops_the_progress_bar_on_error():
    err = io.StringIO()
    with pytest.raises(RuntimeError):
        with TerminalReporter(Console(file=io.StringIO()),
                              progress_console=Console(file=err, force_terminal=True)) as rep:
            rep.start(3)
            raise RuntimeError("runner broke")
    assert rep._progress is None


def test_empty_report():
    out, _ = _run(sample_report(cases=[], identities=[], probe=None))
    assert "no cases were graded" in out and "probe:" not in out  # no probe, no line
    assert out.splitlines()[-1].startswith("posref 0.1.0 rope.apply: 0 passed")


def test_default_consoles_in_a_pipe_are_clean_and_wide(tmp_path):
    # As in CI: stdout and stderr are pipes, no COLUMNS; long ids must not wrap.
    tests_dir = str(Path(__file__).resolve().parent)
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {tests_dir!r})
        from test_reports_common import sample_report
        from conformance.reports.terminal import TerminalReporter
        r = sample_report()
        rep = TerminalReporter()
        rep.start(len(r.cases))
        for c in r.cases:
            rep.advance(c)
        rep.finish(r)
        """
    )
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("COLUMNS", "LINES")}
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert not ANSI.search(proc.stdout)
    assert any("rope.apply/llama2-d128/decode-65535" in l and "float16" in l
               for l in proc.stdout.splitlines())
    assert proc.stdout.splitlines()[-1].startswith("posref 0.1.0 rope.apply:")


def test_one_bug_one_group_with_numbers_as_ranges():
    r = sample_report()
    bases = [500000, 1000000, 500000, 8000000]
    r.cases = [CaseResult(f"rope.apply/g/case-{i}", "float32", "fail", 1.0, 50.0 + i, [0], [
        Diagnosis("wrong-base", f"base 10000 used instead of {b}")]) for i, b in enumerate(bases)] + r.cases
    out, _ = _run(r)
    lines = out.splitlines()
    heads = [l for l in lines if l.startswith("  FAIL wrong-base")]
    assert heads == ["  FAIL wrong-base: 4 cases (float32), error/budget 50 to 53"]
    assert "      base 10000 used instead of 500000 to 8000000" in lines
    i = lines.index(heads[0])
    assert lines[i + 1].startswith("      what it means: ")  # the code's meaning from the registry


def test_merged_causes_keep_braces_and_read_ranges_as_numbers():
    """Messages equal up to their numbers merge: a range "0..7" is two numbers, and a formula's
    braces (R_{-m}) survive the merge."""
    from conformance.reports.causes import merge

    lines = merge(["x at step 0 (8 token(s) at positions 0..7): R_{-m} g expected",
                   "x at step 0 (6 token(s) at positions 0..5): R_{-m} g expected"])
    assert lines == [("x at step 0 (6 to 8 token(s) at positions 0..5 to 7): R_{-m} g expected", 2)]
    assert merge(["version 1.2.3 and sm_80", "version 1.2.4 and sm_80"]) == [
        ("version 1.2.3 and sm_80", 1), ("version 1.2.4 and sm_80", 1)]  # not numbers: kept apart


def _many_failures(n=40):
    """A report whose failures share one cause (as one buggy example's do), with long repros."""
    r = sample_report()
    r.cases = [CaseResult(f"rope.apply/llama2-d128/decode-{i}", "float32", "fail", 1.0, 100.0 + i, [0, 0, 0, 1],
                          [Diagnosis("position-offset", "positions shifted by +1")],
                          repro=f"posref conform examples/rope/buggy/position_offset.py:apply --protocol "
                                f"rope.apply --cases rope.apply/llama2-d128/decode-{i} --dtype float32",
                          mismatch={"count": 10, "total": 20, "unit": "pairs"},
                          worst_location="batch row 0, position 4095 (token 0), head 7, dim 1",
                          first_failing_position=i) for i in range(n)]
    r.cases += [c for c in sample_report().cases if c.verdict not in ("fail", "error")]
    return r


def test_one_cause_fits_a_screen_the_three_worst_and_how_many_more():
    """Issue 25: a failing run printed every failure (494 lines at 80 columns). By default each
    cause details its three worst cases and says how many more, and that -v lists them all."""
    r = _many_failures(40)
    out, _ = _run(r, width=80)
    lines = out.splitlines()
    assert len(lines) < 60, len(lines)
    detailed = [l for l in lines if l.startswith("  FAIL rope.apply/llama2-d128/decode-")]
    assert detailed == [f"  FAIL rope.apply/llama2-d128/decode-{i} [float32]  error/budget {100 + i}"
                        for i in (39, 38, 37)]  # the worst first
    assert "  ... and 37 more failing with position-offset (-v lists them all)" in lines
    loud, _ = _run(r, width=80, verbosity=1)
    assert sum(l.startswith("  FAIL rope.apply/llama2-d128/decode-") for l in loud.splitlines()) == 40


def test_on_a_narrow_terminal_the_summary_wraps_between_words_never_inside_the_digest():
    """Issue 25: the terminal broke the verdict line inside the vectors sha256. On a terminal it
    wraps between words; in a pipe (a CI log, grep) it stays one line."""
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=True, color_system=None, highlight=False)
    TerminalReporter(console, progress_console=Console(file=io.StringIO())).finish(sample_report())
    lines = out.getvalue().splitlines()
    assert max(len(l) for l in lines) <= 80
    assert lines[0].startswith("posref 0.1.0 rope.apply: 2 passed")
    assert "(vectors sha256:0123456789abcdef...)" in lines[1] and lines[1].startswith("  ")
    assert " ".join(l.strip() for l in lines[:2]) == SUMMARY
    assert f"vectors {DIGEST}" in lines  # the whole digest on a line of its own
    piped, _ = _run(sample_report(), width=80)
    assert piped.splitlines()[0] == SUMMARY
    quiet = io.StringIO()  # -q on a terminal: the same words, wrapped between them
    console = Console(file=quiet, width=80, force_terminal=True, color_system=None, highlight=False)
    TerminalReporter(console, progress_console=Console(file=io.StringIO()), verbosity=-1).finish(sample_report())
    assert " ".join(l.strip() for l in quiet.getvalue().splitlines()) == SUMMARY
    assert max(len(l) for l in quiet.getvalue().splitlines()) <= 80


def test_the_progress_bar_fits_an_80_column_terminal():
    """The bar stays one line at 80 columns: a long case id is cut with an ellipsis."""
    err = io.StringIO()
    progress = Console(file=err, force_terminal=True, width=80, color_system=None)
    rep = TerminalReporter(Console(file=io.StringIO()), progress_console=progress)
    rep.start(300)
    long_id = "rope.apply/qwen2.5-yarn4/decode-beyond-the-original-context-131071-with-a-long-name"
    for _ in range(12):
        rep.advance(CaseResult(long_id, "bfloat16", "fail"))
    rep._progress.refresh()
    rep.close()
    drawn = [l for l in re.split(r"\x1b\[[0-9;?]*[A-Za-z]|\r|\n", err.getvalue()) if l.strip()]
    assert any("12 failing" in l and "…" in l for l in drawn)
    assert max(len(l) for l in drawn) <= 80


def test_many_failing_identities_are_capped_by_default():
    """One wrong output shape fails all 20 identities: four are listed, then how many more."""
    from conformance.results import IdentityResult

    r = passing_report()
    r.identities = [IdentityResult(f"rope.apply/identity-{k}", "float32", "error",
                                   message=f"output shape [2, 3, 6, 64] differs from the input's (check {k})")
                    for k in range(20)]
    lines = _run(r, width=80)[0].splitlines()
    assert "black-box identities: 0 passed, 20 failed (20 with an error)" in lines
    assert sum(l.startswith("  ERROR rope.apply/identity-") for l in lines) == 4
    assert "  ... and 16 more failing identities (-v lists them all)" in lines
    loud = _run(r, width=80, verbosity=1)[0].splitlines()
    assert sum(l.startswith("  ERROR rope.apply/identity-") for l in loud) == 20
