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


def _run(report, *, terminal_progress=False):
    out, err = io.StringIO(), io.StringIO()
    console = Console(file=out, width=200, highlight=False)
    progress = Console(file=err, force_terminal=terminal_progress, width=120)
    rep = TerminalReporter(console, progress_console=progress)
    rep.start(len(report.cases))
    for case in report.cases:
        rep.advance(case)
    rep.finish(report)
    return out.getvalue(), err.getvalue()


def test_table_lists_every_case_and_the_summary_line():
    r = sample_report()
    out, err = _run(r)
    assert not ANSI.search(out) and err == ""  # not a terminal: no colours, no progress bar
    lines = out.splitlines()
    for case in r.cases:
        row = [l for l in lines if case.id in l and case.dtype in l and case.verdict in l]
        assert row, case.id
    row = next(l for l in lines if "decode-4095" in l and "│" in l)
    assert "812" in row and "1.37" in row and "position-offset" in row
    assert any("shift-invariance" in l and "fail" in l for l in lines)  # identities table
    assert "probe: detected layout: half" in lines
    assert f"suite 0.1.0, vectors {DIGEST}" in lines
    assert "FAIL positions shifted by +1: 1 case\n      rope.apply/llama2-d128/decode-4095 [bfloat16]\n" in out
    assert "ERROR ZeroDivisionError: division by zero: 1 case" in out
    assert lines[-1] == ("posref 0.1.0 rope.apply: 2 passed, 1 acceptable, 2 failed, 1 error, "
                         "1 skipped, 1 identity failed (vectors sha256:0123456789abcdef...)")
    assert all(l == l.rstrip() or "│" in l or "┃" in l for l in lines)  # no padded headings


def test_case_ids_with_brackets_are_not_read_as_markup():
    r = passing_report()
    r.cases[0].id = "rope.apply/[bold]odd[/bold]/x"
    out, _ = _run(r)
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


def test_failures_are_grouped_by_diagnosis():
    r = sample_report()
    many = [CaseResult(f"rope.apply/g/case-{i}", "float32", "fail", 1.0, 50.0 + i, [0],
                       [Diagnosis("position-offset", "positions shifted by +1")]) for i in range(7)]
    r.cases = many + r.cases
    out, _ = _run(r)
    lines = out.splitlines()
    i = lines.index("failing cases by diagnosis")
    assert lines[i + 1].endswith("positions shifted by +1: 8 cases")  # the most common first
    assert lines[i + 2].strip() == ("rope.apply/g/case-0 [float32], rope.apply/g/case-1 [float32], "
                                    "rope.apply/g/case-2 [float32], +5 more")
