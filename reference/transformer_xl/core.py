"""Transformer-XL relative attention scores (see __init__): argument checks, the relative
distances, the sinusoid R, the fast and golden scores and the fast mode's error bound."""

from __future__ import annotations

import math
import numbers

import mpmath
import numpy as np

from reference.golden.certify import nearest_double
from reference.numerics.sinusoid import table as sinusoid_table
from reference.numerics.validate import check_backend, check_mode

BASE = 10000.0
MAX_LEN = 2**20  # qlen + mlen: far beyond any released model, and every distance exact in float64


def _count(name, v, low):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral) or not low <= int(v) <= MAX_LEN:
        raise ValueError(f"{name}: must be an integer from {low} to 2**20, got {v!r}")
    return int(v)


def check_config(mlen, d_model, clamp_len) -> tuple[int, int, int]:
    """(mlen >= 0, d_model even >= 2, clamp_len >= 0; 0 means no clamp)."""
    mlen, d_model, clamp_len = _count("mlen", mlen, 0), _count("d_model", d_model, 2), _count("clamp_len", clamp_len, 0)
    if d_model % 2:
        raise ValueError(f"d_model: must be even ([sin | cos] halves of d_model / 2 frequencies), got {d_model}")
    return mlen, d_model, clamp_len


def _array(name, a, ndim) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiu" or arr.ndim != ndim:
        raise ValueError(f"{name}: must be a real {ndim}-D array, got {arr.dtype} with shape {list(arr.shape)}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: must hold finite numbers")
    return arr


def check_inputs(q, k, u, v, r_weight, mlen, d_model):
    """float64 copies of q [qlen, n_head, d_head], k [qlen + mlen, n_head, d_head], u, v
    [n_head, d_head], r_weight [n_head * d_head, d_model]; shapes checked against each other."""
    q, k = _array("q", q, 3), _array("k", k, 3)
    u, v, w = _array("u", u, 2), _array("v", v, 2), _array("r_weight", r_weight, 2)
    qlen, n_head, d_head = q.shape
    if qlen < 1 or n_head < 1 or d_head < 1:
        raise ValueError(f"q: must have shape [qlen, n_head, d_head] with every size >= 1, got {list(q.shape)}")
    if k.shape != (qlen + mlen, n_head, d_head):
        raise ValueError(f"k: must have shape [qlen + mlen, n_head, d_head] = {[qlen + mlen, n_head, d_head]}, "
                         f"got {list(k.shape)}")
    for name, a in (("u", u), ("v", v)):
        if a.shape != (n_head, d_head):
            raise ValueError(f"{name}: must have shape [n_head, d_head] = {[n_head, d_head]}, got {list(a.shape)}")
    if w.shape != (n_head * d_head, d_model):
        raise ValueError(f"r_weight: must have shape [n_head * d_head, d_model] = {[n_head * d_head, d_model]}, "
                         f"got {list(w.shape)}")
    return q, k, u, v, w


def distances(qlen: int, mlen: int, clamp_len: int = 0) -> np.ndarray:
    """int64 [qlen, qlen + mlen]: the relative distance of query i to key j, i + mlen - j, capped
    at clamp_len when clamp_len > 0 (the reference code's ``pos_seq.clamp_(max=clamp_len)``).
    Entries j > i + mlen (negative distances) are masked in attention; they hold the same formula."""
    d = np.arange(qlen, dtype=np.int64)[:, None] + mlen - np.arange(qlen + mlen, dtype=np.int64)[None, :]
    return np.minimum(d, clamp_len) if clamp_len > 0 else d


def inv_freq_mp(d_model: int) -> list:
    """w_c = 10000^(-2c/d_model), c = 0..d_model/2 - 1, as mpf at the current precision."""
    return [mpmath.power(mpmath.mpf(BASE), -mpmath.mpf(2 * c) / d_model) for c in range(d_model // 2)]


def sinusoid(positions, d_model: int, *, backend="cpu", mode="fast") -> np.ndarray:
    """R_p = [sin(p w) | cos(p w)] float64 [n, d_model] for integer positions [n] (Transformer-XL
    ``PositionalEmbedding``, concatenated halves, w_c = 10000^(-2c/d_model)): the shared sinusoid
    table (reference/numerics/sinusoid.py, sinusoidal's too), exactly reduced: fast within 1.5 ulp,
    golden correctly rounded."""
    return sinusoid_table(np.asarray(positions, dtype=np.int64), d_model, layout="concatenated",
                          exponent="2i/d", base=BASE, backend=backend, mode=mode)


def _distance_table(qlen, mlen, clamp_len):
    """(distinct distances [n], index [qlen, klen] into them)."""
    d = distances(qlen, mlen, clamp_len)
    values, index = np.unique(d, return_inverse=True)
    return values, index.reshape(d.shape).astype(np.int64)


FRACTION_BITS = 260  # R at 200 bits as an integer times 2^-260: exact for every |R| >= 2^-60


def _integer_scale(w: np.ndarray):
    """(S, W 2^S as int64) with every entry an integer below 2^24 (posref's seeded inputs: 8
    significant bits, at least 2^-15), or None: those products and sums are exact in float64."""
    for shift in range(0, 64):
        scaled = np.ldexp(w, shift)
        if np.all(scaled == np.rint(scaled)):
            return (shift, scaled.astype(np.int64)) if np.max(np.abs(scaled), initial=0) < 2**24 else None
    return None


def _exact_rows(w: np.ndarray, R: list, scaled="find") -> list:
    """[mpf] = W R for W [n_out, d_model] exact doubles and R [d_model] mpf: each sum exact, then
    rounded once to the working precision (as mpmath.fdot gives it), in integer arithmetic.

    Why: W R is the golden's cost (n_head d_head sums of d_model terms per distance: 15 s a case of
    4 queries at Transformer-XL's 1024 x 1024 through mpmath.fdot). With W = W_int 2^-S (W_int
    below 2^24) and R = R_int 2^-260 (R's 200-bit mantissas, exact), R_int is cut into limbs of b
    bits, b such that 2^b max|W_int| d_model < 2^53: each float64 product W_int limb and each sum
    of d_model of them is then an exact integer, whatever order a BLAS adds in, and
    sum_l (W_int limb_l) 2^(b l) is the exact sum. Falls back to mpmath.fdot for other W."""
    scaled = _integer_scale(w)
    ints = []
    for value in R:
        value = mpmath.mpf(value)
        man, exp = value.man_exp  # |value| = man 2^exp (man unsigned)
        if man and exp + FRACTION_BITS < 0:
            scaled = None
            break
        ints.append((-1 if value < 0 else 1) * (int(man) << max(exp + FRACTION_BITS, 0)))
    if scaled is None:
        rows = [[mpmath.mpf(float(x)) for x in row] for row in w]
        return [mpmath.fdot(row, R) for row in rows]
    shift, w_int = scaled
    width = 52 - int(np.max(np.abs(w_int), initial=1)).bit_length() - int(w.shape[1]).bit_length()
    if width < 8:
        rows = [[mpmath.mpf(float(x)) for x in row] for row in w]
        return [mpmath.fdot(row, R) for row in rows]
    signs = np.array([1 if v >= 0 else -1 for v in ints], dtype=np.int64)
    mags = [abs(v) for v in ints]
    n_limbs = max(1, -(-max(m.bit_length() for m in mags) // width))
    mask = (1 << width) - 1
    limbs = np.array([[float((m >> (width * l)) & mask) for l in range(n_limbs)] for m in mags])  # exact
    sums = (w_int * signs[None, :]).astype(np.float64) @ limbs  # [n_out, n_limbs], exact integers
    out = []
    for row in sums:
        total = sum(int(v) << (width * l) for l, v in enumerate(row))
        out.append(mpmath.mpf((total, -(shift + FRACTION_BITS))) if total else mpmath.mpf(0))
    return out


def _golden(q, k, u, v, w, mlen, d_model, clamp_len, heads=None, rows=None, keys=None) -> np.ndarray:
    """Every score (of ``heads`` x ``rows`` x ``keys`` when given: [len(heads), len(rows),
    len(keys)]) at 200 bits from the exact sinusoid (the inputs are exact doubles), rounded once.
    The 200-bit value errs by a few 2^-200 times the terms' size (sin, cos, the sqrt and the
    rounding of each exact dot product). Unless the terms cancel to within 2^-140 of their size,
    that stays below 2^-60 ulp of the score, so the stored value is faithfully rounded (in
    practice correctly). Certification checks every stored value against the oracle. Only the
    graded heads' rows of r_weight and the graded entries' distances are computed."""
    qlen, n_head, d_head = q.shape
    heads = list(range(n_head)) if heads is None else [int(h) for h in heads]
    rows = list(range(qlen)) if rows is None else [int(i) for i in rows]
    keys = list(range(qlen + mlen)) if keys is None else [int(j) for j in keys]
    d = distances(qlen, mlen, clamp_len)[np.ix_(rows, keys)]
    values, index = np.unique(d, return_inverse=True)
    index = index.reshape(d.shape)
    w_heads = np.concatenate([w[h * d_head:(h + 1) * d_head] for h in heads])  # [len(heads) d_head, d_model]
    out = np.empty((len(heads), len(rows), len(keys)))
    with mpmath.workprec(200):
        mp = np.vectorize(lambda x: mpmath.mpf(float(x)), otypes=[object])
        qm, km, um, vm = mp(q[rows]), mp(k[keys]), mp(u), mp(v)
        freq = inv_freq_mp(d_model)
        scaled = _integer_scale(w_heads)
        r_rows = []
        for p in values.tolist():
            angles = [p * f for f in freq]
            r_rows.append(_exact_rows(w_heads, [mpmath.sin(a) for a in angles] + [mpmath.cos(a) for a in angles],
                                      scaled))
        scale = 1 / mpmath.sqrt(d_head)
        for a, h in enumerate(heads):
            for i in range(len(rows)):
                qu = [qm[i, h, e] + um[h, e] for e in range(d_head)]
                qv = [qm[i, h, e] + vm[h, e] for e in range(d_head)]
                for j in range(len(keys)):
                    r = r_rows[index[i, j]][a * d_head:(a + 1) * d_head]
                    content = mpmath.fdot(qu, km[j, h])
                    position = mpmath.fdot(qv, r)
                    out[a, i, j] = nearest_double((content + position) * scale)
    return out


def score_entries(q, k, u, v, r_weight, *, mlen, d_model, clamp_len=0, heads=None, rows=None,
                  keys=None) -> np.ndarray:
    """Golden scores of the ``heads`` x ``rows`` (queries) x ``keys`` subgrid only, float64
    [len(heads), len(rows), len(keys)] (each None: all): ``score(..., mode="golden")[heads][:, rows][:, :, keys]``,
    at the cost of those entries' distances and heads, so that a case at a model's full shape
    (Transformer-XL: 16 heads of 64, d_model 1024, 1600 memory slots) grades a few entries."""
    mlen, d_model, clamp_len = check_config(mlen, d_model, clamp_len)
    q, k, u, v, w = check_inputs(q, k, u, v, r_weight, mlen, d_model)
    qlen, n_head, _ = q.shape
    for name, picked, size in (("heads", heads, n_head), ("rows", rows, qlen), ("keys", keys, qlen + mlen)):
        if picked is not None and (len(picked) == 0 or not all(0 <= int(x) < size for x in picked)):
            raise ValueError(f"{name}: indices from 0 to {size - 1}, got {list(picked)}")
    return _golden(q, k, u, v, w, mlen, d_model, clamp_len, heads, rows, keys)


def score(q, k, u, v, r_weight, *, mlen, d_model, clamp_len=0, backend="cpu", mode="fast") -> np.ndarray:
    """float64 [n_head, qlen, qlen + mlen]: ((q_i + u) . k_j + (q_i + v) . r_(i+mlen-j)) / sqrt(d_head)
    per head, r_p = r_weight R_p split into heads (see __init__). Entries j > i + mlen hold the same
    formula at the negative distance; attention masks them."""
    mlen, d_model, clamp_len = check_config(mlen, d_model, clamp_len)
    q, k, u, v, w = check_inputs(q, k, u, v, r_weight, mlen, d_model)
    backend, mode = check_backend(backend), check_mode(mode)
    if mode == "golden":
        return _golden(q, k, u, v, w, mlen, d_model, clamp_len)
    qlen, n_head, d_head = q.shape
    values, index = _distance_table(qlen, mlen, clamp_len)
    R = sinusoid(values, d_model, backend=backend)
    if backend == "numpy":
        r = (R @ w.T).reshape(-1, n_head, d_head)[index]  # [qlen, klen, n_head, d_head]
        content = np.einsum("ihe,jhe->hij", q + u, k)
        position = np.einsum("ihe,ijhe->hij", q + v, r)
        return (content + position) / math.sqrt(d_head)
    if backend == "cpu":
        from . import cpu_kernels as kernels  # numba start-up: imported on first use
    else:
        from . import cuda_kernels as kernels  # numba start-up: imported on first use
    return kernels.score(q, k, u, v, w, R, index)


def fast_bound(q, k, u, v, r_weight, *, mlen, d_model, clamp_len=0) -> np.ndarray:
    """[n_head, qlen, klen]: the fast mode's error bound, u = 2^-53, to first order in u:

        ((d_head + 6) u (S_c + S_p) + (d_model + 4) u S_r) / sqrt(d_head)

    S_c = sum_e |q_e + u_e| |k_e| and S_r = sum_e |q_e + v_e| sum_c |W_ec| |R_c|, which bounds the
    position term's sum sum_e |q_e + v_e| |r_e|.
    R carries at most 1.5 ulp <= 3u |R_c| (reference.numerics.phase, fast); r = W R is a dot product of
    d_model terms (gamma_(d_model) plus those 3u: (d_model + 3) u, plus u slack); q + u and q + v
    round once (u), each dot product of d_head terms adds d_head u, the sum of the two terms, the
    division by sqrt(d_head) (with sqrt's own rounding) and the golden value's rounding add 4u more."""
    mlen, d_model, clamp_len = check_config(mlen, d_model, clamp_len)
    q, k, u_, v_, w = check_inputs(q, k, u, v, r_weight, mlen, d_model)
    qlen, n_head, d_head = q.shape
    values, index = _distance_table(qlen, mlen, clamp_len)
    R = np.abs(sinusoid(values, d_model, backend="numpy"))
    r = (R @ np.abs(w).T).reshape(-1, n_head, d_head)[index]  # sum_c |W| |R| >= |r|
    s_c = np.einsum("ihe,jhe->hij", np.abs(q + u_), np.abs(k))
    s_r = np.einsum("ihe,ijhe->hij", np.abs(q + v_), r)
    unit = 2.0**-53
    return ((d_head + 6) * unit * (s_c + s_r) + (d_model + 4) * unit * s_r) / math.sqrt(d_head)
