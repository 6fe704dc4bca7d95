"""Grading adapters written for another array library: ``--framework numpy|jax|mlx|cupy``.

torch stays the default and is never wrapped. For another framework the loaded adapter is
wrapped, once, in :class:`FrameworkCall` before the invoker is made (in the child under
``--isolate``: the loaders below are make_invoker's ``loader``), and everything after the call is
unchanged: the runner keeps building torch inputs, grading torch outputs, with the same budgets,
diagnoses and reports. FrameworkCall

* converts every torch tensor in the arguments (top level, in dicts, lists, tuples and dataclass
  fields such as a spec's tensors) to the framework's array (``to_native`` of the framework's
  module: DLPack where the library takes it, else a copy through NumPy);
* calls the adapter;
* converts the framework's arrays in what it returned (a tensor, or tuples, lists and dicts of
  them) back to torch tensors (``to_torch``). A torch tensor or another library's array in the
  output is not converted: it becomes a :class:`Foreign` value, graded as what it is (not a
  tensor: shape-changed), as is anything else (a list of floats, None).

A dtype the framework cannot represent raises ``conformance.Unsupported`` with the reason
("--framework numpy: numpy has no bfloat16"): the case is reported skipped, unsupported, with
that reason, never passed. ``conformance.Unsupported`` raised by the adapter works as for torch.

Gradients (``--grad``) are graded for JAX only (conformance/frameworks/jax_grad.py: a
torch.autograd.Function whose backward is ``jax.vjp``); the other frameworks, ``--autocast``,
``--compile``, ``--triton-interpret`` and the protocols whose adapter returns an object the runner
drives (rope.module, attention.decode, mrope.decode) are one-line usage errors with a framework.
One module per framework (``_numpy``, ``_jax``, ``_mlx``, ``_cupy``) holds NAME, MODULE (import
name), DIST (distribution, for the report's version), DEVICES, ``library()``, ``to_native``,
``is_native`` and ``to_torch``. docs/frameworks.md describes the whole.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
from typing import Callable

from conformance.errors import UsageError

NAMES = ("torch", "numpy", "jax", "mlx", "cupy")
_MODULES = {"numpy": "_numpy", "jax": "_jax", "mlx": "_mlx", "cupy": "_cupy"}
# Without a --dtype, frameworks without a native bfloat16 grade float32 and float64 (docs/frameworks.md).
NO_BFLOAT16 = ("numpy", "cupy")
_MAX_DEPTH = 8


def backend(name: str):
    """The conversion module of a framework other than torch."""
    if name not in _MODULES:
        raise UsageError(f"framework must be one of {', '.join(NAMES)}, got {name!r}")
    return importlib.import_module(f"conformance.frameworks.{_MODULES[name]}")


def require(name: str):
    """The framework's library, imported; UsageError with one line where it is not installed."""
    be = backend(name)
    try:
        return be.library()
    except ImportError:
        raise UsageError(f"--framework {name}: {name} is not installed (pip install {be.INSTALL})") from None
    except Exception as exc:  # noqa: BLE001 - a broken installation: still one line
        from conformance.isolation import error_line

        raise UsageError(f"--framework {name}: {name} cannot be imported ({error_line(exc)})") from None


def version(name: str) -> str:
    if name == "torch":
        import torch

        return torch.__version__
    from importlib import metadata

    try:
        return metadata.version(backend(name).DIST)
    except metadata.PackageNotFoundError:
        return "unknown"


def check(opts, proto) -> None:
    """Validate ``opts.framework`` against the run's other options; OptionError (one line)."""
    from conformance.runner import OptionError

    name = opts.framework
    if name not in NAMES:
        raise OptionError(f"framework must be one of {', '.join(NAMES)}, got {name!r}")
    if name == "torch":
        return
    kind = str(opts.device).partition(":")[0]
    be = backend(name)
    if kind not in be.DEVICES:
        raise OptionError(f"--framework {name} runs on {' or '.join(be.DEVICES)} only, not --device {opts.device}")
    if opts.grad and name != "jax":
        raise OptionError(f"--grad with --framework {name}: gradients are graded for torch and jax only")
    for flag, given in (("--autocast", opts.autocast), ("--compile", opts.compile),
                        ("--triton-interpret", opts.triton_interpret)):
        if given:
            raise OptionError(f"{flag} is torch's: it cannot be used with --framework {name}")
    if getattr(proto, "drives_calls", False):
        raise OptionError(f"--framework {name}: {proto.name}'s adapter returns an object the runner calls with "
                          f"torch tensors ({proto.signature}); grade it with torch")
    try:
        require(name)
    except UsageError as exc:
        raise OptionError(str(exc)) from None


def default_dtypes(opts, proto, defaults) -> list:
    """Without an explicit --dtype, NumPy and CuPy (no native bfloat16) grade float32 and float64
    (dtype-free protocols: nothing to change); returns the note that says so."""
    if opts.framework in NO_BFLOAT16 and not proto.dtype_free and tuple(opts.dtypes) == tuple(defaults):
        opts.dtypes = ("float32", "float64")
        return [f"--framework {opts.framework}: {opts.framework} has no native bfloat16, so float32 and float64 "
                "are graded by default (--dtype bfloat16 grades it through ml_dtypes where installed)"]
    return []


def describe(opts) -> dict:
    """The report environment's entries for the framework."""
    return {"framework": opts.framework, "framework_version": version(opts.framework)}


def note(opts) -> str:
    """The report's note for a run with another framework."""
    name = opts.framework
    return (f"--framework {name}: the adapter received {name} arrays and returned {name} arrays, converted "
            f"from and to torch tensors by posref ({backend(name).HANDOVER}); the budgets, the reference and "
            "the diagnoses are the same as for torch (docs/frameworks.md)")


# ------------------------------------------------------------------------------------------
# The wrapper


class Foreign:
    """What replaces a torch tensor or another library's array in a non-torch adapter's output:
    not a tensor, so the output is graded as one that is not (shape-changed). Its type name says
    what it was."""

    def __init__(self, what: str):
        self.what = what

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


def foreign(value, framework: str) -> Foreign:
    kind = f"{type(value).__module__.split('.')[0]}.{type(value).__name__}"
    made = type(f"{kind} (a {framework} adapter returns {framework} arrays)", (Foreign,), {})
    return made(kind)


def to_native_tree(be, value, depth: int = 0, convert=None):
    """``value`` with every torch tensor replaced by ``convert(tensor)`` (default be.to_native):
    tuples, lists, dicts and dataclass instances are rebuilt (a dataclass by a shallow copy)."""
    import torch

    convert = convert or be.to_native
    if isinstance(value, torch.Tensor):
        return convert(value)
    if depth >= _MAX_DEPTH:
        return value
    if type(value) in (list, tuple):
        return type(value)(to_native_tree(be, v, depth + 1, convert) for v in value)
    if type(value) is dict:
        return {k: to_native_tree(be, v, depth + 1, convert) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changed = {}
        for f in dataclasses.fields(value):
            held = getattr(value, f.name, None)
            new = to_native_tree(be, held, depth + 1, convert)
            if new is not held:
                changed[f.name] = new
        if changed:
            value = copy.copy(value)
            for k, v in changed.items():
                object.__setattr__(value, k, v)  # frozen dataclasses too
    return value


def from_native_tree(be, value, framework: str, depth: int = 0):
    """``value`` with the framework's arrays as torch tensors; torch tensors and other libraries'
    arrays become Foreign; containers are rebuilt (a named tuple as a tuple, as on the wire)."""
    import numpy
    import torch

    if be.is_native(value):
        try:
            return be.to_torch(value)
        except Exception:  # noqa: BLE001 - e.g. an object-dtype array: graded as what it is
            return foreign(value, framework)
    if isinstance(value, torch.Tensor) or isinstance(value, numpy.ndarray) or hasattr(value, "__dlpack__"):
        return foreign(value, framework)
    if depth < _MAX_DEPTH and isinstance(value, (list, tuple)):
        items = [from_native_tree(be, v, framework, depth + 1) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if depth < _MAX_DEPTH and type(value) is dict:
        return {k: from_native_tree(be, v, framework, depth + 1) for k, v in value.items()}
    return value


class FrameworkCall:
    """The adapter of another framework as a torch-in, torch-out callable (module docstring).
    Picklable when ``fn`` is (--isolate without a TARGET string)."""

    def __init__(self, fn: Callable, framework: str):
        if not callable(fn):
            raise ValueError(f"fn must be callable, got {type(fn).__name__}")
        backend(framework)
        self.fn = fn
        self.framework = framework

    def __repr__(self) -> str:
        return f"FrameworkCall({self.fn!r}, {self.framework!r})"

    def __call__(self, *args):
        be = backend(self.framework)
        be.library()
        if self.framework == "jax":
            from conformance.frameworks import jax_grad

            if jax_grad.wants_grad(args):
                return jax_grad.call(self, args)
        out = self.fn(*to_native_tree(be, args))
        return from_native_tree(be, out, self.framework)


def _loader(name: str, training: bool):
    def load(target: str):
        from conformance.loader import load_target

        wrapped = FrameworkCall(load_target(target), name)
        if training:
            from conformance.training import TrainingCall

            return TrainingCall(wrapped)
        return wrapped

    load.__name__ = load.__qualname__ = f"load_{'training_' if training else ''}{name}"
    return load


# make_invoker's ``loader`` for --isolate: the child loads TARGET and wraps it there.
load_numpy, load_jax, load_mlx, load_cupy = (_loader(n, False) for n in ("numpy", "jax", "mlx", "cupy"))
load_training_jax = _loader("jax", True)


def make_invoker(fn, target, opts):
    """The run's invoker for an adapter of ``opts.framework`` (not torch): in-process, or in the
    child under --isolate (which wraps the TARGET it loads), with TrainingCall around it for --grad."""
    from conformance.isolation import make_invoker as invoker_for
    from conformance.training import TrainingCall

    name, training = opts.framework, bool(opts.grad)
    if opts.isolate and target is not None:
        loader = f"conformance.frameworks:load_{'training_' if training else ''}{name}"
        return invoker_for(None, target, isolate=True, timeout=opts.timeout, loader=loader)
    if fn is None:
        from conformance.loader import load_target

        fn = load_target(target)
    wrapped = FrameworkCall(fn, name)
    if training:
        wrapped = TrainingCall(wrapped)
    return invoker_for(wrapped, None if opts.isolate else target, isolate=opts.isolate, timeout=opts.timeout)


__all__ = ["NAMES", "FrameworkCall", "Foreign", "backend", "check", "make_invoker", "require"]
