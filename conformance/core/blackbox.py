"""The family-free machinery of the black-box checks: calling the implementation on fresh
inputs, watching its inputs, and turning residuals into IdentityResults.

Each protocol runs its own checks (``Protocol.blackbox``, e.g. conformance/rope/blackbox.py)
with these helpers. After a call crashes or times out no further calls are made (each would cost
a restart or the timeout): the remaining checks are reported as skipped. The generic checks
every protocol can report: ``inputs-not-mutated`` (bit-identical inputs after every call) and
``determinism`` (the same call twice gives the same bits).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from conformance.core.tensors import dtype_name, same_bits, type_name
from conformance.results import Diagnosis, IdentityResult


@dataclass
class Call:
    """One adapter call: the outcome, the returned value and, when usable, its float64 copy."""

    kind: str  # ok | raised | unsupported | crashed | timeout | skipped
    error: str = ""
    value: Any = None
    out64: Optional[np.ndarray] = None
    problem: str = ""  # why out64 is missing although the call returned


@dataclass
class Session:
    """Calls the invoker with fresh tensors, watches the inputs, stops after a crash or hang."""

    invoker: Any
    fatal: Optional[str] = None
    mutations: list = field(default_factory=list)

    def call(self, *args, watch=()) -> Call:
        import torch

        if self.fatal is not None:
            return Call("skipped", f"not run: an earlier call {self.fatal}")
        before = [(name, t, t.clone()) for name, t in watch]
        outcome = self.invoker.call(*args)
        for name, t, copy in before:
            if not same_bits(t, copy):
                self.mutations.append(name)
        if outcome.kind in ("crashed", "timeout"):
            self.fatal = "crashed" if outcome.kind == "crashed" else "timed out"
        if outcome.kind != "ok":
            return Call(outcome.kind, outcome.error or outcome.kind)
        value = outcome.value
        result = Call("ok", value=value)
        from conformance.isolation import RealInterrupt, error_line
        from conformance.wire import raised_inside

        try:
            raised = raised_inside(value)
            if raised is not None:  # under --isolate: reading the value raised in the child
                result.problem = f"the returned value raised {raised} when used"
            elif isinstance(value, torch.Tensor):
                result.out64 = value.detach().to("cpu", torch.float64).numpy()
            else:
                result.problem = f"returned {type_name(value)}, not a tensor"
        except RealInterrupt:
            raise
        except (RuntimeError, TypeError) as exc:
            result.problem = f"the output could not be read as numbers ({error_line(exc)})"
        except BaseException as exc:  # noqa: BLE001 - SystemExit from a tensor subclass: a verdict
            try:
                line = error_line(exc)
            except RealInterrupt:
                raise
            except BaseException:  # noqa: BLE001
                line = "an exception whose description raised in turn"
            result.problem = f"the returned value raised {line} when used"
        return result

    def skipped(self) -> Call:
        return Call("skipped", f"not run: an earlier call {self.fatal}")


def result(check_id, dtype, verdict, residual=None, bound=None, message="", diagnoses=()) -> IdentityResult:
    return IdentityResult(id=check_id, dtype=dtype_name(dtype), verdict=verdict,
                          residual=None if residual is None else float(residual),
                          bound=None if bound is None else float(bound), message=message,
                          diagnoses=list(diagnoses))


def call_failure(check_id, dtype, call: Call) -> IdentityResult:
    """The verdict of a check whose call did not give a usable output."""
    if call.kind == "skipped":
        return result(check_id, dtype, "skip", message=call.error)
    if call.kind == "unsupported":
        return result(check_id, dtype, "skip", message=f"unsupported: {call.error}")
    if call.kind in ("raised", "crashed", "timeout"):
        return result(check_id, dtype, "error", message=call.error,
                      diagnoses=[Diagnosis(call.kind, call.error)])
    return result(check_id, dtype, "error", message=call.problem or "no usable output")


def nonfinite(out, ref_input) -> Optional[Diagnosis]:
    bad = ~np.isfinite(out) & np.isfinite(ref_input)
    if not np.any(bad):
        return None
    return Diagnosis("non-finite", f"the output has NaN or Inf for finite input ({int(bad.sum())} elements)")


def max_or_nan(a) -> float:
    """The largest value (0 for an empty array, NaN when any value is NaN)."""
    a = np.asarray(a, dtype=np.float64)
    if a.size == 0:
        return 0.0
    if np.any(np.isnan(a)):
        return math.nan
    return float(np.max(a))


def same_place_diff(a, b) -> np.ndarray:
    """|a - b| where NaN/Inf in the same place with the same value count as equal (0), and a
    non-finite value facing a different one counts as inf."""
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return np.where(same, 0.0, np.where(np.isfinite(diff), diff, np.inf))


def verdict_of(residual, bound) -> str:
    return "pass" if residual is not None and np.isfinite(residual) and residual <= bound else "fail"


def mutation_result(pid, dtype, session: Session) -> IdentityResult:
    """``<protocol>/inputs-not-mutated``: every watched input held its bits after every call."""
    cid = pid + "inputs-not-mutated"
    if session.mutations:
        names = sorted(set(session.mutations))
        msg = f"the input tensor {' and '.join(names)} was modified in place"
        return result(cid, dtype, "fail", None, 0.0, msg, [Diagnosis("input-mutated", msg)])
    return result(cid, dtype, "pass", 0.0, 0.0, "inputs hold the same bits after every call")


def determinism_result(cid, dtype, residual: float, what: str) -> IdentityResult:
    """``<protocol>/determinism`` from the largest difference between two identical calls."""
    ok = residual == 0.0
    msg = what + ("" if ok else f" differ by up to {residual:.3g}")
    return result(cid, dtype, "pass" if ok else "fail", residual, 0.0, msg,
                  [] if ok else [Diagnosis("not-deterministic",
                                           f"{what} returned different values (max difference {residual:.3g})")])
