"""mpmath oracle of the attention forward, written apart from core.py for certification.

A second reading of the same formula in another form: projections as mpmath matrix products,
RoPE as the complex product (a + i b) e^(i m theta) (RoFormer, arXiv 2104.09864, eq. 12) with
frequencies and attention factor from reference.numerics.scaling_oracle, ALiBi slopes from
the ALiBi oracle, the other biases from their families' own oracles (KERPLE, FIRE, and T5's
buckets, then the table), all in reference/numerics/bias/*_oracle.py, the softmax as exp(z - logsumexp(z)), GQA by repeating each kv head (HF repeat_kv).
Returns object arrays of mpf at the caller's precision.
"""

from __future__ import annotations

import mpmath
import numpy as np

from reference.numerics.bias.alibi_oracle import slopes_exact
from reference.numerics.bias.fire_oracle import bias_exact as fire_exact
from reference.numerics.bias.kerple_oracle import bias_exact as kerple_exact
from reference.numerics.bias.t5_oracle import bucket_exact
from reference.numerics.scaling_oracle import exact as scaling_exact



def _scale(params, d: int):
    """The factor on q . k: params' logit_scale (T5: 1), else 1/sqrt(d), exactly."""
    given = params.get("logit_scale")
    return 1 / mpmath.sqrt(d) if given is None else mpmath.mpf(float(given))

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


FIRE = ("c", "L_multiplier", "W1", "b1", "W2", "b2")


def bias_exact(params, weights, q_positions, k_positions):
    """object [hq, s, K] of mpf: the KERPLE, FIRE or T5 bias from the family's oracle (None for
    the other encodings; ALiBi is written out below)."""
    enc = params["encoding"]
    hq = int(params["num_heads"])
    if enc == "kerple":
        return kerple_exact(params["kerple_variant"], params["kerple_r1"], params["kerple_r2"], q_positions,
                            k_positions)
    if enc == "fire":
        w = [np.asarray(weights[n], dtype=np.float64) for n in FIRE]
        return fire_exact(q_positions, k_positions, *w, 512.0, 1e-6)  # FIRE's init_L and eps
    if enc == "t5":
        rel = np.array([[int(j) - int(i) for j in k_positions] for i in q_positions], dtype=np.int64)
        buckets = bucket_exact(rel, int(params["num_buckets"]), int(params["max_distance"]),
                               not bool(params["causal"]))
        table = np.asarray(weights["rel_bias"], dtype=np.float64)
        out = np.empty((hq, *rel.shape), dtype=object)
        for (i, j), bk in np.ndenumerate(buckets):
            for h in range(hq):
                out[h, i, j] = mpmath.mpf(float(table[int(bk), h]))
        return out
    return None


def forward_exact(hidden, weights, positions, params, attention_mask, past_keys, past_values):
    """object [b, s, D] of mpf: the exact output (0 in rows where no key is visible)."""
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

        extra = bias_exact(params, weights, pos, kpos)
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
                    dot = mpmath.fsum(x * y for x, y in zip(qv, keys[(j, g)])) * _scale(params, d)
                    if slopes is not None:
                        dist = pos[i] - kpos[j]
                        dot -= slopes[h] * (abs(dist) if not causal else dist)
                    if extra is not None:
                        dot += extra[h, i, j]
                    z.append(dot)
                lse = mpmath.log(mpmath.fsum(mpmath.exp(t) for t in z))
                weights_ = [mpmath.exp(t - lse) for t in z]
                for e in range(d):
                    concat[0, h * d + e] = mpmath.fsum(w * vals[(j, g)][e] for w, j in zip(weights_, seen))
            row = concat * WoT
            for c in range(dm):
                out[bi, i, c] = row[0, c] if seen else mpmath.mpf(0)
    return out


def vjp_exact(g, hidden, weights, positions, params, attention_mask, past_keys, past_values) -> dict:
    """{role: object array of mpf}: the exact gradients of <g, out> with respect to hidden, wq, wk,
    wv, wo, read apart from backward.py: per query row the softmax's Jacobian as the explicit
    matrix J = diag(p) - p p^T (dz = J dp), RoPE's transpose as the complex product with
    conj(e^(i m theta)) f, GQA by repeating each kv head and summing the copies' gradients, and
    the projections' gradients as mpmath matrix products. Rows with no visible key contribute 0.
    The bias's parameters, with dz_hij = dL/db_hij (the softmax Jacobian's output, before the
    scale): T5 "rel_bias" [num_buckets, hq], dz summed by reference.t5.oracle's bucket of each
    (i, j); FIRE's "c", "L_multiplier", "W1", "b1", "W2", "b2", each scalar parameter's gradient
    sum_hij dz_hij db_hij/dtheta with db/dtheta by forward-mode (dual number) differentiation of
    the FIRE bias written out again here (``_fire_tangent``; backward.py's is reverse mode)."""
    hq, hkv, d = int(params["num_heads"]), int(params["num_kv_heads"]), int(params["head_dim"])
    enc, causal = params["encoding"], bool(params["causal"])
    r = int(params.get("rotary_dim") or d)
    layout = params.get("layout", "half")
    X = np.asarray(hidden, dtype=np.float64)
    b, s, dm = X.shape
    P = past_keys.shape[2]
    rep = hq // hkv
    freqs = factor = slopes = None
    if enc == "rope":
        freqs, factor = scaling_exact(params.get("scaling"), r, float(params["base"]), params.get("seq_len") or None)
    if enc == "alibi":
        slopes = slopes_exact(hq)
    Wq, Wk, Wv, Wo = (_mat(weights[n]) for n in ("wq", "wk", "wv", "wo"))
    grads = {"hidden": np.empty((b, s, dm), dtype=object)}
    dWq, dWk, dWv = mpmath.matrix(hq * d, dm), mpmath.matrix(hkv * d, dm), mpmath.matrix(hkv * d, dm)
    dWo = mpmath.matrix(dm, hq * d)

    def turn(vec, m, sign):
        if enc != "rope":
            return list(vec)
        return _rotate(vec, sign * m, freqs, factor, r, layout) if sign > 0 else _conj_rotate(vec, m, freqs, factor,
                                                                                              r, layout)

    for bi in range(b):
        Xb = _mat(X[bi])
        Gb = _mat(np.asarray(g, dtype=np.float64)[bi])
        Q, Kn, V = Xb * Wq.T, Xb * Wk.T, Xb * Wv.T
        pos = [int(p) for p in positions[bi]]
        kpos = list(range(P)) + pos
        extra = bias_exact(params, weights, pos, kpos)
        qv = {(i, h): turn([Q[i, h * d + e] for e in range(d)], pos[i], 1) for i in range(s) for h in range(hq)}
        keys, vals = {}, {}
        for h in range(hq):  # repeat_kv: every query head holds its own copy of its kv head
            gr = h // rep
            for j in range(P):
                keys[(j, h)] = [mpmath.mpf(float(x)) for x in past_keys[bi, gr, j]]
                vals[(j, h)] = [mpmath.mpf(float(x)) for x in past_values[bi, gr, j]]
            for i in range(s):
                keys[(P + i, h)] = turn([Kn[i, gr * d + e] for e in range(d)], pos[i], 1)
                vals[(P + i, h)] = [V[i, gr * d + e] for e in range(d)]
        O = mpmath.matrix(s, hq * d)
        dO = Gb * Wo  # [s, hq d]
        dq = mpmath.matrix(s, hq * d)
        dkc = {key: [mpmath.mpf(0)] * d for key in keys}
        dvc = {key: [mpmath.mpf(0)] * d for key in keys}
        dbias = np.full((hq, s, P + s), mpmath.mpf(0), dtype=object)  # dL/db, per (head, query, key)
        for i in range(s):
            seen = [j for j in range(P + s) if attention_mask[bi, j] and (not causal or j <= P + i)]
            if not seen:
                continue
            for h in range(hq):
                z = []
                for j in seen:
                    dot = mpmath.fsum(x * y for x, y in zip(qv[(i, h)], keys[(j, h)])) * _scale(params, d)
                    if slopes is not None:
                        dist = pos[i] - kpos[j]
                        dot -= slopes[h] * (abs(dist) if not causal else dist)
                    if extra is not None:
                        dot += extra[h, i, j]
                    z.append(dot)
                lse = mpmath.log(mpmath.fsum(mpmath.exp(t) for t in z))
                p = [mpmath.exp(t - lse) for t in z]
                for e in range(d):
                    O[i, h * d + e] = mpmath.fsum(w * vals[(j, h)][e] for w, j in zip(p, seen))
                go = [dO[i, h * d + e] for e in range(d)]
                dp = [mpmath.fsum(x * y for x, y in zip(go, vals[(j, h)])) for j in seen]
                n = len(seen)
                J = mpmath.matrix(n, n)
                for a in range(n):
                    for c in range(n):
                        J[a, c] = (p[a] if a == c else 0) - p[a] * p[c]
                dz = J * mpmath.matrix(dp)
                for a, j in enumerate(seen):
                    dbias[h, i, j] = dz[a]
                dlogit = [dz[a] * _scale(params, d) for a in range(n)]
                for e in range(d):
                    dq[i, h * d + e] = mpmath.fsum(dlogit[a] * keys[(j, h)][e] for a, j in enumerate(seen))
                for a, j in enumerate(seen):
                    dkc[(j, h)] = [x + dlogit[a] * y for x, y in zip(dkc[(j, h)], qv[(i, h)])]
                    dvc[(j, h)] = [x + p[a] * y for x, y in zip(dvc[(j, h)], go)]
        dQ, dK, dV = mpmath.matrix(s, hq * d), mpmath.matrix(s, hkv * d), mpmath.matrix(s, hkv * d)
        for i in range(s):
            for h in range(hq):
                back = turn([dq[i, h * d + e] for e in range(d)], pos[i], -1)
                for e in range(d):
                    dQ[i, h * d + e] = back[e]
            for gr in range(hkv):
                kk = [mpmath.fsum(dkc[(P + i, h)][e] for h in range(gr * rep, (gr + 1) * rep)) for e in range(d)]
                back = turn(kk, pos[i], -1)
                for e in range(d):
                    dK[i, gr * d + e] = back[e]
                    dV[i, gr * d + e] = mpmath.fsum(dvc[(P + i, h)][e] for h in range(gr * rep, (gr + 1) * rep))
        dX = dQ * Wq + dK * Wk + dV * Wv
        for i in range(s):
            for c in range(dm):
                grads["hidden"][bi, i, c] = dX[i, c]
        dWq, dWk, dWv = dWq + dQ.T * Xb, dWk + dK.T * Xb, dWv + dV.T * Xb
        dWo = dWo + Gb.T * O
        def seen_of(i, bi=bi):
            return [j for j in range(P + s) if attention_mask[bi, j] and (not causal or j <= P + i)]

        for name, grad in _bias_param_grads(dbias, params, weights, pos, kpos, seen_of).items():
            grads[name] = grad if name not in grads else grads[name] + grad
    for name, M in (("wq", dWq), ("wk", dWk), ("wv", dWv), ("wo", dWo)):
        grads[name] = np.array([[M[i, j] for j in range(M.cols)] for i in range(M.rows)], dtype=object)
    return grads


def _conj_rotate(vec, m, freqs, factor, r, layout):
    """(f R_m)^T vec: the complex product with conj(e^(i m theta)) f on each pair."""
    out = list(vec)
    for i, (a, b) in enumerate(_pairs(r, layout)):
        w = mpmath.mpc(vec[a], vec[b]) * mpmath.conj(mpmath.expj(m * freqs[i])) * factor
        out[a], out[b] = w.real, w.imag
    return out


def _bias_param_grads(dbias, params, weights, pos, kpos, seen_of) -> dict:
    """{parameter: object array of mpf}: one batch row's gradients of the T5 table or FIRE's MLP
    for the bias cotangent dbias [hq, s, K] (vjp_exact's docstring). Each query row's dz sums to 0
    (the softmax ignores a constant added to the row), so a row contributes sum_j dz_j (db_j -
    db_j0) with j0 its first visible key: the same number in exact arithmetic, and exactly 0 where
    the derivative db is constant along the row (T5: a row in one bucket; FIRE: b2, or a b1 whose
    unit's ReLU does not switch along the row)."""
    enc = params["encoding"]
    hq, s = dbias.shape[0], dbias.shape[1]
    if enc == "t5":
        rel = np.array([[int(j) - int(i) for j in kpos] for i in pos], dtype=np.int64)
        buckets = bucket_exact(rel, int(params["num_buckets"]), int(params["max_distance"]),
                               not bool(params["causal"]))
        out = np.full(np.shape(weights["rel_bias"]), mpmath.mpf(0), dtype=object)
        for i in range(s):
            seen = seen_of(i)
            for h in range(hq):
                for j in seen[1:]:
                    for t, sign in ((int(buckets[i, j]), 1), (int(buckets[i, seen[0]]), -1)):
                        out[t, h] += sign * dbias[h, i, j]
        return {"rel_bias": out}
    if enc != "fire":
        return {}
    theta = {n: np.vectorize(lambda v: mpmath.mpf(float(v)), otypes=[object])(np.asarray(weights[n], dtype=np.float64))
             for n in FIRE}
    out = {}
    for name in FIRE:
        grad = np.empty(theta[name].shape, dtype=object)
        for idx in np.ndindex(theta[name].shape):
            tangent = _fire_tangent(theta, name, idx, pos, kpos)
            total = []
            for i in range(s):
                seen = seen_of(i)
                total += [dbias[h, i, j] * (tangent[h][i][j] - tangent[h][i][seen[0]])
                          for h in range(hq) for j in seen[1:]]
            grad[idx] = mpmath.fsum(total)
        out[name] = grad
    return out


def _fire_tangent(theta, name, idx, pos, kpos):
    """d b_hij / d theta[name][idx], [hq][s][K] nested lists of mpf, by forward-mode (dual number)
    differentiation of FIRE's bias W2 relu(W1 x + b1) + b2, x = ln(1 + |c| |i - j|) / (ln(1 + |c|
    max(i, |L_mult| 512)) + 1e-6) (FIRE, arXiv 2310.04418, eq. 5 with its progressive
    interpolation; init_L 512, eps 1e-6); at the threshold's tie i = L the max's derivative is
    the mean of the one-sided ones, relu'(0) = 0, |.|'(0) = 0."""
    mpf = mpmath.mpf
    one = {n: np.full(v.shape, mpf(0), dtype=object) for n, v in theta.items()}
    one[name][idx] = mpf(1)
    c, dc = theta["c"][()], one["c"][()]
    lm, dlm = theta["L_multiplier"][()], one["L_multiplier"][()]
    thr, dthr = abs(lm * 512), mpmath.sign(lm) * 512 * dlm
    ac, dac = abs(c), mpmath.sign(c) * dc
    W1, b1, W2, b2 = theta["W1"][:, 0], theta["b1"], theta["W2"], theta["b2"]
    dW1, db1, dW2, db2 = one["W1"][:, 0], one["b1"], one["W2"], one["b2"]
    out = [[[None] * len(kpos) for _ in pos] for _ in range(len(b2))]
    for a, i in enumerate(pos):
        i = mpf(int(i))
        m, dm = (thr, dthr) if thr > i else ((i, dthr / 2) if thr == i else (i, mpf(0)))
        den = mpmath.ln(1 + ac * m) + mpf(1e-6)
        dden = (dac * m + ac * dm) / (1 + ac * m)
        for b, j in enumerate(kpos):
            dist = abs(i - int(j))
            num = mpmath.ln(1 + ac * dist)
            dnum = dac * dist / (1 + ac * dist)
            x = num / den
            dx = (dnum * den - num * dden) / (den * den)
            pre = [w * x + s for w, s in zip(W1, b1)]
            dpre = [dw * x + w * dx + ds for w, dw, ds in zip(W1, dW1, db1)]
            act = [p if p > 0 else mpf(0) for p in pre]
            dact = [dp if p > 0 else mpf(0) for p, dp in zip(pre, dpre)]
            for h in range(len(b2)):
                out[h][a][b] = mpmath.fsum([W2[h, k] * dact[k] + dW2[h, k] * act[k] for k in range(len(act))]
                                           + [db2[h]])
    return out
