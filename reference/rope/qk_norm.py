"""QK-norm then RoPE, in float64 (NumPy; never torch): Qwen3's and OLMo 2's query and key path.

Formula (RMSNorm: Zhang and Sennrich, arXiv 1910.07467, eq. 4; Qwen3 (transformers' Qwen3Attention:
``q_norm`` and ``k_norm`` are Qwen3RMSNorm(head_dim) applied per head before
``apply_rotary_pos_emb``) and OLMo 2 (Olmo2Attention: ``q_norm`` over num_heads * head_dim and
``k_norm`` over num_kv_heads * head_dim, applied to the whole projection before it is split into
heads, arXiv 2501.00656 section 3.1)):

    y = x / sqrt(mean(x^2) + eps) * w        the mean over one head's head_dim features
                                             (scope "head", w [head_dim]) or over the token's
                                             heads * head_dim features (scope "full", w
                                             [heads * head_dim])
    out = RoPE(y, positions)                 reference.rope.apply (rotary_dim, base, layout,
                                             scaling)

for q [b, s, hq, d] with q_weight and k [b, s, hkv, d] with k_weight. In exact arithmetic the order
matters only through w: with a uniform w, RMSNorm over a head commutes with the rotation (a rotation
keeps the norm); the cases draw non-uniform weights.

Fast mode: NumPy float64 (the norm, then reference.rope on the numpy backend): a few units of 2^-53
relative. Golden mode: the chain in mpmath at 192 bits from the float64 inputs, each output rounded
once (faithful: the mean is a reduction), certified against qk_norm_oracle.py.
"""

from __future__ import annotations

import numbers

import mpmath
import numpy as np

from reference.golden.certify import nearest_double
from reference.numerics import rotation
from reference.numerics import scaling as scaling_types
from reference.numerics.validate import check_base, check_layout, check_mode

GOLDEN_PREC = 192
SCOPES = ("head", "full")


def _check(q, k, positions, q_weight, k_weight, rotary_dim, base, layout, scaling, eps, scope):
    if scope not in SCOPES:
        raise ValueError(f"scope: must be 'head' or 'full', got {scope!r}")
    out = []
    for name, x in (("q", q), ("k", k)):
        a = np.asarray(x)
        if a.ndim != 4 or a.dtype.kind not in "fiu":
            raise ValueError(f"{name}: must be a real 4-D array [batch, seq, heads, head_dim], got {list(a.shape)}")
        a = np.asarray(a, dtype=np.float64)
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name}: must be finite")
        out.append(a)
    qa, ka = out
    if qa.shape[:2] != ka.shape[:2] or qa.shape[3] != ka.shape[3]:
        raise ValueError(f"k: must share q's batch, seq and head_dim, got {list(ka.shape)} for q {list(qa.shape)}")
    weights = []
    for name, w, x in (("q_weight", q_weight, qa), ("k_weight", k_weight, ka)):
        size = x.shape[3] if scope == "head" else x.shape[2] * x.shape[3]
        wa = np.asarray(w, dtype=np.float64)
        if wa.shape != (size,) or not np.all(np.isfinite(wa)):
            raise ValueError(f"{name}: must be finite of shape [{size}] for scope {scope!r}, got {list(wa.shape)}")
        weights.append(wa)
    p = np.asarray(positions)
    if p.shape != qa.shape[:2] or p.dtype.kind not in "iu":
        raise ValueError(f"positions: must be integers of shape {list(qa.shape[:2])}")
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not 0 < float(eps) < 1:
        raise ValueError(f"eps: must be a float in (0, 1), got {eps!r}")
    r = qa.shape[3] if rotary_dim is None else rotary_dim
    if not isinstance(r, numbers.Integral) or r % 2 or not 2 <= r <= qa.shape[3]:
        raise ValueError(f"rotary_dim: must be even, from 2 to head_dim, got {rotary_dim!r}")
    check_base(base)
    check_layout(layout)
    scaling_types.resolve(scaling)
    return qa, ka, weights[0], weights[1], p.astype(np.int64), int(r)


def rms_norm(x, weight, eps, scope):
    """float64 [b, s, h, d]: x / sqrt(mean(x^2) + eps) * weight over a head (scope "head") or over
    the token's h * d features (scope "full"); weight [d] or [h d]."""
    b, s, h, d = x.shape
    flat = x.reshape(b, s, 1, h * d) if scope == "full" else x
    r = 1.0 / np.sqrt(np.mean(flat * flat, axis=-1, keepdims=True) + eps)
    return ((flat * r) * weight).reshape(b, s, h, d)


def forward(q, k, positions, q_weight, k_weight, *, rotary_dim=None, base=10000.0, layout="half", scaling=None,
            eps=1e-6, scope="head", mode="fast"):
    """(q_out, k_out), float64 [b, s, hq, d] and [b, s, hkv, d]: RMSNorm then RoPE (module docstring)."""
    qa, ka, qw, kw, pos, r = _check(q, k, positions, q_weight, k_weight, rotary_dim, base, layout, scaling, eps,
                                    scope)
    if check_mode(mode) == "golden":
        return tuple(_golden(x, w, pos, r, base, layout, scaling, float(eps), scope) for x, w in ((qa, qw), (ka, kw)))
    return tuple(rotation.apply(rms_norm(x, w, float(eps), scope), pos, rotary_dim=r, base=base, layout=layout,
                                scaling=scaling, backend="numpy") for x, w in ((qa, qw), (ka, kw)))


def _golden(x, w, pos, r, base, layout, scaling, eps, scope):
    b, s, h, d = x.shape
    out = np.empty(x.shape)
    with mpmath.workprec(GOLDEN_PREC):
        mpf = mpmath.mpf
        rope_type, params = scaling_types.resolve(scaling)
        theta, factor = scaling_types.exact(rope_type, params, r, base, None)
        wm = [mpf(float(v)) for v in w]
        e = mpf(eps)
        for bi in range(b):
            for si in range(s):
                m = int(pos[bi, si])
                cs = [(mpmath.cos(m * t) * factor, mpmath.sin(m * t) * factor) for t in theta]
                row = [[mpf(float(v)) for v in x[bi, si, hh]] for hh in range(h)]
                if scope == "full":
                    flat = [v for head in row for v in head]
                    inv = 1 / mpmath.sqrt(mpmath.fsum(v * v for v in flat) / len(flat) + e)
                    y = [[row[hh][j] * inv * wm[hh * d + j] for j in range(d)] for hh in range(h)]
                else:
                    y = []
                    for head in row:
                        inv = 1 / mpmath.sqrt(mpmath.fsum(v * v for v in head) / d + e)
                        y.append([head[j] * inv * wm[j] for j in range(d)])
                for hh in range(h):
                    res = list(y[hh])
                    for i, (c, sn) in enumerate(cs):
                        a_, b_ = (i, i + r // 2) if layout == "half" else (2 * i, 2 * i + 1)
                        res[a_], res[b_] = y[hh][a_] * c - y[hh][b_] * sn, y[hh][a_] * sn + y[hh][b_] * c
                    out[bi, si, hh] = [nearest_double(v) for v in res]
    return out
