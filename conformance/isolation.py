"""Fault isolation: call a user's adapter so that nothing it does can stop the run.

Every call returns an :class:`Outcome` instead of raising:

    ok           the adapter returned; ``value`` is what it returned
    raised       it raised an exception (SystemExit included); ``error`` is one line
    unsupported  it raised ``conformance.Unsupported``: the runner skips the case
    crashed      the isolated process died during the call (os.abort, a segfault in an
                 extension, os._exit); ``error`` names the signal or exit code
    timeout      it did not return within ``timeout`` seconds

Two invokers share that contract (``make_invoker`` picks one):

* In-process (``isolate=False``): the adapter runs in this interpreter. With a timeout the call
  runs in a daemon worker thread; Python cannot kill a thread, so a call that times out keeps
  running in the background (and may keep a core busy) while the run goes on. Hard crashes take
  the whole run down. Use ``--isolate`` for implementations that may hang or crash.
* Isolated (``isolate=True``, POSIX): a server process (a fresh interpreter started with
  ``subprocess`` over private sockets; its stdout goes to our stderr, so that what the adapter
  prints cannot corrupt a report on our stdout (``--json -``)) imports torch and loads
  TARGET itself through ``conformance.loader.load_target`` once, then forks a worker that serves
  the calls. Arguments go there as pickles; everything that comes back (results, and the server's
  own messages, since the adapter's code runs there) is plain data in conformance/wire.py's
  format, so nothing the adapter sends can run code in the runner: results are tensors (dtype,
  shape, device and values), arrays, numbers, strings and containers of them. An adapter that modifies an input tensor in place has the
  modification copied back into the caller's tensor, so the runner's "inputs not mutated" check
  sees it as it would in-process: tensor arguments, and tensors nested in the arguments' dicts,
  lists, tuples and dataclass fields (attention's ``weights["wq"]``, ``spec.past_keys``), each
  named by its path from the argument list (``_tensor_paths``). After a crash the server reports how the worker died and forks
  a fresh one; after a timeout it kills the worker first. A restart therefore costs a fork (tens
  of milliseconds), not the seconds of a new interpreter importing torch, and the start-up is
  never counted against the timeout. Everything runs in its own process group: ``close()`` (also
  run by a finalizer at interpreter exit) kills and reaps it, and the server and the worker exit
  by themselves when their parent dies, even while the adapter is stuck in a loop or stopped
  (Linux: a parent-death SIGKILL; elsewhere they poll their parent). What the adapter starts in
  a session of its own (a daemon, a double fork) is killed too, after a crash or a timeout and at
  the end (Linux: the server is a child subreaper and kills every descendant it finds in /proc,
  stopping them first; elsewhere the process group is what is killed). The server
  never runs the adapter itself, so forked workers can initialise CUDA; where loading TARGET has
  already initialised CUDA (or POSREF_ISOLATE_NO_FORK=1 is set, for targets whose import starts
  threads), the server serves the calls without forking and a restart starts a new interpreter.

Nothing the isolated processes write can stall or exhaust the runner: replies and control
messages are read with the call's deadline and a size limit (``MAX_REPLY_BYTES``; a longer
announced reply is an error verdict and the worker is replaced), arguments are sent with the same
deadline, anything malformed is a verdict (or, while starting, one ``IsolationError`` line), and
faulthandler's crash dump goes to an unlinked temporary file shared by descriptor, read back with
a bounded ``pread``: no path to replace or to leave behind.

A real Ctrl-C (SIGINT) stops the run in both modes. A KeyboardInterrupt that the adapter raises
itself is a verdict like any other exception ("raised"): in-process, posref's own SIGINT handler
(held for each call, and by the runner for the whole run) raises :class:`RealInterrupt` for the
real ones, so that what the adapter's returned objects raise later, while the runner grades them
(SystemExit, KeyboardInterrupt, GeneratorExit), is a verdict too. In-process, the adapter's
standard output goes to standard error during each call (``_ProcessState``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import selectors
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback as _traceback
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from conformance import processes, wire
from conformance.errors import Unsupported, UsageError

KINDS = ("ok", "raised", "unsupported", "crashed", "timeout")

DEFAULT_LOADER = "conformance.loader:load_target"
# Set to 1 to make the isolated server run the calls itself instead of forking workers (for a
# target whose import starts threads or initialises CUDA; a restart then re-imports everything).
NO_FORK_ENV = "POSREF_ISOLATE_NO_FORK"
_MAX_ERROR_CHARS = 400
# One call may take at most a day: longer waits overflow the platform's timers (threading's
# and poll's), and no grading needs them.
MAX_TIMEOUT = 86400.0
# The largest reply a worker may send (one framed message: the result and the mutated inputs).
# Real outputs are far smaller (the largest graded case returns a few MiB); a bigger announced
# length is refused before anything is read, as an error verdict for the call, and the worker is
# replaced. IsolatedInvoker(max_reply_bytes=...) changes it.
MAX_REPLY_BYTES = 1 << 30
_MAX_CONTROL_BYTES = 1 << 16  # the server's messages are a few words each
_MAX_CRASH_LOG = 1 << 18  # what is read back of faulthandler's dump after a crash


@dataclass
class Outcome:
    """The result of one call of a user's adapter.

    kind       one of KINDS
    value      the returned object when kind == "ok" (else None)
    error      one line, e.g. "ZeroDivisionError: division by zero" ("" when ok)
    traceback  the formatted traceback (for crashes: faulthandler's dump when there is one)
    where      the user's own frames, plain data (user_traceback): {"file", "line", "frames"}, or
               None (ok, a crash, or no frame outside posref)
    exception  the exception itself, in-process only (never sent across the process boundary):
               what --raise / --pdb re-raise
    """

    kind: str
    value: Any = None
    error: str = ""
    traceback: str = ""
    where: Optional[dict] = None
    exception: Optional[BaseException] = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


class IsolationError(UsageError):
    """The isolated process could not be started or could not load the target (exit code 2)."""


def printable(text: str) -> str:
    """text with every non-printable character escaped (\\x1b, \\x00, a lone surrogate \\udcff):
    a message from user code must not drive the terminal, break XML, or fail to encode as UTF-8
    when a report is written."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def error_line(exc: BaseException) -> str:
    """One line naming the exception: "TypeName: first line of its message" (printable)."""
    try:
        text = str(exc).strip()
    except Exception:  # a broken __str__ must not hide the failure itself
        text = ""
    first = text.splitlines()[0] if text else ""
    if len(first) > _MAX_ERROR_CHARS:
        first = first[: _MAX_ERROR_CHARS - 3] + "..."
    name = type(exc).__name__
    return printable(f"{name}: {first}" if first else name)


# The user's traceback as reports show it: at most this many frames, each line at most this long.
MAX_USER_FRAMES = 6
_MAX_FRAME_CHARS = 300
_MAX_WALKED_FRAMES = 100_000  # a traceback is a finite list; this only bounds the walk's time


def _posref_dirs() -> tuple:
    """The folders of posref's own packages (conformance/, reference/): frames there are not the user's."""
    import reference

    return tuple(os.path.join(os.path.dirname(os.path.abspath(m.__file__)), "")
                 for m in (sys.modules[__name__.split(".")[0]], reference))


def _library_dirs() -> tuple:
    """The interpreter's and installed packages' folders (stdlib, site-packages: torch, numpy)."""
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple(sorted({os.path.join(os.path.abspath(paths[k]), "") for k in
                         ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k)}))


def _is_library(filename: str, libs: tuple) -> bool:
    return (filename.startswith("<") or os.path.abspath(filename).startswith(libs)
            or "site-packages" in filename or "dist-packages" in filename)


def _frame_line(filename: str, lineno, name: str) -> str:
    """'File "adapter.py", line 12, in rope: return q * cos' (printable, capped)."""
    import linecache

    code = linecache.getline(filename, lineno or 0).strip() if not filename.startswith("<") else ""
    text = f'File "{filename}", line {lineno}, in {name}' + (f": {code}" if code else "")
    if len(text) > _MAX_FRAME_CHARS:
        text = text[: _MAX_FRAME_CHARS - 3] + "..."
    return printable(text)


def user_traceback(exc: BaseException) -> Optional[dict]:
    """{"file", "line", "frames"}: where the user's code raised, as pytest shows it. posref's own
    frames (conformance/, reference/) are dropped; "file"/"line" are the deepest frame outside posref
    and the installed libraries (the adapter itself when every frame is a library's); "frames" are
    the lines of the frames from the adapter's entry down to that one plus at most two library frames
    below it (torch's), at most MAX_USER_FRAMES (the outermost kept, then the innermost). Plain
    strings and ints only: it crosses the process boundary under --isolate. None without such a
    frame. Reads only code objects and line numbers: no user code runs."""
    ours, libs = _posref_dirs(), _library_dirs()
    walked = []
    tb = exc.__traceback__
    while tb is not None and len(walked) < _MAX_WALKED_FRAMES:
        code = tb.tb_frame.f_code
        walked.append((str(code.co_filename), tb.tb_lineno, str(code.co_name)))
        tb = tb.tb_next
    frames = [f for f in walked if not os.path.abspath(f[0]).startswith(ours)]
    if not frames:
        return None
    own = [i for i, f in enumerate(frames) if not _is_library(f[0], libs)]
    last = own[-1] if own else 0
    kept = frames[: last + 3]
    if len(kept) > MAX_USER_FRAMES:  # a deep recursion: the entry, a count, then the innermost
        lines = ([_frame_line(*kept[0]), f"... {len(kept) - (MAX_USER_FRAMES - 1)} frames left out"]
                 + [_frame_line(*f) for f in kept[-(MAX_USER_FRAMES - 2):]])
    else:
        lines = [_frame_line(*f) for f in kept]
    filename, lineno, _ = frames[last]
    return {"file": printable(filename[:_MAX_FRAME_CHARS]), "line": int(lineno or 0), "frames": lines}


def check_where(where) -> Optional[dict]:
    """A user_traceback dict received from an isolated worker (untrusted), checked and capped; None
    for anything else."""
    if not (isinstance(where, dict) and isinstance(where.get("file"), str)
            and isinstance(where.get("line"), int) and not isinstance(where.get("line"), bool)
            and isinstance(where.get("frames"), list) and all(isinstance(f, str) for f in where["frames"])):
        return None
    frames = [printable(f[:_MAX_FRAME_CHARS]) for f in where["frames"][:MAX_USER_FRAMES]]
    return {"file": printable(where["file"][:_MAX_FRAME_CHARS]), "line": where["line"], "frames": frames}


def _outcome_from_exception(exc: BaseException) -> Outcome:
    """The Outcome of an exception the adapter (or an object it made) raised. Formatting it runs
    the adapter's code again (``__str__``, ``__repr__``): whatever that raises, SystemExit
    included, leaves the plainest description instead (a real Ctrl-C still stops the run)."""
    kind = "unsupported" if type(exc) is Unsupported or _plain_isinstance(exc, Unsupported) else "raised"
    try:
        line = error_line(exc)
    except RealInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - a hostile __str__ or type name
        line = "an exception whose description raised in turn"
    try:
        tb = "".join(_traceback.format_exception(type(exc), exc, exc.__traceback__))
    except RealInterrupt:
        raise
    except BaseException:  # noqa: BLE001
        tb = ""
    try:
        where = user_traceback(exc)
    except RealInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - a frame with a hostile file name; the message stands
        where = None
    return Outcome(kind, None, line, tb, where, exc)


def _plain_isinstance(obj, cls) -> bool:
    """isinstance without consulting ``obj.__class__`` (a property the adapter may define)."""
    return issubclass(type(obj), cls)


def _call_catching(fn: Callable, args: tuple) -> Outcome:
    """Call fn(*args); every exception except a real Ctrl-C (RealInterrupt) becomes an Outcome,
    KeyboardInterrupt and SystemExit raised by the adapter included."""
    limit = sys.getrecursionlimit()
    try:
        value = fn(*args)
    except RealInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit from user code is a verdict too
        # An adapter that lowered the recursion limit must not make formatting its error fail.
        sys.setrecursionlimit(max(limit, sys.getrecursionlimit()))
        return _outcome_from_exception(exc)
    return Outcome("ok", value)


def check_timeout(timeout: Optional[float]) -> Optional[float]:
    """The per-call limit as a positive finite float (None: no limit); ValueError otherwise."""
    if timeout is None:
        return None
    try:
        t = float(timeout)
    except (TypeError, ValueError):
        raise ValueError(f"timeout must be a number of seconds or None, got {timeout!r}") from None
    if not 0 < t <= MAX_TIMEOUT:  # NaN and inf fail too
        raise ValueError(f"timeout must be a number of seconds in (0, {MAX_TIMEOUT:g}], got {timeout!r}")
    return t


class Invoker:
    """Common interface: ``call(*args) -> Outcome``, ``close()``, and use as a context manager.

    ``call_with(fn, *args)`` calls another callable the adapter made (rope.module's module, which
    its factory returned) under the same timeout and process-state guard; in-process only: such a
    callable never crosses the process boundary."""

    isolated = False

    def call(self, *args) -> Outcome:  # pragma: no cover - interface
        raise NotImplementedError

    def call_with(self, fn: Callable, *args) -> Outcome:
        raise NotImplementedError(f"{type(self).__name__} calls its adapter only: a callable the adapter "
                                  "returned cannot be called across the process boundary")

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False


class InProcessInvoker(Invoker):
    """Runs the adapter in this interpreter (see the module docstring for the timeout caveat)."""

    def __init__(self, fn: Callable, *, timeout: Optional[float] = None):
        if not callable(fn):
            raise ValueError(f"fn must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.timeout = check_timeout(timeout)
        self._state = _ProcessState()

    def close(self) -> None:
        self._state.close()

    def call(self, *args) -> Outcome:
        return self.call_with(self.fn, *args)

    def call_with(self, fn: Callable, *args) -> Outcome:
        with self._state.restored():
            return self._call(fn, args)

    def _call(self, fn: Callable, args) -> Outcome:
        if self.timeout is None:
            with _real_sigint_marked() as real:
                try:
                    return _call_catching(fn, args)
                except RealInterrupt as exc:
                    if real.is_set():
                        raise
                    return _outcome_from_exception(exc)  # the adapter raised posref's own class
        box: dict = {}
        done = threading.Event()

        def work():
            try:
                box["outcome"] = _call_catching(fn, args)
            except BaseException as exc:  # noqa: BLE001 - a real SIGINT reaches the main thread only
                box["outcome"] = _outcome_from_exception(exc)
            finally:
                done.set()

        # A daemon thread: one that never returns must not keep the interpreter alive at exit.
        worker = threading.Thread(target=work, name="posref-call", daemon=True)
        worker.start()
        if not done.wait(self.timeout):
            return Outcome(
                "timeout",
                None,
                f"the call did not return within {self.timeout:g} s (it keeps running in a "
                "background thread; use --isolate to have it killed)",
                "",
            )
        return box["outcome"]


class _ProcessState:
    """What an in-process adapter may break for the runner, put back after each call: the
    recursion limit, sys.stdout / sys.stderr, and file descriptors 1 and 2 (closed or redirected:
    duplicates are kept from the start), so the run still prints its table and writes reports.

    During each call the adapter's standard output goes to standard error (file descriptor 1 and
    sys.stdout both): what it prints must not mix with posref's own output (``--json -`` writes
    the report to stdout, and it must stay parseable)."""

    FDS = (1, 2)

    def __init__(self):
        self.saved = {}
        for fd in self.FDS:
            try:
                self.saved[fd] = os.dup(fd)
            except OSError:  # not open to begin with: nothing to restore
                pass

    @staticmethod
    def _same_file(a: int, b: int) -> bool:
        try:
            sa, sb = os.fstat(a), os.fstat(b)
        except OSError:
            return False
        return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)

    @staticmethod
    def _flush(*streams) -> None:
        for stream in streams:
            try:
                stream.flush()
            except RealInterrupt:
                raise
            except BaseException:  # noqa: BLE001 - a closed, broken or hostile stream (the adapter's)
                pass

    def _stdout_to_stderr(self) -> None:
        self._flush(sys.stdout)
        if 1 in self.saved and 2 in self.saved:
            try:
                os.dup2(self.saved[2], 1)
            except OSError:
                pass
        sys.stdout = sys.stderr

    @contextlib.contextmanager
    def restored(self):
        limit = sys.getrecursionlimit()
        streams = (sys.stdout, sys.stderr)
        self._stdout_to_stderr()
        try:
            yield
        finally:
            sys.setrecursionlimit(limit)
            self._flush(sys.stdout, sys.stderr, *streams)
            sys.stdout, sys.stderr = streams
            for fd, copy in self.saved.items():
                # fd 1 was pointed at stderr for the call: always put back
                if fd == 1 or not self._same_file(fd, copy):
                    try:
                        os.dup2(copy, fd)
                    except OSError:
                        pass

    def close(self) -> None:
        for copy in self.saved.values():
            try:
                os.close(copy)
            except OSError:
                pass
        self.saved = {}


class RealInterrupt(KeyboardInterrupt):
    """A Ctrl-C that really arrived (SIGINT), raised by posref's own SIGINT handler
    (``_real_sigint_marked``). It stops the run; every other BaseException raised by the adapter
    or by an object it made (KeyboardInterrupt, SystemExit, GeneratorExit) is a verdict. Code
    that touches what the adapter made catches BaseException but re-raises this one:

        except RealInterrupt:
            raise
        except BaseException as exc: ...
    """


@contextlib.contextmanager
def _real_sigint_marked():
    """An Event set when a real SIGINT arrives during the block, which then raises RealInterrupt
    (a KeyboardInterrupt, as Python's default handler would). The runner holds one for the whole
    run (conformance.runner.run), so that a Ctrl-C while posref grades a returned value is told
    apart from a KeyboardInterrupt the value raises. Off the main thread no SIGINT can raise here,
    and the Event stays clear; a SIGINT the user set to be ignored stays ignored."""
    real = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield real
        return

    def on_sigint(signum, frame):
        real.set()
        raise RealInterrupt

    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except (ValueError, OSError):  # e.g. an embedded interpreter without signals
        yield real
        return
    if previous is signal.SIG_IGN:
        signal.signal(signal.SIGINT, previous)
    try:
        yield real
    finally:
        signal.signal(signal.SIGINT, previous)


real_interrupts_marked = _real_sigint_marked


# --------------------------------------------------------------------------------------------
# Isolated invoker: parent side
#
# Three processes: this one; a server (a fresh interpreter that imports torch and loads TARGET
# once, then only forks); and a worker (a fork of the server) that runs the calls. A crash or a
# timeout then costs a fork (tens of ms) instead of a new interpreter (seconds of imports).
# Two sockets: "control" between us and the server (it announces each worker, passing the
# worker's socket as a file descriptor, and reports how each worker died; we ask it to kill a
# worker or to exit) and "data" between us and the current worker (calls and replies). A worker
# that dies closes its data socket, which we see at once as EOF.
#
# Everything the runner reads from either socket is untrusted (the adapter's code runs at the
# other end and can write to any descriptor it inherited), so it is read with a deadline and a
# size limit (_recv_frame), never with Connection.recv_bytes, which blocks on a partial frame and
# allocates whatever length a frame announces.


class FrameTooLarge(wire.WireError):
    """A frame announces more bytes than the reader accepts (nothing of it is read)."""


class _Truncated(TimeoutError):
    """The deadline passed with part of a frame read: the stream can no longer be trusted."""


def _wait_fd(fd: int, event: int, deadline: Optional[float]) -> None:
    """Wait until fd is ready for ``event`` (selectors.EVENT_READ or EVENT_WRITE, end of stream
    and errors included); TimeoutError once ``deadline`` (time.monotonic(); None: never) passes."""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, event)
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError("deadline passed")
            if sel.select(left):
                return


def _read_exactly(fd: int, n: int, deadline: Optional[float], started: bool) -> bytearray:
    """n bytes from fd, read as they arrive. EOFError at end of stream, TimeoutError past the
    deadline when nothing was read and ``started`` is false, _Truncated when part was."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            _wait_fd(fd, selectors.EVENT_READ, deadline)
        except TimeoutError:
            if got or started:
                raise _Truncated(f"only part of a message arrived ({got} of {n} bytes)") from None
            raise
        try:
            k = os.readv(fd, [view[got:]])
        except (BlockingIOError, InterruptedError):
            continue
        if k == 0:
            raise EOFError("end of stream")
        got += k
    return buf  # no copy: a reply may be large


def _recv_frame(conn, deadline: Optional[float], limit: int) -> bytearray:
    """One message framed as multiprocessing.connection frames it (a 4-byte big-endian signed
    length, or -1 and an 8-byte length, then the bytes), read from ``conn``'s descriptor.

    TimeoutError when nothing came before ``deadline``; _Truncated (a TimeoutError) when only part
    of the frame did; EOFError at end of stream; FrameTooLarge for a length over ``limit``
    (before anything is allocated); WireError for a negative length. Reads only what the frame
    holds, so the next message stays in place."""
    fd = conn.fileno()
    (size,) = struct.unpack("!i", _read_exactly(fd, 4, deadline, False))
    if size == -1:
        (size,) = struct.unpack("!Q", _read_exactly(fd, 8, deadline, True))
    elif size < 0:
        raise wire.WireError(f"a frame of negative length {size}")
    if size > limit:
        raise FrameTooLarge(f"a message of {size} bytes, more than the limit of {limit}")
    return _read_exactly(fd, size, deadline, True)


def _send_frame(conn, payload: bytes, deadline: Optional[float]) -> None:
    """Send payload framed as Connection.send_bytes would, on a non-blocking descriptor, so that a
    worker that stopped reading (stopped, or wedged with a full buffer) costs the deadline at
    most (TimeoutError), never a hang. BrokenPipeError (an OSError) when the worker is gone."""
    n = len(payload)
    head = struct.pack("!i", n) if n <= 0x7FFFFFFF else struct.pack("!i", -1) + struct.pack("!Q", n)
    fd = conn.fileno()
    for part in (head, payload):
        view = memoryview(part)
        while view:
            _wait_fd(fd, selectors.EVENT_WRITE, deadline)
            try:
                view = view[os.write(fd, view):]
            except (BlockingIOError, InterruptedError):
                continue


def _recv_fd(conn, deadline: Optional[float]) -> int:
    """The descriptor the server passes after a ("worker", pid) message (as
    multiprocessing.reduction.send_handle sends it: one byte with SCM_RIGHTS), received with a
    deadline; WireError when the next bytes carry no descriptor."""
    import socket

    fd = conn.fileno()
    _wait_fd(fd, selectors.EVENT_READ, deadline)
    with socket.socket(fileno=os.dup(fd)) as sock:
        msg, ancdata, _flags, _addr = sock.recvmsg(1, socket.CMSG_SPACE(4 * 4))
    fds = []
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds.extend(struct.unpack(f"{usable // 4}i", data[:usable]))
    if not msg and not ancdata:
        raise EOFError("end of stream")
    if len(fds) != 1:
        for extra in fds:
            os.close(extra)
        raise wire.WireError("a worker announced without its socket")
    return fds[0]


class _Server:
    """The server process, its control socket and the current worker; owned by _IsolatedState."""

    def __init__(self, proc: subprocess.Popen, ctrl):
        self.proc = proc
        self.ctrl = ctrl
        self.worker_pid: Optional[int] = None
        self.data = None
        self.statuses: dict = {}  # worker pid -> exit status, as the server reported it
        self.pending: Optional[tuple] = None  # a worker announced while we waited for a status

    def send(self, *msg) -> None:
        self.ctrl.send_bytes(pickle.dumps(msg))

    def _read(self, deadline: float):
        """The next control message; None past the deadline; EOFError when the server is gone;
        WireError for anything malformed (also a message cut short), after which the control
        stream cannot be trusted: the caller replaces the server."""
        try:
            raw = _recv_frame(self.ctrl, deadline, _MAX_CONTROL_BYTES)
        except _Truncated as exc:
            raise wire.WireError(str(exc)) from None
        except TimeoutError:
            return None
        msg = _control_message(raw)
        if msg[0] == "died":
            self.statuses[msg[1]] = msg[2]
        elif msg[0] == "worker":
            try:
                self.pending = (msg[1], _recv_fd(self.ctrl, deadline))
            except TimeoutError:
                raise wire.WireError("a worker announced without its socket") from None
        return msg

    def ensure_worker(self, timeout: float) -> None:
        """Make sure a worker is connected (the server forks one after each death)."""
        from multiprocessing.connection import Connection

        if self.data is not None:
            return
        deadline = time.monotonic() + timeout
        while self.pending is None:
            if self._read(deadline) is None:
                raise TimeoutError("the isolated server did not start a worker")
        self.worker_pid, fd = self.pending
        self.pending = None
        os.set_blocking(fd, False)  # only _send_frame and _recv_frame use it, each with a deadline
        self.data = Connection(fd)

    def drop_worker(self, *, kill: bool, timeout: float = 10.0) -> Optional[int]:
        """Forget the current worker (killing it first if asked); return its exit status."""
        pid, self.worker_pid = self.worker_pid, None
        if self.data is not None:
            self.data.close()
            self.data = None
        if pid is None:
            return None
        if pid == self.proc.pid:  # the server serves the calls itself (see _fork_unsafe)
            if not kill:
                _wait_exited(pid, timeout)
            return self.kill()  # reaps it, and kills what it left in its group
        deadline = time.monotonic() + timeout
        try:
            if kill:
                # The server kills it: only the parent can be sure the pid was not reused.
                self.send("kill", pid)
            while pid not in self.statuses:
                if self._read(deadline) is None:
                    return None
        except (EOFError, OSError, wire.WireError):
            return None
        return self.statuses.pop(pid)

    def kill(self) -> Optional[int]:
        """Kill the server with its process group (the worker too); reap it."""
        for conn in (self.data, self.ctrl):
            if conn is not None:
                try:
                    conn.close()
                except OSError:
                    pass
        self.data = None
        if self.pending is not None:
            try:
                os.close(self.pending[1])
            except OSError:
                pass
            self.pending = None
        if self.proc.returncode is None:
            # Not reaped yet (perhaps a zombie): its pid is still ours, and so is the group id.
            # A live server: stop it, the worker and everything they started (a daemon in its own
            # session too), then kill them all (Linux: processes.kill_tree).
            if not _has_exited(self.proc):
                processes.kill_tree(self.proc.pid, include_root=True)
            # Kill the group even when the server has exited already: what the adapter started
            # (subprocesses, daemons) lives on in the group after the server and worker are gone.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                try:
                    self.proc.kill()
                except OSError:
                    pass
        try:
            status = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - uninterruptible sleep
            status = None
        worker, self.worker_pid = self.worker_pid, None
        if worker is not None and worker != self.proc.pid:
            _wait_gone(worker)  # killed with the group; init reaps it, we only wait for that
        return status

    def stop(self) -> None:
        """Ask the server to exit (it kills and reaps its worker), then make sure it has."""
        if self.proc.returncode is None:
            try:
                self.send("exit")
                if self.data is not None and self.worker_pid == self.proc.pid:
                    self.data.close()  # a server that serves the calls itself exits on EOF
                    self.data = None
                _wait_exited(self.proc.pid, 2.0)  # without reaping it: kill() needs the group id
            except (OSError, ValueError):
                pass
        self.kill()


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _wait_exited(pid: int, timeout: float) -> None:
    """Wait until our child ``pid`` has exited, leaving it unreaped (a zombie keeps its pid)."""
    if not hasattr(os, "waitid"):  # kill() then takes the group down without waiting
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:  # already reaped
            return
        if time.monotonic() >= deadline:
            return
        time.sleep(0.01)


def _has_exited(proc: subprocess.Popen) -> bool:
    """Whether our child has exited, without reaping it (unlike Popen.poll)."""
    if proc.returncode is not None:
        return True
    if not hasattr(os, "waitid"):
        return proc.poll() is not None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _wait_gone(pid: int, timeout: float = 2.0) -> None:
    """Wait until a process that is not our child has died (gone, or a zombie awaiting init)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except OSError:
            return
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] in ("Z", "X"):
                    return
        except OSError:
            pass
        time.sleep(0.01)


class _IsolatedState:
    """What the finalizer needs, kept apart from the invoker so it holds no reference to it."""

    def __init__(self):
        self.server: Optional[_Server] = None
        # faulthandler's dump: a temporary file whose name is removed at once, shared with the
        # server by descriptor. No path exists to be replaced (by a FIFO, a link to /dev/zero)
        # or to be left behind by a killed run; crash_dump() reads a bounded prefix.
        self.crash_fd: Optional[int] = None

    def drop_server(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()  # the server reaps its worker itself when it still can

    def shutdown(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()
        if self.crash_fd is not None:
            try:
                os.close(self.crash_fd)
            except OSError:
                pass
            self.crash_fd = None

    def open_crash_log(self) -> int:
        if self.crash_fd is None:
            fd, path = tempfile.mkstemp(prefix="posref-crash-", suffix=".log")
            try:
                os.unlink(path)
            except OSError:
                pass
            self.crash_fd = fd
        return self.crash_fd

    def crash_dump(self) -> str:
        """The start of faulthandler's dump for the last call (at most _MAX_CRASH_LOG bytes)."""
        if self.crash_fd is None:
            return ""
        try:
            raw = os.pread(self.crash_fd, _MAX_CRASH_LOG, 0)
        except OSError:
            return ""
        return raw.decode("utf-8", errors="replace")


_SERVER_CODE = (
    "import sys, json\n"
    "_p = json.loads(sys.argv[2])\n"
    "sys.path[:] = _p + [x for x in sys.path if x not in _p]\n"
    "from conformance.isolation import _server_main\n"
    "_server_main(int(sys.argv[1]))\n"
)


def _path() -> list:
    """Our sys.path for the server, so that it imports TARGET and conformance as we would."""
    return [os.fspath(p) for p in sys.path if isinstance(p, (str, os.PathLike))]


def _describe_exit(status: Optional[int]) -> str:
    if status is None:
        return "the isolated process died and its exit status is unknown"
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = "signal"
        return f"the isolated process was killed by {name} (signal {-status})"
    return f"the isolated process exited with code {status} during the call"


class IsolatedInvoker(Invoker):
    """Runs the adapter in a child process that loads TARGET itself (POSIX only: it forks)."""

    isolated = True

    def __init__(
        self,
        target: Optional[str],
        *,
        fn: Optional[Callable] = None,
        timeout: Optional[float] = None,
        loader: str = DEFAULT_LOADER,
        preload: tuple = ("torch",),
        startup_timeout: float = 120.0,
        max_reply_bytes: int = MAX_REPLY_BYTES,
    ):
        if not hasattr(os, "fork"):
            raise UsageError("--isolate needs a POSIX system (it forks worker processes)")
        self.timeout = check_timeout(timeout)
        self.target = target
        self.loader = loader
        self.preload = tuple(preload)
        self.startup_timeout = float(startup_timeout)
        self.max_reply_bytes = int(max_reply_bytes)
        self._fn_pickle = None
        if target is None:
            # No TARGET string: send the function itself, which pickles by reference only when
            # it is importable (a module-level function); lambdas and closures cannot cross.
            try:
                self._fn_pickle = pickle.dumps(fn)
            except Exception as exc:
                raise UsageError(
                    "isolation needs an importable target ('package.module:name' or "
                    f"'path/to/file.py:name'); the function cannot be sent to a child process "
                    f"({error_line(exc)})"
                ) from None
        self._state = _IsolatedState()
        self._startup_error: Optional[str] = None
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, self._state.shutdown)

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the server and a worker now (else the first call does); raises IsolationError."""
        with self._lock:
            self._ready_server()

    def close(self) -> None:
        self._finalizer()  # runs _state.shutdown once; later calls are no-ops

    @property
    def pid(self) -> Optional[int]:
        """The current worker's process id (None before the first call or after a crash)."""
        server = self._state.server
        return server.worker_pid if server is not None else None

    def _ready_server(self) -> _Server:
        """A server with a connected worker, started or restarted as needed."""
        if self._startup_error is not None:
            raise IsolationError(self._startup_error)
        if not self._finalizer.alive:
            raise ValueError("this invoker has been closed")
        for _ in range(2):  # one restart
            server = self._state.server
            if server is None or _has_exited(server.proc):
                self._state.drop_server()
                try:
                    server = self._spawn()
                except IsolationError as exc:
                    self._startup_error = str(exc)
                    raise
                self._state.server = server
            try:
                server.ensure_worker(self.startup_timeout)
                return server
            except (EOFError, OSError, TimeoutError, wire.WireError):
                # The server itself died, hung, or its control stream carries something it did
                # not write (the adapter killed its parent, wrote to the socket): start over.
                self._state.drop_server()
        raise IsolationError("the isolated process keeps dying before it can serve a call")

    def _spawn(self) -> _Server:
        from multiprocessing import Pipe

        crash_fd = self._state.open_crash_log()
        parent_conn, child_conn = Pipe(duplex=True)
        child_fd = child_conn.fileno()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _SERVER_CODE, str(child_fd), json.dumps(_path())],
                pass_fds=(child_fd, crash_fd),
                stdin=subprocess.DEVNULL,
                # What the adapter prints goes to our stderr: our stdout may carry the JSON
                # report (--json -), which it must not corrupt.
                stdout=2 if _fd_open(2) else subprocess.DEVNULL,
                # Own process group: a Ctrl-C in the terminal reaches only us (we then close the
                # server), and one killpg takes the server, the worker and the adapter's own
                # subprocesses.
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            parent_conn.close()
            child_conn.close()
            raise IsolationError(f"could not start the isolated process: {error_line(exc)}")
        child_conn.close()
        server = _Server(proc, parent_conn)
        init = (
            "init",
            self.target,
            self._fn_pickle,
            self.loader,
            self.preload,
            crash_fd,
            os.getpid(),
            # A parent-death signal follows the thread that started the process, not the
            # process: ask for one only when that thread is the main thread, which lives as
            # long as this process (elsewhere the server polls its parent, as it always does).
            threading.current_thread() is threading.main_thread(),
        )
        what = self.target or "the function"
        try:
            parent_conn.send_bytes(pickle.dumps(init))
            reply = _control_message(_recv_frame(
                parent_conn, time.monotonic() + self.startup_timeout, _MAX_CONTROL_BYTES))
        except _Truncated:
            server.kill()
            raise IsolationError(f"the isolated process sent only part of a message while loading "
                                 f"{what}: does it write to descriptors it inherited?") from None
        except TimeoutError:
            server.kill()
            raise IsolationError(
                f"the isolated process did not load {what} within {self.startup_timeout:g} s"
            ) from None
        except (EOFError, OSError):
            status = server.kill()
            raise IsolationError(
                f"the isolated process died while loading {what}: "
                + _describe_exit(status).replace(" during the call", "")
            ) from None
        except wire.WireError as exc:
            server.kill()
            raise IsolationError(f"the isolated process sent a malformed message while loading "
                                 f"{what} ({error_line(exc)}): does it write to descriptors it "
                                 "inherited?") from None
        if reply[0] != "ready":
            server.kill()
            if reply[2]:
                raise IsolationError(reply[1])
            raise IsolationError(f"the isolated process could not load {what}: {reply[1]}")
        return server

    # -- calls ------------------------------------------------------------------------------

    def call(self, *args) -> Outcome:
        with self._lock:
            return self._call(args)

    def _call(self, args: tuple) -> Outcome:
        server = self._ready_server()
        try:
            payload = pickle.dumps(("call", args), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            # The runner built these arguments: failing to send them is our bug, not the adapter's.
            raise TypeError(f"arguments cannot be sent to the isolated process: {exc}") from exc
        # One deadline covers sending the arguments, the call and reading the whole reply: a
        # worker that stops itself, stops reading, or sends only part of a frame costs the
        # timeout, never a hang.
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        try:
            _send_frame(server.data, payload, deadline)
            raw = _recv_frame(server.data, deadline, self.max_reply_bytes)
        except TimeoutError as exc:
            self._replace_worker(server)
            part = "; it sent only part of its reply" if isinstance(exc, _Truncated) else ""
            return Outcome(
                "timeout",
                None,
                f"the call did not return within {self.timeout:g} s{part}; the isolated process "
                "was killed",
                "",
            )
        except wire.WireError as exc:  # a length over the limit, or a negative one
            self._replace_worker(server)
            return Outcome(
                "raised",
                None,
                f"the result could not be received from the isolated process ({error_line(exc)}); "
                "the isolated process was killed",
                "",
            )
        except (EOFError, OSError):
            return self._crashed(server)
        except KeyboardInterrupt:
            self._state.drop_server()
            raise
        try:
            return _reply_outcome(wire.loads(raw), args)
        except (wire.WireError, ValueError, TypeError) as exc:
            return Outcome(
                "raised",
                None,
                f"the result could not be received from the isolated process ({error_line(exc)})",
                "",
            )

    def _replace_worker(self, server: _Server) -> None:
        """Kill the current worker (its reply stream is no longer usable); a server that does not
        confirm it (stopped, wedged, or its control stream corrupted) is replaced too."""
        if server.drop_worker(kill=True) is None:
            self._state.drop_server()

    def _crashed(self, server: _Server) -> Outcome:
        status = server.drop_worker(kill=False)
        if status is None:  # the server did not say: it is gone or wedged, so start afresh
            self._state.drop_server()
        return Outcome("crashed", None, _describe_exit(status), self._state.crash_dump())


def _control_message(raw: bytes) -> tuple:
    """A message from the server (which may run the adapter: untrusted), checked: ("ready",),
    ("failed", line, is_usage_error), ("worker", pid) or ("died", pid, status)."""
    msg = wire.loads(raw)
    shapes = {"ready": (), "failed": (str, bool), "worker": (int,), "died": (int, (int, type(None)))}
    if (not isinstance(msg, tuple) or not msg or msg[0] not in shapes
            or len(msg) != 1 + len(shapes[msg[0]])
            or not all(isinstance(v, t) for v, t in zip(msg[1:], shapes[msg[0]]))):
        raise wire.WireError("unexpected control message")
    if msg[0] == "failed":
        return ("failed", printable(msg[1]), msg[2])
    return msg


def _reply_outcome(reply, args: tuple) -> Outcome:
    """The Outcome a worker's reply describes, checked field by field (the reply is untrusted)."""
    kind = reply.get("kind") if isinstance(reply, dict) else None
    if kind == "ok":
        _copy_back(args, reply.get("mutated"))
        return Outcome("ok", reply.get("value"))
    error, tb = reply.get("error") if kind else None, reply.get("traceback") if kind else None
    if kind not in KINDS or not isinstance(error, str) or not isinstance(tb, str):
        raise wire.WireError("unexpected reply")
    return Outcome(kind, None, printable(error.splitlines()[0] if error else ""), tb, check_where(reply.get("where")))


def _copy_back(args: tuple, mutated) -> None:
    """Replay in-place modifications the adapter made to its copies of the input tensors.

    Each item of ``mutated`` is (where, tensor): ``where`` is an argument's index for a tensor
    argument, or a path (index, step, ...) to a tensor nested in an argument (``_tensor_paths``).
    The path is resolved in the caller's own arguments (``_resolve``), so the child names a place,
    never an object; a path that names no input tensor is a malformed reply."""
    if not isinstance(mutated, list):
        raise wire.WireError("unexpected reply")
    for item in mutated:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise wire.WireError("unexpected reply")
        where = item[0]
        path = (where,) if isinstance(where, int) and not isinstance(where, bool) else where
        target = _resolve(args, path)
        try:
            target.copy_(item[1])
        except Exception:  # e.g. the adapter resized it: the runner still sees a changed shape
            pass


# Container levels searched below an argument for input tensors (attention: spec -> past_keys).
_MAX_NESTING = 8


def _step_ok(step) -> bool:
    return isinstance(step, str) or (isinstance(step, int) and not isinstance(step, bool))


def _tensor_paths(args: tuple) -> list:
    """[(path, tensor)] for every tensor in ``args``: an argument itself (path (i,)) or one nested
    in dict values (keys that are str or int), list and tuple items and dataclass fields, up to
    ``_MAX_NESTING`` levels down; each container is entered once (the first path names a tensor
    reachable twice)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    found, seen = [], set()

    def walk(obj, path, depth):
        if isinstance(obj, torch.Tensor):
            found.append((path, obj))
            return
        if depth >= _MAX_NESTING or id(obj) in seen:
            return
        if isinstance(obj, dict):
            seen.add(id(obj))
            for key, value in list(obj.items()):
                if _step_ok(key):
                    walk(value, path + (key,), depth + 1)
        elif isinstance(obj, (list, tuple)):
            seen.add(id(obj))
            for k, value in enumerate(obj):
                walk(value, path + (k,), depth + 1)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            seen.add(id(obj))
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name, None), path + (f.name,), depth + 1)

    for i, arg in enumerate(args):
        walk(arg, (i,), 0)
    return found


def _resolve(args: tuple, path):
    """The caller's input tensor at ``path`` (from an untrusted reply): steps go through dict keys,
    list/tuple indices and dataclass field names only; anything else is a WireError."""
    torch = sys.modules.get("torch")
    if (not isinstance(path, tuple) or not 1 <= len(path) <= _MAX_NESTING + 1
            or not all(_step_ok(step) for step in path) or not isinstance(path[0], int)
            or not 0 <= path[0] < len(args)):
        raise wire.WireError("unexpected reply")
    obj = args[path[0]]
    for step in path[1:]:
        if isinstance(obj, dict) and step in obj:
            obj = obj[step]
        elif (isinstance(obj, (list, tuple)) and isinstance(step, int) and not isinstance(step, bool)
              and 0 <= step < len(obj)):
            obj = obj[step]
        elif (dataclasses.is_dataclass(obj) and not isinstance(obj, type) and isinstance(step, str)
              and step in {f.name for f in dataclasses.fields(obj)}):
            obj = getattr(obj, step)
        else:
            raise wire.WireError("unexpected reply")
    if torch is None or not isinstance(obj, torch.Tensor):
        raise wire.WireError("unexpected reply")
    return obj


def make_invoker(
    fn: Optional[Callable],
    target: Optional[str],
    *,
    isolate: bool,
    timeout: Optional[float],
    **options,
) -> Invoker:
    """An invoker for ``fn`` (in-process) or for ``target`` loaded in a child (isolate=True).

    options (isolated only): loader ("module:function" that turns TARGET into the callable;
    default conformance.loader:load_target), preload (modules the child imports before it
    reports ready, default ("torch",)), startup_timeout (seconds, default 120), max_reply_bytes
    (the largest reply accepted, default MAX_REPLY_BYTES).
    """
    if isolate:
        return IsolatedInvoker(target, fn=fn, timeout=timeout, **options)
    if options:
        raise ValueError(f"options {sorted(options)} apply only with isolate=True")
    if fn is None:
        if target is None:
            raise ValueError("make_invoker needs fn or target")
        loader_mod, _, loader_name = DEFAULT_LOADER.partition(":")
        import importlib

        fn = getattr(importlib.import_module(loader_mod), loader_name)(target)
    return InProcessInvoker(fn, timeout=timeout)


# --------------------------------------------------------------------------------------------
# Isolated invoker: server and worker side


def _watch_parent(parent_pid: int) -> None:
    """Exit when the parent goes away, even if the adapter is stuck in a loop."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(0)


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _load(init) -> Callable:
    import importlib

    _, target, fn_pickle, loader, preload = init[:5]
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if fn_pickle is not None:
        return pickle.loads(fn_pickle)
    module, _, name = loader.partition(":")
    return getattr(importlib.import_module(module), name)(target)


def _server_main(fd: int) -> None:
    """Load the target once, then fork one worker at a time and report how each one ended."""
    import faulthandler
    from multiprocessing.connection import Connection

    ctrl = Connection(fd)
    init = pickle.loads(ctrl.recv_bytes())
    log, parent_pid = init[5], init[6]
    if init[7]:
        processes.die_with_parent(parent_pid, code=0)
    # Orphans of the worker's descendants (a double fork, a daemon) become our children, so that
    # _end_descendants finds them after a crash, a timeout and at the end.
    processes.become_subreaper()
    if log is not None:
        faulthandler.enable(file=log, all_threads=False)
    try:
        _serve(ctrl, init, parent_pid, log)
    finally:
        processes.end_descendants()


def _serve(ctrl, init, parent_pid: int, log: Optional[int]) -> None:
    import socket
    from multiprocessing.connection import Connection
    from multiprocessing.reduction import send_handle

    try:
        fn = _load(init)
    except BaseException as exc:  # noqa: BLE001 - report every load failure as one line
        # The loader's own UsageErrors already read as the one line a user should see.
        usage = isinstance(exc, UsageError)
        ctrl.send_bytes(wire.dumps(("failed", str(exc) if usage else error_line(exc), usage)))
        return
    ctrl.send_bytes(wire.dumps(("ready",)))
    if _fork_unsafe():
        # Serve the calls here; the parent kills and restarts the whole server after a crash.
        ours, theirs = socket.socketpair()
        ctrl.send_bytes(wire.dumps(("worker", os.getpid())))
        send_handle(ctrl, ours.fileno(), parent_pid)
        ours.close()
        _worker_main(fn, Connection(theirs.detach()), log)
        return
    server_pid = os.getpid()
    while os.getppid() == parent_pid:
        ours, theirs = socket.socketpair()
        _flush_std()  # or the worker would print our buffered output a second time
        with warnings.catch_warnings():
            # Python >= 3.12 warns when forking with other OS threads alive; torch's import
            # leaves an idle one. The server has run no torch work, so nothing is mid-lock.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            try:
                processes.die_with_parent(server_pid, code=0)  # forked by our main thread, which lives as long
                ctrl.close()
                ours.close()
                _worker_main(fn, Connection(theirs.detach()), log)
            finally:
                _flush_std()
                os._exit(0)
        theirs.close()
        try:
            ctrl.send_bytes(wire.dumps(("worker", pid)))
            send_handle(ctrl, ours.fileno(), parent_pid)
        except OSError:
            _reap(pid)
            return
        finally:
            ours.close()
        status = _wait_worker(ctrl, pid, parent_pid)
        if status is None:
            return
        # What the dead worker started (in its own session too) goes with it, before the runner
        # hears of the death and asks for the next call.
        processes.end_descendants()
        try:
            ctrl.send_bytes(wire.dumps(("died", pid, status)))
        except OSError:
            return


def _fork_unsafe() -> bool:
    """Whether forked workers would break: CUDA already initialised (a CUDA context does not
    survive fork; e.g. a target that builds a CUDA tensor at import), or the user asked."""
    if os.environ.get(NO_FORK_ENV, "").strip() not in ("", "0"):
        return True
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:
        return False


def _reap(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _wait_worker(ctrl, pid: int, parent_pid: int) -> Optional[int]:
    """Wait for the worker to end and return its exit status (negative: killed by that signal).

    Meanwhile serve the parent's requests: ("kill", pid) and ("exit",). Returns None when the
    server should exit (asked to, or the parent is gone); the worker is then killed and reaped.
    """
    import select

    try:
        pidfd = os.pidfd_open(pid)  # readable when the worker ends: no polling delay
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            status = _reap_until(pid)
            if status is not None:
                return status
            fds = [ctrl.fileno()] + ([pidfd] if pidfd is not None else [])
            readable, _, _ = select.select(fds, [], [], 0.5 if pidfd is not None else 0.02)
            if os.getppid() != parent_pid:
                _reap(pid)
                return None
            if ctrl.fileno() in readable:
                try:
                    msg = pickle.loads(ctrl.recv_bytes())
                except (EOFError, OSError):
                    _reap(pid)
                    return None
                if msg[0] == "exit":
                    _reap(pid)
                    return None
                if msg[0] == "kill" and msg[1] == pid:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _reap_until(worker: int) -> Optional[int]:
    """Reap every child that has ended (orphans reparented to us as subreaper, and the worker);
    the worker's exit status when it is among them, else None."""
    while True:
        try:
            done, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return None
        if done == 0:
            return None
        if done == worker:
            return os.waitstatus_to_exitcode(status)


def _worker_main(fn: Callable, data, log: Optional[int]) -> None:
    """Serve calls on the data socket until it closes."""
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    while True:
        try:
            raw = data.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            msg = pickle.loads(raw)
        except Exception as exc:
            data.send_bytes(wire.dumps({"kind": "raised", "error": "the arguments could not be "
                                        f"received in the isolated process ({error_line(exc)})",
                                        "traceback": ""}))
            continue
        args = msg[1]  # ("call", args): the parent sends nothing else on this socket
        pristine = _snapshot(args)
        if log is not None:  # a dump in it is this call's only (the offset is shared: rewind)
            try:
                os.lseek(log, 0, os.SEEK_SET)
                os.ftruncate(log, 0)
            except OSError:
                pass
        try:
            outcome = _call_catching(fn, args)
        except KeyboardInterrupt as exc:  # raised by the adapter itself: a verdict like others
            outcome = _outcome_from_exception(exc)
        _flush_std()
        data.send_bytes(_encode(outcome, args, pristine))


def _snapshot(args: tuple) -> dict:
    """{path: (the input tensor, a pristine clone)} for every tensor reachable from the arguments
    (``_tensor_paths``), taken before the call; the tensor object itself is kept, so an adapter
    that rebinds a container entry (weights["wq"] = ...) is not taken for one writing into it."""
    return {path: (t, t.clone()) for path, t in _tensor_paths(args)}


def _encode(outcome: Outcome, args: tuple, pristine: dict) -> bytes:
    from conformance.core.tensors import same_bits

    if outcome.kind != "ok":
        return wire.dumps({"kind": outcome.kind, "error": outcome.error, "traceback": outcome.traceback,
                           "where": outcome.where})
    # A top-level argument keeps its plain index (the format before nested paths); a nested tensor
    # goes back with its path.
    mutated = [(path[0] if len(path) == 1 else path, t) for path, (t, before) in pristine.items()
               if not same_bits(t, before)]
    # A value that cannot be sent (a generator, a lock, a custom object), or whose reading raises,
    # goes back as an opaque node: graded as what it is, as in-process, never taken for a raise.
    try:
        return wire.dumps({"kind": "ok", "value": outcome.value, "mutated": mutated}, opaque=True)
    except BaseException as exc:  # noqa: BLE001 - e.g. a container whose iteration raises midway
        value = wire.opaque_node(outcome.value, exc)["o"]
        return wire.dumps({"kind": "ok", "value": wire.Opaque(value["type"], value["text"], value["raised"]),
                           "mutated": mutated}, opaque=True)
