"""``--triton-interpret``: grade Triton kernels on a CPU through Triton's interpreter.

Design (docs/design.md, "Triton kernels on a CPU"): Triton decides at *decoration* time whether a
kernel is compiled for a GPU or interpreted: ``triton.jit`` reads ``TRITON_INTERPRET`` (through
``triton.knobs.runtime.interpret``) when the decorator runs, that is when the module defining the
kernel is imported, and returns an ``InterpretedFunction`` instead of a ``JITFunction``. So the
variable must be set before the target (and the library it imports) is imported: :func:`enable`
sets it in this process's environment, which the isolated child processes (--isolate) and the
supervised grading process inherit. The interpreter then runs each program instance of a launch
in NumPy, on CPU tensors (``--device cpu``, the only device this option accepts).

What was imported before the variable was set keeps its compiled kernels; a run whose adapter was
handed over already imported (the Python API with a callable) may hold such kernels.
:func:`compiled_kernels` names them (a scan of the loaded modules' globals for ``JITFunction``
objects, autotuned and heuristics wrappers included), and the report says so: those kernels would
be launched for a GPU and fail on CPU tensors, which the cases then show as ``raised``.

The run's report carries ``triton_interpret``: ``{"triton": version, "interpreted": [kernels this
run launched through the interpreter], "launches": n, "compiled": [kernels decorated before the
variable was set], "isolated": bool}`` (conformance.results.Report; launches are counted by
wrapping ``InterpretedFunction.run`` in this process, so not those of --isolate's child), a line in
every report, and the environment echo's ``triton`` and ``TRITON_INTERPRET``.

bfloat16: the interpreter computes it on raw bits (:func:`bfloat16_problem`); the runner then
grades float32 alone by default.

Sizing: the interpreter runs each program instance of the grid in Python (Liger's RoPE kernel at
[1, 32, 4096, 128]: 13 s a call on this machine), so under this option the default case selection
(``--shapes sample``) keeps the cases up to :data:`MAX_ELEMENTS` elements and one case of each
kind above it (:func:`sample`); ``--shapes full`` grades them all (docs/performance.md).

triton is imported inside functions only, and never before :func:`enable` has set the variable.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

ENV = "TRITON_INTERPRET"
# Largest case (elements of its floating inputs, q and k together) kept by the default selection
# under the interpreter; measured (docs/performance.md): Liger's RoPE at 2^20 elements takes about
# 1.5 s a call through the interpreter here.
MAX_ELEMENTS = 1 << 20


def unavailable() -> Optional[str]:
    """None when Triton can be imported here; otherwise the one-line reason (not installed)."""
    import importlib.util

    try:
        found = importlib.util.find_spec("triton")
    except (ImportError, ValueError):  # a broken or half-removed installation
        found = None
    if found is None:
        return "Triton is not installed here (pip install triton): --triton-interpret needs it"
    return None


def enable() -> None:
    """Set TRITON_INTERPRET=1 in this process's environment (children inherit it). Where triton is
    already imported, its runtime knob is reset so that it reads the variable again (a value set
    through ``triton.knobs`` would win over the environment)."""
    os.environ[ENV] = "1"
    _record_launches()
    knobs = getattr(sys.modules.get("triton"), "knobs", None)
    runtime = getattr(knobs, "runtime", None)
    if runtime is not None:
        try:
            runtime.__dict__.pop("interpret", None)
        except (AttributeError, TypeError):  # an older triton without knobs: the variable is read
            pass


def require() -> None:
    """:func:`enable`, or OptionError (one line, exit 2 on the command line) where Triton is not
    installed. Called before the target is imported (cli, api, pytest plugin, project table)."""
    reason = unavailable()
    if reason is not None:
        from conformance.runner import OptionError

        raise OptionError(reason)
    enable()


_BF16: dict = {}  # the probe's answer, once per process


def bfloat16_problem() -> Optional[str]:
    """None when Triton's interpreter multiplies bfloat16 tensors right here; otherwise one line
    saying it does not. Triton 3.9's interpreter keeps bfloat16 values as their raw 16 bits
    (numpy has no bfloat16: ``np.uint16``) and converts them only in explicit casts, so bfloat16
    arithmetic inside a kernel runs on the integers: 1.5 * 2.0 gives 0, and Liger's RoPE with
    bfloat16 cos/sin returns NaN and 1e38. Measured with a one-line kernel (o = x * y on four
    bfloat16 values), run through the interpreter once per process."""
    if "answer" not in _BF16:
        _BF16["answer"] = _probe_bfloat16()
    return _BF16["answer"]


def _probe_bfloat16() -> Optional[str]:
    enable()
    try:
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def _multiply(x_ptr, y_ptr, out_ptr, n: tl.constexpr):
            i = tl.arange(0, n)
            tl.store(out_ptr + i, tl.load(x_ptr + i) * tl.load(y_ptr + i))

        x = torch.tensor([1.5, -2.0, 3.0, 0.25], dtype=torch.bfloat16)
        y = torch.tensor([2.0, 0.5, -1.0, 4.0], dtype=torch.bfloat16)
        out = torch.zeros_like(x)
        _multiply[(1,)](x, y, out, 4)
        got = [float(v) for v in out]
    except Exception as exc:  # noqa: BLE001 - whatever the interpreter raises is the answer
        from conformance.isolation import error_line

        return f"Triton's interpreter could not run a bfloat16 kernel here ({error_line(exc)})"
    if got == [3.0, -1.0, -3.0, 1.0]:
        return None
    return (f"Triton's interpreter (triton {_triton_version()}) computes bfloat16 arithmetic on the raw bits: "
            f"1.5 * 2.0 gives {got[0]:g} in a one-line kernel")


def _triton_version() -> str:
    from conformance.environment import _version

    return _version("triton")


# Kernel name -> launches through the interpreter in this process (the report's "interpreted").
LAUNCHED: dict = {}


def _record_launches() -> None:
    """Count every launch of an interpreted kernel (``InterpretedFunction.run``, the grid launch
    ``kernel[grid](...)`` reaches), by the kernel's module and name; posref's own probe kernel is
    left out. Installed once; a triton without that class is left alone."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except Exception:  # noqa: BLE001 - a triton of another layout: the report lists no kernels
        return
    run = InterpretedFunction.run
    if getattr(run, "_posref_records", False):
        return

    def recorded(self, *args, **kwargs):
        fn = getattr(self, "fn", None)
        name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"
        if not name.startswith(__name__ + "."):
            LAUNCHED[name] = LAUNCHED.get(name, 0) + 1
        return run(self, *args, **kwargs)

    recorded._posref_records = True
    InterpretedFunction.run = recorded


def enabled() -> bool:
    return os.environ.get(ENV, "").strip() == "1"


def _kernel_classes() -> tuple:
    """(JITFunction, InterpretedFunction, wrapper classes) of the triton already imported, or ()."""
    if "triton" not in sys.modules:
        return ()
    try:
        from triton.runtime.autotuner import Autotuner, Heuristics
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction
    except Exception:  # noqa: BLE001 - a triton of another layout: nothing to name
        return ()
    return JITFunction, InterpretedFunction, (Autotuner, Heuristics)


def _inner(obj, wrappers, depth: int = 0):
    """The kernel under autotune / heuristics wrappers (their ``fn``)."""
    while isinstance(obj, wrappers) and depth < 8:
        obj, depth = getattr(obj, "fn", None), depth + 1
    return obj


def kernels() -> dict:
    """{"interpreted": [...], "compiled": [...]}: the Triton kernels defined in the loaded modules
    (``module.name``, sorted), by whether the interpreter runs them."""
    found = {"interpreted": set(), "compiled": set()}
    classes = _kernel_classes()
    if not classes:
        return {k: [] for k in found}
    jit, interpreted, wrappers = classes
    for name, module in list(sys.modules.items()):
        if module is None or name.startswith(("triton.", "torch.")):
            continue
        try:
            members = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in members:
            try:
                kernel = _inner(value, wrappers)
                if isinstance(kernel, interpreted):
                    found["interpreted"].add(f"{name}.{attr}")
                elif isinstance(kernel, jit):
                    found["compiled"].add(f"{name}.{attr}")
            except Exception:  # noqa: BLE001 - a module attribute whose isinstance check raises
                continue
    return {k: sorted(v) for k, v in found.items()}


def compiled_kernels() -> list:
    """Kernels decorated before TRITON_INTERPRET was set: they would run compiled, for a GPU."""
    return kernels()["compiled"]


def launches() -> dict:
    """A copy of the launch counts so far (a run's own are those added after it: describe)."""
    return dict(LAUNCHED)


def describe(before: Optional[dict] = None) -> dict:
    """The report's ``triton_interpret`` field, read after grading: the Triton version, the kernels
    launched through the interpreter in this process (and how many launches), and the kernels
    the loaded modules define that were decorated before TRITON_INTERPRET was set (compiled);
    ``before`` (:func:`launches` at the run's start) leaves out earlier runs' launches."""
    before = before or {}
    ran = {name: n - before.get(name, 0) for name, n in LAUNCHED.items() if n > before.get(name, 0)}
    return {"triton": _triton_version(), "interpreted": sorted(ran), "launches": sum(ran.values()),
            "compiled": compiled_kernels()}


def line(info: Optional[dict]) -> str:
    """One line for the reports, "" without --triton-interpret."""
    if not info:
        return ""
    ran = info.get("interpreted") or []
    text = (f"Triton kernels ran in Triton's interpreter (TRITON_INTERPRET=1, triton {info.get('triton')}, CPU "
            f"tensors): {info.get('launches', 0)} launch(es) of {len(ran)} kernel(s)"
            + (f" ({', '.join(ran[:4])}{', ...' if len(ran) > 4 else ''})" if ran else ""))
    compiled = info.get("compiled") or []
    if compiled:
        text += (f"; {len(compiled)} kernel(s) were imported before the interpreter was set and run compiled "
                 f"({', '.join(compiled[:4])}{', ...' if len(compiled) > 4 else ''})")
    return text


def case_elements(case) -> int:
    """Elements of a case's floating inputs (the interpreter's work grows with them)."""
    import numpy as np

    total = 0
    for array in case.arrays.values():
        a = np.asarray(array)
        if a.dtype.kind == "f":
            total += int(a.size)
    return total


def sample(cases: list, limit: int = MAX_ELEMENTS) -> tuple[list, list]:
    """(kept, left out): every case up to ``limit`` elements, and of the larger ones the smallest
    of each kind (the case id without its last part: one group's prefill, one fresh kind), in the
    cases' own order."""
    kept, left, seen = [], [], set()
    large = sorted((c for c in cases if case_elements(c) > limit), key=case_elements)
    chosen = set()
    for case in large:
        kind = case.id.rsplit("/", 1)[0]
        if kind not in seen:
            seen.add(kind)
            chosen.add(id(case))
    for case in cases:
        (kept if case_elements(case) <= limit or id(case) in chosen else left).append(case)
    return kept, left


__all__ = ["ENV", "MAX_ELEMENTS", "bfloat16_problem", "case_elements", "compiled_kernels", "describe", "enable", "enabled", "kernels",
           "launches", "line", "require", "sample", "unavailable"]
