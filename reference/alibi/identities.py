"""ALiBi identities."""

from __future__ import annotations

import math

import mpmath
import numpy as np

from reference.alibi import bias, slopes, slopes_mp
from reference.identities import register


@register(id="alibi.geometric-slopes", bound=2.0 ** -150,
          statement="for a power-of-two head count n the slopes form a geometric sequence with ratio 2^(-8/n) "
          "(n = 1..256, exact at 200 bits)")
def geometric() -> float:
    """Residual: max |m_(k+1) / m_k - 2^(-8/n)| in mpmath. Bound 2^-150: the rule is that sequence;
    only 200-bit rounding remains."""
    worst = mpmath.mpf(0)
    with mpmath.workprec(200):
        for e in range(9):
            n = 2**e
            s = slopes_mp(n)
            ratio = mpmath.power(2, -mpmath.mpf(8) / n)
            worst = max([worst] + [abs(b / a - ratio) for a, b in zip(s, s[1:])])
    return float(worst)


@register(id="alibi.softmax-row-constant", bound=512 * 2.0 ** -53,
          statement="softmax over keys is unchanged by a per-row constant: the causal bias -m (i - j) and "
          "fairseq's m j (+ mask) give the same attention weights (12 heads, 64 positions)")
def row_constant() -> float:
    """Residual: max |softmax(s + b) - softmax(s + b + c_i)| with c_i = m_h i. Bound 512u: each
    softmax subtracts its row maximum, so both see the same exponents up to the roundings of adding
    c_i and subtracting the maximum, each at most u times the operands' size (here below 70: scores
    within 5, bias and constant within 32), so exponents differ by at most 4 * 70u = 280u and the
    weights relatively by as much; exp and the fsum normalisation add a few u."""
    rng = np.random.default_rng(7)
    n, L = 12, 64
    b = bias(n, np.arange(L), np.arange(L), causal=True, backend="numpy")
    scores = rng.standard_normal((n, L, L))
    mask = np.triu(np.ones((L, L), dtype=bool), 1)

    def softmax(z):
        z = np.where(mask, -np.inf, z)
        z = z - z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        return e / np.array([[math.fsum(r) for r in h] for h in e])[..., None]


    shifted = b + slopes(n)[:, None, None] * np.arange(L)[None, :, None]  # fairseq's m j = -m (i - j) + m i
    return float(np.max(np.abs(softmax(scores + b) - softmax(scores + shifted))))
