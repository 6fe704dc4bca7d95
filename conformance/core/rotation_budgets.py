"""RoPE error budgets, derived in docs/tolerance.md (sections 2-4).

Notation: T is the dtype under test with unit roundoff u_T; a pair (a, b) of input elements turns
by phi = m * theta_i, theta_i = base**(-e_i) with exponent e_i = 2i / r. The error of a pair is the
larger of its two elements' errors.

Rotation budget for one pair (rope.apply; rope.cache is the rotation of (1, 0)):

    budget = C_ROUND * u_tab * (|a| + |b|)  +  C_ANGLE * eps_angle * |phi| * (|a| + |b|)  +  floor

- position-independent part: C_ROUND roundings of size u_tab relative to |a| + |b| (the cos/sin
  table rounded to T, the two products, the sum); u_tab is conformance.core.tolerance's
  ``table_roundoff`` (float32 tables admitted by ``standard``).
- angle part: a relative angle error eps_angle turns the pair by eps * |phi|, which moves each
  element by at most eps * |phi| * sqrt(a^2 + b^2) <= eps * |phi| * (|a| + |b|). The angle
  computed in arithmetic of unit roundoff u errs by at most
      eps_angle = u * (EXPONENT_ROUNDINGS * ln(base) * e_i + ANGLE_ROUNDINGS)
  (first order). theta_i = exp(x_i) with x_i = -ln(base) e_i: each rounding of the exponent on
  the way to x_i is an absolute error u |x_i| = u ln(base) e_i, which exp (or the power) turns into
  the same relative error of theta_i. HF's ``base ** (arange(0, r, 2) / r)`` rounds it once (2i/r);
  MLX's ``mx.fast.rope`` computes exp(fl(-i * fl(fl(ln base) / h))) (h = r/2: three roundings), as
  diffusers' sinusoids do (exp(fl(fl(fl(-ln base) * i) / h))); EXPONENT_ROUNDINGS = 3 admits all
  of them, and conformance.core.sinusoid_budgets uses the same constant. ANGLE_ROUNDINGS counts
  the position-independent roundings: the power or exp (1 ulp = 2u), the reciprocal (u), the
  product m * theta (u) and the position converted to floating point (u, exact below 2**24 in
  float32). ``standard`` uses u = u_32; ``strict`` uses u = u_64 (``angle_roundoff``).
- floor: C_ROUND * (smallest subnormal of T), so exact zeros and underflow do not divide by 0.

Frequencies (rope.frequencies): relative error of inv_freq_i within
u_out + u * (EXPONENT_ROUNDINGS * ln(base) * e_i + FREQ_ROUNDINGS), eps_angle without the product
and position terms, with u_out the unit roundoff of the returned dtype.

The constants were calibrated (bench/calibrate_tolerance.py, numbers in docs/tolerance.md) on
HF rotate_half, Meta complex freqs_cis and GPT-J rotate_every_two: their worst ratios stay near
0.65 while angles computed in bfloat16 or float16 exceed 100. EXPONENT_ROUNDINGS was raised from 1
(pow's single rounding of 2i/r) to 3 for MLX's fused kernel, whose angles exceeded the one-rounding
bound by up to 1.26x at base 5e5 and 1e6 (docs/tolerance.md, section 3).
"""

from __future__ import annotations

import math

import numpy as np

from conformance.core.tolerance import SMALLEST_SUBNORMAL, angle_roundoff, table_roundoff, unit_roundoff

C_ROUND = 3.0  # table rounding + two products + one sum (docs/tolerance.md, section 2)
C_ANGLE = 1.0  # the first-order angle bound is used as it is (section 3)
# Roundings of the exponent x_i = -ln(base) e_i before exp / pow, each u |x_i| relative in theta_i:
# fl(ln base), the division by h and the product by i (MLX's mx.fast.rope; diffusers' and fairseq's
# sinusoids in another order); pow's rounding of 2i/r is one of them. Shared with sinusoid_budgets.
EXPONENT_ROUNDINGS = 3.0
# Position-independent roundings of the angle, relative to it (the exponent's are above):
ANGLE_ROUNDINGS = 5.0  # power or exp (2) + reciprocal (1) + product m * theta (1) + position conversion (1)
FREQ_ROUNDINGS = 3.0  # power or exp (2) + reciprocal (1): no product, no position
ATTENTION_FACTOR_ROUNDINGS = 4.0  # a log, a sqrt or a product and a sum in float


def exponents(rotary_dim: int) -> np.ndarray:
    """e_i = 2i / r, float64 [r/2]: theta_i = base**(-e_i)."""
    return 2.0 * np.arange(rotary_dim // 2, dtype=np.float64) / rotary_dim


def exponent_error(rotary_dim: int, base: float) -> np.ndarray:
    """EXPONENT_ROUNDINGS * |ln(base)| * e_i, float64 [r/2]: the exponent's roundings, in units of u,
    as a relative error of theta_i (module docstring)."""
    return EXPONENT_ROUNDINGS * abs(math.log(base)) * exponents(rotary_dim)


def angle_relative_error(rotary_dim: int, base: float, profile: str) -> np.ndarray:
    """eps_angle per pair, float64 [r/2]: u * (EXPONENT_ROUNDINGS * ln(base) * e_i + ANGLE_ROUNDINGS)."""
    return angle_roundoff(profile) * (exponent_error(rotary_dim, base) + ANGLE_ROUNDINGS)


def rotation_budget(magnitude, phi, rotary_dim: int, base: float, dtype: str, profile: str):
    """Budget of each pair: magnitude = |a| + |b| and phi = |m * theta_i|, both [..., r/2].

    Returns float64 [..., r/2] (broadcast of the inputs). dtype is the dtype under test.
    """
    mag = np.asarray(magnitude, dtype=np.float64)
    eps = angle_relative_error(rotary_dim, base, profile)
    return (
        C_ROUND * table_roundoff(dtype, profile) * mag
        + C_ANGLE * eps * np.abs(phi) * mag
        + C_ROUND * SMALLEST_SUBNORMAL[dtype]
    )


def scaled_rotation_budget(magnitude, phi, rotary_dim: int, base: float, dtype: str, profile: str,
                           attention_factor: float):
    """rotation_budget for a scaling whose attention factor f multiplies cos and sin (YaRN,
    LongRoPE: HF's ``cos = emb.cos() * attention_scaling``): the rotated pair has magnitude up to
    f (|a| + |b|), so every rounding of the rotation scales with max(f, 1), and the product f cos
    (f sin) adds one rounding of the table (docs/tolerance.md, section 4). f = 1: rotation_budget.
    Calibrated on transformers' Phi-3.5 LongRoPE (f = 1.19) in float32, which exceeded the
    unscaled budget by up to 1.24x at small positions."""
    budget = rotation_budget(magnitude, phi, rotary_dim, base, dtype, profile)
    f = abs(float(attention_factor))
    if f == 1.0:
        return budget
    return max(f, 1.0) * budget + table_roundoff(dtype, profile) * f * np.asarray(magnitude, dtype=np.float64)


def frequency_budget(inv_freq, rotary_dim: int, base: float, dtype: str, profile: str):
    """Absolute budget of each inv_freq_i:
    theta_i * (u_out + u * (EXPONENT_ROUNDINGS ln(base) e_i + FREQ_ROUNDINGS))."""
    theta = np.abs(np.asarray(inv_freq, dtype=np.float64))
    u = angle_roundoff(profile)
    rel = unit_roundoff(dtype) + u * (exponent_error(rotary_dim, base) + FREQ_ROUNDINGS)
    return theta * rel + SMALLEST_SUBNORMAL[dtype]


def attention_factor_budget(value: float, profile: str) -> float:
    """Absolute budget of the attention factor: a few roundings of the profile's arithmetic."""
    return ATTENTION_FACTOR_ROUNDINGS * angle_roundoff(profile) * max(abs(float(value)), 1.0)


# Amplitude on the whole output (Gaussian-kernel RoPE: f(x, m) = K(m) R_m x).


def amplitude_budgets(amp, amp_error, budget, magnitude, tail_budget, tail, dtype: str, profile: str):
    """(pair budget, tail budget) for outputs scaled by amp [batch, seq] per token.

    amp_error [batch, seq]: the amplitude's own error bound per unit roundoff (|dK| <= u * amp_error
    when K is computed in arithmetic of unit roundoff u; for a Gaussian kernel it grows with the
    exponent, see conformance/gaussian_rope/apply.py). The rotation's budget scales with the
    amplitude; u_tab * amp_error * |x| covers the amplitude computed in the implementation's
    arithmetic; a floor of the dtype's smallest subnormal per element covers an amplitude that
    underflows in the dtype (float32 below 1.4e-45, float16 and bfloat16 much earlier), where the
    output may flush to zero (docs/tolerance.md, section 11)."""
    k = np.abs(np.asarray(amp, dtype=np.float64))[:, :, None, None]
    dk = table_roundoff(dtype, profile) * np.abs(np.asarray(amp_error, dtype=np.float64))[:, :, None, None]
    floor = SMALLEST_SUBNORMAL[dtype] * (1.0 + np.abs(magnitude))
    pair = k * budget + dk * np.abs(magnitude) + floor
    tail_floor = SMALLEST_SUBNORMAL[dtype] * (1.0 + np.abs(tail))
    return pair, k * tail_budget + dk * np.abs(tail) + tail_floor
