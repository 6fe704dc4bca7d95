"""mpmath oracle of the attention forward, written apart from core.py for certification.

A second reading of the same formula in another form: projections as mpmath matrix products,
RoPE as the complex product (a + i b) e^(i m theta) (RoFormer, arXiv 2104.09864, eq. 12) with
frequencies and attention factor from reference.rope.scaling_oracle, ALiBi slopes from
reference.alibi.oracle, the softmax as exp(z - logsumexp(z)), GQA by repeating each kv head
(HF repeat_kv). Returns object arrays of mpf at the caller's precision.
"""

from __future__ import annotations

import mpmath
import numpy as np


def _mat(a):
    a = np.asarray(a, dtype=np.float64)
    return mpmath.matrix([[mpmath.mpf(float(x)) for x in row] for row in a])


def _pairs(r, layout):
    if layout == "half":
        return [(i, i + r // 2) for i in range(r // 2)]
    return [(2 * i, 2 * i + 1) for i in range(r // 2)]


def _rotate(vec, m, freqs, factor, r, layout):
    out = list(vec)
    for i, (a, b) in enumerate(_pairs(r, layout)):
        w = mpmath.mpc(vec[a], vec[b]) * mpmath.expj(m * freqs[i]) * factor
        out[a], out[b] = w.real, w.imag
    return out


def forward_exact(hidden, weights, positions, params, attention_mask, past_keys, past_values):
    """object [b, s, D] of mpf: the exact output (0 in rows where no key is visible)."""
    from reference.alibi.oracle import slopes_exact
    from reference.rope.scaling_oracle import exact as scaling_exact

    hq, hkv, d = int(params["num_heads"]), int(params["num_kv_heads"]), int(params["head_dim"])
    enc, causal = params["encoding"], bool(params["causal"])
    r = int(params.get("rotary_dim") or d)
    X = np.asarray(hidden, dtype=np.float64)
    b, s, dm = X.shape
    P = past_keys.shape[2]
    rep = hq // hkv
    freqs = factor = slopes = None
    if enc == "rope":
        freqs, factor = scaling_exact(params.get("scaling"), r, float(params["base"]), params.get("seq_len") or None)
    if enc == "alibi":
        slopes = slopes_exact(hq)
    WqT, WkT, WvT = (_mat(np.asarray(weights[n]).T) for n in ("wq", "wk", "wv"))
    WoT = _mat(np.asarray(weights["wo"]).T)
    out = np.empty((b, s, dm), dtype=object)
    for bi in range(b):
        Xb = _mat(X[bi])
        Q, Kn, V = Xb * WqT, Xb * WkT, Xb * WvT  # [s, hq d], [s, hkv d]
        pos = [int(p) for p in positions[bi]]
        kpos = list(range(P)) + pos

        def head(M, i, h):
            vec = [M[i, h * d + e] for e in range(d)]
            if enc == "rope":
                vec = _rotate(vec, pos[i], freqs, factor, r, params.get("layout", "half"))
            return vec

        keys = {(j, g): [mpmath.mpf(float(x)) for x in past_keys[bi, g, j]] for j in range(P) for g in range(hkv)}
        vals = {(j, g): [mpmath.mpf(float(x)) for x in past_values[bi, g, j]] for j in range(P) for g in range(hkv)}
        for i in range(s):
            for g in range(hkv):
                keys[(P + i, g)] = head(Kn, i, g)
                vals[(P + i, g)] = [V[i, g * d + e] for e in range(d)]
        for i in range(s):
            concat = mpmath.matrix(1, hq * d)
            seen = [j for j in range(P + s) if attention_mask[bi, j] and (not causal or j <= P + i)]
            for h in range(hq):
                if not seen:
                    continue
                g = h // rep
                qv = head(Q, i, h)
                z = []
                for j in seen:
                    dot = mpmath.fsum(x * y for x, y in zip(qv, keys[(j, g)])) / mpmath.sqrt(d)
                    if slopes is not None:
                        dist = pos[i] - kpos[j]
                        dot -= slopes[h] * (abs(dist) if not causal else dist)
                    z.append(dot)
                lse = mpmath.log(mpmath.fsum(mpmath.exp(t) for t in z))
                weights_ = [mpmath.exp(t - lse) for t in z]
                for e in range(d):
                    concat[0, h * d + e] = mpmath.fsum(w * vals[(j, g)][e] for w, j in zip(weights_, seen))
            row = concat * WoT
            for c in range(dm):
                out[bi, i, c] = row[0, c] if seen else mpmath.mpf(0)
    return out
