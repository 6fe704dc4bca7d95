"""ALiBi slopes and bias: the formula and API of reference.alibi (its docstring states them), shared
with the attention composite, which adds this bias to its logits (reference.attention.core)."""

from __future__ import annotations

import math

import mpmath
import numpy as np

from reference.golden.certify import nearest_double
from reference.numerics.validate import check_backend, check_mode


def _check_heads(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= 4096:
        raise ValueError(f"num_heads: must be an integer from 1 to 4096, got {n!r}")
    return int(n)


def slopes_mp(n: int) -> list:
    """The exact slopes (mpf at the current precision), fairseq's rule."""
    n = _check_heads(n)

    def power_of_2(c):
        return [mpmath.mpf(2) ** (-mpmath.mpf(8) * k / c) for k in range(1, c + 1)]

    if n & (n - 1) == 0:
        return power_of_2(n)
    c = 2 ** int(math.floor(math.log2(n)))
    return power_of_2(c) + slopes_mp(2 * c)[0::2][: n - c]


def slopes(n: int, mode: str = "fast") -> np.ndarray:
    """float64 [n]. fast: fairseq's float formula (start * ratio**i); golden: correctly rounded."""
    n = _check_heads(n)
    if check_mode(mode) == "golden":
        with mpmath.workprec(200):
            return np.array([nearest_double(s) for s in slopes_mp(n)])

    def power_of_2(c):
        start = 2 ** (-(2 ** -(math.log2(c) - 3)))
        return [start * start**i for i in range(c)]

    if n & (n - 1) == 0:
        return np.array(power_of_2(n))
    c = 2 ** math.floor(math.log2(n))
    return np.concatenate([power_of_2(c), slopes(2 * c)[0::2][: n - c]])


def _positions(p, name):
    a = np.asarray(p)
    if a.ndim != 1 or a.dtype.kind not in "iu" or (a.size and np.max(np.abs(a)) > 2**40):
        raise ValueError(f"{name}: must be a 1-D integer array with |p| <= 2**40")
    return a.astype(np.int64)


def golden_value(slope, d) -> float:
    """-slope d rounded once (slope an mpf at 200 bits, d an int): golden mode's definition, and
    its path for the values the quick phase cannot certify (alibi_golden.py)."""
    with mpmath.workprec(200):
        return nearest_double(-slope * int(d))


def _golden(n, qp, kp, causal) -> np.ndarray:
    """Golden bias: one value per (head, distinct distance), quick phase then mpmath where its
    rounding is not certain (alibi_golden.py), broadcast (golden_table.py)."""
    from . import alibi_golden, golden_table  # numba start-up: imported on first use

    with mpmath.workprec(200):
        exact = slopes_mp(n)
        hi = np.array([nearest_double(s) for s in exact])
        lo = np.array([nearest_double(s - h) for s, h in zip(exact, hi)])
    dists, plan = golden_table.distances(qp, kp, signed=causal)
    table, flags = alibi_golden.quick(hi, lo, dists)
    for h, t in zip(*np.nonzero(flags)):
        table[h, t] = golden_value(exact[h], dists[t])
    return golden_table.broadcast(table, qp, kp, causal, plan)


def bias(num_heads, q_positions, k_positions, *, causal=True, backend="cpu", mode="fast") -> np.ndarray:
    """[h, sq, sk]: -m_h (i - j) (causal; entries j > i hold the same formula, masked by the
    caller) or -m_h |i - j| (symmetric), i the query's position, j the key's."""
    n = _check_heads(num_heads)
    qp, kp = _positions(q_positions, "q_positions"), _positions(k_positions, "k_positions")
    backend, mode = check_backend(backend), check_mode(mode)
    if mode == "golden":
        return _golden(n, qp, kp, bool(causal))
    m = slopes(n)
    if backend == "numpy":
        d = (qp[:, None] - kp[None, :]).astype(np.float64)
        return -m[:, None, None] * (d if causal else np.abs(d))
    if backend == "cpu":
        from . import alibi_cpu_kernels as kernels  # numba start-up: imported on first use
    else:
        from . import alibi_cuda_kernels as kernels  # numba start-up: imported on first use
    return kernels.bias(m, qp, kp, bool(causal))
