"""Issue 24, --isolate: an adapter that attacks the isolated invoker's sockets, its crash log or
its process tree gets a verdict in bounded time, and nothing it starts outlives the run.

Each test re-enacts one probe of the issue. A call that used to hang runs in a daemon thread
joined with a limit (``_call_within``), so a regression fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest

from conformance.errors import UsageError
from conformance.isolation import IsolatedInvoker, make_invoker
from support import ROOT
from test_qa_isolation import _alive, _gone, _kill

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="--isolate is POSIX only")
LINUX = sys.platform.startswith("linux")

# One hostile adapter file; the first argument names the attack. "Sockets" are found as the
# adapter would find them: every descriptor that is a socket (in the worker, only the data one).
HOSTILE = textwrap.dedent(
    """
    import os, re, signal, stat, struct, subprocess, sys, tempfile, time

    def _sockets():
        out = []
        for fd in range(3, 256):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    out.append(fd)
            except OSError:
                pass
        return out

    def _note(text):
        with open(os.environ["HOSTILE_NOTES"], "a") as f:
            f.write(f"{text}\\n")

    def _write_all(data):
        for fd in _sockets():
            os.write(fd, data)

    # Descriptors kept from import time: in the server, the control socket is among them.
    KEPT = [os.dup(fd) for fd in _sockets()] if os.environ.get("HOSTILE_KEEP") else []

    def adapter(action, *args):
        if action == "pid":
            return os.getpid()
        if action == "pids":
            return os.getpid(), os.getppid()
        if action == "double":
            return args[0] * 2
        if action == "partial_frame":
            _write_all(struct.pack("!i", 100) + b"abc")
            time.sleep(300)
        if action == "huge_frame":
            _write_all(struct.pack("!i", -1) + struct.pack("!Q", 1 << 40))
            time.sleep(300)
        if action == "big":
            return "x" * args[0]
        if action == "stop_self":
            os.kill(os.getpid(), signal.SIGSTOP)
            return "resumed"
        if action == "stop_after_reply":
            # Reply, then stop: the runner's next (large) call finds nobody reading.
            import threading
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGSTOP)).start()
            return "replied"
        if action == "stop_server":
            os.kill(os.getppid(), signal.SIGSTOP)
            time.sleep(300)
        if action == "garbage_on_control":
            for fd in KEPT:
                os.write(fd, b"\\x00\\x00\\x00\\x05hello")
            os.abort()
        if action == "crash_log_fifo" or action == "crash_log_zero":
            for name in os.listdir(tempfile.gettempdir()):
                if name.startswith("posref-crash-"):
                    path = os.path.join(tempfile.gettempdir(), name)
                    os.unlink(path)
                    if action == "crash_log_fifo":
                        os.mkfifo(path)
                    else:
                        os.symlink("/dev/zero", path)
            import ctypes
            ctypes.string_at(0)
        if action == "spin":
            sum(range(1 << 62))  # holds the GIL: no Python thread of this process runs
        if action in ("helpers", "helpers_crash", "helpers_hang"):
            own = subprocess.Popen(["sleep", "300"], start_new_session=True)
            _note(own.pid)
            child = os.fork()
            if child == 0:  # double fork: the grandchild is orphaned in a session of its own
                os.setsid()
                grandchild = os.fork()
                if grandchild == 0:
                    os.execvp("sleep", ["sleep", "301"])
                _note(grandchild)
                os._exit(0)
            os.waitpid(child, 0)
            if action == "helpers_crash":
                os.abort()
            if action == "helpers_hang":
                time.sleep(300)
            return "started"
        if action == "walker":
            # A process that keeps moving: it forks and exits, again and again, in a session of
            # its own (or a new one each time), so that a pid read from /proc is gone by the time
            # it is signalled. Each generation appends a byte to the heartbeat file args[0].
            code = ("import os, sys, time\\n"
                    "for _ in range(20000):\\n"
                    "    with open(sys.argv[1], 'ab') as f: f.write(b'.')\\n"
                    "    time.sleep(0.005)\\n"
                    "    if os.fork():\\n"
                    "        os._exit(0)\\n"
                    "    if sys.argv[2] == 'every': os.setsid()\\n")
            subprocess.Popen([sys.executable, "-c", code, args[0], args[1]], start_new_session=True)
            return "started"
        if action == "print":
            print("chatter from the adapter", flush=True)
            return 1
        raise ValueError(action)
    """
)


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    (tmp_path / "hostile_iso.py").write_text(HOSTILE)
    notes = tmp_path / "notes.txt"
    notes.write_text("")
    monkeypatch.setenv("HOSTILE_NOTES", str(notes))
    # Our own temporary directory, for us and the child: the crash-log attacks touch only it.
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return f"{tmp_path / 'hostile_iso.py'}:adapter"


def _noted(tmp_path) -> list:
    return [int(line) for line in (tmp_path / "notes.txt").read_text().split()]


def _call_within(inv, *args, limit: float):
    """inv.call(*args), failing the test (instead of hanging it) when it takes over ``limit`` s."""
    box = {}

    def run():
        try:
            box["out"] = inv.call(*args)
        except BaseException as exc:  # noqa: BLE001 - reported below
            box["exc"] = exc

    t = threading.Thread(target=run, daemon=True)
    t0 = time.monotonic()
    t.start()
    t.join(limit)
    assert not t.is_alive(), f"the call {args[0]!r} did not end within {limit} s"
    if "exc" in box:
        raise box["exc"]
    return box["out"], time.monotonic() - t0


# ---- 1 and 2: a reply frame cut short, or announcing 2^40 bytes


def test_a_partial_reply_frame_is_a_timeout_not_a_hang(hostile):
    with make_invoker(None, hostile, isolate=True, timeout=2, preload=()) as inv:
        first = inv.call("pid").value
        out, took = _call_within(inv, "partial_frame", limit=30)
        assert out.kind == "timeout" and "part of its reply" in out.error, out
        assert took < 15
        assert _gone(first)
        assert inv.call("double", 4).value == 8  # a fresh worker serves the next call


def test_a_frame_announcing_a_terabyte_is_refused(hostile):
    with make_invoker(None, hostile, isolate=True, timeout=30, preload=()) as inv:
        first = inv.call("pid").value
        out, _ = _call_within(inv, "huge_frame", limit=30)
        assert out.kind == "raised" and "more than the limit" in out.error, out
        assert str(1 << 40) in out.error
        assert _gone(first)
        assert inv.call("double", 4).value == 8


def test_a_reply_over_the_documented_limit_is_an_error_and_the_worker_is_replaced(hostile):
    with IsolatedInvoker(hostile, timeout=30, preload=(), max_reply_bytes=100_000) as inv:
        first = inv.call("pid").value
        assert inv.call("big", 1000).value == "x" * 1000
        out = inv.call("big", 200_000)
        assert out.kind == "raised" and "more than the limit of 100000" in out.error
        assert _gone(first)
        assert inv.call("big", 10).value == "x" * 10


def test_a_worker_that_stops_reading_costs_the_timeout_when_sending(hostile):
    with make_invoker(None, hostile, isolate=True, timeout=2, preload=()) as inv:
        assert inv.call("stop_after_reply").value == "replied"
        time.sleep(0.6)
        # 16 MB of arguments fill any socket buffer: sending blocked forever before.
        out, _ = _call_within(inv, "double", "y" * 16_000_000, limit=30)
        assert out.kind == "timeout", out
        assert inv.call("double", 1).value == 2


# ---- 9: SIGSTOP


def test_a_worker_that_stops_itself_times_out_and_is_killed(hostile):
    with make_invoker(None, hostile, isolate=True, timeout=1.5, preload=()) as inv:
        first = inv.call("pid").value
        out, took = _call_within(inv, "stop_self", limit=30)
        assert out.kind == "timeout" and "killed" in out.error
        assert took < 10
        assert _gone(first)  # SIGKILL ends a stopped process
        assert inv.call("double", 3).value == 6


def test_a_worker_that_stops_the_server_times_out_and_both_are_replaced(hostile):
    with make_invoker(None, hostile, isolate=True, timeout=1.5, preload=()) as inv:
        worker, server = inv.call("pids").value
        out, _ = _call_within(inv, "stop_server", limit=40)
        assert out.kind == "timeout"
        assert _gone(worker) and _gone(server)
        assert inv.call("double", 3).value == 6


# ---- 4: garbage on the control socket


GARBAGE_AT_IMPORT = {
    "frame": 'os.write(fd, b"\\x00\\x00\\x00\\x05hello")',
    "header": 'os.write(fd, b"\\x00\\x00")',
    "huge": 'os.write(fd, b"\\xff\\xff\\xff\\xff" + (1 << 40).to_bytes(8, "big"))',
    "negative": 'os.write(fd, b"\\xff\\xff\\xff\\xf0")',
}


_NOISE = random.Random(24)
for _n in (1, 3, 7, 64):
    GARBAGE_AT_IMPORT[f"random-{_n}"] = f"os.write(fd, {bytes(_NOISE.randrange(256) for _ in range(_n))!r})"


def _garbage_target(tmp_path, kind):
    path = tmp_path / f"garbage_{kind}.py"
    path.write_text(textwrap.dedent(f"""
        import os, stat
        for fd in range(3, 256):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    {GARBAGE_AT_IMPORT[kind]}
            except OSError:
                pass

        def fn(x, positions, spec):
            return x
        """))
    return f"{path}:fn"


@pytest.mark.parametrize("kind", sorted(GARBAGE_AT_IMPORT))
def test_garbage_on_the_control_socket_at_import_is_one_line(tmp_path, kind):
    inv = make_invoker(None, _garbage_target(tmp_path, kind), isolate=True, timeout=30, preload=(),
                       startup_timeout=10)
    try:
        with pytest.raises(UsageError) as info:
            inv.start()
    finally:
        inv.close()
    assert "\n" not in str(info.value)
    assert "isolated process" in str(info.value)


def test_garbage_on_the_control_socket_at_import_from_the_command_line(tmp_path):
    target = _garbage_target(tmp_path, "frame")
    run = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "conform", target, "--protocol", "rope.apply",
         "--isolate", "--cases", "rope.apply/llama2-d128/prefill-8", "--no-fresh"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_garbage_on_the_control_socket_during_a_call_is_a_crash_verdict(hostile, monkeypatch):
    monkeypatch.setenv("HOSTILE_KEEP", "1")
    with make_invoker(None, hostile, isolate=True, timeout=10, preload=()) as inv:
        out, _ = _call_within(inv, "garbage_on_control", limit=60)
        assert out.kind == "crashed", out
        assert inv.call("double", 5).value == 10  # a fresh server and worker


# ---- 3: devices a reply may claim (the wire decoder itself: tests/core/test_wire.py)


DEVICE_REPLY = textwrap.dedent(
    """
    from conformance import wire

    CLAIM = {}
    _encode_tensor = wire._enc_tensor

    def _claiming(torch, t, blobs):  # the worker's encoder, rewritten by the adapter itself
        node = _encode_tensor(torch, t, blobs)
        node["T"]["device"] = CLAIM["device"]
        return node

    wire._enc_tensor = _claiming

    def fn(device):
        import torch
        CLAIM["device"] = device
        return torch.ones(2)
    """
)


def test_a_reply_on_a_device_the_run_cannot_hold_is_an_error_verdict(tmp_path):
    torch = pytest.importorskip("torch")
    (tmp_path / "device_reply.py").write_text(DEVICE_REPLY)
    devices = ["xpu", "mtia", "hpu", "privateuseone", "meta"]
    if not torch.cuda.is_available():
        devices.append("cuda")
    with make_invoker(None, f"{tmp_path / 'device_reply.py'}:fn", isolate=True, timeout=30,
                      preload=("torch",)) as inv:
        for device in devices:
            out, _ = _call_within(inv, device, limit=60)
            assert out.kind == "raised" and "could not be received" in out.error, (device, out)
            assert "device" in out.error


# ---- 5: the crash log


@pytest.mark.parametrize("attack", ["crash_log_fifo", "crash_log_zero"])
def test_a_crash_log_replaced_by_a_fifo_or_dev_zero_does_not_hang_the_runner(hostile, attack):
    with make_invoker(None, hostile, isolate=True, timeout=30, preload=()) as inv:
        out, took = _call_within(inv, attack, limit=30)
        assert out.kind == "crashed" and "SIGSEGV" in out.error, out
        assert "Segmentation fault" in out.traceback  # the dump still comes back
        assert len(out.traceback) < 1 << 20
        assert inv.call("double", 2).value == 4


def test_no_crash_log_is_ever_left_in_the_temporary_directory(hostile, tmp_path):
    with make_invoker(None, hostile, isolate=True, timeout=30, preload=()) as inv:
        inv.call("pid")
        assert not list(tmp_path.glob("posref-crash-*"))
    script = tmp_path / "killed_parent.py"
    script.write_text(textwrap.dedent(f"""
        import time
        from conformance.isolation import make_invoker
        inv = make_invoker(None, {hostile!r}, isolate=True, timeout=None, preload=())
        print(inv.call("pid").value, flush=True)
        time.sleep(60)
        """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(parent.stdout.readline())
    finally:
        parent.kill()  # a harness's timeout: no finalizer runs
        parent.wait()
    assert _gone(worker, 10)
    assert not list(tmp_path.glob("posref-crash-*"))


# ---- 6: the grading process dies


@pytest.mark.skipif(not LINUX, reason="the parent-death signal is Linux's prctl")
@pytest.mark.parametrize("no_fork", [False, True])
def test_server_and_worker_end_with_the_grading_process_even_while_holding_the_gil(hostile, tmp_path,
                                                                                   monkeypatch, no_fork):
    # A worker stuck in C code holding the GIL never runs its parent-watching thread; without
    # fork the server itself is that worker. Before the parent-death signal it ran on at 100% CPU.
    if no_fork:
        monkeypatch.setenv("POSREF_ISOLATE_NO_FORK", "1")
    script = tmp_path / "grading.py"
    script.write_text(textwrap.dedent(f"""
        from conformance.isolation import make_invoker
        inv = make_invoker(None, {hostile!r}, isolate=True, timeout=None, preload=())
        print(*inv.call("pids").value, flush=True)
        inv.call("spin")
        """))
    grading = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        worker, server = map(int, grading.stdout.readline().split())
        time.sleep(1.0)  # the worker is spinning now
    finally:
        grading.kill()
        grading.wait()
    try:
        assert _gone(worker, 5), "the isolated worker outlived the grading process"
        assert _gone(server, 5), "the isolated server outlived the grading process"
    finally:
        _kill(worker)
        _kill(server)


# ---- 7: helpers in their own session (a subprocess with start_new_session, a double fork)


def _all_gone(pids, timeout=5.0):
    try:
        return [pid for pid in pids if not _gone(pid, timeout)]
    finally:
        for pid in pids:
            _kill(pid)


@pytest.mark.skipif(not LINUX, reason="descendants are found through /proc")
@pytest.mark.parametrize("no_fork", [False, True])
def test_helpers_in_their_own_session_do_not_outlive_the_run(hostile, tmp_path, monkeypatch, no_fork):
    if no_fork:
        monkeypatch.setenv("POSREF_ISOLATE_NO_FORK", "1")
    inv = make_invoker(None, hostile, isolate=True, timeout=30, preload=())
    try:
        assert inv.call("helpers").value == "started"
        helpers = _noted(tmp_path)
        assert len(helpers) == 2 and all(_alive(pid) for pid in helpers)
    finally:
        inv.close()
    assert not _all_gone(helpers), "a helper outlived the isolated run"


@pytest.mark.skipif(not LINUX, reason="descendants are found through /proc")
@pytest.mark.parametrize("action, kind", [("helpers_crash", "crashed"), ("helpers_hang", "timeout")])
def test_helpers_of_a_crashed_or_hung_worker_are_killed_with_it(hostile, tmp_path, action, kind):
    with make_invoker(None, hostile, isolate=True, timeout=3, preload=()) as inv:
        assert inv.call(action).kind == kind
        helpers = _noted(tmp_path)
        assert len(helpers) == 2
        # killed when the worker is replaced, before the run goes on
        assert not _all_gone(helpers), "a helper outlived its crashed or hung worker"
        assert inv.call("double", 1).value == 2


def _beating(heartbeat, seconds: float = 0.5) -> bool:
    """Whether the walker still appends to its heartbeat file."""
    before = heartbeat.stat().st_size
    time.sleep(seconds)
    return heartbeat.stat().st_size != before


@pytest.mark.skipif(not LINUX, reason="descendants are found through /proc")
@pytest.mark.parametrize("sessions", ["once", "every"])
def test_a_helper_that_keeps_forking_away_does_not_outlive_the_run(hostile, tmp_path, sessions):
    heartbeat = tmp_path / "heartbeat"
    heartbeat.write_bytes(b"")
    inv = make_invoker(None, hostile, isolate=True, timeout=30, preload=())
    try:
        assert inv.call("walker", str(heartbeat), sessions).value == "started"
        time.sleep(0.3)
        assert _beating(heartbeat), "the walker did not start"
    finally:
        inv.close()
    time.sleep(0.2)
    # 20000 generations of 5 ms at most: a walker that escaped stops within two minutes anyway
    assert not _beating(heartbeat, 1.0), "a process that kept forking outlived the run"


# ---- 8: the adapter's stdout under --json -


def test_a_printing_adapter_leaves_json_on_stdout_parseable(tmp_path):
    target = tmp_path / "printing.py"
    target.write_text(textwrap.dedent("""
        def fn(x, positions, spec):
            print("chatter from the adapter", flush=True)
            print("more chatter")
            return x
        """))
    run = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "conform", f"{target}:fn", "--protocol", "rope.apply",
         "--isolate", "--cases", "rope.apply/llama2-d128/prefill-8", "--no-fresh", "--json", "-"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert run.returncode == 1, run.stderr  # x unchanged is not RoPE
    doc = json.loads(run.stdout)
    assert doc["cases"]
    assert "chatter from the adapter" in run.stderr
