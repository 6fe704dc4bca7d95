"""Exit codes must not lie, and a run always ends (issues 9 and 24): ``posref conform`` runs in a
child process (the *grading process*) that the command line's own process (the *supervisor*)
watches.

Without --isolate the adapter runs inside the grading process, where it can end that process
(``os._exit(0)``, a signal) before any report is written, hold the interpreter so that no
thread-based timeout can fire (a catastrophic regular expression, a ``__del__`` that loops), stop
it (SIGSTOP) or leave a non-daemon thread that keeps it alive. So:

- The grading process tells the supervisor what it is doing, as newline-delimited JSON over a
  pipe (``emit``): the run's limits and report paths (``start``), the guard's start
  (``guard``), the report's header and the planned cases (``header``, ``plan``), each call's
  start and end (``call``, ``done``), each finished case (``case``), the end of grading
  (``graded``) and, as its last act, its exit code (``exit``). It then leaves with ``os._exit``,
  so no stray thread (or ``atexit`` hook of the adapter) can keep it alive.
- The supervisor continues a stopped grading process (SIGCONT; the limits keep counting) and kills
  it (its whole process group: it runs in a session of its own) when an in-process call runs past
  its limit plus ``CALL_GRACE``, or the run past ``--max-time`` plus ``RUN_GRACE`` with no
  progress. It then ends the run itself: the terminal table and the --json / --junit / --markdown
  reports with the cases done so far, the hung call as a ``timeout`` verdict, the rest not run,
  a one-line reason, exit 1.
- A grading process that ends without reporting its code, or with another code than it reported,
  ended early: the command says so and exits 1. (This detects an adapter that exits; it does not
  defend against one that deliberately forges the events: in-process code can do anything the
  runner can. Use --isolate, whose worker is the only process the adapter's code runs in.)
- The grading process dies with its supervisor (``PR_SET_PDEATHSIG`` on Linux, polling
  elsewhere): a harness that kills ``posref`` leaves no grading behind.
- Ctrl-C: the supervisor passes SIGINT on to the grading process, which stops the run and
  reports as before.

Other commands, and ``main()`` called from Python, are not supervised.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Optional

from conformance import processes

ENV = "POSREF_SUPERVISED_FD"
PARENT_ENV = "POSREF_SUPERVISOR_PID"
# Seconds past a limit before the supervisor acts. An in-process call that times out normally
# returns within milliseconds of its limit (the waiting thread needs the interpreter back, which a
# Python-level loop yields every 5 ms); only a call that holds the interpreter runs past this.
CALL_GRACE = 5.0
# Past --max-time, the guard reports the remaining calls as not run at once; grading what came
# back takes about a second on the whole catalog (tests/core/test_guard.py). The supervisor waits
# until the grading process has been silent this long past the deadline.
RUN_GRACE = 10.0
# Loading the adapter and the vectors before the guard starts, and writing the reports after
# grading, are posref's own work (seconds); these bound them against an adapter that hangs there.
SETUP_ALLOWANCE = 60.0
REPORT_ALLOWANCE = 60.0
EXIT_GRACE = 5.0  # between the exit code's event and the process's end
MAX_LINE = 64 << 20  # an event line longer than this is dropped
HUNG_IN_PROCESS = ("the adapter held the interpreter past --timeout; in-process hangs that hold the GIL "
                   "cannot be interrupted; grade such code with --isolate")

# --------------------------------------------------------------------------------------------
# Grading-process side

_channel: Optional["_Channel"] = None


class _Channel:
    def __init__(self, fd: int):
        self.fd = fd
        self.lock = threading.Lock()

    def send(self, event: dict) -> None:
        data = (json.dumps(event, default=str) + "\n").encode()
        with self.lock:
            try:
                while data:
                    data = data[os.write(self.fd, data):]
            except OSError:  # the supervisor is gone (and this process with it, by its signal)
                pass


def supervised() -> bool:
    """True in a grading process that a supervisor watches."""
    return _channel is not None


def emit(event: dict) -> None:
    """Tell the supervisor what the grading process is doing (nothing when unsupervised)."""
    if _channel is not None:
        _channel.send(event)


class Progress:
    """Wraps the terminal reporter (start / advance / finish) and tells the supervisor about the
    report's header, the planned cases and each finished case; runner.run calls ``planned``."""

    def __init__(self, inner):
        self.inner = inner
        self.report = None

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def planned(self, report, plan) -> None:
        """plan: [(case id, dtype, repro, compiled)] in the order the runner grades them."""
        self.report = report
        self._header()
        emit({"ev": "plan", "cases": [list(p) for p in plan]})

    def _header(self) -> None:
        if self.report is not None:
            header = self.report.to_json()
            header["cases"], header["identities"] = [], []
            emit({"ev": "header", "report": header})

    def start(self, total: int) -> None:
        self._header()  # with what the probe found
        emit({"ev": "started"})
        self.inner.start(total)

    def advance(self, result) -> None:
        emit({"ev": "case", "result": result.to_json()})
        self.inner.advance(result)

    def finish(self, report) -> None:
        emit({"ev": "graded"})
        self.inner.finish(report)


def _grading_process(argv) -> None:
    """Run ``conform`` and report the exit code as the very last thing, then leave at once."""
    global _channel
    from conformance.cli import main

    fd = int(os.environ.pop(ENV))
    parent = int(os.environ.pop(PARENT_ENV, "0") or 0)
    if parent:
        processes.die_with_parent(parent, code=1)
    os.set_inheritable(fd, False)  # the adapter's subprocesses must not hold the pipe open
    _channel = _Channel(fd)
    code, finished = 1, True
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse (a usage error, --help): the adapter's are verdicts
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
        code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # noqa: BLE001 - a traceback, and the supervisor says the run ended early
        import traceback

        traceback.print_exc()
        runner = sys.modules.get("conformance.runner")
        if runner is not None and any(exc is e for e in runner.RERAISED):
            code = 1  # --raise: the adapter's own exception, as asked; not a run that ended early
        else:
            finished = False
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or replaced stream
            pass
    if finished:
        emit({"ev": "exit", "code": code})
    # Not sys.exit: the interpreter would wait for the adapter's non-daemon threads and run its
    # atexit hooks. The run's own cleanup (the isolated server) is done by now.
    os._exit(code & 0xFF if finished else 1)


# --------------------------------------------------------------------------------------------
# Supervisor side


class _Watch:
    """What the supervisor knows of the run, from the grading process's events."""

    def __init__(self):
        self.buffer = b""
        self.skipping = False
        self.start: Optional[dict] = None
        self.t_start = self.t_guard = self.t_graded = self.t_exit = None
        self.t_last = time.monotonic()
        self.header: Optional[dict] = None
        self.plan: Optional[list] = None
        self.started = False
        self.call: Optional[tuple] = None  # (monotonic start, limit or None)
        self.results: list = []
        self.exit_code: Optional[int] = None

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while True:
            line, sep, rest = self.buffer.partition(b"\n")
            if not sep:
                if len(self.buffer) > MAX_LINE:
                    self.buffer, self.skipping = b"", True
                return
            self.buffer = rest
            if self.skipping:
                self.skipping = False
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                self._on(event)

    def _on(self, event: dict) -> None:
        now = time.monotonic()
        self.t_last = now
        kind = event.get("ev")
        if kind == "start":
            self.start, self.t_start = event, now
        elif kind == "guard":
            self.t_guard = now
        elif kind == "header" and isinstance(event.get("report"), dict):
            self.header = event["report"]
        elif kind == "plan" and isinstance(event.get("cases"), list):
            self.plan = event["cases"]
        elif kind == "started":
            self.started = True
        elif kind == "call":
            limit = event.get("limit")
            self.call = (now, float(limit) if isinstance(limit, (int, float)) else None)
        elif kind == "done":
            self.call = None
        elif kind == "case" and isinstance(event.get("result"), dict):
            self.results.append(event["result"])
        elif kind == "graded":
            self.t_graded, self.call = now, None
        elif kind == "exit" and isinstance(event.get("code"), int):
            self.exit_code, self.t_exit = event["code"], now

    def _limit(self, name: str) -> Optional[float]:
        value = (self.start or {}).get(name)
        return float(value) if isinstance(value, (int, float)) else None

    def overdue(self, now: float) -> Optional[tuple]:
        """(what, reason) when the grading process must be ended now, else None; what is
        "exited" (it reported its code but lingers), "call" (an in-process call holds the
        interpreter) or "run" (a time limit of the run)."""
        if self.t_exit is not None:
            return ("exited", "") if now > self.t_exit + EXIT_GRACE else None
        if self.start is None:
            return None
        if self.t_graded is not None:
            if now <= self.t_graded + REPORT_ALLOWANCE:
                return None
            return ("run", (f"writing the reports did not end within {REPORT_ALLOWANCE:g} s (the adapter's "
                            "objects kept the grading process busy?); grade such code with --isolate"))
        max_time = self._limit("max_time")
        if self.t_guard is None:
            if max_time is None or now <= self.t_start + max_time + SETUP_ALLOWANCE:
                return None
            return ("run", (f"loading the adapter and the vectors did not end within --max-time {max_time:g} s "
                            f"(+{SETUP_ALLOWANCE:g} s); grade such code with --isolate"))
        in_process = not self.start.get("isolate")
        if in_process and self.call is not None and self.call[1] is not None \
                and now > self.call[0] + self.call[1] + CALL_GRACE:
            return ("call", HUNG_IN_PROCESS)
        if max_time is not None and now > max(self.t_guard + max_time, self.t_last) + RUN_GRACE:
            return ("run", (f"the run did not end within --max-time {max_time:g} s (+{RUN_GRACE:g} s): the "
                            "adapter kept the grading process busy (an in-process hang that holds the GIL, a "
                            "__del__ that loops?); grade such code with --isolate"))
        return None


def _kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _supervise(argv) -> int:
    import select

    # Orphans of the grading process (the isolated server after a kill, what the adapter started in
    # a session of its own) are adopted here and killed with everything else at the end.
    processes.become_subreaper()
    read_end, write_end = os.pipe()
    env = dict(os.environ, **{ENV: str(write_end), PARENT_ENV: str(os.getpid())})
    # A session of its own: the supervisor can kill the grading process's whole group, and
    # terminal job-control stops (SIGTSTP, SIGTTOU) do not reach it.
    proc = subprocess.Popen(posref_command(argv), env=env, pass_fds=(write_end,),
                            start_new_session=True)
    os.close(write_end)
    os.set_blocking(read_end, False)
    watch = _Watch()
    fatal: list = []

    def on_sigint(signum, frame):  # Ctrl-C: the grading process stops the run and reports
        _kill_group(proc.pid, signal.SIGINT)

    def on_fatal(signum, frame):
        fatal.append(signum)

    previous = {s: signal.signal(s, h) for s, h in ((signal.SIGINT, on_sigint), (signal.SIGTERM, on_fatal),
                                                    (signal.SIGHUP, on_fatal))}
    poller = select.poll()
    poller.register(read_end, select.POLLIN)
    reading, status, why = True, None, None
    try:
        while True:
            if reading:
                if poller.poll(100):
                    reading = _drain(read_end, watch)
            else:
                time.sleep(0.1)
            pid, wstatus = os.waitpid(proc.pid, os.WNOHANG | os.WUNTRACED)
            if pid and os.WIFSTOPPED(wstatus):
                # Stopped by the adapter: continued, and the limits keep counting (no `continue`
                # here: an adapter that stops it again and again must still meet the deadlines).
                _kill_group(proc.pid, signal.SIGCONT)
            elif pid:
                status = os.waitstatus_to_exitcode(wstatus)
                break
            if fatal:
                _kill_group(proc.pid)
                os.waitpid(proc.pid, 0)
                signal.signal(fatal[0], signal.SIG_DFL)
                os.kill(os.getpid(), fatal[0])
                return 128 + fatal[0]
            why = watch.overdue(time.monotonic())
            if why is not None:
                _kill_group(proc.pid)
                os.waitpid(proc.pid, 0)
                break
    finally:
        proc.returncode = status if status is not None else -9  # reaped here, not by Popen
        for s, h in previous.items():
            signal.signal(s, h)
    if reading:
        _drain(read_end, watch)  # what was written before the end; never waits for EOF
    os.close(read_end)
    _kill_leftovers(proc.pid)  # what the adapter left in the grading process's group (a forked child)
    processes.end_descendants()  # and anywhere else below this process
    if why is not None and why[0] == "exited":
        return watch.exit_code
    if why is not None:
        return _end_run(watch, *why)
    if watch.exit_code == status:
        return status
    how = f"exit status {status}" if status >= 0 else f"signal {-status}"
    print(f"posref: error: the run ended before it finished ({how}): the adapter ended the process "
          "(os._exit, a signal?), so verdicts and reports are missing or incomplete; grade such code "
          "with --isolate", file=sys.stderr)
    return 1


def _kill_leftovers(pgid: int) -> None:
    """SIGKILL what is left of the grading process's group (its leader is reaped by now, and a
    group's id is not reused while the group has members)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _drain(fd: int, watch: _Watch) -> bool:
    """Read what is there; False at end of file."""
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        watch.feed(data)


def _end_run(watch: _Watch, what: str, reason: str) -> int:
    """The grading process was killed: report the cases done so far, the hung call as a timeout,
    the rest as not run, and the reason; exit 1."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[2K\x1b[?25h")  # the killed progress bar's line, and the cursor
    if watch.header is None or watch.plan is None:
        print(f"posref: error: {reason}; no report was written (grading had not started)", file=sys.stderr)
        return 1
    try:
        report = _partial_report(watch, what, reason)
        _print_and_write(report, watch.start or {})
    except Exception as exc:  # noqa: BLE001 - the reason must still be said
        print(f"posref: error: cannot write a report: {exc}", file=sys.stderr)
    print(f"posref: error: {reason}", file=sys.stderr)
    return 1


def _partial_report(watch: _Watch, what: str, reason: str):
    from conformance.results import CaseResult, Diagnosis, IdentityResult, Report

    report = Report.from_json(watch.header)
    report.cases = [CaseResult.from_json(r) for r in watch.results]
    plan, done = watch.plan, len(report.cases)
    limit = watch.call[1] if watch.call is not None else None
    if what == "call" and limit is not None:
        hung = (f"the call did not return within {limit:g} s and held the interpreter (no in-process timeout "
                "can fire), so the grading process was killed; --isolate kills such calls")
    else:
        hung = ("the grading process stopped responding during this case and was killed when the run's time "
                "limit was spent (see the run's notes)")
    rest = "not run: the grading process was killed before this case (see the run's notes)"
    if not watch.started:  # the probe's call
        report.notes.append("the protocol's probe did not return")
        todo = plan
    elif done < len(plan):
        case_id, dtype, repro, compiled = _planned(plan[done])
        report.cases.append(CaseResult(id=str(case_id), dtype=str(dtype), verdict="error", compiled=compiled,
                                       diagnoses=[Diagnosis("timeout", hung)], repro=str(repro)))
        todo = plan[done + 1:]
    else:  # every case was graded: the black-box identities
        todo = []
        dtype = plan[-1][1] if plan else "float32"
        report.identities.append(IdentityResult(id="blackbox", dtype=str(dtype), verdict="error",
                                                message=f"black-box checks did not end: {hung}",
                                                diagnoses=[Diagnosis("timeout", hung)]))
    for case_id, dtype, repro, compiled in map(_planned, todo):
        report.cases.append(CaseResult(id=str(case_id), dtype=str(dtype), verdict="error", compiled=compiled,
                                       diagnoses=[Diagnosis("timeout", rest)], repro=str(repro)))
    report.notes.append(reason)
    baseline = watch.start.get("expected_failures") if watch.start else None
    if baseline:
        from conformance import baseline as baselines

        baselines.apply(report, baselines.load(baseline))
    return report


def _planned(entry) -> tuple:
    """(case id, dtype, repro, compiled) of one planned case, as ``planned`` sent it."""
    case_id, dtype, repro, compiled = (list(entry) + ["", "", "", False])[:4]
    return str(case_id), str(dtype), str(repro), compiled is True


def _print_and_write(report, start: dict) -> None:
    from conformance.reports import write_reports
    from conformance.reports.terminal import TerminalReporter, default_console

    to_stdout = start.get("json") == "-"
    verbosity = start.get("verbosity") if isinstance(start.get("verbosity"), int) else 0
    TerminalReporter(default_console(stderr=to_stdout), verbosity=verbosity).finish(report)
    paths = {k: start.get(k) for k in ("json", "junit", "markdown")}
    write_reports(report, **{k: v for k, v in paths.items() if isinstance(v, str) and v})
    skipped = [f"--{k.replace('_', '-')}" for k in ("plot", "write_expected_failures") if start.get(k)]
    if skipped:
        print(f"posref: note: {' and '.join(skipped)} not written: the run was ended before it finished",
              file=sys.stderr)


# `python -c` puts the current folder first on sys.path, where a user's project may have a
# `reference` or `conformance` package of its own: posref's are imported from where this process
# found them. (A module TARGET still finds the current folder: conformance.loader adds it.)
_POSREF_CODE = ("import sys\n"
                "if sys.path and sys.path[0] == '':\n    del sys.path[0]\n"
                "sys.path.insert(0, {root!r})\n"
                "from conformance.supervise import entry\n"
                "sys.exit(entry())\n")


def posref_command(argv) -> list:
    """The command line that runs this very ``posref`` with ``argv`` in a new Python process."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [sys.executable, "-c", _POSREF_CODE.format(root=root), *argv]


def _wants_supervision(argv) -> bool:
    return bool(argv) and argv[0] == "conform" and os.name == "posix" and ENV not in os.environ


def entry() -> int:
    from conformance.cli import main

    argv = sys.argv[1:]
    if ENV in os.environ:  # the supervised grading process
        _grading_process(argv)
    if not _wants_supervision(argv):
        return main(argv)
    return _supervise(argv)
