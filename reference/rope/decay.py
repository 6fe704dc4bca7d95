"""RoFormer long-term decay: the Abel-summation bound on a RoPE score and its relative curve.

Source: Su et al., RoFormer, arXiv 2104.09864, section 3.4.3, eqs. 35-37.
With interleaved pairs read as complex numbers q~_i = q_{2i} + i q_{2i+1} (likewise k~), the
rotated score is (eq. 35)

    <R_m q, R_n k> = Re[ sum_{i=0}^{r/2-1} h_i e^{i (m-n) theta_i} ],   h_i = q~_i conj(k~_i),

with theta_i = base^(-2i/r). Let S_0 = 0, S_j = sum_{k=0}^{j-1} e^{i (m-n) theta_k} and h_{r/2} = 0.
Abel summation (eq. 36) and the triangle inequality (eq. 37) give

    sum_i h_i e^{i (m-n) theta_i} = -sum_{i=0}^{r/2-1} S_{i+1} (h_{i+1} - h_i)
    |sum_i h_i e^{i (m-n) theta_i}| <= (max_i |h_{i+1} - h_i|) * sum_{j=1}^{r/2} |S_j|,

and the paper plots the relative upper bound (1/(r/2)) sum_{j=1}^{r/2} |S_j| against the distance
m - n (d = 128 per Su's blog, base 1e4): (r/2 + 1)/2 = 32.5 at distance 0, about 4.47 at 1000.

``distance`` is always m - n as integers (any shape); its sign only conjugates the phases, so the
phases are computed for |m - n| with the accurate ``reference.rope.cos_sin`` and conjugated. h
arrays have shape ``[..., r/2]`` and broadcast against ``distance[..., None]``. float64 throughout.
"""

from __future__ import annotations

import numpy as np

from reference import rope  # rope.cos_sin is looked up at call time, so a replaced one is used
from reference.numerics.validate import check_rotary_dim

__all__ = [
    "phases",
    "partial_sums",
    "score_coefficients",
    "phase_sum",
    "abel_sum",
    "abel_bound",
    "relative_upper_bound",
]


def _distances(distance) -> np.ndarray:
    d = np.asarray(distance)
    if d.dtype.kind not in "iu":
        if d.dtype.kind == "f" and np.all(np.isfinite(d)) and np.all(d == np.round(d)):
            d = d.astype(np.int64)
        else:
            raise ValueError("distance: must be integers (the relative position m - n)")
    return d.astype(np.int64)


def phases(distance, rotary_dim=128, base=10000.0) -> np.ndarray:
    """e^{i (m-n) theta_i} for i = 0..r/2-1: complex128 ``[*distance.shape, r/2]``.

    theta_i = base^(-2i/r) (RoFormer eq. 15, 0-based). Computed as cos + i sin of |m - n| theta_i
    with ``reference.rope.cos_sin`` (accurate to about 1 ulp), conjugated where m - n < 0.
    """
    d = _distances(distance)
    r = check_rotary_dim(rotary_dim)
    flat = d.reshape(-1)  # cos_sin is given 1-D positions; the shape is restored below
    cos, sin = rope.cos_sin(np.abs(flat), r, base)
    sin = np.where(flat[:, None] < 0, -sin, sin)
    return (cos + 1j * sin).reshape(d.shape + (r // 2,))


def partial_sums(distance, rotary_dim=128, base=10000.0) -> np.ndarray:
    """S_j = sum_{k=0}^{j-1} e^{i (m-n) theta_k} for j = 1..r/2: complex128 ``[..., r/2]``.

    Entry ``[..., j - 1]`` holds S_j (S_0 = 0 is left out). RoFormer section 3.4.3.
    """
    return np.cumsum(phases(distance, rotary_dim, base), axis=-1)


def score_coefficients(q, k) -> np.ndarray:
    """h_i = q~_i conj(k~_i) with q~_i = q_{2i} + i q_{2i+1}: complex128 ``[..., r/2]``.

    q and k hold the rotary part in interleaved order, shape ``[..., r]`` (RoFormer eq. 35).
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    if q.shape[-1] % 2 or k.shape[-1] != q.shape[-1]:
        raise ValueError("k: q and k need the same even last dimension (the rotary dim)")
    qc = q[..., 0::2] + 1j * q[..., 1::2]
    kc = k[..., 0::2] + 1j * k[..., 1::2]
    return qc * np.conj(kc)


def _coefficients(h, rotary_dim) -> tuple[np.ndarray, int]:
    """(h as complex128 [..., r/2], r) after checking rotary_dim and h's last dimension."""
    r = check_rotary_dim(rotary_dim)
    h = np.asarray(h, dtype=np.complex128)
    if h.shape[-1:] != (r // 2,):
        raise ValueError(f"h: last dimension must be rotary_dim // 2 = {r // 2}, got {h.shape}")
    return h, r


def _differences(h) -> np.ndarray:
    """h_{i+1} - h_i for i = 0..r/2-1, with h_{r/2} = 0 (so the last entry is -h_{r/2-1})."""
    return np.diff(h, axis=-1, append=np.zeros_like(h[..., :1]))


def phase_sum(h, distance, rotary_dim=128, base=10000.0) -> np.ndarray:
    """sum_{i=0}^{r/2-1} h_i e^{i (m-n) theta_i}: complex128 of the broadcast leading shape.

    Its real part is the RoPE score <R_m q, R_n k> when h = score_coefficients(q, k) (eq. 35).
    """
    h, r = _coefficients(h, rotary_dim)
    return np.sum(h * phases(distance, r, base), axis=-1)


def abel_sum(h, distance, rotary_dim=128, base=10000.0) -> np.ndarray:
    """-sum_{i=0}^{r/2-1} S_{i+1} (h_{i+1} - h_i), h_{r/2} = 0: Abel's form of phase_sum (eq. 36)."""
    h, r = _coefficients(h, rotary_dim)
    return -np.sum(partial_sums(distance, r, base) * _differences(h), axis=-1)


def abel_bound(h, distance, rotary_dim=128, base=10000.0) -> np.ndarray:
    """(max_i |h_{i+1} - h_i|) * sum_{j=1}^{r/2} |S_j| (eq. 37): float64, bounds |phase_sum|."""
    h, r = _coefficients(h, rotary_dim)
    largest_step = np.max(np.abs(_differences(h)), axis=-1)
    return largest_step * np.sum(np.abs(partial_sums(distance, r, base)), axis=-1)


def relative_upper_bound(distance, rotary_dim=128, base=10000.0) -> np.ndarray:
    """(1/(r/2)) sum_{j=1}^{r/2} |S_j|, the RoFormer Figure 2 curve: float64 ``distance.shape``.

    Equals (r/2 + 1)/2 at distance 0 (|S_j| = j) and decays, with ripples, as |m - n| grows.
    Defaults are the figure's d = 128 and base 1e4.
    """
    return np.mean(np.abs(partial_sums(distance, rotary_dim, base)), axis=-1)
