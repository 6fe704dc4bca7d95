"""Error budgets of sinusoid tables (derived in docs/tolerance.md, section 10), shared by the families
that grade one (sinusoidal.table, transformer_xl.score's position term).

Each value is sin(phi) or cos(phi) with phi = p w_i, w_i = base**(-e_i). An implementation
computes w_i (a power or an exp of a product), the product p w_i (u, and u for the position
converted to floating point), then sin or cos (1 ulp) and rounds the result to the returned
dtype T:

    budget = C_ROUND * u_tab  +  eps_angle_i * |phi|  +  C_ROUND * tiny_T

with eps_angle_i = u_a (EXPONENT_ROUNDINGS ln(base) e_i + ANGLE_ROUNDINGS). The exponent
x = -ln(base) e_i may be rounded up to three times before exp(x) turns its absolute error
|x| u into a relative error of w_i: diffusers' ``get_timestep_embedding`` computes
exp(fl(fl(fl(-ln base) * i) / h)) in float32 (ln(base) rounded to float32, the product, the
division), fairseq and tensor2tensor the same with a multiplication. u_a is float32's unit
roundoff in the
``standard`` profile (float32 angles are what most code computes) and float64's in ``strict``;
u_tab is conformance.core.tolerance's table_roundoff. A zero pad column (odd d_model,
concatenated) has budget tiny_T: it must be 0.
"""

from __future__ import annotations

import math

import numpy as np

from dataclasses import dataclass

from conformance.core.rotation_budgets import EXPONENT_ROUNDINGS
from conformance.core.tolerance import SMALLEST_SUBNORMAL, angle_roundoff, table_roundoff
from reference.numerics import sinusoid_frequencies, sinusoid_layouts

C_ROUND = 2.0  # sin / cos (1 ulp) and the rounding to T
ANGLE_ROUNDINGS = 5.0  # power (2), the product (1), the position converted (1), one more (log / exp)
# EXPONENT_ROUNDINGS (3: ln(base) rounded, times i, divided by h; each rounding is u |x| in w_i) is
# rotation_budgets': RoPE's angles and the sinusoids' are built the same way.


@dataclass(frozen=True)
class Sinusoid:
    """The table parameters the budgets read (a sinusoidal.table spec has the same fields):
    d_model, layout ("interleaved" or "concatenated"), exponent ("2i/d" or "2i/(d-2)"), base,
    dims (1, or 2 for a 2-D table)."""

    d_model: int
    layout: str
    exponent: str
    base: float
    dims: int = 1


def columns(spec):
    """Per column of a row: (coordinate index, exponent e_i, kind) with kind as in
    reference/numerics/sinusoid_layouts.py (0 sin, 1 cos, 2 zero)."""
    width = spec.d_model // 2 if spec.dims == 2 else spec.d_model
    freq, kind = sinusoid_layouts.columns(width, spec.layout)
    e = np.array([float(f) for f in sinusoid_frequencies.exponents(width, spec.layout, spec.exponent)])[freq]
    coord = np.zeros(width, dtype=np.int64)
    if spec.dims == 2:
        return np.concatenate([coord, coord + 1]), np.concatenate([e, e]), np.concatenate([kind, kind])
    return coord, e, kind


def angles(positions, spec) -> np.ndarray:
    """|phi| per value, float64 [n, d_model] (from float64 frequencies: budget precision)."""
    coord, e, _ = columns(spec)
    pos = np.asarray(positions, dtype=np.float64)
    p = pos[:, None] if spec.dims == 1 else pos[:, coord]
    return np.abs(p * spec.base ** (-e))


def table_budget(positions, spec, dtype: str, profile: str) -> np.ndarray:
    """Budget of each value, float64 [n, d_model]."""
    _, e, kind = columns(spec)
    phi = angles(positions, spec)
    eps = angle_roundoff(profile) * (EXPONENT_ROUNDINGS * abs(math.log(spec.base)) * e + ANGLE_ROUNDINGS)
    budget = C_ROUND * table_roundoff(dtype, profile) + eps * phi + C_ROUND * SMALLEST_SUBNORMAL[dtype]
    return np.where(kind == 2, SMALLEST_SUBNORMAL[dtype], budget)
