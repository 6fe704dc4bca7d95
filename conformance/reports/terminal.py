"""The terminal report: a transient progress bar on stderr while grading, then on stdout, summary
first: the summary line, the causes of the failures grouped by diagnosis code (numbers as ranges),
each skip reason and the acceptable results once with their counts, the black-box identities, then
the failing cases with the place they fail and the command that repeats them, and the summary line
again. ``-v`` lists every case, ``-q`` prints the summary line only (with the seed). Under --grad
carries the gradient's verdict and error / budget, and a failing gradient's input, mismatch and
worst element follow the output's; under --autocast the dtype the output arrived in.

There are no tables: every line is wrapped to the console's width with a hanging indent (shell
commands with a trailing backslash), so nothing is dropped at 80 columns. When stdout is not a
terminal (CI logs) rich writes no colour codes, the progress bar is not drawn, and lines wrap at
100 columns unless COLUMNS says otherwise.
"""

from __future__ import annotations

import os
import sys

from conformance.reports._common import autocast_overview, case_reason, codes, failure_details, fmt_float, \
    case_name, compile_line, grad_overview, grad_summary, identity_counts, model_line, output_dtype_note, \
    summary_line, triton_line
from conformance.reports.causes import failure_causes, merge, skip_reasons

VERDICT_STYLES = {
    "pass": "green",
    "acceptable": "cyan",
    "fail": "bold red",
    "error": "bold magenta",
    "skip": "yellow",
}
OVERALL_STYLES = {"pass": "bold green", "fail": "bold red", "skip": "bold yellow"}
PIPE_WIDTH = 100
PER_CAUSE = 3  # failing cases detailed per cause by default; -v shows every case, --json all of them
SCREEN = 58  # lines the default report aims to fit in (more only when one case per cause needs it)
MAX_IDENTITIES = 4  # failing identities listed by default (one wrong shape fails them all)
MAX_MESSAGES = 4  # distinct messages shown per cause
MAX_IDS = 6  # case ids listed per cause


def default_console(stderr: bool = False):
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # `posref conform ... | head`: the reader left. rich would exit(1) here, losing the
            # --json/--junit reports and the verdict's exit code; go quiet and finish the run.
            self.quiet = True
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, (sys.stderr if stderr else sys.stdout).fileno())

    console = _Console(stderr=stderr, highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = _Console(stderr=stderr, highlight=False, width=PIPE_WIDTH)
    return console


class TerminalReporter:
    """start(total) -> advance(result) per graded case -> finish(report).

    console           where the tables go (default: stdout)
    progress_console  where the progress bar goes (default: stderr)
    Also usable as a context manager, which stops the progress bar if grading is interrupted.
    """

    def __init__(self, console=None, *, progress_console=None, verbosity: int = 0):
        self.console = console if console is not None else default_console()
        self.verbosity = verbosity
        self._progress_console = progress_console
        self._progress = None
        self._task = None
        self._bad = 0

    # -- progress -----------------------------------------------------------------------------

    def start(self, total: int) -> None:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn,
                                   TextColumn, TimeElapsedColumn)
        from rich.table import Column

        self.close()
        console = self._progress_console or default_console(stderr=True)
        self._bad = 0
        if not console.is_terminal:
            # A transient bar on a pipe would draw nothing but still print a stray newline.
            return
        # One line however narrow the terminal: the bar shrinks to what is left, and the case id
        # (the only long field) is cut with an ellipsis rather than wrapped onto a second line,
        # which a transient bar would leave behind on every refresh (issue 25).
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("grading"),
            BarColumn(bar_width=self._bar_width(console.width)),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[bad]}", table_column=Column(no_wrap=True)),
            TextColumn("{task.fields[case]}", markup=False, table_column=Column(no_wrap=True)),
            console=console,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("grading", total=max(int(total), 0), bad="", case="")
        self._width, self._total = console.width, max(int(total), 0)

    @staticmethod
    def _bar_width(width: int) -> int:
        return max(min(width // 4, 40), 5)

    def _case_field(self, text: str, bad: str) -> str:
        """The case id cut (with an ellipsis) to what the line leaves it: spinner, "grading", the
        bar, "N/N", the elapsed time, "N failing" and a space between columns."""
        used = 1 + 7 + self._bar_width(self._width) + 2 * len(str(self._total)) + 1 + 7 + len(bad) + 6 + 1
        room = self._width - used
        if len(text) <= room:
            return text
        return text[: max(room - 1, 0)] + "…" if room > 0 else ""

    def advance(self, result) -> None:
        if self._progress is None:
            return
        if result.verdict in ("fail", "error"):
            self._bad += 1
        bad = f"{self._bad} failing" if self._bad else ""
        self._progress.update(
            self._task,
            advance=1,
            bad=f"[red]{bad}[/red]" if bad else "",
            case=self._case_field(case_name(result), bad),
        )

    def close(self) -> None:
        """Stop the progress bar (idempotent)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._task = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False

    # -- final report -------------------------------------------------------------------------

    def finish(self, report) -> None:
        from rich.text import Text

        self.close()
        lines = report_lines(report, verbosity=self.verbosity, width=self.console.width,
                             wrap_summary=self.console.is_terminal)
        for text, style in lines:
            # Lines are wrapped here (report_lines); rich must neither wrap nor cut them again.
            self.console.print(Text(text, style=style), no_wrap=True, overflow="ignore", crop=False)


# --------------------------------------------------------------------------------------------
# The lines of the final report (plain text and a style each), wrapped to the width


def report_lines(report, *, verbosity: int = 0, width: int = 80, wrap_summary: bool = False) -> list:
    """[(text, style)]: the summary line; then (verbosity >= 0) the target, the causes of the
    failures grouped by code, skip reasons and acceptable results once each with their counts,
    failing identities, the probe and notes; then the failing cases (every case with -v), each
    with its mismatch count, worst element, first failing position and repro; then the summary
    line again. verbosity -1 (-q) prints the summary line only, with the seed of the fresh cases."""
    from conformance.core import registry

    summary = report.summary()
    closing = (summary_line(report), OVERALL_STYLES.get(summary["overall"], ""))
    if verbosity < 0:
        # One line for a CI log: the summary and, when fresh cases were drawn, the seed that
        # repeats them (--seed N with a fresh id in --cases).
        seed = f"; --seed {report.seed}" if report.seed is not None else ""
        quiet = _Lines(max(int(width or 80), 40))
        quiet.add(closing[0] + seed, closing[1], wrap=wrap_summary)
        return quiet.lines
    out = _Lines(max(int(width or 80), 40))
    # The verdict line stays one line in a log (grep, CI); on a terminal narrower than it, it
    # wraps between words, so the terminal does not break it inside the digest (issue 25).
    out.add(*closing, wrap=wrap_summary)
    out.add(f"target {report.target}, profile {report.profile}" +
            (f"; {report.probe.get('summary')}" if report.probe and report.probe.get("summary") else ""),
            indent=2)
    if report.probe and report.probe.get("reason"):
        out.add(f"why: {report.probe['reason']}", indent=4)
    if report.model:
        out.add(f"model {model_line(report.model)}", indent=2)
    for note in report.notes:
        out.add(f"note: {note}", indent=2)
    for line in ([grad_overview(report)] if grad_overview(report) else []) + autocast_overview(report):
        out.add(line, indent=2)
    if compile_line(report):
        out.add(compile_line(report), indent=2)
    if triton_line(report):
        out.add(triton_line(report), indent=2)

    unexpected = [c for c in report.cases if not c.expected_failure]
    causes = failure_causes(unexpected, registry.codes())
    if causes:
        bad = sum(len(c.cases) for c in causes)
        out.blank()
        out.add(f"Causes ({bad} failing case{'s' if bad != 1 else ''}, by diagnosis code):", style="bold")
        for cause in causes:
            _cause(out, cause, ids=verbosity > 0)
    _baseline(out, report)
    acceptable = [c for c in report.cases if c.verdict == "acceptable"]
    skipped = [c for c in report.cases if c.verdict == "skip"]
    if acceptable or skipped:
        out.blank()
    if acceptable:
        out.add(f"{len(acceptable)} acceptable (passed the standard profile; expected, not a bug):",
                style=VERDICT_STYLES["acceptable"])
        for text, n in merge([str(c.notes[-1]) for c in acceptable if c.notes]):
            out.add(f"{n} x {text}", indent=2)
    if skipped:
        out.add(f"{len(skipped)} skipped:", style=VERDICT_STYLES["skip"])
        for text, n in skip_reasons(skipped):
            out.add(f"{n} x {text}", indent=2)
    if not report.cases:
        out.add("no cases were graded", style="yellow")

    bad_ids = [i for i in report.identities if i.verdict in ("fail", "error")]
    shown_ids = report.identities if verbosity > 0 else bad_ids
    if report.identities:
        out.blank()
        out.add(f"black-box identities: {identity_counts(report.identities)}", style="bold")
        more = len(shown_ids) - MAX_IDENTITIES if verbosity <= 0 else 0
        for i in shown_ids[:MAX_IDENTITIES] if verbosity <= 0 else shown_ids:
            measured = f" (residual {fmt_float(i.residual)}, bound {fmt_float(i.bound)})" \
                if i.residual is not None or i.bound is not None else ""
            out.add(f"{i.verdict.upper()} {i.id} [{i.dtype}]{measured}: "
                    f"{i.message or ', '.join(codes(i.diagnoses))}", indent=2,
                    style=VERDICT_STYLES.get(i.verdict, ""))
        if more > 0:
            out.add(f"... and {more} more failing identities (-v lists them all)", indent=2, style="dim")

    if verbosity > 0 and report.cases:
        out.blank()
        out.add("Cases:", style="bold")
        for c in report.cases:
            _case(out, c, detail=c.verdict in ("fail", "error"))
    elif causes:
        out.blank()
        out.add("Failures: the worst of each cause (-v lists every case)", style="bold")
        _failures(out, causes)
    out.blank()
    # The whole digest, on one line at 80 columns (the suite version opens the verdict line).
    out.add(f"vectors {report.vectors_digest}", style="dim")
    out.add(*closing, wrap=wrap_summary)
    return out.lines


def _failures(out, causes) -> None:
    """A screenful (issue 25): the worst case of each cause in detail, then its second and third
    worst while the report stays within SCREEN lines, then how many more each cause has."""
    blocks = []
    for cause in causes:
        mine = []
        for c in cause.cases[:PER_CAUSE]:
            block = _Lines(out.width)
            # The cause's heading already says why when its cases share one message.
            _case(block, c, detail=True, reason=len(cause.lines) > 1)
            mine.append(block.lines)
        blocks.append(mine)
    shown = [1] * len(causes)  # the worst of each cause, always
    tail = 3 + sum(len(cause.cases) > 1 for cause in causes)  # "... more" lines, the digest, the verdict
    used = len(out.lines) + tail + sum(len(b[0]) for b in blocks)
    for rank in range(1, PER_CAUSE):
        for k, mine in enumerate(blocks):
            if rank < len(mine) and shown[k] == rank and used + len(mine[rank]) <= SCREEN:
                used += len(mine[rank])
                shown[k] += 1
    for cause, mine, n in zip(causes, blocks, shown):
        for lines in mine[:n]:
            out.lines.extend(lines)
        if len(cause.cases) > n:
            out.add(f"... and {len(cause.cases) - n} more failing with {', '.join(cause.codes)} "
                    "(-v lists them all)", indent=2, style="dim")


def _baseline(out, report) -> None:
    base = report.baseline
    if not base:
        return
    out.blank()
    out.add(f"expected failures ({base['file']}, {base['entries']} entries): {base['expected']} "
            f"case{'s' if base['expected'] != 1 else ''} failed as expected (xfail)", style="bold")
    if base["fixed"]:
        out.add(f"{len(base['fixed'])} listed case(s) pass now, remove them from the file: "
                + ", ".join(base["fixed"][:MAX_IDS]) + (", ..." if len(base["fixed"]) > MAX_IDS else ""),
                indent=2, style=VERDICT_STYLES["pass"])
    if base["stale"]:
        out.add(f"{len(base['stale'])} entr{'y' if len(base['stale']) == 1 else 'ies'} matched no graded "
                "case: " + ", ".join(base["stale"][:MAX_IDS]), indent=2, style="dim")


def _cause(out, cause, *, ids: bool = True) -> None:
    n = len(cause.cases)
    head = f"{cause.verdict.upper()} {', '.join(cause.codes)}: {n} case{'s' if n != 1 else ''}"
    head += f" ({', '.join(cause.dtypes)})"
    if cause.ratio_range():
        head += f", error/budget {cause.ratio_range()}"
    out.add(head, indent=2, style=VERDICT_STYLES.get(cause.verdict, ""))
    if cause.meaning:
        out.add(f"what it means: {cause.meaning}", indent=6)
    for text, count in cause.lines[:MAX_MESSAGES]:
        out.add(f"{text}" + (f" ({count} case{'s' if count != 1 else ''})" if len(cause.lines) > 1 else ""), indent=6)
    if len(cause.lines) > MAX_MESSAGES:
        out.add(f"... and {len(cause.lines) - MAX_MESSAGES} other messages", indent=6)
    if not ids:  # the default report details the worst cases of each cause under Failures
        return
    names = [case_name(c) for c in cause.cases]
    more = f", and {len(names) - MAX_IDS} more" if len(names) > MAX_IDS else ""
    out.add("cases: " + ", ".join(names[:MAX_IDS]) + more, indent=6, style="dim")


def _case(out, c, *, detail: bool, reason: bool = True) -> None:
    ratio = "" if c.budget_ratio is None else f"  error/budget {fmt_float(c.budget_ratio)}"
    # Under --grad / --autocast: the gradient's verdict and ratio, the dtype the output came in.
    grad = grad_summary(c)
    ratio += f"; {grad}" if grad else ""
    dtype_note = "" if detail else output_dtype_note(c)
    ratio += f"; {dtype_note}" if dtype_note else ""
    label = "XFAIL" if c.expected_failure else c.verdict.upper()
    out.add(f"{label} {case_name(c)}{ratio}", indent=2,
            style=VERDICT_STYLES.get(c.verdict, ""))
    if not detail:
        return
    if reason:
        out.add(f"cause: {case_reason(c)}", indent=6)
    for text in failure_details(c):
        out.add(text, indent=6)
    _traceback(out, c)
    if c.repro.startswith("posref "):
        out.command(c.repro, indent=6)
    elif c.repro:  # Python, for an adapter given as a callable
        for line in c.repro.splitlines():
            out.add(line, indent=6, style="dim", wrap=False)


def _traceback(out, c) -> None:
    """Where the adapter raised, in the user's code (CaseResult.traceback_lines): the file and line
    whole (a path is never broken), then the user's frames."""
    for i, text in enumerate(c.traceback_lines()):
        out.add(text.strip(), indent=6 if i == 0 else 8, style="" if i == 0 else "dim", wrap=i != 0)


class _Lines:
    """Lines wrapped to a width, with a hanging indent; shell commands wrapped with a trailing
    backslash so they still paste as one command."""

    def __init__(self, width: int):
        self.width = width
        self.lines: list = []

    def add(self, text: str, style: str = "", indent: int = 0, wrap: bool = True) -> None:
        import textwrap

        pad = " " * indent
        text = _printable(text, wrap)
        if not wrap:
            self.lines.append((pad + text, style))
            return
        # Long words (a digest, a path) stay whole on a line of their own: they must copy whole.
        wrapped = textwrap.wrap(str(text), width=self.width, initial_indent=pad, subsequent_indent=pad + "  ",
                                break_on_hyphens=False, break_long_words=False) or [pad]
        self.lines.extend((line, style) for line in wrapped)

    def command(self, text: str, indent: int = 0) -> None:
        pad = " " * indent
        words, line = _printable(text, False).split(" "), pad + "$"
        for word in words:
            if len(line) + 1 + len(word) + 2 > self.width and line.strip() != "$":
                self.lines.append((line + " \\", "dim"))
                line = pad + "   "
            line += " " + word
        self.lines.append((line, "dim"))

    def blank(self) -> None:
        if self.lines and self.lines[-1][0]:
            self.lines.append(("", ""))


def _printable(text, wrap: bool) -> str:
    """The text with every character a terminal would act on escaped (an adapter's exception or
    return type named "\\x1b[31mEvil" must not colour, move or clear the terminal, issue 24);
    line breaks and tabs of wrapped text become spaces, as textwrap makes them anyway."""
    from conformance.isolation import printable

    text = str(text)
    if wrap:
        text = text.replace("\r\n", " ").translate(_WHITESPACE)
    return printable(text)


_WHITESPACE = {ord(c): " " for c in "\t\n\r\x0b\x0c"}


__all__ = ["TerminalReporter"]
