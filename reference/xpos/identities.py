"""xPos identities (arXiv 2212.10554), on the reference in golden mode (u = 2^-53)."""

from __future__ import annotations

import math

import mpmath
import numpy as np

from reference.identities import register
from reference.numerics import rotation_backward
from reference.xpos import apply, backward, zeta
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


# ---- the backward pass (reference/xpos/backward.py) ---------------------------------------------


@register(id="xpos.backward-adjoint", bound=24 * U,
          statement="<grad_q, dq> + <grad_k, dk> = <g_q, J_q dq> + <g_k, J_k dk> per token and head, J the "
          "(linear) forward (positions 0..20000, centre 0 and 1000, both layouts)")
def backward_adjoint() -> float:
    """Residual: max over tokens and heads of |<grad_q, dq> - <g_q, q_out(dq)>| / N_q and the same for
    k, N_q = sum_pairs s_i |g_pair| |dq_pair| + sum_tail |g_j| |dq_j| with s_i = zeta_i^((m - c)/B)
    (1 / s_i for k).

    Bound 24u: as for RoPE with an amplitude (rope.backward-adjoint): each side is the fast rotation
    (5u per element of the pair's norm) times the scale rounded once (u) and one product (u), 9.9u
    s_i |pair| per pair, and an fsum dot (2u N): 23.8u N for both.
    """
    rng = np.random.default_rng(2212_10554)
    positions = np.array([[0, 1, 5, 511, 512, 4096, 20000]])  # scales stay normal (zeta_0^39)
    worst = 0.0
    for layout, centre in (("interleaved", 0.0), ("half", 1000.0)):
        gq, gk, dq, dk = (rng.standard_normal((1, positions.shape[1], 2, 40)) for _ in range(4))
        kw = dict(rotary_dim=32, layout=layout, centre=centre, backend="numpy")
        grad_q, grad_k = backward.apply_vjp(gq, gk, positions, **kw)
        jq, _ = apply(dq, dq, positions, **kw)
        _, jk = apply(dk, dk, positions, **kw)
        e = ((positions - centre) / 512.0)[..., None, None]  # [1, s, 1, 1]
        s = zeta(32) ** e  # [1, s, 1, r/2]
        for grad, d, g, j, amp in ((grad_q, dq, gq, jq, s), (grad_k, dk, gk, jk, 1.0 / s)):
            weights = rotation_backward.pair_weights(g, d, 32, layout, (amp, 1.0))
            worst = max(worst, rotation_backward.adjoint_residual(grad, d, g, j, weights))
    return worst
