"""The supervised `posref conform` always ends (issue 24, "Bounded time, always").

Each test runs the real command (``python -m conformance.cli conform``, the `posref` entry point)
as a subprocess on a few cases, with small --timeout / --max-time, against an adapter that:
holds the interpreter in a call (a catastrophic regular expression), returns an object whose
``__del__`` loops, leaves a non-daemon thread running, stops the grading process with SIGSTOP
(in-process and under --isolate), or hangs while the supervisor is killed. Ctrl-C still stops
the run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBSET = "rope.apply/llama2-d128/*"
# A correct adapter to delegate to, so that the cases graded before a hang pass.
CORRECT = f"""
import importlib.util as _u
_s = _u.spec_from_file_location("posref_hf_example", {str(ROOT / "examples/rope/hf_rotate_half.py")!r})
_m = _u.module_from_spec(_s)
_s.loader.exec_module(_m)
correct = _m.apply
"""
# The llama2-d128 cases at positions 8000 and beyond (decode-8191 is the third of ten); the
# probe's calls stay below.
LATE = "int(positions.max()) >= 8000"
CASE_IDS = ["prefill-8", "decode-4095", "decode-8191"]


def _adapter(tmp_path: Path, body: str, name: str = "adapter.py") -> str:
    path = tmp_path / name
    path.write_text(CORRECT + body)
    return f"{path}:apply"


def _posref(args, *, timeout: float = 120, **popen):
    """Run `posref conform ARGS`; (exit code, stdout, stderr, seconds). Output goes to files, so
    that nothing the adapter leaves behind can keep a pipe open."""
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "conformance.cli", "conform", *args], stdout=out,
                                stderr=err, cwd=ROOT, **popen)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        took = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return code, out.read().decode(errors="replace"), err.read().decode(errors="replace"), took


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")  # a zombie has ended
    except (FileNotFoundError, ProcessLookupError):
        return True


def _ends_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _gone(pid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reports(tmp_path: Path) -> list:
    return ["--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"), "--markdown",
            str(tmp_path / "r.md")]


def test_an_in_process_call_that_holds_the_interpreter_ends_the_run_with_the_cases_done(tmp_path):
    """A catastrophic regular expression never gives the interpreter back, so the thread-based
    timeout cannot fire: no output at all, killed at 60 to 90 s. The supervisor kills the grading
    process past --timeout plus a grace and reports what was done."""
    target = _adapter(tmp_path, f"""
import re
def apply(x, positions, spec):
    if {LATE}:
        re.match(r'(a+)+$', 'a' * 40 + 'b')
    return correct(x, positions, spec)
""")
    code, out, err, took = _posref([target, "--protocol", "rope.apply", "--cases", SUBSET, "--dtype", "float32",
                                    "--no-fresh", "--timeout", "1", *_reports(tmp_path)])
    assert code == 1, err
    assert took < 60
    reason = "the adapter held the interpreter past --timeout"
    assert err.strip().splitlines()[-1] == (
        "posref: error: the adapter held the interpreter past --timeout; in-process hangs that hold the GIL "
        "cannot be interrupted; grade such code with --isolate")
    assert "posref 0.5" in out or "rope.apply:" in out  # the terminal table, on stdout
    report = json.loads((tmp_path / "r.json").read_text())
    cases = {c["id"].rsplit("/", 1)[1]: c for c in report["cases"]}
    assert len(report["cases"]) == 10  # every planned case is in the report
    assert cases["prefill-8"]["verdict"] in ("pass", "acceptable")
    assert cases["decode-4095"]["verdict"] in ("pass", "acceptable")
    hung = cases["decode-8191"]
    assert hung["verdict"] == "error" and hung["diagnoses"][0]["code"] == "timeout"
    assert "held the interpreter" in hung["diagnoses"][0]["message"] and hung["repro"]
    rest = [c for k, c in cases.items() if k not in CASE_IDS]
    assert rest and all(c["verdict"] == "error" and c["diagnoses"][0]["message"].startswith("not run")
                        for c in rest)
    assert any(reason in n for n in report["notes"])
    assert report["summary"]["overall"] == "fail"
    assert "decode-8191" in (tmp_path / "r.xml").read_text()
    assert "held the interpreter" in (tmp_path / "r.md").read_text()


def test_a_returned_object_whose_del_loops_ends_within_max_time(tmp_path):
    """The __del__ runs in the grading process's main thread after the call, where no call's
    timeout applies: --max-time plus a grace bounds it."""
    target = _adapter(tmp_path, f"""
class Loop:
    def __del__(self):
        while True:
            pass
def apply(x, positions, spec):
    if {LATE}:
        return Loop()
    return correct(x, positions, spec)
""")
    code, _, err, took = _posref([target, "--protocol", "rope.apply", "--cases", SUBSET, "--dtype", "float32",
                                  "--no-fresh", "--timeout", "1", "--max-time", "2", "-q",
                                    "--json", str(tmp_path / "r.json")])
    assert code == 1, err
    assert took < 60
    assert "did not end within --max-time 2 s" in err.strip().splitlines()[-1]
    report = json.loads((tmp_path / "r.json").read_text())
    verdicts = [c["verdict"] for c in report["cases"]]
    assert set(verdicts[:2]) <= {"pass", "acceptable"}  # graded before the hang
    assert len(verdicts) == 10 and set(verdicts[2:]) == {"error"}


def test_a_non_daemon_thread_left_running_does_not_keep_the_command_alive(tmp_path):
    """The report was written, then the process never exited (the interpreter waits for
    non-daemon threads at exit)."""
    target = _adapter(tmp_path, """
import threading, time
threading.Thread(target=time.sleep, args=(3600,), name="left-behind").start()
def apply(x, positions, spec):
    return correct(x, positions, spec)
""")
    code, _, err, took = _posref([target, "--protocol", "rope.apply", "--cases", f"{SUBSET[:-1]}prefill-8",
                                  "--dtype", "float32", "--no-fresh", "--json", str(tmp_path / "r.json")],
                                 timeout=90)
    assert code == 0, err
    assert took < 60
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["overall"] == "pass"


def test_a_forked_child_holding_the_pipe_does_not_keep_the_command_alive(tmp_path):
    """The supervisor read the grading process's pipe to its end, which a forked child of the
    adapter holds open: it waited for that child. It reads what is there, and the adapter's
    leftovers in the grading process's group are killed."""
    pid_file = tmp_path / "pid"
    target = _adapter(tmp_path, f"""
import os, time
_child = []
def apply(x, positions, spec):
    if not _child:
        pid = os.fork()
        if pid == 0:
            time.sleep(3600)
            os._exit(0)
        _child.append(pid)
        with open({str(pid_file)!r}, "w") as f:
            f.write(str(pid))
    return correct(x, positions, spec)
""")
    try:
        code, _, err, _ = _posref([target, "--protocol", "rope.apply", "--cases", f"{SUBSET[:-1]}prefill-8",
                                   "--dtype", "float32", "--no-fresh", "--json", str(tmp_path / "r.json")],
                                  timeout=90)
        assert code == 0, err
        assert _ends_within(int(pid_file.read_text()), 5), "the adapter's forked child outlived the run"
    finally:
        if pid_file.exists():
            _kill(int(pid_file.read_text()))


STOP_IN_PROCESS = """
import os, signal
def apply(x, positions, spec):
    open(STOPPED, "a").close()
    os.kill(os.getpid(), signal.SIGSTOP)
    return correct(x, positions, spec)
"""
# Under --isolate the worker stops the grading process: the ancestor whose environment holds the
# supervisor's pipe (worker -> server -> grading process).
STOP_GRADING_PROCESS = """
import os, signal
def _grading_process():
    pid = os.getppid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if b"POSREF_SUPERVISED_FD=" in f.read():
                    return pid
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return None
    return None
def apply(x, positions, spec):
    pid = _grading_process()
    if pid is not None:
        open(STOPPED, "a").close()
        os.kill(pid, signal.SIGSTOP)
    return correct(x, positions, spec)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreapers are a Linux feature")
def test_a_helper_in_a_session_of_its_own_does_not_outlive_the_command(tmp_path):
    """A double-forked helper in a session of its own leaves the grading process's group and is
    reparented away from it: the `posref` process adopts it (child subreaper) and kills what is
    left below it when the run ends (conformance/processes.py)."""
    pid_file = tmp_path / "pid"
    target = _adapter(tmp_path, f"""
import os, subprocess, sys
_started = []
def apply(x, positions, spec):
    if not _started:
        helper = ("import os, time\\n"
                  "if os.fork() == 0:\\n"
                  "    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\\n"
                  "    time.sleep(3600)\\n")
        subprocess.run([sys.executable, "-c", helper], start_new_session=True, check=True)
        _started.append(True)
    return correct(x, positions, spec)
""")
    try:
        code, _, err, _ = _posref([target, "--protocol", "rope.apply", "--cases", f"{SUBSET[:-1]}prefill-8",
                                   "--dtype", "float32", "--no-fresh"], timeout=90)
        assert code == 0, err
        assert _ends_within(int(pid_file.read_text()), 5), "a helper in a session of its own outlived the command"
    finally:
        if pid_file.exists():
            _kill(int(pid_file.read_text()))


@pytest.mark.parametrize("how, body, extra", [
    ("in-process", STOP_IN_PROCESS, []),
    ("isolated", STOP_GRADING_PROCESS, ["--isolate"]),
], ids=["in-process", "isolated"])
def test_a_grading_process_stopped_by_the_adapter_is_continued(tmp_path, how, body, extra):
    """SIGSTOP to the grading process left `posref` waiting forever; the supervisor continues it
    (the limits keep counting) and the run ends with its verdicts."""
    stopped = tmp_path / "stopped"
    target = _adapter(tmp_path, f"STOPPED = {str(stopped)!r}\n" + body)
    code, _, err, took = _posref([target, "--protocol", "rope.apply", "--cases", f"{SUBSET[:-1]}prefill-8",
                                  "--dtype", "float32", "--no-fresh", "--timeout", "20", *extra,
                                  "--json", str(tmp_path / "r.json")], timeout=120)
    assert stopped.exists(), "the adapter did not find the grading process"
    assert code == 0, err
    assert took < 60
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["overall"] == "pass"


def test_killing_the_supervisor_ends_the_grading_process(tmp_path):
    """A harness's timeout SIGKILLs the `posref` process it started: the grading process kept
    running at 100% CPU (11 minutes measured). It dies with its supervisor."""
    pid_file = tmp_path / "pid"
    target = _adapter(tmp_path, f"""
import os
def apply(x, positions, spec):
    with open({str(pid_file)!r} + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace({str(pid_file)!r} + ".tmp", {str(pid_file)!r})
    while True:
        pass
""")
    proc = subprocess.Popen([sys.executable, "-m", "conformance.cli", "conform", target, "--protocol", "rope.apply",
                             "--cases", SUBSET, "--no-fresh", "--timeout", "300"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    grading = None
    try:
        deadline = time.monotonic() + 90
        while not pid_file.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert pid_file.exists(), "the adapter was never called"
        grading = int(pid_file.read_text())
        assert grading != proc.pid and not _gone(grading)
        proc.kill()
        proc.wait()
        assert _ends_within(grading, 5), "the grading process outlived its supervisor"
    finally:
        proc.kill()
        if grading is not None:
            _kill(grading)


def test_ctrl_c_still_stops_the_run(tmp_path):
    """Ctrl-C (SIGINT to the terminal's foreground process group) stops the run: 'interrupted',
    exit 130, as before the supervisor kept the grading process in a session of its own."""
    started = tmp_path / "started"
    target = _adapter(tmp_path, f"""
import time
def apply(x, positions, spec):
    open({str(started)!r}, "w").close()
    time.sleep(60)
    return correct(x, positions, spec)
""")
    import tempfile

    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "conformance.cli", "conform", target, "--protocol",
                                 "rope.apply", "--cases", SUBSET, "--no-fresh", "--timeout", "100"], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        try:
            deadline = time.monotonic() + 90
            while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            assert started.exists(), "the adapter was never called"
            os.killpg(proc.pid, signal.SIGINT)  # what the terminal does
            code = proc.wait(timeout=60)
        finally:
            proc.kill()
        err.seek(0)
        text = err.read().decode(errors="replace")
    assert code == 130, text
    assert "posref: interrupted" in text


def test_reports_round_trip_through_json():
    """The supervisor rebuilds the report from the grading process's events (Report.from_json)."""
    from conformance.results import CaseResult, Diagnosis, IdentityResult, Report

    report = Report(suite_version="0.5.0", vectors_digest="sha256:x", protocol="rope.apply", target="t.py:f",
                    environment={"torch": "2"}, profile="standard", probe={"summary": "half"},
                    cases=[CaseResult(id="a", dtype="float32", verdict="fail", max_abs_error=1.5,
                                      diagnoses=[Diagnosis("shape-changed", "m")], curve=[[0, 1.0, 2.0]],
                                      grad={"verdict": "pass"})],
                    identities=[IdentityResult(id="i", dtype="float32", verdict="error", message="x",
                                               diagnoses=[Diagnosis("raised", "y")])],
                    notes=["n"], seed=7, baseline={"fixed": ["b"]}, training={"grad": True, "autocast": None})
    again = Report.from_json(json.loads(json.dumps(report.to_json())))
    assert again.to_json() == report.to_json()
    assert isinstance(again.cases[0].diagnoses[0], Diagnosis) and isinstance(again.identities[0], IdentityResult)


@pytest.mark.parametrize("phase", ["probe", "cases", "identities"])
def test_the_partial_report_names_where_the_run_hung(phase):
    """The supervisor's report from the events: a hang in the probe leaves every case not run; in
    a case, that case is the timeout and the rest not run; after the cases, the black-box checks
    are the error."""
    from conformance.results import CaseResult, Report
    from conformance.supervise import HUNG_IN_PROCESS, _partial_report, _Watch

    header = Report(suite_version="0.5.0", vectors_digest="d", protocol="rope.apply", target="t.py:f",
                    environment={}, profile="standard").to_json()
    # under --compile each case is planned twice, its compiled half flagged
    plan = [[f"rope.apply/g/c{i // 2}", "float32", f"posref conform ... c{i // 2}", bool(i % 2)] for i in range(4)]
    events = [{"ev": "start", "timeout": 1.0, "max_time": 600.0}, {"ev": "guard"},
              {"ev": "header", "report": header}, {"ev": "plan", "cases": plan}]
    if phase != "probe":
        events.append({"ev": "started"})
        done = 1 if phase == "cases" else 4
        events += [{"ev": "case", "result": CaseResult(id=p[0], dtype="float32", verdict="pass", compiled=p[3]).to_json()}
                   for p in plan[:done]]
    events.append({"ev": "call", "limit": 1.0})
    watch = _Watch()
    watch.feed(b"".join(json.dumps(e).encode() + b"\n" for e in events) + b'{"ev": "par')  # a cut line
    report = _partial_report(watch, "call", HUNG_IN_PROCESS)
    verdicts = [(c.verdict, c.diagnoses[0].message[:7] if c.diagnoses else "") for c in report.cases]
    assert [(c.id, c.compiled) for c in report.cases] == [(p[0], p[3]) for p in plan]
    assert HUNG_IN_PROCESS in report.notes
    if phase == "probe":
        assert verdicts == [("error", "not run")] * 4 and "probe" in report.notes[0]
    elif phase == "cases":
        assert verdicts == [("pass", ""), ("error", "the cal"), ("error", "not run"), ("error", "not run")]
        assert "held the interpreter" in report.cases[1].diagnoses[0].message
        assert report.cases[1].repro == plan[1][2]
    else:
        assert verdicts == [("pass", "")] * 4
        assert [(i.id, i.verdict) for i in report.identities] == [("blackbox", "error")]
    assert report.summary()["overall"] == "fail"
