"""What every protocol module provides to the generic runner, and shared validation helpers.

A protocol turns a golden case into adapter arguments (``prepare``) and the adapter's return
value into a :class:`Graded` record (``grade``): validation problems (non-tensor, shape, dtype,
device, NaN/Inf, mutated inputs) as diagnoses, the output in float64, and the budget ratios in
both profiles. The runner decides verdicts, calls diagnosis and writes CaseResults.

torch is imported inside functions only.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from conformance.results import Diagnosis
from conformance.spec import RopeSpec


def torch_dtype(name: str):
    import torch

    return getattr(torch, name)


def dtype_name(dtype) -> str:
    """"bfloat16" for torch.bfloat16 (and for the string itself)."""
    return str(dtype).replace("torch.", "")


@dataclass
class Prepared:
    """The adapter's arguments for one case in one dtype, and what grading needs besides.

    args        the positional arguments of the adapter call
    inputs_f64  the inputs as the adapter sees them (rounded to the dtype), in float64 numpy
    watched     name -> (tensor passed to the adapter, pristine clone) for the mutation check
    """

    args: tuple
    inputs_f64: dict
    watched: dict = field(default_factory=dict)
    dtype: Optional[str] = None
    device: str = "cpu"


@dataclass
class Graded:
    """The grading of one returned value (budget ratios in both profiles)."""

    problems: list = field(default_factory=list)  # list[Diagnosis] from validation
    output_f64: Optional[np.ndarray] = None  # None when the value could not be read
    output_dtype: Optional[str] = None
    max_abs_error: Optional[float] = None
    ratio: dict = field(default_factory=dict)  # profile -> budget ratio (finite elements)
    worst_index: dict = field(default_factory=dict)  # profile -> index list
    curve: dict = field(default_factory=dict)  # profile -> [[position, max_error, max_budget]]
    notes: dict = field(default_factory=dict)  # profile -> list[str]

    @property
    def gradable(self) -> bool:
        return self.output_f64 is not None


class Protocol:
    """Interface of a protocol (see the module docstring); subclasses fill in the RoPE parts."""

    name = ""
    signature = ""
    has_layout = False  # graded per pair layout (--layout applies)
    dtype_free = False  # the adapter gets no tensor in the dtype under test: graded once per case
    # Why a result within standard but over strict is only "acceptable" (CaseResult.notes).
    acceptable_note = "float32 angle rounding, growing with position"

    def spec(self, case) -> RopeSpec:
        p = case.params
        return RopeSpec(
            head_dim=int(p["head_dim"]),
            rotary_dim=int(p.get("rotary_dim") or p["head_dim"]),
            base=float(p.get("base", 10000.0)),
            layout=str(p.get("layout", "half")),
            scaling=copy.deepcopy(p.get("scaling")),  # never the case's own dict: adapters get it
            seq_len=int(p.get("seq_len") or 0),
        )

    def prepare(self, case, spec, dtype: Optional[str], device: str) -> Prepared:
        raise NotImplementedError

    def grade(self, case, spec, prepared: Prepared, value: Any) -> Graded:
        raise NotImplementedError

    def repro_call(self) -> str:
        """The adapter call in a Python repro, using the names ``args`` built by ``prepare``."""
        return "fn(*args)"


# ------------------------------------------------------------------------------------------
# Validation helpers


def check_tensor(value, what: str, shape, dtype: Optional[str], device: str):
    """Validate one returned tensor; returns (float64 numpy or None, problems, dtype name).

    A non-tensor or a wrong shape cannot be graded (None); a wrong dtype or device is a failure
    but the values are still converted so that diagnosis can explain them.
    """
    import torch

    problems = []
    if not isinstance(value, torch.Tensor):
        problems.append(
            Diagnosis("shape-changed", f"{what} is a {type(value).__name__}, not a torch.Tensor")
        )
        return None, problems, None
    got = dtype_name(value.dtype)
    if tuple(value.shape) != tuple(shape):
        problems.append(
            Diagnosis(
                "shape-changed",
                f"{what} has shape {list(value.shape)}, expected {list(shape)}",
            )
        )
        return None, problems, got
    if value.is_complex() or not value.is_floating_point():
        problems.append(Diagnosis("dtype-changed", f"{what} has dtype {got}, expected a real floating dtype"))
        return None, problems, got
    if dtype is not None and got != dtype:
        problems.append(Diagnosis("dtype-changed", f"{what} has dtype {got}, expected {dtype} like the input"))
    if device and value.device.type != torch.device(device).type:
        problems.append(
            Diagnosis("dtype-changed", f"{what} is on device {value.device}, expected {device} like the input")
        )
    try:
        values = value.detach().to("cpu", torch.float64).resolve_conj().numpy()
    except Exception as exc:  # noqa: BLE001 - meta, sparse or otherwise unreadable tensors
        from conformance.isolation import error_line

        problems.append(Diagnosis("dtype-changed", f"{what} cannot be read back as numbers ({error_line(exc)})"))
        return None, problems, got
    return values, problems, got


def nonfinite_problem(out: np.ndarray, expected: np.ndarray, what: str) -> Optional[Diagnosis]:
    """NaN/Inf where the reference is finite, or a number where the reference is NaN (hidden)."""
    bad = ~np.isfinite(out) & np.isfinite(expected)
    n = int(bad.sum())
    if n:
        first = [int(i) for i in np.argwhere(bad)[0]]
        return Diagnosis(
            "non-finite", f"{what} has {n} NaN/Inf element(s) where the reference is finite (first at {first})"
        )
    hidden = np.isnan(expected) & ~np.isnan(out)
    n = int(hidden.sum())
    if n:
        first = [int(i) for i in np.argwhere(hidden)[0]]
        return Diagnosis(
            "non-finite", f"{what} has {n} number(s) where the reference is NaN: a NaN input must propagate (first at {first})"
        )
    return None


def mutation_problems(watched: dict) -> list:
    """input-mutated for each watched input tensor that differs from its pristine clone."""
    import torch

    problems = []
    for name, (tensor, pristine) in watched.items():
        same = tensor.shape == pristine.shape and tensor.dtype == pristine.dtype
        if same:
            if tensor.is_floating_point():
                nan_a, nan_b = torch.isnan(tensor), torch.isnan(pristine)
                same = torch.equal(nan_a, nan_b) and torch.equal(
                    tensor.masked_fill(nan_a, 0), pristine.masked_fill(nan_b, 0)
                )
            else:
                same = torch.equal(tensor, pristine)
        if not same:
            problems.append(Diagnosis("input-mutated", f"the input tensor {name} was modified in place"))
    return problems


def abs_error(out: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|out - ref|, 0 where both are NaN or the same infinity (NaN inputs must propagate, and
    doing so is not an error); NaN where only one side is NaN."""
    with np.errstate(invalid="ignore"):
        err = np.abs(out - ref)
    same = (np.isnan(out) & np.isnan(ref)) | (np.isinf(out) & (out == ref))
    return np.where(same, 0.0, err)


def finite_max(a: np.ndarray) -> Optional[float]:
    finite = a[np.isfinite(a)]
    return float(finite.max()) if finite.size else None


def argmax_index(a: np.ndarray) -> list:
    """Index (list of ints) of the largest element, NaN/Inf counting as largest."""
    b = np.where(np.isnan(a), np.inf, a)
    return [int(i) for i in np.unravel_index(int(np.argmax(b)), b.shape)]


def token_max(err: np.ndarray) -> np.ndarray:
    """Largest finite error per token [b, s] over the remaining axes (NaN where none is finite)."""
    flat = err.reshape(err.shape[0], err.shape[1], -1)
    m = np.where(np.isfinite(flat), flat, -np.inf).max(axis=-1, initial=-np.inf)
    return np.where(np.isfinite(m), m, np.nan)


def per_position_curve(positions: np.ndarray, err_tok: np.ndarray, bud_tok: np.ndarray) -> list:
    """[[position, max_error, max_budget], ...] sorted by position (max over rows sharing it).

    A position whose outputs are all non-finite gets error inf: infinitely wrong, and still a
    number for the JSON report and the plot (which marks it as such)."""
    pos = np.asarray(positions).reshape(-1)
    e = np.asarray(err_tok, dtype=np.float64).reshape(-1)
    b = np.asarray(bud_tok, dtype=np.float64).reshape(-1)
    curve = []
    for p in np.unique(pos):
        sel = pos == p
        ev = e[sel]
        ev = ev[np.isfinite(ev)]
        curve.append([int(p), float(ev.max()) if ev.size else float("inf"), float(b[sel].max())])
    return curve


def format_positions(values, limit: int = 6) -> str:
    vals = sorted({int(v) for v in np.asarray(values).reshape(-1)})
    text = ", ".join(str(v) for v in vals[:limit])
    return text + (f", ... ({len(vals)} in all)" if len(vals) > limit else "")


def off_by_one_note(profile: str, positions) -> str:
    """The note for positions where the budget exceeds the change from position m to m+1."""
    return (f"the {profile} budget at position(s) {format_positions(positions)} exceeds the change "
            "from position m to m+1, so an off-by-one position would pass there")
