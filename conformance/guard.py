"""Bound a whole run against an adapter that hangs (issue 9): ``RunGuard`` wraps an invoker.

- After ``STREAK`` consecutive calls time out, the remaining calls are not made: each returns a
  ``timeout`` outcome "not run after earlier timeouts" at once (``keep_going`` calls them anyway).
  A hanging adapter on the whole catalog then costs two timeouts, not one per call.
- ``max_time``: an overall deadline in seconds. Each call's limit is cut to the time left, and
  once it is spent the remaining calls are "not run" the same way.
- In-process (no ``--isolate``) a timed-out call keeps running in a background thread: the guard
  counts them (``background``) so the report can say so.
- Under ``posref conform`` it tells the supervising process (conformance.supervise) when its clock
  starts and when each call starts (with its limit) and ends: a call that holds the interpreter
  cannot time out here, and the supervisor ends the run instead.
"""

from __future__ import annotations

import math
import time
from typing import Optional

from conformance.isolation import Invoker, Outcome
from conformance.supervise import emit

STREAK = 2
DEFAULT_MAX_TIME = 600.0  # seconds for a whole run unless --max-time says otherwise (issue 9: 10 min)


class RunGuard(Invoker):
    def __init__(self, inner: Invoker, *, max_time: Optional[float] = None, keep_going: bool = False):
        self.inner = inner
        self.isolated = getattr(inner, "isolated", False)
        self.max_time = max_time
        self.keep_going = keep_going
        self.deadline = None if max_time is None else time.monotonic() + max_time
        self.per_call = getattr(inner, "timeout", None)
        self.streak = 0
        self.background = 0
        self.stopped: Optional[str] = None
        emit({"ev": "guard", "max_time": max_time})

    def start(self) -> None:
        start = getattr(self.inner, "start", None)
        if start is not None:
            start()

    def close(self) -> None:
        self.inner.close()

    def call(self, *args) -> Outcome:
        return self._guarded(lambda: self.inner.call(*args))

    def call_with(self, fn, *args) -> Outcome:
        return self._guarded(lambda: self.inner.call_with(fn, *args))

    def _guarded(self, make_call) -> Outcome:
        if self.stopped is None and self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.stopped = f"not run: the run's time limit (--max-time {self.max_time:g} s) is spent"
            else:
                self.inner.timeout = min(self.per_call if self.per_call is not None else math.inf, left)
        if self.stopped is not None:
            return Outcome("timeout", None, self.stopped, "")
        emit({"ev": "call", "limit": getattr(self.inner, "timeout", None)})
        try:
            out = make_call()
        finally:
            emit({"ev": "done"})
        if out.kind != "timeout":
            self.streak = 0
            return out
        self.streak += 1
        if not self.isolated:
            self.background += 1
        if self.streak >= STREAK and not self.keep_going:
            self.stopped = (f"not run after earlier timeouts ({self.streak} calls in a row timed out; "
                            "--keep-going calls them anyway)")
        return out

    def note(self) -> Optional[str]:
        """What the report should say about calls still running, or None."""
        if not self.background:
            return None
        return (f"{self.background} timed-out call(s) may still be running in background threads of "
                "this process (Python cannot stop a thread); use --isolate to have them killed")
