"""xPos identities (arXiv 2212.10554), on the reference in golden mode (u = 2^-53)."""

from __future__ import annotations

import math

import mpmath
import numpy as np

from reference.identities import register
from reference.xpos import apply, zeta
from reference.xpos.core import zeta_mp

U = 2.0 ** -53
D = 32


def _logit(q, k, m, n, centre=0.0):
    qo, _ = apply(q, q, np.array([[m]]), mode="golden", backend="numpy", centre=centre)
    _, ko = apply(k, k, np.array([[n]]), mode="golden", backend="numpy", centre=centre)
    return math.fsum((qo * ko).reshape(-1).tolist())


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((1, 1, 1, D)), rng.standard_normal((1, 1, 1, D))


def _scale(q, k, m, n):
    """sum_i |q pair||k pair| zeta_i^((m - n)/B): the size of the logit's terms."""
    z = zeta(D) ** ((m - n) / 512.0)
    qa, ka = np.abs(q.reshape(-1, 2)).sum(-1), np.abs(k.reshape(-1, 2)).sum(-1)
    return float(np.sum(qa * ka * z))


@register(id="xpos.logit-depends-on-distance", bound=16 * U,
          statement="<q_out(m), k_out(n)> depends on m - n only (shifts s up to 2^15, head 32)")
def shift_invariant() -> float:
    """Residual: max |logit(m + s, n + s) - logit(m, n)| / scale, scale = sum_i |q_i||k_i| zeta_i^((m-n)/B).
    Bound 16u: each side sums products of correctly rounded outputs (2u relative each) whose scales
    zeta^((m-c)/B) zeta^(-(n-c)/B) multiply to the same zeta^((m-n)/B); fsum adds u."""
    q, k = _inputs(1)
    worst = 0.0
    for m, n in ((0, 0), (10, 3), (3, 10), (700, 100)):
        ref = _logit(q, k, m, n)
        for s in (1, 1000, 2**15):
            worst = max(worst, abs(_logit(q, k, m + s, n + s) - ref) / _scale(q, k, m, n))
    return worst


@register(id="xpos.logit-decays", bound=0.0,
          statement="the logit factor zeta_i^((m - n)/B) of every pair is below 1 for m > n (exact, 200 bits)")
def decays() -> float:
    """Residual: max(0, zeta_i^((m - n)/B) - 1) over pairs and m - n in 1..2^16. Bound 0: zeta_i < 1
    for every pair (2i + gamma r < (1 + gamma) r), so every positive power of it is below 1."""
    worst = mpmath.mpf(0)
    with mpmath.workprec(200):
        for i in range(D // 2):
            z = zeta_mp(i, D, 0.4)
            for d in (1, 7, 512, 2**16):
                worst = max(worst, z ** (mpmath.mpf(d) / 512) - 1)
    return float(worst)


@register(id="xpos.centring-cancels", bound=16 * U,
          statement="the logits do not depend on the common centring c (c = 0, 7, -2048, 40000)")
def centring_cancels() -> float:
    """Residual: max |logit_c(m, n) - logit_0(m, n)| / scale. Bound 16u, as xpos.logit-depends-on-distance:
    the centring multiplies q's pair by zeta^(-c/B) and k's by zeta^(c/B), exactly inverse."""
    q, k = _inputs(2)
    worst = 0.0
    for m, n in ((0, 0), (10, 3), (500, 900)):
        ref = _logit(q, k, m, n)
        for c in (7.0, -2048.0, 40000.0):
            worst = max(worst, abs(_logit(q, k, m, n, c) - ref) / _scale(q, k, m, n))
    return worst
