"""xPos: zeta, the scale exponent and apply (see __init__)."""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np

from reference.numerics import phase
from reference.numerics.validate import (
    as_x,
    check_backend,
    check_base,
    check_layout,
    check_mode,
    check_positions,
    check_x,
    resolve_rotary_dim,
)


def _check(scale_base, gamma, centre):
    for name, v in (("scale_base", scale_base), ("gamma", gamma), ("centre", centre)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{name}: must be a finite number, got {v!r}")
    if scale_base <= 0 or gamma <= 0:
        raise ValueError(f"{'scale_base' if scale_base <= 0 else 'gamma'}: must be > 0")
    return float(scale_base), float(gamma), float(centre)


def zeta_mp(i, rotary_dim, gamma):
    r = mpmath.mpf(int(rotary_dim))
    g = mpmath.mpf(float(gamma))
    return (2 * i + g * r) / ((1 + g) * r)


def zeta(rotary_dim, gamma=0.4) -> np.ndarray:
    """zeta_i = (2i + gamma r) / ((1 + gamma) r), float64 [r/2], correctly rounded."""
    with mpmath.workprec(200):
        return np.array([float(zeta_mp(i, rotary_dim, gamma)) for i in range(int(rotary_dim) // 2)])


def scale_exponent(positions, scale_base=512.0, centre=0.0) -> np.ndarray:
    """(m - c) / B for the query; the key uses its negative."""
    m = np.asarray(positions, dtype=np.float64)
    return (m - float(centre)) / float(scale_base)


def _factor(rotary_dim, scale_base, gamma, centre, sign):
    cache: dict = {}

    def factor(prec, m, i):
        key = (prec, m, i)
        if key not in cache:
            with mpmath.workprec(prec):
                e = sign * (mpmath.mpf(int(m)) - mpmath.mpf(centre)) / mpmath.mpf(scale_base)
                cache[key] = mpmath.mpf(1) if i is None else zeta_mp(i, rotary_dim, gamma) ** e
        return cache[key]

    return factor


@functools.lru_cache(maxsize=64)
def _log_zeta(rotary_dim, gamma):
    """(hi, lo) float64 [r/2]: ln zeta_i as a double-double (hi correctly rounded, hi + lo within
    2^-104 relative), evaluated in mpmath at 200 bits."""
    with mpmath.workprec(200):
        logs = [mpmath.log(zeta_mp(i, rotary_dim, gamma)) for i in range(int(rotary_dim) // 2)]
        hi = np.array([float(v) for v in logs])
        lo = np.array([float(v - mpmath.mpf(h)) for v, h in zip(logs, hi)])
    hi.setflags(write=False)
    lo.setflags(write=False)
    return hi, lo


def fast_scales(flat, rotary_dim, scale_base, gamma, centre, sign, factor):
    """float64 [len(flat), r/2]: the fast scale zeta_i^(sign (m - c) / B) for int64 positions m,
    within cpu_kernels.REL_ERR = 2^-51 relative of the exact value (derived in cpu_kernels.py),
    once per distinct position. Entries past the kernel's range (|e ln zeta_i| > 700: near
    overflow or subnormal) are ``factor(PREC_BITS, m, i)`` rounded once, as the golden path."""
    from . import cpu_kernels  # numba start-up: imported on first use

    values, inverse = np.unique(flat, return_inverse=True)
    hi, lo = _log_zeta(int(rotary_dim), float(gamma))
    out, flags = cpu_kernels.scales(values, centre, scale_base, sign, hi, lo)
    for t, i in zip(*np.nonzero(flags)):
        out[t, i] = phase.to_double(factor(phase.PREC_BITS, int(values[t]), int(i)))
    return out[inverse.reshape(-1)]


def golden_scales(flat, rotary_dim, scale_base, gamma, centre, sign, factor):
    """(float64 [len(flat), r/2, 4], frel): the scale zeta_i^(sign (m - c) / B) as
    ``phase.dd_factor`` rows (2^fe (fh + fl), fd) within cpu_kernels.GOLDEN_REL_ERR = 2^-86, once
    per distinct position (cpu_kernels.golden_scale_kernel); entries past its range are
    ``phase.dd_factor(factor(PREC_BITS, m, i))``, from mpmath. The amplitudes of golden mode's
    quick phase (phase.scaled_rotate's golden_factors)."""
    from . import cpu_kernels  # numba start-up: imported on first use

    values, inverse = np.unique(flat, return_inverse=True)
    hi, lo = _log_zeta(int(rotary_dim), float(gamma))
    out, flags = cpu_kernels.golden_scales(values, centre, scale_base, sign, hi, lo)
    for t, i in zip(*np.nonzero(flags)):
        out[t, i] = phase.dd_factor(factor(phase.PREC_BITS, int(values[t]), int(i)))
    return out[inverse.reshape(-1)], cpu_kernels.GOLDEN_REL_ERR


def apply(q, k, positions, *, rotary_dim=None, base=10000.0, layout="interleaved", scale_base=512.0, gamma=0.4,
          centre=0.0, backend="cpu", mode="fast"):
    """(q_out, k_out), float64 [batch, seq, heads, head_dim] each: pair i of q at position m turned
    by m theta_i and scaled by zeta_i^((m - c)/B), of k scaled by zeta_i^(-(m - c)/B); the tail past
    rotary_dim is passed through. fast: the fast rotation times the float64 scale (on the cpu
    backend within 2^-51 relative of the exact scale, xpos/cpu_kernels.py; on the others the scale
    correctly rounded); golden: each output the nearest double to the exact product (Ziv's loop),
    over- and underflow included."""
    scale_base, gamma, centre = _check(scale_base, gamma, centre)
    qx, kx = as_x(q), as_x(k)  # may be the caller's arrays: copied below unless the cpu fast path
    if qx.shape != kx.shape:
        raise ValueError(f"k: shape {kx.shape} differs from q's {qx.shape}")
    r = resolve_rotary_dim(rotary_dim, qx.shape[3])
    layout = check_layout(layout)
    m = check_positions(positions, qx.shape[:2])
    backend, mode = check_backend(backend), check_mode(mode)
    table = phase.ladder(r, check_base(base))
    if (backend, mode) != ("cpu", "fast"):
        qx, kx = check_x(q), check_x(k)  # these paths write into a private copy
    # q and k share their positions: one cos/sin table for both (cpu fast path)
    tables = phase.stream_cos_sin(m[None], table) if (backend, mode) == ("cpu", "fast") and qx.size else None
    out = []
    for x, sign in ((qx, 1), (kx, -1)):
        factor = _factor(r, scale_base, gamma, centre, sign)
        fast = None if backend != "cpu" else (
            lambda flat, factor=factor, sign=sign: fast_scales(flat, r, scale_base, gamma, centre, sign, factor))
        gold = None if backend != "cpu" else (
            lambda flat, factor=factor, sign=sign: golden_scales(flat, r, scale_base, gamma, centre, sign, factor))
        out.append(phase.scaled_rotate(x, m, table, factor, r, layout, backend, mode, fast_factors=fast,
                                       tables=tables, golden_factors=gold))
    return tuple(out)
