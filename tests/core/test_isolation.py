"""conformance.isolation: every way an adapter can fail becomes an Outcome, and the run goes on."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import textwrap
import threading
import time

import pytest

from conformance.errors import UsageError
from conformance.isolation import Outcome, error_line, make_invoker
from test_qa_isolation import _alive

# One adapter file serves every scenario: the first argument names what to do. Isolated tests
# start a child per crash, so the child is kept cheap (no torch unless a test needs tensors).
TARGETS = textwrap.dedent(
    """
    import ctypes, os, sys, time

    from conformance.errors import Unsupported

    def adapter(action, *args):
        if action == "double":
            return args[0] * 2
        if action == "pid":
            return os.getpid()
        if action == "raise":
            return 1 / 0
        if action == "unsupported":
            raise Unsupported("partial rotary is not supported")
        if action == "exit":
            sys.exit(3)
        if action == "abort":
            os.abort()
        if action == "segfault":
            ctypes.string_at(0)
        if action == "os_exit":
            os._exit(7)
        if action == "hang":
            time.sleep(120)
        if action == "unpicklable":
            return (i for i in range(3))
        if action == "mutate":
            args[0].mul_(2)
            return args[0] + 1
        if action == "grad":
            import torch
            w = torch.ones(args[0].shape[-1], requires_grad=True)
            return args[0] * w, (args[0] * w).sum()
        if action == "print":
            print("chatter from the adapter")
            return "done"
        raise ValueError(action)

    def not_an_adapter_at_import():
        pass
    """
)

# Used only while conformance.loader (H4) does not exist yet: the same "file.py:name" rule.
FALLBACK_LOADER = textwrap.dedent(
    """
    import importlib, importlib.util, pathlib

    def load_target(target):
        where, _, name = target.rpartition(":")
        if where.endswith(".py"):
            path = pathlib.Path(where).resolve()
            spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        return getattr(module, name)
    """
)

HAVE_LOADER = importlib.util.find_spec("conformance.loader") is not None


@pytest.fixture
def target_file(tmp_path, monkeypatch):
    path = tmp_path / "isolation_targets.py"
    path.write_text(TARGETS)
    (tmp_path / "posref_fallback_loader.py").write_text(FALLBACK_LOADER)
    monkeypatch.syspath_prepend(str(tmp_path))  # the child inherits the parent's sys.path
    return path


def _options():
    opts = {"preload": ()}
    if not HAVE_LOADER:
        opts["loader"] = "posref_fallback_loader:load_target"
    return opts


def _load(path):
    spec = importlib.util.spec_from_file_location("isolation_targets_parent", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.adapter


# ---------------------------------------------------------------------------------------------
# in-process


def test_error_line_is_one_line_with_the_type():
    assert error_line(ZeroDivisionError("division by zero")) == "ZeroDivisionError: division by zero"
    assert error_line(KeyError()) == "KeyError"
    assert "\n" not in error_line(ValueError("first\nsecond"))
    assert len(error_line(ValueError("x" * 10_000))) < 500


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_in_process_kinds(target_file, timeout):
    fn = _load(target_file)
    with make_invoker(fn, str(target_file) + ":adapter", isolate=False, timeout=timeout) as inv:
        ok = inv.call("double", 21)
        assert (ok.kind, ok.value, ok.error) == ("ok", 42, "")

        raised = inv.call("raise")
        assert raised.kind == "raised"
        assert raised.error == "ZeroDivisionError: division by zero"
        assert "ZeroDivisionError" in raised.traceback and "adapter" in raised.traceback

        unsupported = inv.call("unsupported")
        assert unsupported.kind == "unsupported"
        assert "partial rotary is not supported" in unsupported.error

        exited = inv.call("exit")
        assert exited.kind == "raised" and exited.error == "SystemExit: 3"

        assert inv.call("double", 1).value == 2  # still usable after failures


def test_in_process_keyboard_interrupt_from_the_adapter_is_a_verdict():
    # Issue 9: an adapter that raises KeyboardInterrupt itself used to abort the whole run.
    def interrupted():
        raise KeyboardInterrupt("from the adapter")

    for timeout in (None, 5.0):
        out = make_invoker(interrupted, None, isolate=False, timeout=timeout).call()
        assert out.kind == "raised" and out.error == "KeyboardInterrupt: from the adapter"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_in_process_real_ctrl_c_stops_the_run():
    def slow():
        time.sleep(5)

    main = threading.main_thread().ident
    for timeout in (None, 10.0):
        inv = make_invoker(slow, None, isolate=False, timeout=timeout)
        timer = threading.Timer(0.3, signal.pthread_kill, args=(main, signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            inv.call()
        timer.join()


def test_in_process_timeout_reports_and_goes_on():
    release = threading.Event()

    def slow(x):
        if x == "hang":
            release.wait(30)
        return x

    inv = make_invoker(slow, None, isolate=False, timeout=0.3)
    t0 = time.monotonic()
    out = inv.call("hang")
    assert out.kind == "timeout"
    assert time.monotonic() - t0 < 5
    assert "0.3 s" in out.error and "--isolate" in out.error
    assert inv.call("fine").value == "fine"
    release.set()


def test_bad_timeout_is_a_value_error():
    with pytest.raises(ValueError, match="timeout"):
        make_invoker(lambda: 1, None, isolate=False, timeout=0)
    with pytest.raises(ValueError, match="timeout"):
        make_invoker(lambda: 1, None, isolate=False, timeout=float("nan"))


# ---------------------------------------------------------------------------------------------
# isolated


def test_isolated_exceptions_and_unsupported(target_file):
    target = f"{target_file}:adapter"
    with make_invoker(None, target, isolate=True, timeout=30, **_options()) as inv:
        ok = inv.call("double", 21)
        assert ok.kind == "ok" and ok.value == 42
        child = ok_pid = inv.call("pid").value
        assert ok_pid != os.getpid()

        raised = inv.call("raise")
        assert raised.kind == "raised"
        assert raised.error == "ZeroDivisionError: division by zero"
        assert "isolation_targets.py" in raised.traceback

        unsupported = inv.call("unsupported")
        assert unsupported.kind == "unsupported"
        assert "partial rotary is not supported" in unsupported.error

        exited = inv.call("exit")
        assert exited.kind == "raised" and exited.error == "SystemExit: 3"

        # exceptions do not cost a restart
        assert inv.call("pid").value == child
    assert not _alive(child)


@pytest.mark.parametrize(
    "action, expect",
    [
        ("abort", f"SIGABRT (signal {int(signal.SIGABRT)})"),
        ("segfault", f"SIGSEGV (signal {int(signal.SIGSEGV)})"),
        ("os_exit", "exited with code 7"),
    ],
)
def test_isolated_crash_then_fresh_child(target_file, action, expect):
    with make_invoker(None, f"{target_file}:adapter", isolate=True, timeout=30, **_options()) as inv:
        first = inv.call("pid").value
        out = inv.call(action)
        assert out.kind == "crashed"
        assert expect in out.error
        assert "\n" not in out.error
        if action == "segfault":
            assert "Segmentation fault" in out.traceback  # faulthandler's dump comes back
        assert not _alive(first)
        again = inv.call("double", 5)
        assert again.kind == "ok" and again.value == 10
        assert inv.call("pid").value != first


def test_isolated_timeout_kills_and_recovers(target_file):
    with make_invoker(None, f"{target_file}:adapter", isolate=True, timeout=1.0, **_options()) as inv:
        first = inv.call("pid").value
        t0 = time.monotonic()
        out = inv.call("hang")
        assert out.kind == "timeout"
        assert time.monotonic() - t0 < 10
        assert "1 s" in out.error and "killed" in out.error
        assert not _alive(first)
        assert inv.call("double", 2).value == 4


def test_isolated_unpicklable_result_is_reported(target_file):
    # Issue 24: a value that cannot be sent back is the adapter's answer (an inert Opaque naming
    # its type), graded as what it is, never taken for a raise.
    from conformance import wire

    with make_invoker(None, f"{target_file}:adapter", isolate=True, timeout=30, **_options()) as inv:
        pid = inv.call("pid").value
        out = inv.call("unpicklable")
        assert out.kind == "ok" and type(out.value) is wire.Opaque
        assert out.value.type_name == "generator" and "generator object" in repr(out.value)
        assert out.value.raised is None
        assert inv.call("pid").value == pid  # the child survived


def test_isolated_tensors_round_trip_and_mutation_copied_back(target_file):
    torch = pytest.importorskip("torch")
    opts = _options()
    opts["preload"] = ("torch",)
    with make_invoker(None, f"{target_file}:adapter", isolate=True, timeout=60, **opts) as inv:
        x = torch.arange(12, dtype=torch.bfloat16).reshape(3, 4)
        out = inv.call("double", x)
        assert out.kind == "ok"
        assert out.value.dtype == torch.bfloat16 and torch.equal(out.value, x * 2)
        assert torch.equal(x, torch.arange(12, dtype=torch.bfloat16).reshape(3, 4))

        # a non-contiguous view crosses as a non-contiguous tensor
        view = torch.arange(24.0).reshape(4, 6)[:, ::2]
        echoed = inv.call("double", view).value
        assert torch.equal(echoed, view * 2)

        # in-place modification in the child shows up in the caller's tensor, as in-process
        y = torch.ones(2, 3)
        mut = inv.call("mutate", y)
        assert mut.kind == "ok"
        assert torch.equal(y, torch.full((2, 3), 2.0))
        assert torch.equal(mut.value, torch.full((2, 3), 3.0))

        # results that carry an autograd graph come back as plain values
        graded = inv.call("grad", torch.ones(2, 3))
        assert graded.kind == "ok" and torch.equal(graded.value[0], torch.ones(2, 3))
        assert float(graded.value[1]) == 6.0

        # a crash costs a fork of the loaded server, not a new interpreter importing torch
        assert inv.call("abort").kind == "crashed"
        t0 = time.monotonic()
        again = inv.call("double", x)
        assert again.kind == "ok" and torch.equal(again.value, x * 2)
        assert time.monotonic() - t0 < 1.5


def test_isolated_adapter_output_does_not_break_the_protocol(target_file, capfd):
    with make_invoker(None, f"{target_file}:adapter", isolate=True, timeout=30, **_options()) as inv:
        assert inv.call("print").value == "done"
    captured = capfd.readouterr()
    # Issue 24: the adapter's stdout goes to our stderr, so `--json -` on stdout stays parseable.
    assert "chatter from the adapter" in captured.err
    assert "chatter" not in captured.out


def test_isolated_close_reaps_the_child(target_file):
    inv = make_invoker(None, f"{target_file}:adapter", isolate=True, timeout=30, **_options())
    pid = inv.call("pid").value
    assert _alive(pid)
    inv.close()
    assert not _alive(pid)
    inv.close()  # idempotent


def test_isolated_target_that_cannot_load_is_a_usage_error(target_file, tmp_path):
    inv = make_invoker(None, f"{target_file}:no_such_name", isolate=True, timeout=30, **_options())
    with pytest.raises(UsageError, match="no_such_name"):
        inv.call("double", 1)
    with pytest.raises(UsageError):  # remembered: no second start-up attempt
        inv.call("double", 1)
    inv.close()

    broken = tmp_path / "broken_target.py"
    broken.write_text("raise RuntimeError('no GPU here')\n")
    with make_invoker(None, f"{broken}:fn", isolate=True, timeout=30, **_options()) as inv:
        with pytest.raises(UsageError, match="no GPU here") as info:
            inv.start()
        assert "\n" not in str(info.value)


def test_isolated_function_without_target_must_be_importable():
    with pytest.raises(UsageError, match="importable target"):
        make_invoker(lambda x: x, None, isolate=True, timeout=None)


def test_isolated_function_object_by_reference(tmp_path):
    # os.getpid pickles by reference, so it can run in the child without a TARGET string
    opts = _options()
    opts.pop("loader", None)
    with make_invoker(os.getpid, None, isolate=True, timeout=30, **opts) as inv:
        out = inv.call()
        assert out.kind == "ok" and out.value != os.getpid()


def test_outcome_fields():
    out = Outcome("ok", 1)
    assert out.ok and out.error == "" and out.traceback == ""
    assert not Outcome("raised", None, "E: x").ok


def test_child_exits_when_parent_dies(target_file, tmp_path):
    # A parent that starts a child and is then SIGKILLed must not leave the child behind.
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            sys.path.insert(0, {str(tmp_path)!r})
            from conformance.isolation import make_invoker
            inv = make_invoker(None, {str(target_file) + ':adapter'!r}, isolate=True,
                               timeout=None, **{_options()!r})
            print(inv.call("pid").value, flush=True)
            time.sleep(60)
            """
        )
    )
    import subprocess

    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)


def test_isolated_without_fork_still_recovers(target_file, monkeypatch):
    # POSREF_ISOLATE_NO_FORK (also chosen automatically when the target initialised CUDA while
    # loading): the server runs the calls itself and is replaced after a crash or a timeout.
    monkeypatch.setenv("POSREF_ISOLATE_NO_FORK", "1")
    with make_invoker(None, f"{target_file}:adapter", isolate=True, timeout=1.0, **_options()) as inv:
        first = inv.call("pid").value
        assert inv.pid == first  # no separate worker: the server process answers
        assert inv.call("raise").kind == "raised"
        assert inv.call("pid").value == first
        out = inv.call("segfault")
        assert out.kind == "crashed" and "SIGSEGV" in out.error
        second = inv.call("pid").value
        assert second != first and not _alive(first)
        assert inv.call("hang").kind == "timeout"
        assert not _alive(second)
        assert inv.call("double", 4).value == 8


def test_mutation_check_is_bitwise():
    torch = pytest.importorskip("torch")
    from conformance.core.tensors import same_bits as _same_tensor

    a = torch.tensor([1.0, float("nan"), 0.0])
    assert _same_tensor(a, a.clone())  # NaN in the input is not a modification
    assert not _same_tensor(a, torch.tensor([1.0, float("nan"), -0.0]))  # -0.0 was written
    assert not _same_tensor(a, torch.tensor([1.0, 2.0, 0.0]))
    view = torch.randn(4, 6)[:, ::2]
    assert _same_tensor(view.bfloat16(), view.bfloat16().clone())
    assert not _same_tensor(a, a.double())


def test_ctrl_c_while_waiting_kills_the_child_and_propagates(target_file):
    inv = make_invoker(None, f"{target_file}:adapter", isolate=True, timeout=None, **_options())
    try:
        child = inv.call("pid").value
        main = threading.main_thread().ident
        timer = threading.Timer(0.5, signal.pthread_kill, args=(main, signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            inv.call("hang")
        timer.join()
        assert not _alive(child)
        assert inv.call("double", 3).value == 6  # usable again afterwards
    finally:
        inv.close()


def test_in_process_adapter_cannot_break_the_runners_process_state(tmp_path):
    """Issue 9: an adapter that lowers the recursion limit, replaces sys.stdout or closes fd 1
    must still get a verdict, and the run must still be able to print and write reports."""
    import io

    def hostile():
        sys.setrecursionlimit(60)
        sys.stdout = io.StringIO()
        os.close(1)
        raise RuntimeError("broke things")

    limit, stdout = sys.getrecursionlimit(), sys.stdout
    before = os.fstat(1)
    inv = make_invoker(hostile, None, isolate=False, timeout=None)
    try:
        out = inv.call()
    finally:
        inv.close()
    assert out.kind == "raised" and "broke things" in out.error
    assert sys.getrecursionlimit() == limit and sys.stdout is stdout
    after = os.fstat(1)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
