"""``--compile``: grade the adapter under ``torch.compile`` as well as eagerly.

Design (docs/design.md, "Compiled grading"): every case is graded twice, first through the usual
invoker, then through a second one whose adapter is :class:`CompiledCall`, the adapter wrapped
once by ``torch.compile(fn, backend=BACKEND, dynamic=None)`` (one compiled callable per adapter,
reused for every case: dynamo recompiles per distinct guard, e.g. a new shape, and marks a dimension
dynamic after its first change). Each half is its own CaseResult; the compiled one has
``compiled=True`` and keeps the case id, as dtypes do. A compiled result that fails or errors where
the eager one passed (or was acceptable) gets the core diagnosis ``compile-fault`` first, the
underlying diagnoses (position-offset, raised, ...) after it: "correct eagerly, wrong under
torch.compile", the shape of vLLM's interleaved M-RoPE bug (right in eager mode, shifted after
compile).

Protocols whose adapter returns a module that posref then calls (``drives_calls``) reach the
returned callable through ``invoker.call_with``: :class:`CompiledInvoker` compiles that callable
too (once per object). The probe and the black-box identities run eagerly only.

Where torch.compile cannot run at all (torch without dynamo, no C++ compiler for inductor, an
unsupported platform), :func:`unavailable` says why in one line, found by compiling a two-operation
function first; the runner then grades the eager half only and notes that reason once.

Recompiles: dynamo stops compiling a code object after ``recompile_limit`` (8) distinct guards and
silently runs it eagerly from then on, which would grade eager code as compiled. The calls run with
that limit raised to :data:`RECOMPILE_LIMIT` and ``fail_on_recompile_limit_hit`` set, so that a run
past it is an error of that case, never an eager result labelled compiled.

torch is imported inside functions only (the reference never imports torch; neither does the
runner's import).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Optional

DEFAULT_BACKEND = "inductor"
RECOMPILE_LIMIT = 4096  # far above a run's distinct (shape, spec, dtype) guards per code object
COMPILE_FAULT = "compile-fault"


class CompileFailed(RuntimeError):
    """torch.compile's backend raised while compiling the adapter: one line naming the backend and
    what it raised (dynamo's BackendCompilerFailed puts that on its second line, after
    "backend='inductor' raised:")."""


def _compiled_call(compiled, args, kwargs, backend: str):
    """compiled(*args, **kwargs) with the recompile limits raised; a backend failure becomes
    CompileFailed (its cause kept), any other exception goes through as the adapter's."""
    try:
        with _config_patch():
            return compiled(*args, **kwargs)
    except Exception as exc:
        inner = _backend_failure(exc)
        if inner is None:
            raise
        raise CompileFailed(f"torch.compile (backend {backend}) failed to compile the adapter: "
                            f"{_first_line(inner)}") from exc


def _backend_failure(exc: BaseException) -> Optional[BaseException]:
    """What the backend raised when exc is dynamo's BackendCompilerFailed, else None."""
    if type(exc).__name__ != "BackendCompilerFailed":
        return None
    return getattr(exc, "inner_exception", None) or exc


def _config_patch():
    """torch._dynamo.config.patch raising the recompile limits (names differ across torch versions)."""
    import torch._dynamo.config as cfg

    wanted = {"recompile_limit": RECOMPILE_LIMIT, "cache_size_limit": RECOMPILE_LIMIT,
              "accumulated_recompile_limit": RECOMPILE_LIMIT, "accumulated_cache_size_limit": RECOMPILE_LIMIT,
              "fail_on_recompile_limit_hit": True}
    known = {k: v for k, v in wanted.items() if hasattr(cfg, k)}
    return cfg.patch(**known) if known else contextlib.nullcontext()


def compile_fn(fn: Callable, backend: str = DEFAULT_BACKEND) -> Callable:
    """torch.compile(fn, backend=backend, dynamic=None): an nn.Module keeps its module (OptimizedModule)."""
    import torch

    return torch.compile(fn, backend=backend, dynamic=None)


class CompiledCall:
    """The adapter compiled on its first call and reused after. Picklable (for --isolate): given a
    TARGET string instead of fn, the child loads TARGET when it unpickles this object."""

    def __init__(self, fn: Optional[Callable] = None, backend: str = DEFAULT_BACKEND, target: Optional[str] = None):
        if fn is None and target is None:
            raise ValueError("CompiledCall needs fn or target")
        if fn is not None and not callable(fn):
            raise ValueError(f"fn must be callable, got {type(fn).__name__}")
        self.fn, self.backend, self.target = fn, str(backend), target
        self._compiled = None

    def __repr__(self) -> str:
        return f"CompiledCall({self.fn if self.fn is not None else self.target!r}, backend={self.backend!r})"

    def __getstate__(self) -> dict:
        # The compiled callable never crosses a process: the child compiles for itself.
        return {"fn": self.fn if self.target is None else None, "backend": self.backend, "target": self.target}

    def __setstate__(self, state: dict) -> None:
        self.fn, self.backend, self.target = state["fn"], state["backend"], state["target"]
        self._compiled = None
        if self.fn is None:
            from conformance.loader import load_target

            self.fn = load_target(self.target)  # a load error is the child's startup error, as without --compile

    def __call__(self, *args):
        if self._compiled is None:
            self._compiled = compile_fn(self.fn, self.backend)
        return _compiled_call(self._compiled, args, {}, self.backend)


class CompiledInvoker:
    """An invoker whose adapter is a CompiledCall; ``call_with(fn, ...)`` (a callable the adapter
    returned, drives_calls protocols) compiles fn too, once per object."""

    isolated = False

    def __init__(self, inner, backend: str = DEFAULT_BACKEND):
        self.inner = inner
        self.backend = backend
        self.isolated = getattr(inner, "isolated", False)
        self._made: dict = {}  # id(fn) -> (fn, compiled): fn kept alive so that its id stays its own

    @property
    def timeout(self):
        return self.inner.timeout

    @timeout.setter
    def timeout(self, value):  # conformance.guard.RunGuard cuts each call's limit to the run's time left
        self.inner.timeout = value

    def start(self) -> None:
        start = getattr(self.inner, "start", None)
        if start is not None:
            start()

    def close(self) -> None:
        self._made.clear()
        self.inner.close()

    def call(self, *args):
        return self.inner.call(*args)

    def call_with(self, fn: Callable, *args):
        held = self._made.get(id(fn))
        if held is None or held[0] is not fn:
            held = (fn, _LazyCompiled(fn, self.backend))
            self._made[id(fn)] = held
        return self.inner.call_with(held[1], *args)


class _LazyCompiled:
    """fn compiled at its first call (inside the invoker, so a compile error is the call's outcome)."""

    def __init__(self, fn, backend):
        self.fn, self.backend, self._compiled = fn, backend, None

    def __call__(self, *args, **kwargs):
        if self._compiled is None:
            self._compiled = compile_fn(self.fn, self.backend)
        return _compiled_call(self._compiled, args, kwargs, self.backend)


def make_compiled_invoker(fn, target, *, isolate: bool, timeout, training: bool, backend: str):
    """The compiled half's invoker: the adapter as a CompiledCall (inside TrainingCall under --grad /
    --autocast, so that the backward runs through the compiled graph), in-process or isolated."""
    from conformance.isolation import make_invoker

    if fn is None and not isolate:
        from conformance.loader import load_target

        fn = load_target(target)
    call = CompiledCall(fn, backend) if fn is not None else CompiledCall(None, backend, target=target)
    if training:
        from conformance.training import TrainingCall

        call = TrainingCall(call)
    if isolate:
        # The wrapper pickles (the adapter by reference, or TARGET to load in the child).
        inner = make_invoker(call, None, isolate=True, timeout=timeout)
    else:
        inner = make_invoker(call, target, isolate=False, timeout=timeout)
    return CompiledInvoker(inner, backend)


# Why torch.compile cannot run here, per (backend, device): found once per process.
_UNAVAILABLE: dict = {}

_PROBE_SOURCE = "def posref_compile_probe(x):\n    return x * 2.0 + 1.0\n"


def unavailable(backend: str = DEFAULT_BACKEND, device: str = "cpu") -> Optional[str]:
    """None when torch.compile with ``backend`` compiles and runs a two-operation function on
    ``device`` here; else one line saying why (no dynamo, no C++ compiler, unsupported platform,
    a backend that raises)."""
    key = (str(backend), str(device))
    if key not in _UNAVAILABLE:
        _UNAVAILABLE[key] = _try_compile(*key)
    return _UNAVAILABLE[key]


def _try_compile(backend: str, device: str) -> Optional[str]:
    from conformance.isolation import error_line

    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        return f"torch cannot be imported ({error_line(exc)})"
    if not hasattr(torch, "compile"):
        return f"torch {getattr(torch, '__version__', '?')} has no torch.compile"
    try:
        import torch._dynamo  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - a build without dynamo
        return f"torch {torch.__version__} has no dynamo ({error_line(exc)})"
    # A new code object each time: dynamo caches compiled code per code object, and a probe that
    # reused the cache of an earlier backend would prove nothing about this one.
    space: dict = {}
    exec(compile(_PROBE_SOURCE, f"<posref compile probe {backend}>", "exec"), space)  # noqa: S102
    try:
        x = torch.arange(4, dtype=torch.float32, device=device)
        with _config_patch():
            y = compile_fn(space["posref_compile_probe"], backend)(x)
        if not torch.equal(y, x * 2.0 + 1.0):
            return f"torch.compile (backend {backend}) computed x * 2 + 1 wrong on a 4-element tensor"
    except Exception as exc:  # noqa: BLE001 - whatever the missing compiler raises
        return f"torch.compile (backend {backend}) cannot run here: {_first_line(_backend_failure(exc) or exc)}"
    return None


def _first_line(exc: BaseException) -> str:
    """The exception's type and first non-empty line (inductor's messages run to pages)."""
    text = next((t.strip() for t in str(exc).splitlines() if t.strip()), "")
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."


def compile_fault(eager, compiled, backend: str):
    """The compile-fault Diagnosis for a compiled CaseResult that fails or errors where the eager
    result of the same case and dtype passed or was acceptable; None otherwise."""
    from conformance.results import Diagnosis

    if eager is None or eager.verdict not in ("pass", "acceptable") or compiled.verdict not in ("fail", "error"):
        return None
    under = [d.code for d in compiled.diagnoses if d.code != COMPILE_FAULT]
    what = "raises" if compiled.verdict == "error" else "fails"
    because = f" ({', '.join(under)})" if under else ""
    ratio = f", error/budget {compiled.budget_ratio:.3g}" if compiled.budget_ratio is not None else ""
    return Diagnosis(COMPILE_FAULT, f"correct eagerly ({eager.verdict}), {what} under torch.compile "
                                    f"(backend {backend}){ratio}{because}")


__all__ = [
    "COMPILE_FAULT",
    "CompiledCall",
    "CompileFailed",
    "CompiledInvoker",
    "DEFAULT_BACKEND",
    "compile_fault",
    "make_compiled_invoker",
    "unavailable",
]
