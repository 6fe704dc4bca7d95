"""Training mode of the runner: ``--grad`` (grade the backward pass) and ``--autocast DTYPE``.

Design: nothing in the invoker or the wire format changes. The adapter is wrapped in
:class:`TrainingCall`, a callable that takes the adapter's arguments followed, optionally, by a
*plan* (a dict tagged with :data:`PLAN_KEY`, so that it can never be mistaken for an adapter
argument):

    {PLAN_KEY: 1,
     "grad_args":  (0, (1, "wq"))  the float inputs whose gradients are wanted: an index into
                                   the arguments, or a path (index, key) to a tensor held in a
                                   dict argument (attention's weights {"wq", ...})
     "cotangents": (g,)            one tensor per output tensor (the output's layout and shape)
     "autocast":   "bfloat16"      or None: run the adapter inside torch.autocast(device, dtype)
     "device":     "cpu"           torch.autocast's device_type
     "gradcheck":  None            or {"eps", "atol", "rtol"}: run torch.autograd.gradcheck instead}

A call without a plan (the probe, the black-box checks) is the adapter's plain call. With a plan,
the float inputs at ``grad_args`` become fresh leaves (``detach().requires_grad_()``: same
storage, so the input-mutation check still sees the caller's tensors), the adapter runs (inside
autocast when asked), and ``torch.autograd.grad(outputs, leaves, cotangents, allow_unused=True)``
runs outside autocast (as torch recommends). The call returns

    {"output": the output, detached,
     "grads": (gradient or None per grad_arg),            None: no gradient reached that input
     "cotangent_dtypes": (dtype name per output),         the cotangent is cast to its output's dtype
     "problem": None or one line,                         why no gradient could be computed
     "cotangent_written": [output index]}                 outputs whose cotangent the backward overwrote

or the plain (detached) output when no gradient is wanted (autocast only). In-process the runner
calls ``make_invoker(TrainingCall(fn), ...)``; isolated (--isolate) the child loads TARGET with
:func:`load_training_target` (make_invoker's ``loader`` option): dicts, tuples, None and tensors
cross the wire format as they are.

Runner-side helpers (family-free): :func:`cotangent` draws a case's cotangent from its id,
:func:`output_dtypes` reads the dtypes of a returned value, :func:`gradcheck_identity` runs the
float64 gradcheck through an invoker. torch is imported inside functions only.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Optional

import numpy as np

PLAN_KEY = "posref-training-plan"
AUTOCAST_DTYPES = ("bfloat16", "float16")
COTANGENT_ROLE = "cotangent"


def make_plan(grad_args=(), cotangents=(), autocast: Optional[str] = None, device: str = "cpu",
              gradcheck: Optional[dict] = None) -> dict:
    """The plan TrainingCall reads (see the module docstring)."""
    return {
        PLAN_KEY: 1,
        "grad_args": tuple(_grad_arg(i) for i in grad_args),
        "cotangents": tuple(cotangents),
        "autocast": autocast,
        "device": str(device).partition(":")[0],
        "gradcheck": gradcheck,
    }


def _grad_arg(item):
    """An argument index, or a path (index, key) into a dict argument, as the plan holds it."""
    if isinstance(item, (tuple, list)):
        if len(item) != 2:
            raise ValueError(f"grad_args: a path is (argument index, dict key), got {item!r}")
        return (int(item[0]), item[1])
    return int(item)


def _get_arg(args, where):
    """The value at an index or a path (index, key)."""
    if isinstance(where, tuple):
        return args[where[0]][where[1]]
    return args[where]


def _set_arg(args: list, where, value) -> None:
    """Put value at an index, or at a path into a shallow copy of the dict argument (the caller's
    dict is never modified; its other entries are the same objects)."""
    if isinstance(where, tuple):
        i, key = where
        held = dict(args[i])
        held[key] = value
        args[i] = held
    else:
        args[where] = value


def split_plan(args: tuple) -> tuple[tuple, Optional[dict]]:
    """(adapter arguments, plan or None)."""
    if args and isinstance(args[-1], dict) and args[-1].get(PLAN_KEY) == 1:
        return tuple(args[:-1]), args[-1]
    return tuple(args), None


def autocast_context(plan: dict):
    """torch.autocast(device, dtype) for the plan, or a context that does nothing."""
    name = plan.get("autocast")
    if not name:
        return contextlib.nullcontext()
    import torch

    return torch.autocast(device_type=plan.get("device") or "cpu", dtype=getattr(torch, name))


def _detached(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (tuple, list)):
        return type(value)(_detached(v) for v in value) if type(value) in (tuple, list) else tuple(
            _detached(v) for v in value)  # a named tuple becomes a tuple, as on the wire
    return value


def _tensors(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


class TrainingCall:
    """The adapter with an optional trailing plan (module docstring). Picklable when fn is."""

    def __init__(self, fn: Callable):
        if not callable(fn):
            raise ValueError(f"fn must be callable, got {type(fn).__name__}")
        self.fn = fn

    def __repr__(self) -> str:
        return f"TrainingCall({self.fn!r})"

    def __call__(self, *args):
        args, plan = split_plan(args)
        if plan is None:
            return self.fn(*args)
        if plan.get("gradcheck"):
            return self._gradcheck(args, plan)
        args = list(args)
        leaves = []
        for i in plan.get("grad_args", ()):
            a = _get_arg(args, i)
            if hasattr(a, "is_floating_point") and a.is_floating_point():
                a = a.detach().requires_grad_(True)
                _set_arg(args, i, a)
            leaves.append(a)
        with autocast_context(plan):
            out = self.fn(*args)
        if not leaves:
            return _detached(out)
        return self._backward(out, leaves, plan)

    def _backward(self, out, leaves, plan) -> dict:
        import torch

        outs = _tensors(out)
        cots = list(plan.get("cotangents", ()))
        result = {"output": _detached(out), "grads": tuple(None for _ in leaves),
                  "cotangent_dtypes": tuple(str(o.dtype).replace("torch.", "") for o in outs), "problem": None}
        if len(outs) != len(cots):
            result["problem"] = f"the call returned {len(outs)} tensor(s), expected {len(cots)}"
            return result
        pairs = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
        if not pairs:
            result["problem"] = ("the output does not require grad: it is detached from the inputs "
                                 "(computed under no_grad, .detach(), .data or a NumPy round trip)")
            return result
        usable = [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
        # The adapter's backward gets copies: one that writes into its incoming gradient (Liger's
        # Triton RoPE rotates grad_output in place) must not change the cotangent the gradient is
        # graded against. Whether it wrote is kept for a note.
        given = [c.to(device=o.device, dtype=o.dtype, copy=True) for o, c in pairs]
        pristine = [g.clone() for g in given]
        try:
            grads = torch.autograd.grad([o for o, _ in pairs],
                                        usable,
                                        grad_outputs=given,
                                        allow_unused=True)
        except Exception as exc:  # noqa: BLE001 - the backward's failure is the finding
            from conformance.isolation import error_line

            result["problem"] = f"the backward pass raised {error_line(exc)}"
            return result
        from conformance.core.tensors import same_bits

        result["cotangent_written"] = [i for i, (g, p) in enumerate(zip(given, pristine)) if not same_bits(g, p)]
        got = iter(grads)
        result["grads"] = tuple(
            _grad_or_none(next(got)) if isinstance(t, torch.Tensor) and t.requires_grad else None
            for t in leaves
        )
        return result

    def _gradcheck(self, args, plan) -> dict:
        """torch.autograd.gradcheck of the adapter in its float inputs at grad_args."""
        import torch

        from conformance.core.tensors import same_bits

        idx = tuple(plan.get("grad_args", ()))
        kept = {i: _get_arg(args, i).detach().clone() for i in idx}
        self.fn(*args)  # Unsupported (and any plain failure) surfaces as the call's own outcome
        # A call that writes into its inputs (Liger's Triton RoPE at one head) changes what
        # gradcheck's finite differences perturb: said with the failure.
        written = [i for i in idx if not same_bits(_get_arg(args, i), kept[i])]
        opts = dict(plan["gradcheck"])
        base = list(args)

        def f(*xs):
            call = list(base)
            for i, x in zip(idx, xs):
                _set_arg(call, i, x)
            return self.fn(*call)

        inputs = tuple(_get_arg(base, i).detach().clone().requires_grad_(True) for i in idx)
        try:
            ok = torch.autograd.gradcheck(f, inputs, eps=opts.get("eps", 1e-6), atol=opts.get("atol", 1e-5),
                                          rtol=opts.get("rtol", 1e-3), raise_exception=True)
            return {"gradcheck": bool(ok), "message": ""}
        except Exception as exc:  # noqa: BLE001 - GradcheckError, or a backward that raised
            from conformance.isolation import error_line

            text = str(exc).strip().splitlines()
            first = next((t for t in text if t.strip()), "") if text else ""
            if type(exc).__name__ != "GradcheckError":
                first = error_line(exc)
            if written:
                first += (f" (the call writes into its input argument{'s' if len(written) > 1 else ''} "
                          f"{', '.join(str(i) for i in written)} in place, so the finite differences see "
                          "inputs it has already rotated)")
            return {"gradcheck": False, "message": first}


def _grad_or_none(g):
    return None if g is None else g.detach()


def load_training_target(target: str) -> TrainingCall:
    """make_invoker's ``loader`` for --isolate with --grad / --autocast: TARGET, wrapped."""
    from conformance.loader import load_target

    return TrainingCall(load_target(target))


def make_training_invoker(fn, target, *, isolate: bool, timeout):
    """An invoker whose calls accept a trailing plan (in-process or isolated)."""
    from conformance.isolation import make_invoker

    if isolate:
        if target is not None:
            return make_invoker(None, target, isolate=True, timeout=timeout,
                                loader="conformance.training:load_training_target")
        return make_invoker(TrainingCall(fn), None, isolate=True, timeout=timeout)
    if fn is None:
        from conformance.loader import load_target

        fn = load_target(target)
    return make_invoker(TrainingCall(fn), target, isolate=False, timeout=timeout)


# ------------------------------------------------------------------------------------------
# Runner side


def cotangent(case_id: str, shape, dtype: str, index: int = 0) -> np.ndarray:
    """The case's cotangent g, float64 of ``shape``, drawn from the case id like its inputs
    (reference.golden.inputs: values in [-2, 2] exactly representable in bfloat16 and float16,
    so g is the same in every dtype). Output ``index`` > 0 (a second output) gets its own stream."""
    from reference.golden.inputs import representable_inputs

    role = COTANGENT_ROLE if index == 0 else f"{COTANGENT_ROLE}-{index}"
    return representable_inputs(case_id, tuple(shape), role=role)


def output_dtypes(value) -> tuple:
    """Dtype names of the tensors in a returned value (a tensor, or a tuple / list of them)."""
    return tuple(str(t.dtype).replace("torch.", "") for t in _tensors(value))


def budget_dtype(value, input_dtype: Optional[str], autocast: Optional[str]) -> Optional[str]:
    """The dtype whose budget grades a value under autocast: the dtype autocast chose when every
    output arrived in it, else the input dtype (an output in any other dtype stays dtype-changed)."""
    if not autocast or input_dtype is None:
        return input_dtype
    got = set(output_dtypes(value))
    return autocast if got == {autocast} else input_dtype


def unpack(value):
    """(output, training dict or None) of a TrainingCall result."""
    if isinstance(value, dict) and "output" in value and "grads" in value:
        return value["output"], value
    return value, None


# Finite differences in float64 (torch's defaults, atol loosened to 1e-5), then, where those
# fail, at a float32 implementation's resolution: many correct implementations compute in float32
# inside a float64 call (HF's eager softmax, HF's vision RoPE, torchscale's xPos), and the standard
# profile admits that in the forward. With eps = 2^-10 their rounding, about u_32 |y| / eps ~ 1e-4,
# and the truncation error of a smooth map, about eps^2 |f'''| / 6 ~ 1e-7 |f'''|, stay inside
# atol 2^-7 + rtol 1e-2 |J|, while a wrong backward (a transposed rotation, a missing scale or
# kernel, a detached part) is off by O(|J|) and still fails.
GRADCHECK_FLOAT64 = {"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3}
GRADCHECK_FLOAT32 = {"eps": 2.0**-10, "atol": 2.0**-7, "rtol": 1e-2}


def _run_gradcheck(invoker, args, grad_args, device: str, settings: dict):
    return invoker.call(*args, make_plan(grad_args, (), None, device, gradcheck=dict(settings)))


def gradcheck_identity(invoker, args, grad_args, device: str, identity_id: str, what: str):
    """IdentityResult of torch.autograd.gradcheck in float64 run through the invoker: float64
    finite differences, else float32-resolution ones (a pass that says so); skip when the
    implementation raises Unsupported for float64."""
    from conformance.results import Diagnosis, IdentityResult

    outcome = _run_gradcheck(invoker, args, grad_args, device, GRADCHECK_FLOAT64)
    if outcome.kind == "unsupported":
        return IdentityResult(id=identity_id, dtype="float64", verdict="skip",
                              message=f"float64 not supported: {outcome.error}")
    if outcome.kind != "ok":
        return IdentityResult(id=identity_id, dtype="float64", verdict="error",
                              message=f"gradcheck could not run: {outcome.error}",
                              diagnoses=[Diagnosis(outcome.kind, outcome.error or outcome.kind)])
    value = outcome.value if isinstance(outcome.value, dict) else {}
    if value.get("gradcheck") is True:
        return IdentityResult(id=identity_id, dtype="float64", verdict="pass",
                              message=f"torch.autograd.gradcheck passes on {what}")
    message = value.get("message") or "gradcheck returned False"
    coarse = _run_gradcheck(invoker, args, grad_args, device, GRADCHECK_FLOAT32)
    if coarse.kind == "ok" and isinstance(coarse.value, dict) and coarse.value.get("gradcheck") is True:
        return IdentityResult(id=identity_id, dtype="float64", verdict="pass",
                              message=(f"torch.autograd.gradcheck passes on {what} at float32 resolution "
                                       f"(eps 2^-10, atol 2^-7, rtol 1e-2) but not with float64 finite "
                                       f"differences ({message}): the implementation computes in float32 "
                                       f"inside a float64 call"))
    return IdentityResult(id=identity_id, dtype="float64", verdict="fail",
                          message=f"torch.autograd.gradcheck fails on {what}: {message}")


__all__ = [
    "AUTOCAST_DTYPES",
    "PLAN_KEY",
    "TrainingCall",
    "budget_dtype",
    "cotangent",
    "gradcheck_identity",
    "load_training_target",
    "make_plan",
    "make_training_invoker",
    "output_dtypes",
    "split_plan",
    "unpack",
]
