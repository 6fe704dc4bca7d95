"""Attention forward: validation, the fast float64 pipeline and the golden mpmath chain (see
__init__ for the formula and sources)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import mpmath
import numpy as np

from reference.golden.certify import nearest_double
from reference.numerics import rotation
from reference.numerics import scaling as scaling_types
from reference.numerics.bias import alibi, fire, kerple, t5
from reference.numerics.bias.alibi import slopes_mp
from reference.numerics.bias.fire import EPS, INIT_L, check_weights
from reference.numerics.bias.kerple import check_params, check_variant
from reference.numerics.bias.t5 import check_config as check_t5
from reference.numerics.validate import check_backend, check_base, check_layout, check_mode

ENCODINGS = ("rope", "alibi", "none", "kerple", "fire", "t5")
BIASES = ("alibi", "kerple", "fire", "t5")  # the additive-bias encodings
BASE_WEIGHTS = ("wq", "wk", "wv", "wo")
FIRE_WEIGHTS = ("c", "L_multiplier", "W1", "b1", "W2", "b2")  # reference.fire's weights, learned
T5_WEIGHTS = ("rel_bias",)  # [num_buckets, num_heads], HF's relative_attention_bias.weight
GOLDEN_PREC = 192
MAX_POSITION = 2**40
MAX_ABS = 2.0**400


@dataclass(frozen=True)
class Config:
    """num_heads hq, num_kv_heads hkv (divides hq), head_dim d; causal; encoding "rope" (base,
    rotary_dim (0: head_dim), layout "half" | "interleaved", scaling in HF rope_parameters form,
    seq_len for the scalings that read it), "alibi", "none", "kerple" (kerple_variant "log" |
    "power", kerple_r1, kerple_r2: one float per head, before reference.kerple's clamps), "fire"
    (the MLP's weights in the weights dict) or "t5" (num_buckets, max_distance; the table
    rel_bias in the weights dict; bidirectional buckets exactly when not causal). logit_scale: the
    factor on q . k, None for 1/sqrt(head_dim) (T5 has none: 1.0, its scale folded into the
    initialisation, Raffel et al. 2020, and transformers' T5Attention)."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    causal: bool = True
    encoding: str = "rope"
    base: float = 10000.0
    rotary_dim: int = 0
    layout: str = "half"
    scaling: Optional[Mapping[str, Any]] = field(default=None, hash=False, compare=False)
    seq_len: int = 0
    kerple_variant: str = "log"
    kerple_r1: tuple = ()
    kerple_r2: tuple = ()
    num_buckets: int = 32
    max_distance: int = 128
    logit_scale: Optional[float] = None

    @property
    def scale(self) -> float:
        """The factor on q . k: logit_scale, or 1/sqrt(head_dim)."""
        return 1.0 / math.sqrt(self.head_dim) if self.logit_scale is None else float(self.logit_scale)

    def exact_scale(self):
        """The same in mpmath at the working precision (1/sqrt(d) exactly, not its double)."""
        return 1 / mpmath.sqrt(self.head_dim) if self.logit_scale is None else mpmath.mpf(float(self.logit_scale))

    @property
    def rot(self) -> int:
        return self.rotary_dim or self.head_dim

    @property
    def group(self) -> int:
        return self.num_heads // self.num_kv_heads


def _int(value, name, low, high):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or not low <= value <= high:
        raise ValueError(f"{name}: must be an integer from {low} to {high}, got {value!r}")
    return int(value)


def check_config(c: Config) -> Config:
    if not isinstance(c, Config):
        raise ValueError(f"config: must be a reference.attention.Config, got {type(c).__name__}")
    hq = _int(c.num_heads, "num_heads", 1, 4096)
    hkv = _int(c.num_kv_heads, "num_kv_heads", 1, 4096)
    if hq % hkv:
        raise ValueError(f"num_kv_heads: {hkv} does not divide num_heads {hq}")
    d = _int(c.head_dim, "head_dim", 1, 4096)
    if c.encoding not in ENCODINGS:
        raise ValueError(f"encoding: must be one of {', '.join(ENCODINGS)}, got {c.encoding!r}")
    if c.encoding == "rope":
        r = _int(c.rot, "rotary_dim", 2, d)
        if r % 2:
            raise ValueError(f"rotary_dim: must be even, got {r}")
        check_base(c.base)
        check_layout(c.layout)
        scaling_types.resolve(c.scaling)
    if c.encoding == "kerple":
        check_variant(c.kerple_variant)
        r1, _ = check_params(c.kerple_r1, c.kerple_r2)
        if r1.size != hq:
            raise ValueError(f"kerple_r1: must hold one value per query head ({hq}), got {r1.size}")
    if c.encoding == "t5":
        _int(c.num_buckets, "num_buckets", 2, 2**20)
        _int(c.max_distance, "max_distance", 2, MAX_POSITION)
        check_t5(c.num_buckets, c.max_distance, not c.causal)  # buckets in [0, num_buckets), or refused
    _int(c.seq_len, "seq_len", 0, MAX_POSITION)
    if c.logit_scale is not None and not (isinstance(c.logit_scale, numbers.Real) and not isinstance(c.logit_scale, bool)
                                          and 0 < float(c.logit_scale) < math.inf):
        raise ValueError(f"logit_scale: must be a positive finite number or None, got {c.logit_scale!r}")
    return c


def weight_names(c: Config) -> tuple:
    """The keys the weights dict holds for this config: wq, wk, wv, wo, plus FIRE's MLP or T5's table."""
    return BASE_WEIGHTS + {"fire": FIRE_WEIGHTS, "t5": T5_WEIGHTS}.get(c.encoding, ())


def _float_array(a, name, shape):
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiu" or arr.shape != tuple(shape):
        raise ValueError(f"{name}: must be a real array of shape {list(shape)}, got {arr.dtype} {list(arr.shape)}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or (arr.size and np.max(np.abs(arr)) > MAX_ABS):
        raise ValueError(f"{name}: must be finite with |x| <= 2**400 (Dot2's splitting stays exact)")
    return arr


def check_inputs(hidden, weights, positions, c, attention_mask, past_keys, past_values):
    """Validated float64 / int64 / bool arrays: (X, W dict, positions, mask [b, P+s], pk, pv)."""
    h = np.asarray(hidden)
    if h.ndim != 3:
        raise ValueError(f"hidden: must be 3-D [batch, seq, d_model], got shape {list(h.shape)}")
    b, s, dm = h.shape
    X = _float_array(h, "hidden", (b, s, dm))
    hq, hkv, d = c.num_heads, c.num_kv_heads, c.head_dim
    names = weight_names(c)
    if not isinstance(weights, Mapping) or set(weights) != set(names):
        raise ValueError(f"weights: must be a dict with exactly the keys {', '.join(names)} for encoding "
                         f"{c.encoding!r}")
    W = {"wq": _float_array(weights["wq"], "wq", (hq * d, dm)), "wk": _float_array(weights["wk"], "wk", (hkv * d, dm)),
         "wv": _float_array(weights["wv"], "wv", (hkv * d, dm)), "wo": _float_array(weights["wo"], "wo", (dm, hq * d))}
    if c.encoding == "fire":
        W.update(_fire_weights(weights, hq))
    if c.encoding == "t5":
        W["rel_bias"] = _float_array(weights["rel_bias"], "rel_bias", (c.num_buckets, hq))
    p = np.asarray(positions)
    if p.shape != (b, s) or p.dtype.kind not in "iu" or (p.size and np.max(np.abs(p)) > MAX_POSITION):
        raise ValueError(f"positions: must be integers of shape [{b}, {s}] with |p| <= 2**40")
    if (past_keys is None) != (past_values is None):
        raise ValueError("past_keys: past_keys and past_values come together (or both None)")
    if past_keys is None:
        pk = pv = np.zeros((b, hkv, 0, d))
    else:
        shape = np.shape(past_keys)
        if len(shape) != 4:
            raise ValueError("past_keys: must be 4-D [batch, num_kv_heads, past_len, head_dim]")
        pk = _float_array(past_keys, "past_keys", (b, hkv, shape[2], d))
        pv = _float_array(past_values, "past_values", (b, hkv, shape[2], d))
    P = pk.shape[2]
    if attention_mask is None:
        mask = np.ones((b, P + s), dtype=bool)
    else:
        m = np.asarray(attention_mask)
        if m.shape != (b, P + s) or m.dtype.kind not in "biu":
            raise ValueError(f"attention_mask: must be bool of shape [{b}, {P + s}] (past + new keys)")
        mask = m.astype(bool)
    if c.encoding == "fire" and p.size and (np.min(p) < 0):
        raise ValueError("positions: FIRE takes 0-based positions (>= 0)")
    return X, W, p.astype(np.int64), mask, pk, pv


def _fire_weights(weights, hq) -> dict:
    """FIRE's MLP as reference.fire checks it (c, L_multiplier scalars; W1 [hidden, 1], b1, W2
    [hq, hidden], b2 [hq]), float64; W2 must have one row per query head."""
    w = check_weights({n: np.asarray(weights[n]) for n in FIRE_WEIGHTS})
    if w["W2"].shape[0] != hq:
        raise ValueError(f"W2: must have one row per query head ({hq}), got {w['W2'].shape[0]}")
    for n in ("W1", "b1", "W2", "b2"):
        if np.max(np.abs(w[n]), initial=0.0) > MAX_ABS:
            raise ValueError(f"{n}: must be finite with |x| <= 2**400")
    return w


def key_positions(positions: np.ndarray, past_len: int) -> np.ndarray:
    """int64 [b, P + s]: the cache's keys at 0..P-1, then the new tokens' positions."""
    b = positions.shape[0]
    return np.concatenate([np.broadcast_to(np.arange(past_len, dtype=np.int64), (b, past_len)), positions], axis=1)


def visible(c: Config, mask: np.ndarray, b: int, s: int, past_len: int) -> np.ndarray:
    """bool [b, s, P + s]: key slot j is visible to query i (slot P + i): mask[j] and, causal,
    j <= P + i."""
    K = past_len + s
    vis = np.broadcast_to(mask[:, None, :], (b, s, K)).copy()
    if c.causal:
        vis &= (np.arange(K)[None, :] <= past_len + np.arange(s)[:, None])[None]
    return vis


def graded_rows(mask: np.ndarray, vis: np.ndarray, past_len: int) -> np.ndarray:
    """bool [b, s]: queries that are real tokens and see at least one key (graded rows)."""
    return mask[:, past_len:] & vis.any(axis=-1)


def _bias(c: Config, kpos: np.ndarray, positions: np.ndarray, backend: str, W: Mapping = None) -> np.ndarray:
    """float64 [b, hq, s, K]: the additive bias of the encoding (ALiBi, KERPLE, FIRE, T5; 0 for
    RoPE and none), each from its own family's reference (W: the validated weights, for FIRE's
    MLP and T5's table). Entries of keys a query does not see are computed and never used."""
    b, s = positions.shape
    if c.encoding not in BIASES:
        return np.zeros((b, c.num_heads, s, kpos.shape[1]))
    if c.encoding == "alibi":
        rows = [alibi.bias(c.num_heads, positions[i], kpos[i], causal=c.causal, backend=backend) for i in range(b)]
    elif c.encoding == "kerple":
        rows = [kerple.bias(positions[i], kpos[i], c.kerple_variant, c.kerple_r1, c.kerple_r2, backend=backend)
                for i in range(b)]
    elif c.encoding == "fire":
        w = {n: W[n] for n in FIRE_WEIGHTS}
        rows = [fire.bias(positions[i], kpos[i], w, backend=backend) for i in range(b)]
    else:
        rows = [t5_bias(c, positions[i], kpos[i], W["rel_bias"]) for i in range(b)]
    return np.stack(rows)


def t5_buckets(c: Config, q_positions, k_positions) -> np.ndarray:
    """int64 [s, K]: T5's bucket of j - i (reference.t5.bucket; bidirectional when not causal)."""
    rel = np.asarray(k_positions, dtype=np.int64)[None, :] - np.asarray(q_positions, dtype=np.int64)[:, None]
    values, inverse = np.unique(rel, return_inverse=True)  # t5.bucket decides each distance in mpmath
    found = t5.bucket(values, num_buckets=c.num_buckets, max_distance=c.max_distance, bidirectional=not c.causal)
    return found[inverse.reshape(rel.shape)]


def t5_bias(c: Config, q_positions, k_positions, table) -> np.ndarray:
    """[hq, s, K]: table[bucket(j - i), h], an exact lookup."""
    return np.moveaxis(np.asarray(table, dtype=np.float64)[t5_buckets(c, q_positions, k_positions)], -1, 0)


def _rope(x, positions, c, backend):
    return rotation.apply(x, positions, rotary_dim=c.rot, base=c.base, layout=c.layout, scaling=c.scaling,
                      seq_len=c.seq_len or None, backend=backend)


def stages(hidden, weights, positions, config, *, attention_mask=None, past_keys=None, past_values=None) -> dict:
    """The float64 intermediates in plain NumPy arithmetic (for error budgets and diagnosis):
    q [b,s,hq,d] and k, v [b,s,hkv,d] before the encoding, qr, kr after it, keys, values
    [b,P+s,hkv,d] (cache first), bias, z (scores, -inf where not visible), p [b,hq,s,P+s],
    o [b,s,hq d], out [b,s,D], vis [b,s,P+s], rows [b,s], kpos [b,P+s], mask [b,P+s], and the
    validated inputs X, W."""
    c = check_config(config)
    X, W, pos, mask, pk, pv = check_inputs(hidden, weights, positions, c, attention_mask, past_keys, past_values)
    b, s, _ = X.shape
    P, d, hq, hkv = pk.shape[2], c.head_dim, c.num_heads, c.num_kv_heads
    q = (X @ W["wq"].T).reshape(b, s, hq, d)
    k = (X @ W["wk"].T).reshape(b, s, hkv, d)
    v = (X @ W["wv"].T).reshape(b, s, hkv, d)
    qr, kr = (_rope(q, pos, c, "numpy"), _rope(k, pos, c, "numpy")) if c.encoding == "rope" else (q, k)
    keys = np.concatenate([pk.transpose(0, 2, 1, 3), kr], axis=1)
    values = np.concatenate([pv.transpose(0, 2, 1, 3), v], axis=1)
    kpos = key_positions(pos, P)
    vis = visible(c, mask, b, s, P)
    bias = _bias(c, kpos, pos, "numpy", W)
    g = np.arange(hq) // c.group
    z = np.einsum("bihe,bjhe->bhij", qr, keys[:, :, g]) * c.scale + bias
    z = np.where(vis[:, None], z, -np.inf)
    rows = graded_rows(mask, vis, P)
    zmax = np.max(z, axis=-1, keepdims=True, initial=-np.inf)
    e = np.exp(z - np.where(np.isfinite(zmax), zmax, 0.0))
    ssum = e.sum(axis=-1, keepdims=True)
    p = np.where(ssum > 0, e / np.where(ssum > 0, ssum, 1.0), 0.0)
    o = np.einsum("bhij,bjhe->bihe", p, values[:, :, g]).reshape(b, s, hq * d)
    out = o @ W["wo"].T
    return dict(X=X, W=W, q=q, k=k, v=v, qr=qr, kr=kr, keys=keys, values=values, bias=bias, z=z, p=p, o=o, out=out,
                vis=vis, rows=rows, kpos=kpos, mask=mask)


def forward(hidden, weights, positions, config, *, attention_mask=None, past_keys=None, past_values=None,
            backend="cpu", mode="fast") -> np.ndarray:
    """float64 [b, s, D]: the attention layer's output (formula in __init__). Rows without a
    visible key are 0 (not meaningful; never graded, nor are rows of masked queries)."""
    backend, mode = check_backend(backend), check_mode(mode)
    if mode == "golden":
        return _golden(hidden, weights, positions, config, attention_mask, past_keys, past_values)
    if backend == "numpy":
        return stages(hidden, weights, positions, config, attention_mask=attention_mask, past_keys=past_keys,
                      past_values=past_values)["out"]
    c = check_config(config)
    X, W, pos, mask, pk, pv = check_inputs(hidden, weights, positions, c, attention_mask, past_keys, past_values)
    st = kernel_stages(X, W, pos, mask, pk, pv, c, backend)
    kernels = st["kernels"]
    b, s, dm = X.shape
    hq, d = c.num_heads, c.head_dim
    o = kernels.attend(st["qr"], st["keys"], st["values"], st["bias"], st["vis"], c.scale, c.group)
    return kernels.project(o.reshape(b * s, hq * d), W["wo"]).reshape(b, s, dm)


def kernel_stages(X, W, pos, mask, pk, pv, c, backend) -> dict:
    """The fast forward's stages before the softmax on backend "cpu" or "cuda", from the validated
    inputs: qr [b, s, hq, d] (after the encoding), keys, values [b, P+s, hkv, d] (cache first),
    bias [b, hq, s, P+s], vis, kpos, all C-contiguous, and the backend's kernels module."""
    if backend == "cpu":
        from . import cpu_kernels as kernels  # numba start-up: imported on first use
    else:
        from . import cuda_kernels as kernels  # numba start-up: imported on first use
    b, s, dm = X.shape
    P, d, hq, hkv = pk.shape[2], c.head_dim, c.num_heads, c.num_kv_heads
    flat = X.reshape(b * s, dm)
    q = kernels.project(flat, W["wq"]).reshape(b, s, hq, d)
    k = kernels.project(flat, W["wk"]).reshape(b, s, hkv, d)
    v = kernels.project(flat, W["wv"]).reshape(b, s, hkv, d)
    if c.encoding == "rope":
        q, k = _rope(q, pos, c, backend), _rope(k, pos, c, backend)
    keys = np.ascontiguousarray(np.concatenate([pk.transpose(0, 2, 1, 3), k], axis=1))
    values = np.ascontiguousarray(np.concatenate([pv.transpose(0, 2, 1, 3), v], axis=1))
    kpos = key_positions(pos, P)
    vis = visible(c, mask, b, s, P)
    bias = np.ascontiguousarray(_bias(c, kpos, pos, backend, W))
    return dict(qr=np.ascontiguousarray(q), keys=keys, values=values, bias=bias, vis=vis, kpos=kpos, kernels=kernels)


# ---- golden mode: the chain in mpmath, rounded once ----------------------------------------


def _golden(hidden, weights, positions, config, attention_mask, past_keys, past_values) -> np.ndarray:
    c = check_config(config)
    X, W, pos, mask, pk, pv = check_inputs(hidden, weights, positions, c, attention_mask, past_keys, past_values)
    b, s, dm = X.shape
    P, d, hq, hkv = pk.shape[2], c.head_dim, c.num_heads, c.num_kv_heads
    vis = visible(c, mask, b, s, P)
    kpos = key_positions(pos, P)
    out = np.zeros((b, s, dm))
    with mpmath.workprec(GOLDEN_PREC):
        mpf = mpmath.mpf
        Wm = {n: [[mpf(float(x)) for x in row] for row in W[n]] for n in BASE_WEIGHTS}
        theta, factor = _golden_frequencies(c) if c.encoding == "rope" else (None, None)
        scale = c.exact_scale()
        for bi in range(b):
            bias = golden_bias(c, W, pos[bi], kpos[bi])
            xs = [[mpf(float(x)) for x in X[bi, i]] for i in range(s)]

            def proj(name, heads, i):
                return [[mpmath.fdot(Wm[name][h * d + e], xs[i]) for e in range(d)] for h in range(heads)]

            q = [proj("wq", hq, i) for i in range(s)]
            k = [proj("wk", hkv, i) for i in range(s)]
            v = [proj("wv", hkv, i) for i in range(s)]
            if c.encoding == "rope":
                q = [[_golden_rotate(vec, int(pos[bi, i]), theta, factor, c) for vec in q[i]] for i in range(s)]
                k = [[_golden_rotate(vec, int(pos[bi, i]), theta, factor, c) for vec in k[i]] for i in range(s)]
            keys = [[[mpf(float(x)) for x in pk[bi, g, j]] for g in range(hkv)] for j in range(P)] + k
            values = [[[mpf(float(x)) for x in pv[bi, g, j]] for g in range(hkv)] for j in range(P)] + v
            for i in range(s):
                o = []
                for h in range(hq):
                    g = h // c.group
                    js = [j for j in range(P + s) if vis[bi, i, j]]
                    if not js:
                        o.extend([mpf(0)] * d)
                        continue
                    z = []
                    for j in js:
                        zj = mpmath.fdot(q[i][h], keys[j][g]) * scale
                        if bias is not None:
                            zj += bias[h, i, j]
                        z.append(zj)
                    top = max(z)
                    e = [mpmath.exp(zj - top) for zj in z]
                    total = mpmath.fsum(e)
                    o.extend(mpmath.fsum(e[t] * values[j][g][x] for t, j in enumerate(js)) / total
                             for x in range(d))
                if vis[bi, i].any():
                    for r in range(dm):
                        out[bi, i, r] = nearest_double(mpmath.fdot(Wm["wo"][r], o))
    return out


def _golden_frequencies(c):
    rope_type, params = scaling_types.resolve(c.scaling)
    theta, factor = scaling_types.exact(rope_type, params, c.rot, c.base, c.seq_len or None)
    return [mpmath.mpf(t) for t in theta], mpmath.mpf(factor)


def _golden_slopes(c):
    return slopes_mp(c.num_heads)


def golden_bias(c: Config, W: Mapping, q_positions, k_positions):
    """object [hq, s, K] of mpf at the caller's precision: the encoding's bias, exact up to that
    precision (None for RoPE and none): ALiBi -m_h (p_i - p_j) (|.| when not causal) with
    reference.alibi's mpmath slopes; KERPLE -r1 log1p(r2 n) or -r1 n^r2 (n = |p_i - p_j|, the
    clamped parameters of reference.kerple.clamp); FIRE's MLP on psi(i - j) / (psi(max(i, L)) +
    eps), its ReLU decided on the exact pre-activation (reference.fire's constants); T5 the table
    entry of reference.t5's bucket (exact: a lookup)."""
    if c.encoding not in BIASES:
        return None
    mpf = mpmath.mpf
    qp, kp = [int(v) for v in q_positions], [int(v) for v in k_positions]
    out = np.empty((c.num_heads, len(qp), len(kp)), dtype=object)
    if c.encoding == "alibi":
        slopes = _golden_slopes(c)
        for h, i, j in np.ndindex(out.shape):
            dist = qp[i] - kp[j]
            out[h, i, j] = -slopes[h] * (dist if c.causal else abs(dist))
    elif c.encoding == "kerple":
        r1, r2 = kerple.clamp(c.kerple_variant, c.kerple_r1, c.kerple_r2)
        for h, i, j in np.ndindex(out.shape):
            n = abs(qp[i] - kp[j])
            a, e = mpf(float(r1[h])), mpf(float(r2[h]))
            if c.kerple_variant == "log":
                out[h, i, j] = -a * mpmath.log1p(e * n)
            else:
                out[h, i, j] = -a * mpmath.power(n, e) if n else mpf(0)
    elif c.encoding == "fire":
        w1 = [mpf(float(v)) for v in np.ravel(W["W1"])]
        b1 = [mpf(float(v)) for v in W["b1"]]
        w2 = [[mpf(float(v)) for v in row] for row in W["W2"]]
        b2 = [mpf(float(v)) for v in W["b2"]]
        cc, L = mpf(float(W["c"])), abs(mpf(float(W["L_multiplier"])) * mpf(INIT_L))
        for i, p in enumerate(qp):
            norm = mpmath.log1p(abs(cc * max(mpf(p), L))) + mpf(EPS)
            for j, r in enumerate(kp):
                x = mpmath.log1p(abs(cc * (p - r))) / norm
                act = [max(w1[k] * x + b1[k], 0) for k in range(len(w1))]
                for h in range(c.num_heads):
                    out[h, i, j] = mpmath.fdot(w2[h], act) + b2[h]
    else:
        buckets = t5_buckets(c, qp, kp)
        for h, i, j in np.ndindex(out.shape):
            out[h, i, j] = mpf(float(W["rel_bias"][buckets[i, j], h]))
    return out


def _golden_rotate(vec, m, theta, factor, c):
    r = c.rot
    out = list(vec)
    for i in range(r // 2):
        a, b = (i, i + r // 2) if c.layout == "half" else (2 * i, 2 * i + 1)
        cs, sn = mpmath.cos(m * theta[i]) * factor, mpmath.sin(m * theta[i]) * factor
        out[a], out[b] = vec[a] * cs - vec[b] * sn, vec[a] * sn + vec[b] * cs
    return out
