"""Process trees: die with the parent, adopt orphans, kill everything a run started.

posref runs code that may start processes of its own (helpers, daemons, processes in sessions of
their own) and may be killed itself by a harness. So the processes posref starts die with their
parent (the kernel's parent-death signal on Linux, a polling thread elsewhere), the supervising
`posref` process and the isolated server adopt orphans (child subreaper, Linux), and at the end
of a run everything below them is found through /proc and killed (``kill_tree``). Elsewhere
the process group is all there is to kill. Used by conformance/supervise.py (the grading process
under the `posref` command) and conformance/isolation.py (the isolated server and its workers).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Optional

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, arg: int) -> bool:
    """prctl(option, arg) through libc (Linux only); whether it succeeded."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0),
                          ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0
    except Exception:  # noqa: BLE001 - no libc or no prctl: the polling fallback remains
        return False


def die_with_parent(parent_pid: int, *, code: int) -> None:
    """Be killed (SIGKILL) by the kernel when the parent dies, even while stuck in C code or
    stopped (Linux); elsewhere a daemon thread polls every 0.5 s and exits with ``code``. Checked
    after arming: a parent that died before prctl took hold makes this process exit now. The
    parent-death signal follows the thread that started this process: call it only in a process
    started from its parent's main thread."""
    armed = _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent_pid:
        os._exit(code)
    if not armed:
        def watch():
            while os.getppid() == parent_pid:
                time.sleep(0.5)
            os._exit(code)

        threading.Thread(target=watch, name="posref-parent-watch", daemon=True).start()


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux PR_SET_CHILD_SUBREAPER), so that kill_tree finds a process
    whose parent exited (a double fork) below this one instead of under init."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def _proc_stat(pid: int) -> tuple:
    """(parent pid, process group) of pid from /proc; OSError / ValueError when it is gone."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rpartition(b")")[2].split()
    return int(fields[1]), int(fields[2])


def _processes() -> dict:
    """{pid: (parent pid, process group)} for every process in /proc (empty without /proc)."""
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return {}
    out = {}
    for pid in pids:
        try:
            out[pid] = _proc_stat(pid)
        except (OSError, ValueError, IndexError):
            pass  # gone meanwhile
    return out


def _descendants(root: int, table: Optional[dict] = None) -> set:
    table = _processes() if table is None else table
    kids: dict = {}
    for pid, (ppid, _group) in table.items():
        kids.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in kids.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _stop_new_descendants(root: int, known: set, groups: set) -> bool:
    """One pass over /proc: stop (SIGSTOP) every process whose parent is root or already known,
    add it to known and its process group to groups; whether any was new. Newest pids are read
    first and each is stopped as soon as it is recognised, so that a process that keeps forking
    and exiting (each new one an orphan reparented to the subreaper root) is caught in the
    microseconds after the listing, not after the whole table was read."""
    try:
        pids = sorted((int(name) for name in os.listdir("/proc") if name.isdigit()), reverse=True)
    except OSError:
        return False
    me, table, new = os.getpid(), {}, False
    for pid in pids:
        try:
            table[pid] = _proc_stat(pid)
        except (OSError, ValueError, IndexError):
            continue
    while True:  # a parent read after its child (a lower pid) makes the child known next turn
        grew = False
        for pid, (ppid, group) in table.items():
            if pid not in known and pid != me and (ppid == root or ppid in known):
                _signal(pid, signal.SIGSTOP)
                known.add(pid)
                groups.add(group)
                grew = new = True
        if not grew:
            return new


def kill_tree(root: int, *, include_root: bool, rounds: int = 200) -> None:
    """SIGKILL every descendant of ``root`` (and root itself if asked), wherever it went: its own
    session or process group included. Each is stopped first (SIGSTOP) so it cannot fork away,
    and /proc is read again until no new descendant shows up; then all are killed (SIGKILL ends a
    stopped process), and so is every process group a descendant was seen in (a signal to a
    group reaches all its members at once, also one forked after the last look). Processes whose
    parent died are found only where they were reparented to a process of the tree: the server
    makes itself a child subreaper for that. Without /proc this does nothing and the process
    group is what is killed."""
    me = os.getpid()
    known: set = set()
    groups: set = set()
    if include_root and root != me:
        _signal(root, signal.SIGSTOP)
        known.add(root)
        try:
            groups.add(_proc_stat(root)[1])
        except (OSError, ValueError, IndexError):
            pass
    quiet = 0
    for _ in range(rounds):  # done after two passes in a row found nobody new
        quiet = 0 if _stop_new_descendants(root, known, groups) else quiet + 1
        if quiet == 2:
            break
    # Kill what is still in the tree (stopped, nothing in it can have left); a pid that is no
    # longer there ended meanwhile and may have been reused by another process: let that one go.
    tree = _descendants(root) | ({root} if include_root else set())
    for pid in known:
        _signal(pid, signal.SIGKILL if pid in tree else signal.SIGCONT)
    # Groups made inside the tree (a process can only join a group of its own session, and the
    # server's session is its own), never ours: the server does not kill itself this way.
    for group in groups - {os.getpgrp()}:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass


def reap_children(timeout: float = 2.0) -> None:
    """Reap every child of this process that has ended or is about to (after kill_tree), for at
    most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.005)


def end_descendants() -> None:
    """In the server: kill everything below it (workers, what the adapter started, orphans
    reparented to it) and reap them."""
    kill_tree(os.getpid(), include_root=False)
    reap_children()
