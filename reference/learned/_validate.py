"""Argument checks of the learned absolute lookup, and the length wall.

Every failure is a ValueError whose message starts with the argument's name and gives a one-line
reason, so a CLI can print it as is. The length wall is the defining property of a learned
table: there is a row for positions 0..N-1 and nothing else, so every position whose row falls
outside [0, N) is refused here, before any backend reads the table.
"""

from __future__ import annotations

import numbers

import numpy as np

VARIANTS = ("absolute", "roberta")
BACKENDS = ("cpu", "cuda", "numpy")
# RoBERTa-style position ids mark padding tokens with this value; they read row padding_idx.
PADDING_MARKER = -1


def check_backend(backend):
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend: must be one of {', '.join(BACKENDS)}; got {backend!r}")
    return backend


def _real_array(value, name: str, ndim: int, what: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name}: must have a real numeric dtype, got {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name}: must be {ndim}-D {what}, got shape {arr.shape}")
    # float64 C-contiguous, the caller's own array when it already is one (no copy of a table of
    # megabytes per call): the lookup reads x and the table and writes a new array, never into them.
    return np.ascontiguousarray(arr, dtype=np.float64)


def check_x(x) -> np.ndarray:
    """x: [batch, seq, d_model] of a real dtype; returned as float64 C-order (never written)."""
    return _real_array(x, "x", 3, "[batch, seq, d_model]")


def check_table(table, d_model: int) -> np.ndarray:
    """table: [num_positions, d_model] with at least one row; float64 C-order (never written)."""
    tab = _real_array(table, "table", 2, "[num_positions, d_model]")
    if tab.shape[0] < 1:
        raise ValueError("table: must have at least one row (num_positions >= 1)")
    if tab.shape[1] != d_model:
        raise ValueError(f"table: has {tab.shape[1]} columns, but x has d_model = {d_model}")
    return tab


def check_variant(variant, padding_idx, num_positions: int) -> int:
    """The row offset of the variant: 0 (absolute) or padding_idx + 1 (roberta)."""
    if not isinstance(variant, str) or variant not in VARIANTS:
        raise ValueError(f"variant: must be one of {', '.join(VARIANTS)}; got {variant!r}")
    if variant == "absolute":
        if padding_idx is not None:
            raise ValueError(f"padding_idx: only the roberta variant has one; got {padding_idx!r} "
                             "for the absolute variant (use None)")
        return 0
    if padding_idx is None:
        raise ValueError("padding_idx: the roberta variant needs the padding row (RoBERTa: 1)")
    if isinstance(padding_idx, (bool, np.bool_)) or not isinstance(padding_idx, numbers.Integral):
        raise ValueError(f"padding_idx: must be an integer, got {padding_idx!r}")
    k = int(padding_idx)
    if not 0 <= k < num_positions:
        raise ValueError(f"padding_idx: {k} is not a row of the {num_positions}-row table")
    return k + 1


def position_range(num_positions: int, variant: str = "absolute", padding_idx=None) -> tuple[int, int]:
    """(lowest, highest) accepted position, both inclusive: the two sides of the length wall.

    absolute: 0 .. N-1. roberta: -1 (the padding marker, row padding_idx) .. N - padding_idx - 2
    (RoBERTa-base: -1 .. 511 for its 514 rows). highest < lowest when no real position fits.
    """
    offset = check_variant(variant, padding_idx, int(num_positions))
    low = PADDING_MARKER if variant == "roberta" else 0
    return low, int(num_positions) - offset - 1


def _where(arr: np.ndarray, mask: np.ndarray) -> tuple[int, list[int], int]:
    """(first offending value, its index, how many offend)."""
    first = [int(i) for i in np.argwhere(mask)[0]]
    return int(arr[tuple(first)]), first, int(np.count_nonzero(mask))


def check_positions(positions, shape, num_positions: int, variant: str, padding_idx) -> tuple[np.ndarray, int]:
    """(positions as int64 C-contiguous, row offset); refuses every position outside the wall.

    positions: an integer array (not bool, not float) of ``shape`` = x's [batch, seq].
    """
    arr = np.asarray(positions)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"positions: must be an integer array, got dtype {arr.dtype}")
    if arr.shape != tuple(shape):
        raise ValueError(f"positions: shape {arr.shape} does not match x's [batch, seq] = {tuple(shape)}")
    n = int(num_positions)
    offset = check_variant(variant, padding_idx, n)
    low, high = position_range(n, variant, padding_idx)
    if arr.size:
        # NumPy compares an integer array with Python ints exactly (no overflow, any int dtype).
        below = arr < low
        above = arr > high
        if np.any(below):
            value, index, count = _where(arr, below)
            more = f"; {count} positions in all" if count > 1 else ""
            if variant == "roberta":
                raise ValueError(f"positions: {value} at index {index} is negative and not the padding "
                                 f"marker -1, so it has no row (length wall: positions -1..{high} for the "
                                 f"{n}-row table){more}")
            raise ValueError(f"positions: {value} at index {index} is negative; a learned table has rows "
                             f"0..{n - 1} only and must not wrap around (length wall){more}")
        if np.any(above):
            value, index, count = _where(arr, above)
            more = f"; {count} positions in all" if count > 1 else ""
            if variant == "roberta":
                raise ValueError(f"positions: {value} at index {index} maps to row {value + offset} "
                                 f"(position + padding_idx + 1), past the length wall of the {n}-row "
                                 f"table (positions -1..{high}){more}")
            raise ValueError(f"positions: {value} at index {index} is past the length wall: the table "
                             f"has {n} rows (positions 0..{n - 1}) and no row {value}{more}")
    return np.ascontiguousarray(arr, dtype=np.int64), offset
