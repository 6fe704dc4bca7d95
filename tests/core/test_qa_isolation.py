"""QA regressions for conformance.isolation: nothing an adapter starts outlives the run."""

from __future__ import annotations

import os
import textwrap
import time

import pytest

from conformance.isolation import make_invoker

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="--isolate is POSIX only")

# The adapter starts a long-lived subprocess (as a model loader or a compile cache daemon might)
# and hands back its pid; "crash" does the same and then aborts, "hang" then sleeps.
TARGET = textwrap.dedent(
    """
    import os, subprocess, sys, time

    def adapter(action):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        if action == "crash":
            with open(os.environ["QA_PID_FILE"], "w") as f:
                f.write(str(child.pid))
            os.abort()
        if action == "hang":
            with open(os.environ["QA_PID_FILE"], "w") as f:
                f.write(str(child.pid))
            time.sleep(300)
        return child.pid
    """
)


def _alive(pid: int) -> bool:
    """Whether pid runs: a zombie (Z) or a dead task (X) still answers kill(pid, 0)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.fixture
def target(tmp_path, monkeypatch):
    path = tmp_path / "qa_spawning_adapter.py"
    path.write_text(TARGET)
    monkeypatch.setenv("QA_PID_FILE", str(tmp_path / "child.pid"))
    return f"{path}:adapter"


def _kill(pid):
    try:
        os.kill(pid, 9)
    except OSError:
        pass


def test_subprocess_of_the_adapter_is_killed_on_normal_close(target):
    # Bug: close() asked the server to exit, reaped it, and then skipped the killpg because the
    # server was already gone, so the adapter's own subprocesses were left running (orphans).
    inv = make_invoker(None, target, isolate=True, timeout=30, preload=())
    out = inv.call("ok")
    assert out.kind == "ok", out
    pid = out.value
    try:
        assert _alive(pid)
        inv.close()
        assert _gone(pid), "the adapter's subprocess outlived the isolated run"
    finally:
        _kill(pid)


@pytest.mark.parametrize("action, kind", [("crash", "crashed"), ("hang", "timeout")])
def test_subprocess_of_a_crashed_or_hung_call_is_killed_on_close(target, tmp_path, action, kind):
    inv = make_invoker(None, target, isolate=True, timeout=3, preload=())
    try:
        assert inv.call(action).kind == kind
        pid = int((tmp_path / "child.pid").read_text())
        assert inv.call("ok").kind == "ok"  # a fresh worker serves the next call
    finally:
        inv.close()
    try:
        assert _gone(pid), f"the subprocess started before the {action} outlived the run"
    finally:
        _kill(pid)


def test_subprocess_is_killed_without_fork_too(target, monkeypatch):
    monkeypatch.setenv("POSREF_ISOLATE_NO_FORK", "1")
    inv = make_invoker(None, target, isolate=True, timeout=30, preload=())
    pid = inv.call("ok").value
    try:
        inv.close()
        assert _gone(pid)
    finally:
        _kill(pid)


def test_death_while_loading_is_not_described_as_during_the_call(tmp_path):
    from conformance.errors import UsageError

    path = tmp_path / "qa_exits_on_import.py"
    path.write_text("import os\nos._exit(0)\n")
    inv = make_invoker(None, f"{path}:fn", isolate=True, timeout=30, preload=())
    try:
        with pytest.raises(UsageError) as info:
            inv.start()
    finally:
        inv.close()
    assert str(info.value).endswith("while loading " + f"{path}:fn: the isolated process exited with code 0")
