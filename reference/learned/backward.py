"""The learned lookup's backward pass in float64: gradients of out = x + table[row].

Formula. out[b, s, :] = x[b, s, :] + table[row(b, s), :] (core.py) is linear in both inputs, with
Jacobians the identity for x and a 0/1 selection for the table. For a cotangent g [batch, seq,
d_model] the VJP is

    grad_x = g,            grad_table[r, :] = sum over the tokens t with row(t) = r of g[t, :],

the scatter-add of g into the rows the tokens read (rows no token reads get 0). This is the
backward of ``torch.nn.functional.embedding`` / ``table[ids]`` (``embedding_dense_backward``).
One convention differs: ``nn.Embedding(padding_idx=k)`` (HF RoBERTa's position table) never
accumulates into row k, so its gradient there is 0, not the sum of the padding tokens' g.
``lookup_vjp(..., freeze_padding=True)`` gives that convention for the roberta variant.

Modes. grad_x is g converted to float64 (exact). grad_table is a reduction:
- "fast": recursive summation in token order (b, s), starting from 0: each value within
  (n_r - 1) u sum_t |g_t| of the exact sum, n_r the number of tokens reading the row (u = 2**-53;
  Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. 4.4). Three backends
  compute it with the same additions in the same order, so they agree bit for bit (additions
  only: nothing NVVM could contract into an FMA):
  "numpy" (the default) ``numpy.add.at`` (numpy_twin.scatter_add); "cpu" a Numba loop over the
  tokens (cpu_kernels.scatter_add); "cuda" one thread per table element, looping over its row's
  tokens in token order, no atomics (cuda_kernels.scatter_add; the simulator with
  NUMBA_ENABLE_CUDASIM=1);
- "golden": each value the float64 nearest to the exact sum (``math.fsum``, which rounds the exact
  sum once; an exact rational sum where fsum's partials overflow): correctly rounded, which is
  better than the faithful rounding a reduction needs. Computed on the host whatever the backend
  (any valid backend is accepted). NaN and Inf in g propagate as in IEEE summation.

Shapes: g [batch, seq, d_model] (any real dtype), positions int [batch, seq] inside the length wall
(the same check as lookup), num_positions the table's rows. Returns (grad_x [b, s, d],
grad_table [num_positions, d]), float64.

Mutants (``mutants``): backward-missing (no gradient to the table, or to x), backward-scale (the
mean over the tokens of a row instead of the sum), backward-overwrite (a scatter without
accumulation: the row keeps the last token's g; a proposed code). Never imports torch.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from . import numpy_twin
from ._validate import check_backend, check_positions
from .core import _kernels

__all__ = ["lookup_vjp", "rows_of", "mutants"]


def _check_cotangent(g) -> np.ndarray:
    arr = np.asarray(g)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"g: must have a real numeric dtype, got {arr.dtype}")
    if arr.ndim != 3:
        raise ValueError(f"g: must be 3-D [batch, seq, d_model], got shape {arr.shape}")
    return np.array(arr, dtype=np.float64, order="C", copy=True)


def _tokens(cot: np.ndarray) -> np.ndarray:
    """[batch * seq, d_model] view of [batch, seq, d_model] (explicit sizes: d_model may be 0)."""
    return cot.reshape(cot.shape[0] * cot.shape[1], cot.shape[2])


def rows_of(g, positions, num_positions, variant="absolute", padding_idx=None) -> np.ndarray:
    """int64 [batch, seq]: the table row each token reads (the length wall enforced)."""
    pos, offset = check_positions(positions, np.shape(g)[:2], int(num_positions), variant, padding_idx)
    return pos + offset


def _exact_sum(values) -> float:
    """The float64 nearest to the exact sum of finite doubles (math.fsum; a rational sum when its
    partials overflow, which then rounds to +-inf only if the exact sum is past the threshold)."""
    try:
        return math.fsum(values)
    except OverflowError:
        total = sum((Fraction(v) for v in values), Fraction(0))
        try:
            return float(total)
        except OverflowError:
            return math.inf if total > 0 else -math.inf  # past the overflow threshold


def lookup_vjp(g, positions, num_positions, *, variant="absolute", padding_idx=None, freeze_padding=False,
               mode="fast", backend="numpy"):
    """(grad_x, grad_table) of reference.learned.lookup for the cotangent g (module docstring).

    backend ("numpy", "cpu" or "cuda") picks the fast mode's scatter-add (bit-identical on all
    three); golden mode is the same host computation on every backend."""
    cot = _check_cotangent(g)
    if isinstance(num_positions, bool) or not isinstance(num_positions, (int, np.integer)) or num_positions < 1:
        raise ValueError(f"num_positions: must be a positive integer, got {num_positions!r}")
    if mode not in ("fast", "golden"):
        raise ValueError(f"mode: must be one of fast, golden; got {mode!r}")
    backend = check_backend(backend)
    rows = rows_of(cot, positions, num_positions, variant, padding_idx).reshape(-1)
    flat = _tokens(cot)
    if mode == "fast":
        grad_table = _scatter_add(backend)(flat, rows, int(num_positions))
    else:
        grad_table = _golden_scatter_add(flat, rows, int(num_positions))
    if freeze_padding and variant == "roberta":
        grad_table[int(padding_idx)] = 0.0
    return cot, grad_table


def _scatter_add(backend):
    """scatter_add(g [tokens, d], rows [tokens], num_positions) of the backend; the kernel modules
    are imported on first use, as in core.lookup."""
    if backend == "numpy":
        return numpy_twin.scatter_add
    return _kernels(backend).scatter_add


def _golden_scatter_add(flat, rows, num_positions) -> np.ndarray:
    """float64 [num_positions, d]: each row's sum of its tokens' g, correctly rounded (fsum)."""
    grad_table = np.zeros((num_positions, flat.shape[1]))
    order = np.argsort(rows, kind="stable")
    bounds = np.flatnonzero(np.diff(rows[order])) + 1
    for group in np.split(order, bounds) if order.size else []:
        block = flat[group]
        for j in range(block.shape[1]):
            col = block[:, j]
            if np.all(np.isfinite(col)):
                grad_table[rows[group[0]], j] = _exact_sum(col.tolist())
            else:
                with np.errstate(invalid="ignore"):
                    grad_table[rows[group[0]], j] = np.sum(col)  # IEEE: NaN, or the infinity
    return grad_table


def mutants(g, positions, num_positions, *, variant="absolute", padding_idx=None, freeze_padding=False) -> dict:
    """{diagnosis code: [(description, (wrong grad_x, wrong grad_table))]} (module docstring)."""
    cot = _check_cotangent(g)
    kw = dict(variant=variant, padding_idx=padding_idx, freeze_padding=freeze_padding)
    grad_x, grad_table = lookup_vjp(cot, positions, num_positions, **kw)
    rows = rows_of(cot, positions, num_positions, variant, padding_idx).reshape(-1)
    counts = np.bincount(rows, minlength=int(num_positions)).astype(np.float64)
    mean = grad_table / np.maximum(counts, 1.0)[:, None]
    last = np.zeros_like(grad_table)
    last[rows] = _tokens(cot)  # fancy assignment: the last token of a row wins
    if freeze_padding and variant == "roberta":
        last[int(padding_idx)] = 0.0
    return {
        "backward-missing": [("no gradient reaches the table (detached or a buffer)",
                              (grad_x, np.zeros_like(grad_table))),
                             ("no gradient reaches x", (np.zeros_like(grad_x), grad_table))],
        "backward-scale": [("each row gets the mean of its tokens' gradients instead of the sum", (grad_x, mean))],
        "backward-overwrite": [("each row keeps one token's gradient (a scatter without accumulation)",
                                (grad_x, last))],
    }
