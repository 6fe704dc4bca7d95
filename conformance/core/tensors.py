"""Tensor helpers every protocol uses: reading a returned tensor, bitwise equality, error arrays.

torch is imported inside functions only, so that importing this module stays cheap.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from conformance.results import Diagnosis


def type_name(value) -> str:
    """The name of a returned value's type for messages; under --isolate a value the isolated
    process could not send arrives as a conformance.wire.Opaque and keeps its own type's name, so
    that verdicts and messages read the same in and out of --isolate."""
    from conformance.wire import type_name as name

    return name(value)


def torch_dtype(name: str):
    import torch

    return getattr(torch, name)


def dtype_name(dtype) -> str:
    """"bfloat16" for torch.bfloat16 (and for the string itself)."""
    return str(dtype).replace("torch.", "")


def same_bits(a, b) -> bool:
    """True when two tensors hold the same bits: same shape, dtype and every byte.

    The one equality the runner uses (input mutation, the isolated child's copy-back, black-box
    checks): -0.0 differs from 0.0 (writing it is a write) and a NaN equals the same NaN.
    """
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False

    def raw(t):
        return t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8)

    try:
        return torch.equal(raw(a), raw(b))
    except (RuntimeError, TypeError):  # a dtype without a byte view: value equality only
        return bool(torch.equal(a, b))


def not_a_tensor(value, what: str) -> str:
    """The message for a returned value that is no torch.Tensor; a NumPy array (or scalar) is named
    as one, with the fix: the grade compares torch tensors in the input's dtype and device, and
    ``torch.from_numpy`` / ``torch.as_tensor`` make one without changing the values."""
    if isinstance(value, (np.ndarray, np.generic)):
        kind = "a NumPy array" if isinstance(value, np.ndarray) else "a NumPy scalar"
        shape = f" of shape {list(np.shape(value))}" if isinstance(value, np.ndarray) else ""
        return (f"{what} is {kind}{shape} (dtype {value.dtype}), not a torch.Tensor: return "
                "torch.from_numpy(x) or torch.as_tensor(x, dtype=<the input's dtype>, device=<its device>)")
    return f"{what} is a {type_name(value)}, not a torch.Tensor"


def check_tensor(value, what: str, shape, dtype: Optional[str], device: str):
    """Validate one returned tensor; returns (float64 numpy or None, problems, dtype name).

    A non-tensor or a wrong shape cannot be graded (None); a wrong dtype or device is a failure
    but the values are still converted so that diagnosis can explain them.
    """
    import torch

    problems = []
    if not isinstance(value, torch.Tensor):
        problems.append(Diagnosis("shape-changed", not_a_tensor(value, what)))
        return None, problems, None
    got = dtype_name(value.dtype)
    if tuple(value.shape) != tuple(shape):
        problems.append(
            Diagnosis("shape-changed", f"{what} has shape {list(value.shape)}, expected {list(shape)}")
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


def as_number(value):
    """float of a Python number, numpy scalar or one-element tensor; None otherwise."""
    try:
        import torch

        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                return None
            return float(value.detach().to("cpu", torch.float64).reshape(()))
    except ImportError:  # pragma: no cover - torch is always there when grading
        pass
    if isinstance(value, (bool, str, bytes, bytearray)):  # float("1.0") works, but "1.0" is no number
        return None
    try:
        return float(value)
    except OverflowError:  # an int past float range, e.g. 10**400: graded as the infinity it rounds to
        return float("inf") if value > 0 else float("-inf")
    except (TypeError, ValueError):
        return None


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


def mutation_problems(watched: dict, detail: Optional[dict] = None) -> list:
    """input-mutated for each watched input tensor whose bits differ from its pristine clone;
    ``detail`` (name -> words, e.g. "1 KV head for 8 query heads, 4 tokens") goes into the message
    after the name: whether a kernel writes into its input can hang on the shape (Liger's RoPE
    does when the transpose it makes is already contiguous: one head, or one token)."""
    detail = detail or {}
    return [Diagnosis("input-mutated", f"the input tensor {name}{f' ({detail[name]})' if detail.get(name) else ''} "
                                       "was modified in place")
            for name, (tensor, pristine) in watched.items() if not same_bits(tensor, pristine)]


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


def check_integer_tensor(value, what: str, shape) -> tuple[Optional[np.ndarray], list]:
    """(int64 numpy or None, problems) for protocols whose answer is integers, graded exactly
    (position ids, buckets): an integer torch tensor of exactly ``shape``, on any device."""
    import torch

    if (not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(shape) or value.is_floating_point()
            or value.is_complex() or value.dtype == torch.bool):
        if not isinstance(value, torch.Tensor):
            return None, [Diagnosis("shape-changed", not_a_tensor(value, what))]
        got = f"{value.dtype} {list(value.shape)}"
        return None, [Diagnosis("shape-changed", f"{what} are {got}, expected integers of shape {list(shape)}")]
    return value.detach().to("cpu", torch.int64).numpy(), []


def adapter_inputs(arrays: dict, floats, ints, dtype, device) -> tuple[list, dict, dict]:
    """(args, inputs, watched) for an adapter call: the ``floats`` roles cast to the dtype under test
    (inputs holds them as the adapter receives them, in float64), the ``ints`` roles as int64, in
    that order; every tensor is watched for in-place changes (``mutation_problems``)."""
    import torch

    args, inputs, watched = [], {}, {}
    for role in (*floats, *ints):
        a = np.array(arrays[role], dtype=np.float64 if role in floats else np.int64)
        t = torch.from_numpy(a.copy()).to(device)
        if role in floats:
            t = t.to(torch_dtype(dtype))
            a = t.detach().to("cpu", torch.float64).numpy()
        inputs[role], watched[role] = a, (t, t.clone())
        args.append(t)
    return args, inputs, watched


def over_budget(*ratios: np.ndarray) -> tuple[int, int]:
    """(elements over budget, elements) over the ratio arrays: a ratio above 1, or NaN, is over
    (the mismatch count torch.testing.assert_close prints)."""
    over = total = 0
    for r in ratios:
        r = np.asarray(r, dtype=np.float64)
        over += int(np.count_nonzero(~(r <= 1.0)))
        total += int(r.size)
    return over, total


def token_max(err: np.ndarray) -> np.ndarray:
    """Largest finite error per token [b, s] over the remaining axes (NaN where none is finite)."""
    flat = err.reshape(err.shape[0], err.shape[1], -1)
    m = np.where(np.isfinite(flat), flat, -np.inf).max(axis=-1, initial=-np.inf)
    return np.where(np.isfinite(m), m, np.nan)


def ratio_max(ratio: np.ndarray) -> np.ndarray:
    """Largest ratio per token [b, s] over the remaining axes (inf where any is inf: a NaN error
    has ratio inf, see conformance.core.tolerance.ratio)."""
    flat = np.asarray(ratio, dtype=np.float64).reshape(ratio.shape[0], ratio.shape[1], -1)
    return np.where(np.isnan(flat), np.inf, flat).max(axis=-1, initial=0.0)


def per_position_curve(positions: np.ndarray, err_tok: np.ndarray, bud_tok: np.ndarray,
                       ratio_tok: np.ndarray) -> list:
    """[[position, max_error, max_budget, max_ratio], ...] sorted by position (max over the rows
    sharing it). max_ratio is the largest per-element error / budget there: the quantity the
    verdict is decided on, so a failing case always has a point above 1.

    A position whose outputs are all non-finite gets error inf: infinitely wrong, and still a
    number for the JSON report and the plot (which marks it as such)."""
    pos = np.asarray(positions).reshape(-1)
    e = np.asarray(err_tok, dtype=np.float64).reshape(-1)
    b = np.asarray(bud_tok, dtype=np.float64).reshape(-1)
    r = np.asarray(ratio_tok, dtype=np.float64).reshape(-1)
    uniq, at = np.unique(pos, return_inverse=True)
    at = at.reshape(-1)
    err, bud, rat = (np.full(uniq.size, -np.inf) for _ in range(3))
    finite = np.isfinite(e)
    np.maximum.at(err, at[finite], e[finite])
    np.maximum.at(bud, at, b)
    np.maximum.at(rat, at, r)
    err[err == -np.inf] = np.inf  # no finite output there
    return [[int(p), float(x), float(y), float(z)] for p, x, y, z in zip(uniq, err, bud, rat)]


def format_positions(values, limit: int = 6) -> str:
    vals = sorted({int(v) for v in np.asarray(values).reshape(-1)})
    text = ", ".join(str(v) for v in vals[:limit])
    return text + (f", ... ({len(vals)} in all)" if len(vals) > limit else "")


def off_by_one_note(profile: str, positions) -> str:
    """The note for positions where the budget exceeds the change from position m to m+1."""
    return (f"the {profile} budget at position(s) {format_positions(positions)} exceeds the change "
            "from position m to m+1, so an off-by-one position would pass there")


def grade_on_mask(graded, out: np.ndarray, ref: np.ndarray, mask: np.ndarray, budget, what: str, unit: str,
                  distance=None):
    """Fill ``graded`` (a conformance.core.protocol.Graded) from ``out`` against ``ref`` on the
    entries ``mask`` selects (broadcast to out's shape; the others are not graded): a non-finite
    problem, the largest error and, per profile, the ratio to ``budget(profile)``, its worst index
    and the mismatch count in ``unit``; with ``distance`` (broadcast to out's shape), the curve
    against it (``distance_curve``). Returns graded."""
    from conformance.core import tolerance

    mask = np.broadcast_to(mask, out.shape)
    bad = nonfinite_problem(np.where(mask, out, 0.0), np.where(mask, ref, 0.0), what)
    if bad is not None:
        graded.problems.append(bad)
    err = np.where(mask, abs_error(out, ref), 0.0)
    graded.max_abs_error = finite_max(err)
    total = int(np.count_nonzero(mask))
    for profile in tolerance.PROFILES:
        r = tolerance.ratio(err, budget(profile))
        graded.ratio[profile] = finite_max(r)
        graded.worst_index[profile] = argmax_index(r)
        graded.mismatch[profile] = (over_budget(np.where(mask, r, 0.0))[0], total, unit)
        if distance is not None:
            graded.curve[profile] = distance_curve(distance, err, budget(profile), r, mask)
    return graded


def distance_curve(distance, err, budget, ratio, mask) -> list:
    """[[distance, max_error, max_budget, max_ratio], ...] over the graded entries (``mask``), for
    protocols whose error depends on the query-key distance rather than on a position (relative
    biases: Protocol.curve_axis "distance"); the plot draws it as it draws positions."""
    shape = np.broadcast_shapes(np.shape(err), np.shape(mask))
    pick = np.broadcast_to(mask, shape)
    values = [np.broadcast_to(np.asarray(v, dtype=np.float64), shape)[pick] for v in (distance, err, budget, ratio)]
    return per_position_curve(*values)
