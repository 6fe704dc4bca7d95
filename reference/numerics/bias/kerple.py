"""KERPLE bias: argument checks, the clamps, fast and golden modes. The formula and API are
reference.kerple's (its docstring states them); shared with the attention composite, which adds this
bias to its logits."""

from __future__ import annotations

import numbers

import mpmath
import numpy as np

from reference.golden.certify import nearest_double
from reference.numerics.log1p import log1p_product
from reference.numerics.validate import check_backend, check_mode

VARIANTS = ("log", "power")
CLAMP_LOW = 1e-2  # ParallelKerpleLog / ParallelKerplePower: clamp(min=1e-2) on every forward
POWER_HIGH = 2.0  # ParallelKerplePower: the exponent is clamped to at most 2
# Fast mode's bound in ulps of the exact value. log: r2 d rounded (its relative error u reaches
# log1p relatively at most u * x / ((1 + x) log1p(x)) <= u), log1p within 1 ulp (2u), the product
# with r1 (u): 4u. Where r2 d overflows (r2 > 2**1024 / 2**41, so ln r2 > 680 and ln d >= 0, no
# cancellation) log1p(x) = ln r2 + ln d + O(1 / x): two logs within 2u each of positive terms,
# their sum (u) and the product (u): 4u. power: pow within 1 ulp (2u) and the product (u): 3u.
# 4 ulp = 8u covers all.
FAST_ULPS = 4
MAX_POSITION = 2**40


def check_variant(variant) -> str:
    if variant not in VARIANTS:
        raise ValueError(f"variant: must be one of {VARIANTS}, got {variant!r}")
    return variant


def check_params(r1, r2) -> tuple[np.ndarray, np.ndarray]:
    """r1, r2: sequences of the same length 1..4096 of finite real numbers (float64 arrays)."""
    out = []
    for name, v in (("r1", r1), ("r2", r2)):
        if isinstance(v, (str, bytes)) or np.ndim(v) != 1:
            raise ValueError(f"{name}: must be a 1-D sequence of numbers, one per head")
        if not all(isinstance(x, (numbers.Real, np.floating, np.integer)) and not isinstance(x, bool) for x in v):
            raise ValueError(f"{name}: must hold real numbers, got {list(v)!r}")
        a = np.asarray(v, dtype=np.float64)
        if not 1 <= a.size <= 4096 or not np.all(np.isfinite(a)):
            raise ValueError(f"{name}: must hold 1 to 4096 finite numbers, got {a.size}")
        out.append(a)
    if out[0].size != out[1].size:
        raise ValueError(f"r2: must have one value per head like r1 ({out[0].size}), got {out[1].size}")
    return out[0], out[1]


def clamp(variant, r1, r2) -> tuple[np.ndarray, np.ndarray]:
    """The parameters as the code uses them: log r1, r2 >= 1e-2; power r1 >= 1e-2, r2 in [1e-2, 2]."""
    variant = check_variant(variant)
    a, b = check_params(r1, r2)
    a = np.maximum(a, CLAMP_LOW)
    b = np.maximum(b, CLAMP_LOW) if variant == "log" else np.clip(b, CLAMP_LOW, POWER_HIGH)
    return a, b


def positions(p, name) -> np.ndarray:
    a = np.asarray(p)
    if a.ndim != 1 or a.dtype.kind not in "iu" or (a.size and np.max(np.abs(a)) > MAX_POSITION):
        raise ValueError(f"{name}: must be a 1-D integer array with |p| <= 2**40")
    return a.astype(np.int64)


def golden_value(variant, r1, r2, d) -> float:
    """The golden bias at distance d >= 0 (int) for the clamped float64 r1, r2, computed in mpmath
    at 200 bits and rounded once: golden mode's definition, and its path for the values the quick
    phase cannot certify (kerple_golden.py)."""
    with mpmath.workprec(200):
        a, b = mpmath.mpf(float(r1)), mpmath.mpf(float(r2))
        if variant == "log":
            return nearest_double(-a * mpmath.log1p(b * d))
        return nearest_double(-a * mpmath.power(d, b)) if d else -0.0


def _golden(variant, a, b, qp, kp) -> np.ndarray:
    """Golden bias: one value per (head, distinct distance), quick phase then mpmath where its
    rounding is not certain (kerple_golden.py), broadcast (golden_table.py)."""
    from . import golden_table, kerple_golden  # numba start-up: imported on first use

    dists, plan = golden_table.distances(qp, kp, signed=False)
    table, flags = kerple_golden.quick(a, b, dists, variant == "log")
    for h, t in zip(*np.nonzero(flags)):
        table[h, t] = golden_value(variant, a[h], b[h], int(dists[t]))
    return golden_table.broadcast(table, qp, kp, False, plan)


def bias(q_positions, k_positions, variant, r1, r2, *, backend="cpu", mode="fast") -> np.ndarray:
    """[h, sq, sk]: -r1_h log(1 + r2_h |i - j|) (log) or -r1_h |i - j|^r2_h (power), after the
    clamps; i the query's position, j the key's. Causal callers ignore the entries j > i."""
    a, b = clamp(variant, r1, r2)
    qp, kp = positions(q_positions, "q_positions"), positions(k_positions, "k_positions")
    backend, mode = check_backend(backend), check_mode(mode)
    if mode == "golden":
        return _golden(variant, a, b, qp, kp)
    if backend == "numpy":
        d = np.abs(qp[:, None] - kp[None, :]).astype(np.float64)[None]
        if variant == "log":
            return -a[:, None, None] * log1p_product(b[:, None, None], d)
        return -a[:, None, None] * np.power(d, b[:, None, None])
    if backend == "cpu":
        from . import kerple_cpu_kernels as kernels  # numba start-up: imported on first use
    else:
        from . import kerple_cuda_kernels as kernels  # numba start-up: imported on first use
    return kernels.bias(a, b, qp, kp, variant == "log")

