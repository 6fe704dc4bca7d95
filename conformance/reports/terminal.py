"""The terminal report: a transient progress bar on stderr while grading, then on stdout a table
of cases, the black-box identities, the detected layout, the suite version and vectors digest,
and one closing summary line.

Works the same when stdout is not a terminal (CI logs): rich then writes no colour codes and no
cursor movement, the progress bar is not drawn at all (it is transient), and the table is laid
out for a wide log (160 columns unless COLUMNS says otherwise) so case ids are not wrapped.
"""

from __future__ import annotations

import os
import sys

from conformance.reports._common import case_reason, codes, fmt_float, summary_line

VERDICT_STYLES = {
    "pass": "green",
    "acceptable": "cyan",
    "fail": "bold red",
    "error": "bold magenta",
    "skip": "yellow",
}
OVERALL_STYLES = {"pass": "bold green", "fail": "bold red", "skip": "bold yellow"}
MAX_DETAIL_LINES = 20  # kinds of failure explained below the table; the rest: --json


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
        console = _Console(stderr=stderr, highlight=False, width=160)
    return console


class TerminalReporter:
    """start(total) -> advance(result) per graded case -> finish(report).

    console           where the tables go (default: stdout)
    progress_console  where the progress bar goes (default: stderr)
    Also usable as a context manager, which stops the progress bar if grading is interrupted.
    """

    def __init__(self, console=None, *, progress_console=None):
        self.console = console if console is not None else default_console()
        self._progress_console = progress_console
        self._progress = None
        self._task = None
        self._bad = 0

    # -- progress -----------------------------------------------------------------------------

    def start(self, total: int) -> None:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn,
                                   TextColumn, TimeElapsedColumn)

        self.close()
        console = self._progress_console or default_console(stderr=True)
        self._bad = 0
        if not console.is_terminal:
            # A transient bar on a pipe would draw nothing but still print a stray newline.
            return
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("grading"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[bad]}"),
            TextColumn("{task.fields[case]}", markup=False),
            console=console,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("grading", total=max(int(total), 0), bad="", case="")

    def advance(self, result) -> None:
        if self._progress is None:
            return
        if result.verdict in ("fail", "error"):
            self._bad += 1
        self._progress.update(
            self._task,
            advance=1,
            bad=f"[red]{self._bad} failing[/red]" if self._bad else "",
            case=f"{result.id} [{result.dtype}]",
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
        from rich.table import Table
        from rich.text import Text

        self.close()
        con = self.console
        summary = report.summary()

        # Headings are printed as lines of their own: a table title would be padded with
        # spaces to the table's width, which litters CI logs.
        con.print(Text(f"{report.protocol}: {report.target} (profile {report.profile})",
                       style="bold"))
        table = Table(header_style="bold")
        table.add_column("case", no_wrap=True)
        table.add_column("dtype", no_wrap=True)
        table.add_column("verdict", no_wrap=True)
        table.add_column("ratio", justify="right", no_wrap=True)
        table.add_column("max abs err", justify="right", no_wrap=True)
        table.add_column("diagnoses")
        for c in report.cases:
            ratio = Text(fmt_float(c.budget_ratio))
            if c.budget_ratio is not None and not float(c.budget_ratio) <= 1.0:
                ratio.stylize("red")
            diag = Text(", ".join(codes(c.diagnoses)))
            if c.notes:
                diag.append((" " if diag else "") + "; ".join(str(n) for n in c.notes), style="dim")
            table.add_row(Text(c.id), Text(c.dtype),
                          Text(c.verdict, style=VERDICT_STYLES.get(c.verdict, "")),
                          ratio, Text(fmt_float(c.max_abs_error)), diag)
        if report.cases:
            con.print(table)
        else:
            con.print(Text("no cases were graded", style="yellow"))

        if report.identities:
            con.print(Text("black-box identities", style="bold"))
            ids = Table(header_style="bold")
            ids.add_column("identity", no_wrap=True)
            ids.add_column("dtype", no_wrap=True)
            ids.add_column("verdict", no_wrap=True)
            ids.add_column("residual", justify="right", no_wrap=True)
            ids.add_column("bound", justify="right", no_wrap=True)
            ids.add_column("message")
            for i in report.identities:
                ids.add_row(Text(i.id), Text(i.dtype),
                            Text(i.verdict, style=VERDICT_STYLES.get(i.verdict, "")),
                            Text(fmt_float(i.residual)), Text(fmt_float(i.bound)),
                            Text(i.message or ", ".join(codes(i.diagnoses))))
            con.print(ids)

        bad = [c for c in report.cases if c.verdict in ("fail", "error")]
        if bad:
            con.print(Text("failing cases by diagnosis", style="bold"))
        groups = _group_failures(bad)
        for (verdict, reason), members in groups[:MAX_DETAIL_LINES]:
            line = Text("  ")
            line.append(verdict.upper(), style=VERDICT_STYLES[verdict])
            line.append(f" {reason}: ")
            n = len(members)
            line.append(f"{n} case{'s' if n != 1 else ''}", style="bold")
            con.print(line)
            shown = ", ".join(f"{c.id} [{c.dtype}]" for c in members[:3])
            more = f", +{n - 3} more" if n > 3 else ""
            # examples on a line of their own, cut rather than wrapped in narrow terminals
            con.print(Text(f"      {shown}{more}", style="dim"), no_wrap=True, overflow="ellipsis")
        if len(groups) > MAX_DETAIL_LINES:
            con.print(Text(f"  ... and {len(groups) - MAX_DETAIL_LINES} more kinds of failure "
                           "(see --json)"))

        if report.probe:
            con.print(Text(f"probe: {report.probe.get('summary') or '-'}"))
        for note in report.notes:
            con.print(Text(f"note: {note}"))
        con.print(Text(f"suite {report.suite_version}, vectors {report.vectors_digest}"))
        con.print(Text(summary_line(report), style=OVERALL_STYLES.get(summary["overall"], "")))


def _group_failures(cases) -> list:
    """[((verdict, reason), [cases...]), ...], most common first, first-seen order on ties."""
    groups: dict = {}
    for c in cases:
        groups.setdefault((c.verdict, case_reason(c)), []).append(c)
    return sorted(groups.items(), key=lambda kv: -len(kv[1]))


__all__ = ["TerminalReporter"]
