"""The budget of ``attention.forward`` in float16 and bfloat16: a first-order propagation of every
rounding to T, with the exact sensitivities of the output, combined as independent errors
(docs/tolerance.md, section 17, "Half precision").

Why not the running worst-case bound of budgets.py: in half precision its stages add absolute
values (|X| |W|, sum_j E_p |v_j|, |o| |W_o|), each of which is as large as the output's terms
before they cancel, and some 60 units u_T of them (u = 2^-8 in bfloat16) make the bound as wide
as the output itself: an adapter returning zeros passed. Here each rounding is what it is: one
relative error |delta| <= u at one stored value x, which moves the output element out_{b,i,n} by
J delta x, J the exact derivative of out_{b,i,n} with respect to x (first order). Roundings at
different stored values are independent and of either sign (round to nearest), so, by
Hoeffding's inequality for the sum of independent zero-mean terms |X_k| <= c_k,

    |sum_k X_k| <= LAMBDA sqrt(sum_k c_k^2)   except with probability 2 exp(-LAMBDA^2 / 2)

(Higham and Mary, "A new approach to probabilistic rounding error analysis", SIAM J. Sci.
Comput. 41 (2019)). LAMBDA = 7: at most 5e-11 per element. The budget of out_{b,i,n} is
LAMBDA sigma + the second order + T's smallest subnormal, sigma^2 = sum over the sources of
(J c)^2, with c = u |x| + (half T's smallest subnormal) for a rounding to T and the float32
accumulation terms gamma(n, a) |x| . |y| (as budgets.py) as further sources. The sources, with
b, i, n fixed (the output row and column), h a query head, g a kv head, j a key slot, e a
component, c_s = 1 / sqrt(d), A_hj = W_o[n, h, :] . (v_j - o_ih), the sensitivity of the output
to the logit z_hij is p_hij A_hj (softmax's derivative: d o_ih = p_hij (v_j - o_ih) d z_hij):

  out stored:           1 at u |out| (and gamma(hq d) |o| . |W_o|)
  o stored:             W_o[n, h, e] at u |o_ihe| (and gamma(n_vis) sum_j p |v_j|)
  P stored:             W_o[n, h, :] . v_j at u p_hij (and p (gamma(n + 6) + a |z - max|): exp, sum)
  logits:               p_hij A_hj at 2 u |q . k c_s| + u |z| (the dot product stored, the scale's
                        product stored, the bias added and stored), at the bias's own error and
                        cast (budgets.bias_logit_error less its u |z|) and at gamma(d) |q| . |k| c_s
  rotated q:            c_s sum_j p_hij A_hj k_je at u |q'| (SDPA's sqrt(scale) on q) and, with
                        RoPE, the two products and their sum: u f |x_a cos|, u f |x_b sin|, u |q'|
  rotated k (slot j):   c_s sum_{h in g} p_hij A_hj q'_ihe, likewise (the cache's keys only the
                        sqrt(scale) rounding: they are inputs)
  q, k before RoPE:     the rotated sensitivity turned back, f R(-m) (RoPE's transpose), at
                        u |q| and gamma(D) |X| . |W_q| (the projection stored and accumulated)
  v (new slots):        sum_{h in g} W_o[n, h, e] p_hij at u |v| and gamma(D) |X| . |W_v|
  RoPE tables:          f cos and f sin of each (token, pair), rounded to T once and shared by
                        the token's query (every head) and key (every kv head): the summed signed
                        sensitivity x_a S_a + x_b S_b (cos) or x_a S_b - x_b S_a (sin) at u f |cos|
  RoPE angles:          m theta in float32 (g): per (token, pair) g |m theta| + 2 a (the product
                        and cos/sin's evaluation), sensitivity -q'_b S_a + q'_a S_b summed over the
                        token's query and key; and theta itself (4 g relative, shared by every
                        token: the sum over tokens of m times that sensitivity)

Second order (deterministic, added in full): a logit error delta_j (|delta_j| <= E_j = LAMBDA
times the logit's own sigma, from its sources and q's and k's) moves p_j by exactly
p_j (e^(x_j) - 1), x_j = delta_j - L, L = log sum_k p_k e^(delta_k). Its part past the first order
is rem_j = p_j (g(x_j) - c), g(x) = e^x - 1 - x >= 0, c = L - sum_k p_k delta_k >= 0 (Jensen); the
rem_j sum to 0, so sum_j p_j g(x_j) = c, and they move o_ih by sum_j rem_j (v_j - o_ih) =
sum_j p_j g(x_j) (v_j - o_ih): the output by at most c max_j |A_hj| per head, with
c <= R = sum_k p_k E_k^2 e^(E_k) / 2 (L <= sum_k p_k (e^(delta_k) - 1)). A logit far below the
row's maximum may have a large E (a KERPLE power bias of -98 in bfloat16) but carries p_k ~ 0.
Products of two roundings elsewhere are O(u^2) against the O(u) terms: within LAMBDA's margin.
"""

from __future__ import annotations


import numpy as np

from conformance.attention.bias_budgets import bias_logit_error
from conformance.core import tolerance
from reference.numerics.frequencies import frequencies
from reference.numerics.layouts import pair_indices

LAMBDA = 7.0  # Hoeffding: P(|error| > LAMBDA sigma) <= 2 exp(-LAMBDA^2 / 2) = 4.6e-11 per element


def is_half(dtype: str) -> bool:
    """True when the dtype's storage rounding is coarser than float32's (float16, bfloat16)."""
    return dtype in tolerance.DTYPES and tolerance.unit_roundoff(dtype) > tolerance.unit_roundoff("float32")


def _gamma(n, a):
    na = np.asarray(n, dtype=np.float64) * a
    return na / (1.0 - na)


class _Rope:
    """cos, sin, the attention factor and the pair indices of a RoPE spec at given positions."""

    def __init__(self, spec):
        self.r = spec.rotary_dim or spec.head_dim
        self.theta, self.f = frequencies(self.r, spec.base, spec.scaling, spec.seq_len or None)
        self.first, self.second = pair_indices(self.r, spec.layout)

    def angles(self, positions):
        return np.asarray(positions, dtype=np.float64)[..., None] * self.theta  # [..., r/2]

    def pullback(self, S, positions):
        """S [..., t, H, d] (sensitivity to the rotated values at tokens with ``positions`` [t]) ->
        the sensitivity to the values before RoPE: f R(-m) S on the rotary part (RoPE's transpose)."""
        phi = self.angles(positions)[:, None, :]  # [t, 1, r/2]
        c, s = np.cos(phi), np.sin(phi)
        a, b = S[..., self.first], S[..., self.second]
        out = S.copy()
        out[..., self.first] = self.f * (a * c + b * s)
        out[..., self.second] = self.f * (b * c - a * s)
        return out

    def table_sensitivity(self, S, x, xr):
        """(cos, sin, angle) sensitivities [..., t, r/2] from S [..., t, H, d] (to the rotated
        values) given the values before (x) and after (xr) RoPE [t, H, d]: summed over the heads."""
        i, j = self.first, self.second
        Sa, Sb = S[..., i], S[..., j]
        cos = np.sum(Sa * x[..., i] + Sb * x[..., j], axis=-2)
        sin = np.sum(Sb * x[..., i] - Sa * x[..., j], axis=-2)
        ang = np.sum(Sb * xr[..., i] - Sa * xr[..., j], axis=-2)
        return cos, sin, ang

    def rotated_sources(self, x, xr, positions, u):
        """Squared magnitude [t, H, d] of the roundings at each rotated value: the products
        f x_a cos, f x_b sin (or their mirror) and their sum."""
        phi = self.angles(positions)[:, None, :]
        fc, fs = np.abs(self.f * np.cos(phi)), np.abs(self.f * np.sin(phi))
        src = np.zeros_like(xr)
        a, b = np.abs(x[..., self.first]), np.abs(x[..., self.second])
        src[..., self.first] = (u * a * fc) ** 2 + (u * b * fs) ** 2
        src[..., self.second] = (u * b * fc) ** 2 + (u * a * fs) ** 2
        return src + (u * xr) ** 2 * (np.arange(xr.shape[-1]) < self.r)


def half_budget(st: dict, spec, positions: np.ndarray, dtype: str, profile: str) -> np.ndarray:
    """float64 [b, s, D]: LAMBDA sigma + the softmax's second order + T's smallest subnormal (module
    docstring), from the float64 reference's intermediates ``st`` (reference.attention.stages)."""
    u = tolerance.unit_roundoff(dtype)
    a = tolerance.accumulation_roundoff(dtype, profile)
    g = tolerance.angle_roundoff(profile)
    tiny = tolerance.SMALLEST_SUBNORMAL[dtype]
    half_tiny = tiny / 2

    def rnd(x):  # one rounding to T of x: u |x|, and half a subnormal where x underflows
        return u * np.abs(x) + half_tiny

    X, W = st["X"], st["W"]
    b, s, D = X.shape
    hq, hkv, d = spec.num_heads, spec.num_kv_heads, spec.head_dim
    K = st["keys"].shape[1]
    P = K - s
    grp = hq // hkv
    heads = np.arange(hq) // grp
    cs = spec.scale
    Wo = W["wo"].reshape(D, hq, d)
    rope = _Rope(spec) if spec.encoding == "rope" else None
    Eb = bias_logit_error(st, spec, positions, dtype, profile)
    absX = np.abs(X)
    acc = {n: _gamma(D, a) * (absX @ np.abs(W[n]).T) for n in ("wq", "wk", "wv")}  # [b, s, H d]
    budget = np.zeros((b, s, D))
    for r in range(b):
        vis = st["vis"][r]  # [s, K]
        p = np.where(vis[None], st["p"][r], 0.0)  # [hq, s, K]
        z = np.where(vis[None], st["z"][r], 0.0)
        qr, qpre = st["qr"][r], st["q"][r]  # [s, hq, d]
        kH, vH = st["keys"][r][:, heads], st["values"][r][:, heads]  # [K, hq, d]
        o = st["o"][r].reshape(s, hq, d)
        out = st["out"][r]
        n_vis = vis.sum(axis=-1)  # [s]
        WV = np.einsum("nhe,jhe->jnh", Wo, vH)  # W_o[n, h, :] . v_j
        A = WV.transpose(1, 2, 0)[None] - np.einsum("nhe,ihe->inh", Wo, o)[..., None]  # [s, D, hq, K]
        pa = p.transpose(1, 0, 2)[:, None] * A  # sensitivity to z_hij [s, D, hq, K]
        var = rnd(out) ** 2 + (_gamma(hq * d, a) * (np.abs(o).reshape(s, -1) @ np.abs(W["wo"]).T)) ** 2
        # o stored (and its n-term accumulation)
        o_src = rnd(o) + _gamma(n_vis, a)[:, None, None] * np.einsum("hij,jhe->ihe", p, np.abs(vH))
        var += np.einsum("nhe,ihe->in", Wo ** 2, o_src ** 2)
        # P stored, the softmax's own arithmetic
        top = np.max(np.where(vis[None], z, -np.inf), axis=-1, keepdims=True)
        spread = np.where(vis[None], np.abs(z - np.where(np.isfinite(top), top, 0.0)), 0.0)
        p_src = np.where(vis[None], u * p + half_tiny + p * (_gamma(n_vis[None, :, None] + 6, a) + a * spread), 0.0)
        var += np.einsum("jnh,hij->in", WV ** 2, p_src ** 2)
        # the logits
        qk = np.einsum("ihe,jhe->hij", qr, kH) * cs
        absqk = np.einsum("ihe,jhe->hij", np.abs(qr), np.abs(kH)) * cs
        z_var = 2 * (u * qk) ** 2 + rnd(z) ** 2 + (_gamma(d, a) * absqk) ** 2
        if Eb is not None:  # the bias's own error and its cast; its sum with q.k c_s is the u |z| above
            z_var = z_var + np.maximum(Eb[r] - u * np.abs(z), 0.0) ** 2
        z_var = np.where(vis[None], z_var, 0.0)
        var += np.einsum("inhj,hij->in", pa ** 2, z_var)
        # rotated q and keys (SDPA's sqrt(scale) rounding on both; RoPE's own on the new ones)
        Sq = cs * np.einsum("inhj,jhe->inhe", pa, kH)  # [s, D, hq, d]
        Sk = cs * np.einsum("inhj,ihe->injhe", pa, qr).reshape(s, D, K, hkv, grp, d).sum(axis=4)  # [s, D, K, hkv, d]
        Sv = np.einsum("nhe,hij->injhe", Wo, p).reshape(s, D, K, hkv, grp, d).sum(axis=4)
        keys = st["keys"][r]  # [K, hkv, d]
        q_rot = (u * qr) ** 2
        k_rot = (u * keys) ** 2
        kpos_new = positions[r]
        if rope is not None:
            q_rot = q_rot + rope.rotated_sources(qpre, qr, positions[r], u)
            k_rot[P:] += rope.rotated_sources(st["k"][r], keys[P:], kpos_new, u)
        var += np.einsum("inhe,ihe->in", Sq ** 2, q_rot) + np.einsum("injge,jge->in", Sk ** 2, k_rot)
        # q, k, v before RoPE: the projections stored and accumulated
        Skn = Sk[:, :, P:]  # [s, D, s, hkv, d]
        if rope is not None:
            Sq_pre = rope.pullback(Sq.transpose(1, 0, 2, 3), positions[r]).transpose(1, 0, 2, 3)
            Sk_pre = rope.pullback(Skn, kpos_new)
        else:
            Sq_pre, Sk_pre = Sq, Skn
        q_src = rnd(qpre) ** 2 + acc["wq"][r].reshape(s, hq, d) ** 2
        k_src = rnd(st["k"][r]) ** 2 + acc["wk"][r].reshape(s, hkv, d) ** 2
        v_src = rnd(st["v"][r]) ** 2 + acc["wv"][r].reshape(s, hkv, d) ** 2
        var += (np.einsum("inhe,ihe->in", Sq_pre ** 2, q_src) + np.einsum("injge,jge->in", Sk_pre ** 2, k_src)
                + np.einsum("injge,jge->in", Sv[:, :, P:] ** 2, v_src))
        if rope is not None:
            var += _table_variance(rope, Sq, Skn, qpre, qr, st["k"][r], keys[P:], positions[r], u, a, g, half_tiny)
        # second order: the largest logit error of each row (its own sources, and q's and k's)
        q_all = q_rot + _pair_sum(q_src, rope)
        k_all = k_rot.copy()
        k_all[P:] += _pair_sum(k_src, rope)
        z_tot = z_var + cs ** 2 * (np.einsum("ihe,jhe->hij", q_all, kH ** 2)
                                   + np.einsum("ihe,jhe->hij", qr ** 2, k_all[:, heads]))
        E = LAMBDA * np.sqrt(np.where(vis[None], z_tot, 0.0))  # [hq, s, K]
        reach = np.max(np.where(vis[:, None, None, :], np.abs(A), 0.0), axis=-1)  # max_j |A_hj| [s, D, hq]
        budget[r] = LAMBDA * np.sqrt(var) + np.einsum("hi,inh->in", _softmax_remainder(p, E), reach)
    return budget + tiny


def _softmax_remainder(p, E):
    """R [hq, s]: the bound on c = L - sum_k p_k delta_k when each logit moves by |delta_k| <= E_k
    (module docstring): L = log(1 + sum_k p_k (e^delta_k - 1)) <= sum_k p_k delta_k + sum_k p_k
    (e^delta_k - 1 - delta_k), and e^x - 1 - x <= x^2 e^|x| / 2, so c <= sum_k p_k E_k^2 e^E_k / 2."""
    E = np.minimum(E, 300.0)
    return np.sum(p * E ** 2 * np.exp(E), axis=-1) / 2


def _pair_sum(src, rope):
    """Squared magnitudes [t, H, d] moved through RoPE: each rotated value receives both of its
    pair's (times f^2); the tail and encodings without RoPE keep their own."""
    if rope is None:
        return src
    out = src.copy()
    both = rope.f ** 2 * (src[..., rope.first] + src[..., rope.second])
    out[..., rope.first] = both
    out[..., rope.second] = both
    return out


def _table_variance(rope, Sq, Skn, qpre, qr, kpre, kr, positions, u, a, g, half_tiny):
    """[s, D]: the RoPE tables' share of sigma^2 (module docstring): f cos and f sin rounded to T
    once per (token, pair), the angle m theta rounded in float32 per (token, pair), theta itself
    rounded once per pair; each source's sensitivity summed over the token's query and key."""
    s = Sq.shape[0]
    qc, qs, qa = rope.table_sensitivity(Sq, qpre[:, None], qr[:, None])  # [s(i), D, r/2], token = i
    kc, ks, ka = rope.table_sensitivity(Skn, kpre, kr)  # [s(i), D, s(t), r/2]
    eye = np.eye(s)[:, None, :, None]
    tc, ts, ta = kc + eye * qc[:, :, None], ks + eye * qs[:, :, None], ka + eye * qa[:, :, None]
    phi = rope.angles(positions)  # [t, r/2]
    fc, fs = rope.f * np.abs(np.cos(phi)), rope.f * np.abs(np.sin(phi))
    var = np.einsum("intf,tf->in", tc ** 2, (u * fc + half_tiny) ** 2)
    var += np.einsum("intf,tf->in", ts ** 2, (u * fs + half_tiny) ** 2)
    var += np.einsum("intf,tf->in", ta ** 2, (g * np.abs(phi) + 2 * a) ** 2)
    shared = np.einsum("intf,t->inf", ta, np.asarray(positions, dtype=np.float64))
    var += np.einsum("inf,f->in", shared ** 2, (4 * g * rope.theta) ** 2)
    return var
