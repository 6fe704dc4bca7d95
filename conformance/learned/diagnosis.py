"""Explain a failing learned lookup: the closest shifted-row mutant names a wrong offset, and a
value returned past the length wall is described (clamped, wrapped or extended).

For a failing output y (a value case) this module builds *mutants* of the float64 reference:
x + table[row + k] for small shifts k (1, -1, 2, -2, 3, -3) and the variant's own suspects
(-(padding_idx + 1) for RoBERTa: its offset missing, rows read as in BERT; +(padding_idx + 1)
with RoBERTa-base's padding_idx 1, i.e. +2, for an absolute case: RoBERTa's offset added to a BERT
or GPT-2 lookup). A shifted row below 0 wraps to the end of the table, as ``table[positions]``
indexing does; one at or past N has no value and makes that mutant inapplicable (such an
implementation raises there). For the roberta variant each shift is also tried on the real tokens
only (padding kept at row padding_idx, as code that masks padding first would do).
conformance.core.mutants's ``closest_mutant`` picks the one that explains y; every mutant here has
the code ``position-offset``.

The noise floor is the rms of the standard budget (conformance.learned.budgets): a correct
implementation never deviates by more, while a shifted row moves every element by the
difference of two independent table rows, O(1) for the golden tables.

``describe_wall`` explains what an implementation returned for a position outside the table, by
comparing the returned rows with the table's last row (clamped), the row the position wraps to
(modulo N: wrapped) and zeros or x itself (extended with a zero row).

Shapes: x, output [batch, seq, d_model] float64; positions int64 [batch, seq]; table [N, d_model].
numpy only; never imports torch.
"""

from __future__ import annotations

import numpy as np

from conformance.core.mutants import Mutant, closest_mutant
from conformance.learned import budgets
from conformance.results import Diagnosis
from reference import learned as learned_reference

SHIFTS = (1, -1, 2, -2, 3, -3)
ROBERTA_BASE_OFFSET = 2  # RoBERTa-base's padding_idx 1, plus 1


def reference_rows(positions, spec) -> np.ndarray:
    """The rows the reference reads (reference.learned.rows); ValueError past the wall."""
    return learned_reference.rows(np.asarray(positions, dtype=np.int64), spec.num_positions,
                                  variant=spec.variant, padding_idx=spec.padding_idx)


def shifted_lookup(x, table, rows, shift, keep=None) -> np.ndarray:
    """x + table[rows + shift] (float64); rows below 0 wrap to the end (tensor indexing), rows at
    or past N give NaN; where ``keep`` is True the row is not shifted."""
    n = table.shape[0]
    moved = rows + shift
    if keep is not None:
        moved = np.where(keep, rows, moved)
    moved = np.where(moved < 0, moved + n, moved)
    valid = (moved >= 0) & (moved < n)
    out = x + table[np.where(valid, moved, 0)]
    out[~valid] = np.nan
    return out


def _shift_message(shift: int, spec) -> str:
    where = "after" if shift > 0 else "before"
    base = f"rows shifted by {shift:+d}: each token read the row {abs(shift)} {where} its own"
    if spec.variant == "roberta":
        k = spec.padding_idx
        if shift == -(k + 1):
            return (f"{base}: RoBERTa's padding_idx + 1 = {k + 1} is missing (rows read as in BERT, "
                    "row = position)")
        if shift == -1:
            return f"{base}: row = position + padding_idx, the + 1 of RoBERTa's position ids is missing"
        return f"{base} (RoBERTa: row = position + padding_idx + 1 = position + {k + 1})"
    if shift == ROBERTA_BASE_OFFSET:
        return (f"{base}: RoBERTa's padding_idx + 1 = {ROBERTA_BASE_OFFSET} added to an absolute "
                "(BERT / GPT-2) lookup, where row = position")
    if shift == 1:
        return f"{base}: positions counted from 1 instead of 0"
    return f"{base} (absolute variant: row = position)"


def lookup_mutants(x, table, rows, positions, spec) -> list:
    """The shifted-row mutants of one case, more specific first (see the module docstring)."""
    shifts = list(SHIFTS)
    if spec.variant == "roberta":
        suspects = [-(spec.padding_idx + 1)]
    else:
        suspects = [ROBERTA_BASE_OFFSET]
    order = suspects + [k for k in shifts if k not in suspects]
    mutants = []
    for k in order:
        message = _shift_message(k, spec)
        mutants.append(Mutant("position-offset", message,
                              (lambda k=k: shifted_lookup(x, table, rows, k)), kind="offset"))
        if spec.variant == "roberta":
            pads = np.asarray(positions) == -1
            if pads.any():
                mutants.append(Mutant("position-offset", message + " (padding kept at row padding_idx)",
                                      (lambda k=k, pads=pads: shifted_lookup(x, table, rows, k, keep=pads)),
                                      kind="offset"))
    return mutants


def noise_floor(x, table_rows, dtype: str) -> float:
    """rms of the standard budget: no correct implementation deviates by more."""
    b = budgets.sum_budget(x, table_rows, dtype, "standard")
    b = b[np.isfinite(b)]
    return float(np.sqrt(np.mean(b * b))) if b.size else 0.0


def diagnose_lookup(x, positions, table, output, spec, dtype: str) -> list:
    """Diagnoses for one failing learned.lookup output (float64 arrays; see module docstring)."""
    x = np.asarray(x, dtype=np.float64)
    table = np.asarray(table, dtype=np.float64)
    output = np.asarray(output, dtype=np.float64)
    positions = np.asarray(positions, dtype=np.int64)
    if x.ndim != 3 or output.shape != x.shape or positions.shape != x.shape[:2]:
        return []
    if table.ndim != 2 or table.shape[1] != x.shape[2]:
        return []
    try:
        rows = reference_rows(positions, spec)
    except ValueError:
        return []
    reference = x + table[rows]
    mask = np.isfinite(output) & np.isfinite(reference)
    if np.count_nonzero(mask) < 2:
        return []
    floor = noise_floor(x, table[rows], dtype)
    found = closest_mutant(output, reference, lookup_mutants(x, table, rows, positions, spec), mask, floor)
    if found is None:
        return []
    return [Diagnosis(found[0].code, found[0].message)]


# --------------------------------------------------------------------------------------------
# Past the wall


def outside(positions, spec) -> np.ndarray:
    """bool [batch, seq]: the positions whose row is outside the table."""
    low, high = learned_reference.position_range(spec.num_positions, spec.variant, spec.padding_idx)
    p = np.asarray(positions, dtype=np.int64)
    return (p < low) | (p > high)


def _fmt(values, limit=4) -> str:
    vals = sorted({int(v) for v in np.asarray(values).reshape(-1)})
    text = ", ".join(str(v) for v in vals[:limit])
    return text + (f", ... ({len(vals)} in all)" if len(vals) > limit else "")


def wall_summary(positions, spec) -> str:
    """'position(s) 512 past the 512-row table (positions 0..511)' for the offending positions."""
    low, high = learned_reference.position_range(spec.num_positions, spec.variant, spec.padding_idx)
    bad = np.asarray(positions)[outside(positions, spec)]
    return (f"position(s) {_fmt(bad)} outside the {spec.num_positions}-row table "
            f"(accepted positions {low}..{high})")


def missing_wall(positions, spec) -> Diagnosis:
    """The diagnosis of a case whose right answer is an exception, when a value came back."""
    return Diagnosis("length-wall-missing",
                     f"returned a value for {wall_summary(positions, spec)}: a learned table has no "
                     "row there, so the lookup must raise (clamping, wrapping or extending the "
                     "table gives a silent wrong answer)")


def describe_wall(x, positions, table, output, spec) -> str:
    """What the implementation did with the positions outside the table: 'clamped to the last
    row', 'wrapped around (row = position mod N)', 'extended with a zero row' or 'returned
    something else'. Arrays in float64: x, output [b, s, d], positions [b, s], table [N, d]."""
    x = np.asarray(x, dtype=np.float64)
    out = np.asarray(output, dtype=np.float64)
    table = np.asarray(table, dtype=np.float64)
    p = np.asarray(positions, dtype=np.int64)
    bad = outside(p, spec)
    if out.shape != x.shape or not bad.any():
        return "returned a value"
    n = spec.num_positions
    offset = 0 if spec.variant == "absolute" else spec.padding_idx + 1
    want_rows = p[bad] + offset
    got = out[bad]
    xb = x[bad]
    scale = np.maximum(np.abs(xb) + np.max(np.abs(table)), 1e-30)

    def close(candidate):
        return bool(np.all(np.abs(got - candidate) <= 1e-2 * scale))

    if close(xb + table[np.clip(want_rows, 0, n - 1)]):
        return "clamped to the table's edge (row 0 or row N-1)"
    if close(xb + table[np.mod(want_rows, n)]):
        return "wrapped around (row = position mod N)"
    if close(xb):
        return "extended with a zero row (x returned unchanged)"
    if close(np.zeros_like(xb)):
        return "returned zeros"
    # Another row inside the table: the rows are shifted, so the wall moved with them.
    dist = np.abs(got[:, None, :] - (xb[:, None, :] + table[None, :, :])).max(axis=-1)  # [k, N]
    best = dist.argmin(axis=-1)
    if np.all(dist[np.arange(best.size), best] <= 1e-2 * scale.max(axis=-1)):
        return (f"read row(s) {_fmt(best)} of the table instead (shifted rows move the wall), for "
                f"row(s) {_fmt(want_rows)}")
    return "returned a value"
