"""``posref conform`` with no TARGET: grade every adapter of the project's table in turn.

Each adapter is graded by a ``posref conform TARGET ...`` process of its own (supervised as any
such run, in the table's folder), its terminal report kept aside. Then: one summary line per
adapter, the details of each that did not pass (of every one with -v; none with -q), and a closing
line. The exit code is the worst of the adapters' (0 < 1 failed < 2 usage or target error < 3
vectors); Ctrl-C stops after the adapter being graded has reported.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from conformance.errors import UsageError

STATUS = {0: "ok", 1: "FAIL", 2: "ERROR", 3: "VECTORS"}
INTERRUPTED = 130
STOP_GRACE = 60.0
LOG_LIMIT = 1 << 20  # bytes of an adapter run's output kept for the details (the report is at its end)  # seconds an interrupted adapter's run has to report before it is killed


@dataclass
class Outcome:
    name: str
    protocol: str
    target: str
    code: Optional[int] = None  # None: not run
    line: str = ""  # what the summary says after the status
    log: str = ""  # the adapter run's own output
    seconds: float = 0.0


def run(args) -> int:
    from conformance import project

    overrides = project.given_options(args.argv[args.argv.index("conform") + 1:])
    for dest in ("debug",) + project.PER_ADAPTER:
        if dest in overrides:
            option = project.to_argv(project.conform_parser(), {dest: overrides[dest]})[0]
            raise UsageError(f"{option} applies to one adapter: set it per adapter in the project's table, or give "
                             "a TARGET")
    for dest in ("config", "adapters"):
        overrides.pop(dest, None)
    overrides = project.absolute_paths(overrides)
    path = args.config if args.config is not None else project.find(".")
    if path is None:
        raise UsageError(f"no TARGET given, and no posref.toml or pyproject.toml with a [tool.posref] table in "
                         f"{os.getcwd()} or above it: give TARGET --protocol NAME, or list the project's adapters "
                         "in such a table (docs/project.md)")
    table = project.load(path)  # the table found once, read once
    adapters = table.select(args.adapters or [])
    for adapter in adapters:
        adapter.args(overrides)  # a bad command-line value: exit 2 before anything is graded
    verbosity = overrides.get("verbosity", 0)
    width = shutil.get_terminal_size().columns
    outcomes = [Outcome(a.name, a.protocol, a.target) for a in adapters]
    say = (lambda text: None) if verbosity < 0 else (lambda text: print(text, file=sys.stderr, flush=True))
    say(f"posref: {len(adapters)} adapter{'s' if len(adapters) != 1 else ''} from {table.path}")
    interrupted = False
    with tempfile.TemporaryDirectory(prefix="posref-project-") as tmp:
        for i, (adapter, outcome) in enumerate(zip(adapters, outcomes), 1):
            say(f"posref: [{i}/{len(adapters)}] {adapter.name} ({adapter.protocol}, {adapter.target}) ...")
            interrupted = _grade(adapter, outcome, overrides, table.root, Path(tmp) / str(i), width)
            if outcome.code is not None:
                say(f"posref: [{i}/{len(adapters)}] {adapter.name}: {STATUS.get(outcome.code, 'STOPPED')} "
                    f"in {outcome.seconds:.0f} s")
            if interrupted:
                break
    _print(outcomes, verbosity, table.path, width)
    if interrupted:
        return INTERRUPTED
    codes = [o.code for o in outcomes]
    unknown = [c for c in codes if c not in STATUS]
    if unknown:  # a run ended by a signal (negative) or interrupted: not a verdict
        return unknown[0] if unknown[0] > 0 else 128 - unknown[0]
    return max(codes)


def _grade(adapter, outcome: Outcome, overrides: dict, root: Path, tmp: Path, width: int) -> bool:
    """Run one adapter's ``posref conform``; fills ``outcome``; True when interrupted."""
    from conformance.supervise import posref_command

    tmp.mkdir()
    mine = dict(overrides)
    report_path = adapter.values.get("json")
    if report_path is None:
        report_path = mine["json"] = str(tmp / "report.json")
    env = dict(os.environ, COLUMNS=str(width))
    started = time.monotonic()
    interrupted = False
    with tempfile.TemporaryFile() as log:  # scratch, with no name
        # A session of its own: an adapter that signals its run's process group cannot reach this
        # process (nor the adapters after it).
        proc = subprocess.Popen(posref_command(["conform", *adapter.argv(mine)]), cwd=root, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            proc.wait()
        except KeyboardInterrupt:  # passed on: the run stops and reports what it graded
            interrupted = True
            try:
                proc.send_signal(signal.SIGINT)
                proc.wait(STOP_GRACE)
            except (subprocess.TimeoutExpired, KeyboardInterrupt):
                proc.kill()
                proc.wait()
        outcome.log = _tail(log)
    outcome.seconds = time.monotonic() - started
    outcome.code = proc.returncode
    outcome.line = _line(outcome, root / report_path)
    return interrupted


def _tail(log) -> str:
    """The run's output; its last LOG_LIMIT bytes when an adapter printed more than that."""
    size = log.seek(0, os.SEEK_END)
    log.seek(max(0, size - LOG_LIMIT))
    text = log.read().decode("utf-8", "backslashreplace").rstrip("\n")
    if size > LOG_LIMIT:
        text = f"[{size - LOG_LIMIT} bytes of the run's output left out here]\n" + text.partition("\n")[2]
    return text


def _line(outcome: Outcome, report_path: Path) -> str:
    """The counts and seed of the adapter's report, or the reason it has none."""
    from conformance.reports._common import count_text
    from conformance.results import Report

    try:
        report = Report.from_json(json.loads(report_path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        report = None
    if report is not None and outcome.code in (0, 1):
        seed = f" (seed {report.seed})" if report.seed is not None else ""
        return count_text(report) + seed
    errors = [ln for ln in outcome.log.splitlines() if ln.startswith("posref: error:")]
    if errors:
        return errors[-1][len("posref: error:"):].strip()
    if outcome.code is not None and outcome.code < 0:
        return f"ended by signal {-outcome.code}"
    return f"exit {outcome.code}, no report"


def _print(outcomes: list, verbosity: int, path: Path, width: int) -> None:
    ran = [o for o in outcomes if o.code is not None]
    name_w = max([len(o.name) for o in outcomes] + [4])
    proto_w = max([len(o.protocol) for o in outcomes] + [8])
    for o in outcomes:
        status = "-" if o.code is None else STATUS.get(o.code, "STOPPED")
        line = o.line if o.code is not None else "not run (interrupted)"
        print(f"{status:<7} {o.name:<{name_w}}  {o.protocol:<{proto_w}}  {line}")
    shown = [o for o in ran if verbosity > 0 or (verbosity == 0 and o.code != 0)]
    for o in shown:
        title = f" {STATUS.get(o.code, 'STOPPED')} {o.name} ({o.protocol}, {o.target}) "
        print()
        print(f"{'=' * 3}{title}{'=' * max(3, min(width, 100) - len(title) - 3)}")
        print(o.log)
    counts = {}
    for o in ran:
        word = {0: "passed", 1: "failed", 2: "error", 3: "vectors failed"}.get(o.code, "stopped")
        counts[word] = counts.get(word, 0) + 1
    parts = [f"{n} {w}" for w, n in counts.items()]
    if len(ran) < len(outcomes):
        parts.append(f"{len(outcomes) - len(ran)} not run")
    if shown:
        print()
    print(f"posref: {len(outcomes)} adapter{'s' if len(outcomes) != 1 else ''} from {path.name}: {', '.join(parts)}")
