"""NoPE identities: the baseline of the identities matrix. Without an encoding, attention is blind
to order unless it is causal; the causal mask alone is a position signal (Haviv et al., arXiv
2203.16634; Kazemnejad et al., arXiv 2305.19466).

The attention here is a small float64 softmax attention whose every sum is math.fsum (correctly
rounded, so independent of the order of its terms): a permutation of the tokens permutes the
operands of each sum and nothing else.
"""

from __future__ import annotations

import math

import numpy as np

from reference.identities import register
from reference.nope import apply

_U = 2.0**-53


def attention(q, k, v, causal: bool) -> np.ndarray:
    """softmax(q k^T / sqrt(d), masked) v for q, k, v [s, d], every sum by fsum."""
    s, d = q.shape
    out = np.empty_like(v)
    for i in range(s):
        keys = range(i + 1) if causal else range(s)
        scores = [math.fsum(q[i] * k[j]) / math.sqrt(d) for j in keys]
        top = max(scores)
        e = [math.exp(z - top) for z in scores]
        total = math.fsum(e)
        for c in range(v.shape[1]):
            out[i, c] = math.fsum([w * v[j, c] for w, j in zip(e, keys)]) / total
    return out


def _qkv(seed, s=8, d=4):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((3, s, d))


@register(id="nope.identity", bound=0.0,
          statement="apply(x, positions) = x bit for bit on every backend (no position enters; -0.0, NaN, inf kept)")
def identity() -> float:
    """Residual: the number of elements whose bits differ. Bound 0: the output is a copy."""
    x = np.random.default_rng(1).standard_normal((2, 3, 2, 8))
    x[0, 0, 0, :3] = (-0.0, np.nan, np.inf)
    p = np.array([[0, 1, 2], [8191, 8192, 131071]])
    return float(sum(np.count_nonzero(apply(x, p, backend=b).view(np.int64) != x.view(np.int64))
                     for b in ("cpu", "numpy")))


@register(id="nope.permutation-equivariance", bound=0.0,
          statement="non-causal attention without an encoding is permutation equivariant: attn(Pq, Pk, Pv) = "
          "P attn(q, k, v) bit for bit (order-free fsum reductions; 8 tokens, 20 permutations)")
def equivariance() -> float:
    """Residual: max |attn(P.) - P attn(.)|. Bound 0: every score and weight is computed from the
    same operands, and every sum is correctly rounded whatever the order of its terms."""
    q, k, v = _qkv(2)
    base = attention(q, k, v, causal=False)
    rng = np.random.default_rng(3)
    worst = 0.0
    for _ in range(20):
        perm = rng.permutation(q.shape[0])
        worst = max(worst, float(np.max(np.abs(attention(q[perm], k[perm], v[perm], causal=False) - base[perm]))))
    return worst


@register(id="nope.causal-position-signal", bound=2 * _U,
          statement="causal attention with equal scores and the value 1 on the first token only outputs "
          "1/(i+1) at token i: the mask alone tells positions apart (i = 0..1023)")
def causal_signal() -> float:
    """Residual: max relative error against 1/(i+1). Bound 2u: the weights are exp(0) = 1 exactly,
    the fsum numerator is exactly 1 and the denominator exactly i + 1, so one division rounds; the
    relative error of a correctly rounded quotient is at most u."""
    s = 1024
    q = np.zeros((s, 1))
    v = np.zeros((s, 1))
    v[0, 0] = 1.0
    out = attention(q, q, v, causal=True)[:, 0]
    exact = 1.0 / np.arange(1, s + 1)
    return float(np.max(np.abs(out - exact) / exact))


@register(id="nope.causal-breaks-permutation", bound=1e-3, expect="violated-by-design",
          statement="causal attention without an encoding is not permutation equivariant: the mask itself "
          "encodes order (8 tokens, 20 permutations)")
def causal_not_equivariant() -> float:
    """Residual: max |attn(P.) - P attn(.)| with the causal mask, far above rounding (bound 1e-3):
    token i averages over its own prefix, which a permutation changes."""
    q, k, v = _qkv(4)
    base = attention(q, k, v, causal=True)
    rng = np.random.default_rng(5)
    worst = 0.0
    for _ in range(20):
        perm = rng.permutation(q.shape[0])
        worst = max(worst, float(np.max(np.abs(attention(q[perm], k[perm], v[perm], causal=True) - base[perm]))))
    return worst
