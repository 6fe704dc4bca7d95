"""Grade the survey's rows: each in a supervised ``posref conform`` process of its own, a few at a
time, its JSON report read into a cell.

A row is run by conformance.commands.project's ``_grade`` (the same supervised process a project
table's adapter gets), with the survey's seed, ``--max-time`` its time limit, ``-q``, the default
dtypes and the row's declared options. Rows run on ``jobs`` threads (each only waits on its
process; the machine's cores do the grading). The cell:

- ``passed``, or ``acceptable`` when some case passed within the acceptable budget only;
- ``failed`` with the diagnosis codes of the failing cases and identities;
- ``unsupported``: nothing graded, every case skipped on the adapter's own Unsupported;
- ``not installed``: a declared distribution is absent, or the module's import fails (the reason);
- ``error``: no report (a usage error, a crash, a signal) or a declaration posref cannot use.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

STATUSES = ("passed", "acceptable", "failed", "unsupported", "error", "not installed")
PASSING = ("passed", "acceptable")
STOP_GRACE = 60.0  # seconds the interrupted rows have to report before they are killed


@dataclass
class Cell:
    status: str  # one of STATUSES
    detail: str = ""  # the report's counts, or the reason there is none
    codes: dict = field(default_factory=dict)  # diagnosis code -> failing cases and identities naming it
    summary: Optional[dict] = None  # the report's summary counts
    seconds: float = 0.0
    installed: bool = True  # False: a declared distribution is absent here (not the adapter's fault)
    suite_version: Optional[str] = None
    vectors_digest: Optional[str] = None

    def text(self) -> str:
        """The matrix's cell: "failed: code-a, code-b", "not installed: reason", "passed"."""
        if self.status == "failed":
            return f"failed: {', '.join(self.codes) or 'no named cause'}"
        if self.status in ("error", "not installed"):
            return f"{self.status}: {self.detail}"
        return self.status


def cell_of(code: Optional[int], line: str, report, seconds: float = 0.0) -> Cell:
    """The cell of a graded row from the run's exit code, its summary line (commands.project's
    ``_line``: the counts, or the error) and its report (None when it wrote none)."""
    if code == 2 and line.startswith("cannot import"):
        return Cell("not installed", line.split(": ", 1)[-1], seconds=seconds)
    if report is None or code not in (0, 1):
        return Cell("error", line or f"exit {code}", seconds=seconds)
    from conformance.reports._common import count_text

    summary = report.summary()
    done = dict(detail=count_text(report), summary=summary, seconds=seconds, suite_version=report.suite_version,
                vectors_digest=report.vectors_digest)
    if summary["overall"] == "fail":
        return Cell("failed", codes=failure_codes(report), **done)
    if summary["overall"] == "skip":  # nothing graded (exit 1): every case on the adapter's Unsupported
        return Cell("unsupported", **done)
    if code != 0:  # a report that passes with a failing exit: the adapter ended the grading process
        return Cell("error", **dict(done, detail=f"exit {code}: {line}"))
    return Cell("acceptable" if summary.get("acceptable") else "passed", **done)


def failure_codes(report) -> dict:
    """{code: count} over the failing (or erroring) cases and identities, most frequent first; an
    identity that fails with no code counts under its id ("identity rope.apply/...", what the
    matrix can name), a case with none under "no-code"."""
    counts: dict = {}
    failing = [(c, "no-code") for c in report.cases if c.verdict in ("fail", "error") and not c.expected_failure]
    failing += [(i, f"identity {i.id}") for i in report.identities if i.verdict in ("fail", "error")]
    for result, unnamed in failing:
        for code in sorted({d.code for d in result.diagnoses}) or [unnamed]:
            counts[code] = counts.get(code, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def grade_row(row, seed: int, timeout: float, tmp: Path) -> Cell:
    """One row's cell; runs ``posref conform`` unless the row cannot be graded."""
    if row.problem is not None:
        return Cell("error", row.problem)
    if row.missing is not None:
        return Cell("not installed", row.missing, installed=False)
    from conformance import project
    from conformance.commands.project import Outcome, _grade
    from conformance.results import Report

    name = f"{row.module}:{row.function}"
    values = dict(row.options, protocol=row.protocol, seed=seed, max_time=timeout, verbosity=-1)
    adapter = project.Adapter(name=name, target=str(row.target), values=values, where=f"survey row {name}")
    outcome = Outcome(name, row.protocol, adapter.target)
    _grade(adapter, outcome, {}, row.path.parent, tmp, 100)
    try:
        report = Report.from_json(json.loads((tmp / "report.json").read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        report = None
    return cell_of(outcome.code, outcome.line, report, outcome.seconds)


def grade_all(rows: list, seed: int, timeout: float, jobs: int = 2,
              say: Callable[[str], None] = lambda text: None) -> list:
    """The cells of ``rows`` in their order, graded ``jobs`` at a time; ``say`` gets one line per
    row as it finishes. A module whose import failed once is not imported again for its other rows.
    Ctrl-C: the rows being graded are interrupted (they report what they graded), the rest are
    not run, and KeyboardInterrupt is raised again."""
    cells: list = [None] * len(rows)
    broken: dict = {}  # module -> the cell of its failed import
    lock = threading.Lock()
    started = time.monotonic()
    done = 0

    def work(i, tmp):
        row = rows[i]
        with lock:
            known = broken.get(row.module)
        cell = Cell(known.status, known.detail) if known is not None else grade_row(row, seed, timeout, tmp)
        if cell.status == "not installed" and cell.installed:
            with lock:
                broken.setdefault(row.module, cell)
        return cell

    with tempfile.TemporaryDirectory(prefix="posref-survey-") as scratch:
        pool = ThreadPoolExecutor(max_workers=max(1, jobs))
        futures = {pool.submit(work, i, Path(scratch) / str(i)): i for i in range(len(rows))}
        pending = set(futures)
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    i = futures[future]
                    cells[i] = future.result()
                    done += 1
                    say(progress_line(done, len(rows), time.monotonic() - started, rows[i], cells[i]))
        except KeyboardInterrupt:
            for future in pending:
                future.cancel()
            _interrupt_children()
            wait(pending, timeout=STOP_GRACE)
            _interrupt_children(signal.SIGKILL)
            pool.shutdown(wait=True)
            raise
        pool.shutdown(wait=True)
    return cells


def progress_line(done: int, total: int, elapsed: float, row, cell: Cell) -> str:
    minutes, seconds = divmod(int(elapsed), 60)
    version = f" {row.version}" if row.version else ""
    return (f"posref survey: [{done}/{total}, {minutes}:{seconds:02d}] {row.library}{version} {row.protocol} "
            f"({row.module}:{row.function}): {cell.text()}")


def _interrupt_children(sig=signal.SIGINT) -> None:
    """Signal this process's own children (the rows' ``posref conform`` runs, each in a session of
    its own, so the terminal's Ctrl-C does not reach them). Linux only (/proc); elsewhere the
    rows end at their --max-time."""
    me = os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == me:
                os.kill(int(entry), sig)
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
