"""One-pass cpu kernel for rotations whose cos/sin are known per token and pair (issue 13).

Families that turn the pairs of x by angles RoPE's own apply kernel does not cover -- several
position streams (2-D RoPE's x and y, M-RoPE's t, h, w: ``phase.rotate_streams``) or an amplitude
on the rotation (Gaussian RoPE's K(m), xPos's zeta_i^e, a scaled RoPE's attention factor:
``phase.scaled_rotate``) -- get their cos/sin tables from RoPE's fast kernels and then rotate here:
x is read once and a new array written once, instead of a chain of numpy fancy-index passes.

Arithmetic (never fastmath, no contraction into FMA): for pair i of token t with (a, b) its two
elements, c = cos[stream_of_pair[i], t, entry_of_pair[i]], s likewise, f the pair's amplitude,

    out_first = (a c - b s) f,     out_second = (a s + b c) f,

each product and sum rounded once, in this order: the same operations, on the same cos/sin, as
the numpy code it replaces (and as RoPE's apply kernel, times f afterwards), so the results are
bit for bit those of the numpy paths. With no amplitude f = 1.0 (an exact multiplication). The
tail past the 2P rotated elements is copied bit for bit, or (``tail``) multiplied by a per-token
scale; tokens before ``first_token`` are copied unrotated (2-D RoPE's CLS tokens).
"""

import math

import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic

from .cpu_kernels import run_kernel


@numba.njit(cache=True, fastmath=False, parallel=True)
def rotate_kernel(x, out, cos, sin, index, stream_of_pair, entry_of_pair, factor, tail, scale_tail, layout,
                  first_token):
    """x, out float64 [b, s, h, d] C-contiguous (distinct); cos, sin float64 [S, U, n], the rows of
    each stream's distinct positions; index int64 [S, b*s]: token t of stream k is row index[k, t];
    stream_of_pair, entry_of_pair int64 [P] (2P <= d); factor float64 [b*s, F] with F = P (one
    amplitude per pair) or F = 1 (one per token); tail float64 [b*s] (read when scale_tail);
    layout 0 = half (i, i + P), 1 = interleaved (2i, 2i + 1)."""
    nb, ns, nh, d = x.shape
    pairs = stream_of_pair.shape[0]
    per_pair = factor.shape[1] > 1
    for t in numba.prange(nb * ns):
        bi = t // ns
        si = t % ns
        if si < first_token:
            for h in range(nh):
                for j in range(d):
                    out[bi, si, h, j] = x[bi, si, h, j]
            continue
        cs = np.empty(pairs)
        sn = np.empty(pairs)
        fa = np.empty(pairs)
        for i in range(pairs):
            k = stream_of_pair[i]
            cs[i] = cos[k, index[k, t], entry_of_pair[i]]
            sn[i] = sin[k, index[k, t], entry_of_pair[i]]
            fa[i] = factor[t, i] if per_pair else factor[t, 0]
        for h in range(nh):
            if layout == 0:
                for i in range(pairs):
                    a = x[bi, si, h, i]
                    b = x[bi, si, h, i + pairs]
                    out[bi, si, h, i] = (a * cs[i] - b * sn[i]) * fa[i]
                    out[bi, si, h, i + pairs] = (a * sn[i] + b * cs[i]) * fa[i]
            else:
                for i in range(pairs):
                    a = x[bi, si, h, 2 * i]
                    b = x[bi, si, h, 2 * i + 1]
                    out[bi, si, h, 2 * i] = (a * cs[i] - b * sn[i]) * fa[i]
                    out[bi, si, h, 2 * i + 1] = (a * sn[i] + b * cs[i]) * fa[i]
            if scale_tail:
                g = tail[t]
                for j in range(2 * pairs, d):
                    out[bi, si, h, j] = x[bi, si, h, j] * g
            else:
                for j in range(2 * pairs, d):
                    out[bi, si, h, j] = x[bi, si, h, j]


def rotate(x, cos, sin, index, stream_of_pair, entry_of_pair, layout, *, factor=None, tail=None, first_token=0):
    """The rotated x as a new float64 array (x, a validated float64 C-order [b, s, h, d], is only read).

    cos, sin: [S, U, n] per-stream tables of U rows; index: int [S, b, s], the row of each token
    in its stream's table (``stream_tables``); stream_of_pair, entry_of_pair [P];
    layout "half" | "interleaved"; factor: None, [b, s] (one amplitude per token) or [b, s, P];
    tail: None (copied) or [b, s] (the tail past 2P multiplied by it); first_token: tokens
    before it are copied unrotated. See the module docstring for the arithmetic."""
    nb, ns, nh, d = x.shape
    out = np.empty_like(x)
    if x.size == 0:
        return out
    tokens = nb * ns
    pairs = len(stream_of_pair)
    c = np.ascontiguousarray(cos, dtype=np.float64)
    s = np.ascontiguousarray(sin, dtype=np.float64)
    idx = np.ascontiguousarray(index, dtype=np.int64).reshape(len(index), tokens)
    if factor is None:
        f = np.ones((tokens, 1))  # times 1.0: exact
    else:
        f = np.ascontiguousarray(factor, dtype=np.float64).reshape(tokens, -1)
    if f.shape[1] not in (1, pairs) or 2 * pairs > d:
        raise ValueError(f"factor: {f.shape[1]} amplitudes per token for {pairs} pairs of head_dim {d}")
    g = np.ascontiguousarray(tail, dtype=np.float64).reshape(tokens) if tail is not None else np.empty(0)
    args = (x, out, c, s, idx, np.ascontiguousarray(stream_of_pair, dtype=np.int64),
            np.ascontiguousarray(entry_of_pair, dtype=np.int64), f, g, tail is not None,
            np.int64(0 if layout == "half" else 1), np.int64(first_token))
    run_kernel(rotate_kernel, x.size, *args)  # on one thread below cpu_kernels.PARALLEL_MIN_WORK values
    return out


def stream_tables(streams, cos_sin):
    """(cos, sin [S, U, n], index int64 [S, *stream shape]) for position streams [S, ...]:
    cos_sin(positions int64 [u]) -> (cos, sin [u, n]) is evaluated once per distinct position of
    each stream (an image's rows and columns repeat; a text stream is often constant), U the
    largest count of distinct positions (shorter tables padded with zeros, never read)."""
    uniques = [np.unique(np.asarray(p).reshape(-1), return_inverse=True) for p in streams]
    rows = max(u.size for u, _ in uniques)
    index = np.stack([inv.reshape(np.shape(p)) for (_, inv), p in zip(uniques, streams)]).astype(np.int64)
    tabs = [cos_sin(u) for u, _ in uniques]
    n = tabs[0][0].shape[-1]
    cos = np.zeros((len(tabs), rows, n))
    sin = np.zeros((len(tabs), rows, n))
    for k, (c, s) in enumerate(tabs):
        cos[k, : c.shape[0]] = c
        sin[k, : s.shape[0]] = s
    return cos, sin, index


# ---- golden mode (issue 31): the same rotations, each output rounded once and certified ---------
#
# Per token and pair, cos/sin of m theta_e come as double-doubles from RoPE's golden machinery
# (cpu_kernels.py): the quick phase (0 < |m| <= 2**21, entry e off the table's exact rows; relative
# error QUICK_REL_ERR plus QUICK_ABS_ERR absolute) or ddmath's double-double path (relative error
# GOLDEN_REL_ERR, inside APPLY_REL_ERR), the latter computed for a pair only when the quick values
# cannot certify it. D = a c - b s (a s + b c) is formed by dot2_dd with the bound E0 of
# cpu_kernels._rotate_quick / ddmath.rotate_golden:
#     E0 = (|a||c| + |b||s|) (APPLY_REL_ERR + rel) + (|a| + |b|) abs,
# (rel, abs) = (QUICK_REL_ERR, QUICK_ABS_ERR) on the quick phase, (0, 0) on the double-double path.
#
# An amplitude F (Gaussian RoPE's K(m), xPos's zeta_i^e) is handed in as F = 2**fe (fh + fl) with
# fh in [1, 2) (or F = 0: fh = fl = 0), |fh + fl - F 2**-fe| <= frel F 2**-fe, so that every F a
# family can produce is representable, however small or large. The product P = D f (D renormalised
# by TwoSum first, f = fh + fl, dd_mul's relative error below 2**-104) then satisfies
#     |P - F (a c - b s) 2**-fe| <= fh (1 + 2**-52) (E0 + |D| (2**-104 + frel) (1 + 2**-50)),
# which the kernel rounds up to err = fh (E0 + |D_hi| (2**-102 + frel)) (1 + 2**-50). P 2**fe is
# rounded once to the nearest double by _round_scaled (normal results: Ziv's test in the scaled
# domain, whose grid is the target grid times 2**-fe; subnormal results and zeros: rounding to a
# multiple of 2**-1074 in fixed point, with the same test against the half-way points).
# The tail (Gaussian RoPE scales it by K too): P = x f by TwoProduct plus x fl, err = |x| fh
# (2**-102 + frel). Results whose rounding is not certain, inputs outside [2**-800, 2**990]
# (ddmath.APPLY_MIN_ABS..MAX_ABS; zeros allowed), |D| below 2**-900 (dd products inexact) and
# results above 2**1000 are flagged: the caller settles them in mpmath (phase.py). An exact zero
# (a = b = 0, F = 0, or a result certainly below 2**-1075) is +0.0, as phase.to_double rounds it.
# Non-finite inputs propagate as in the host's golden loop: fd (a c - b s), c and s the rounded
# double-doubles, fd the nearest double to F.

from . import cpu_kernels as _ck  # noqa: E402  (golden building blocks, compiled inline)

_SMALL_M = _ck.SMALL_M
_QUICK_REL = _ck.QUICK_REL_ERR
_QUICK_ABS = _ck.QUICK_ABS_ERR
_A_REL = _ck._APPLY_REL_ERR
_A_MIN = _ck._APPLY_MIN_ABS
_A_MAX = _ck._APPLY_MAX_ABS
_MIN_D = 2.0**-900
_MAX_OUT = 2.0**1000
_NORMAL_OUT = 2.0**-1021
_two_sum = _ck._two_sum
_dd_mul = _ck._dd_mul
_two_prod = _ck._two_prod
_dot2_dd = _ck._dot2_dd
_round_certain = _ck._round_certain
_reduce_small = _ck._reduce_small
_sincos_quick = _ck._sincos_quick
_sincos_golden = _ck._sincos_golden
_inline = numba.njit(fastmath=False, inline="always")


@intrinsic
def _fma(typingctx, a, b, c):
    """a b + c rounded once (LLVM's llvm.fma.f64: the hardware instruction where the cpu has one,
    a correctly rounded libm call otherwise). Only the branch-free pass uses it, for TwoProduct."""
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        return builder.fma(*args)

    return sig, codegen


@_inline
def _two_prod_fma(a, b):
    """TwoProduct by FMA: p + e == a b exactly (p = fl(a b)) unless e underflows (|a b| < 2**-969),
    the same result as Dekker's split (ddmath.two_prod) in two operations."""
    p = a * b
    return p, _fma(a, b, -p)


@_inline
def _dot2_fma(a, ch, cl, b, sh, sl):
    """ddmath.dot2_dd with FMA TwoProducts: the same operations and result."""
    p1, e1 = _two_prod_fma(a, ch)
    p2, e2 = _two_prod_fma(b, sh)
    s, e = _two_sum(p1, p2)
    lo = (((e + e1) + e2) + a * cl) + b * sl
    return s, lo


@_inline
def _dd_mul_fma(ah, al, bh, bl):
    """ddmath.dd_mul with an FMA TwoProduct: the same operations and result."""
    p, e = _two_prod_fma(ah, bh)
    e = e + (ah * bl + al * bh)
    s = p + e
    return s, e - (s - p)


@_inline
def _certain(h, l, err):
    """(fl(h + l), certain) as cpu_kernels._round_certain, also certain when err == 0 and h + l is
    a double (an exact result, e.g. m = 0)."""
    r, ok = _round_certain(h, l, err)
    if not ok and err == 0.0:
        r2, d = _two_sum(h, l)
        ok = d == 0.0
    return r, ok


@_inline
def _round_scaled(h, l, err, fe):
    """(r, certain): r the nearest double to 2**fe (h + l) when every real within 2**fe err of it
    rounds there. fe: an integer as float64."""
    # clamped: math.ldexp takes a C int; below 2**-3000 |h| the value is +0.0 either way
    e = np.int64(max(min(fe, 3000.0), -3000.0))
    ah = abs(h)
    if ah == 0.0 and l == 0.0:
        return 0.0, err == 0.0
    top = math.ldexp(ah, e) if e < 2000 else math.inf
    if top > _MAX_OUT:
        return 0.0, False
    if top >= _NORMAL_OUT:
        r, ok = _certain(h, l, err)
        return math.ldexp(r, e), ok
    # fixed point: k = (h + l) 2**(1074 + fe), |k| < 2**53; the scalings are exact unless k's
    # parts are subnormal, an absolute error far below the 2**-1000 added to the bound
    s = e + 1074
    kh = math.ldexp(h, s) if s > -2000 else 0.0
    kl = math.ldexp(l, s) if s > -2000 else 0.0
    ke = (math.ldexp(err, s) if s > -2000 else 0.0) + 2.0**-1000
    n = np.rint(kh)
    fr = (kh - n) + kl  # kh - n exact; the sum's rounding is below 2**-53
    if fr > 0.5:
        n += 1.0
        fr -= 1.0
    elif fr < -0.5:
        n -= 1.0
        fr += 1.0
    ok = (abs(fr) + ke + 2.0**-52) * (1.0 + 2.0**-50) < 0.5
    return math.ldexp(n, -1074) + 0.0, ok


@_inline
def _pair_golden(a, b, sh, sl, ch, cl, rel, absr, fh, fl, fe, fd, frel, scaled):
    """(o0, o1, ok0, ok1): F (a c - b s) and F (a s + b c) rounded once (see above)."""
    if not (math.isfinite(a) and math.isfinite(b)):
        c = ch + cl
        s = sh + sl
        o0 = a * c - b * s
        o1 = a * s + b * c
        if scaled:
            o0 = fd * o0
            o1 = fd * o1
        return o0, o1, True, True
    aa = abs(a)
    ab = abs(b)
    if (a == 0.0 and b == 0.0) or (scaled and fh == 0.0):
        return 0.0, 0.0, True, True
    # |F (a c - b s)| <= 2**fe |fh| (|a| + |b|) < 2**-1076: both results are certainly +0.0
    if scaled and math.ldexp((aa + ab) * 2.0, np.int64(min(max(fe + 1076.0, -3000.0), 3000.0))) < 1.0:
        return 0.0, 0.0, True, True
    in_range = ((aa == 0.0) | ((aa >= _A_MIN) & (aa <= _A_MAX))) & ((ab == 0.0) | ((ab >= _A_MIN) & (ab <= _A_MAX)))
    h0, l0 = _dot2_dd(a, ch, cl, -b, sh, sl)
    h1, l1 = _dot2_dd(a, sh, sl, b, ch, cl)
    r = _A_REL + rel
    err0 = (aa * abs(ch) + ab * abs(sh)) * r + (aa + ab) * absr
    err1 = (aa * abs(sh) + ab * abs(ch)) * r + (aa + ab) * absr
    if not scaled:
        o0, ok0 = _certain(h0, l0, err0)
        o1, ok1 = _certain(h1, l1, err1)
        return o0 + 0.0, o1 + 0.0, ok0 & in_range, ok1 & in_range
    h0, l0 = _two_sum(h0, l0)
    h1, l1 = _two_sum(h1, l1)
    p0, q0 = _dd_mul(h0, l0, fh, fl)
    p1, q1 = _dd_mul(h1, l1, fh, fl)
    g = 2.0**-102 + frel
    af = abs(fh)
    o0, ok0 = _round_scaled(p0, q0, af * (err0 + abs(h0) * g) * (1.0 + 2.0**-50), fe)
    o1, ok1 = _round_scaled(p1, q1, af * (err1 + abs(h1) * g) * (1.0 + 2.0**-50), fe)
    ok0 = ok0 & in_range & ((abs(h0) >= _MIN_D) | ((h0 == 0.0) & (err0 == 0.0)))
    ok1 = ok1 & in_range & ((abs(h1) >= _MIN_D) | ((h1 == 0.0) & (err1 == 0.0)))
    return o0, o1, ok0, ok1


@_inline
def _tail_golden(v, fh, fl, fe, fd, frel):
    """(o, ok): F v rounded once (the scaled tail)."""
    if not math.isfinite(v):
        return fd * v, True
    if v == 0.0 or fh == 0.0:
        return 0.0, True
    av = abs(v)
    if av < _A_MIN or av > _A_MAX:
        return 0.0, False
    p, q = _two_prod(v, fh)
    q = q + v * fl
    return _round_scaled(p, q, av * abs(fh) * (2.0**-102 + frel) * (1.0 + 2.0**-50), fe)


@_inline
def _pair_quick(a, b, sh, sl, ch, cl, rel, absr, fh, fl, sc, frel, scaled):
    """(o0, o1, certain): the common case of _pair_golden without branches (so that the loop over
    a token's pairs vectorises): finite inputs in range, normal results (the amplitude's 2**fe
    applied as the exact product by sc = 2**fe); anything else is reported uncertain and goes to
    _pair_golden."""
    aa = abs(a)
    ab = abs(b)
    in_range = ((aa == 0.0) | ((aa >= _A_MIN) & (aa <= _A_MAX))) & ((ab == 0.0) | ((ab >= _A_MIN) & (ab <= _A_MAX)))
    h0, l0 = _dot2_fma(a, ch, cl, -b, sh, sl)
    h1, l1 = _dot2_fma(a, sh, sl, b, ch, cl)
    r = _A_REL + rel
    err0 = (aa * abs(ch) + ab * abs(sh)) * r + (aa + ab) * absr
    err1 = (aa * abs(sh) + ab * abs(ch)) * r + (aa + ab) * absr
    if scaled:
        h0, l0 = _two_sum(h0, l0)
        h1, l1 = _two_sum(h1, l1)
        p0, q0 = _dd_mul_fma(h0, l0, fh, fl)
        p1, q1 = _dd_mul_fma(h1, l1, fh, fl)
        g = 2.0**-102 + frel
        af = abs(fh)
        r0, ok0 = _round_certain(p0, q0, af * (err0 + abs(h0) * g) * (1.0 + 2.0**-50))
        r1, ok1 = _round_certain(p1, q1, af * (err1 + abs(h1) * g) * (1.0 + 2.0**-50))
        o0 = r0 * sc
        o1 = r1 * sc
        a0 = abs(o0)
        a1 = abs(o1)
        ok = ok0 & ok1 & (abs(h0) >= _MIN_D) & (abs(h1) >= _MIN_D) & (a0 >= _NORMAL_OUT) & (a1 >= _NORMAL_OUT) & (
            a0 <= _MAX_OUT) & (a1 <= _MAX_OUT)
    else:
        o0, ok0 = _round_certain(h0, l0, err0)
        o1, ok1 = _round_certain(h1, l1, err1)
        ok = ok0 & ok1
    return o0 + 0.0, o1 + 0.0, ok & in_range


@_inline
def _token_streams_golden(x, out, flags, bi, si, t, positions, stream_of_pair, entry_of_pair, limbs, chunks,
                          small_ok, fac, tail, frel, scaled, scale_tail, layout, scratch, tab):
    """One token of the golden stream rotation, x -> out; flags[bi, si, h, j] = 1 where out[.., j]
    needs the host. tab [16, P]: the quick phase's sh, sl, ch, cl (rows 0-3), the amplitude's fh,
    fl, 2**fe, fe, fd (4-8), 1.0 where the branch-free pass applies (9), ddmath's sh, sl, ch, cl
    (10-13), 1.0 once those are in (14), 1.0 where the quick cos/sin are valid (15), 1.0 where the
    amplitude makes every output of the pair certainly +0.0 (16)."""
    nh = x.shape[2]
    d = x.shape[3]
    pairs = stream_of_pair.shape[0]
    per_pair = fac.shape[1] > 1
    big = 0.0
    if scaled:  # the largest |x| of the token: amplitudes that make every output +0.0 (row 16)
        for h in range(nh):
            for j in range(d):
                big = max(big, abs(x[bi, si, h, j]))
    for i in range(pairs):  # the quick phase for every pair (branch-free; unusable ones flagged)
        m = positions[stream_of_pair[i], t]
        e = entry_of_pair[i]
        q, ah, al = _reduce_small(float(m), chunks[0, e], chunks[1, e], chunks[2, e], chunks[3, e], chunks[4, e])
        sh, sl, ch, cl = _sincos_quick(q, ah, al)
        # m = 0 (M-RoPE's text stream, an image's first row or column): cos 1, sin 0 exactly,
        # which the quick phase's error bound covers, so those pairs stay on the fast pass
        zm = m == 0
        tab[0, i] = 0.0 if zm else sh
        tab[1, i] = 0.0 if zm else sl
        tab[2, i] = 1.0 if zm else ch
        tab[3, i] = 0.0 if zm else cl
        good = (small_ok[e] & (m <= _SMALL_M) & (m >= -_SMALL_M) & (m != 0)) | zm
        tab[15, i] = 1.0 if good else 0.0
        if scaled:
            k = i if per_pair else 0
            fe = fac[t, k, 2]
            tab[4, i] = fac[t, k, 0]
            tab[5, i] = fac[t, k, 1]
            tab[7, i] = fe
            tab[8, i] = fac[t, k, 3]
            fine = (fe >= -1000.0) & (fe <= 1000.0)
            tab[6, i] = math.ldexp(1.0, np.int64(fe)) if fine else 0.0
            good = good & fine
            # |F (a c - b s)| <= 2**fe |fh| (|a| + |b|) <= 2**fe 4 big < 2**-1076 (big finite)
            zero = math.isfinite(big) and math.ldexp(4.0 * big, np.int64(min(max(fe + 1076.0, -3000.0), 3000.0))) < 1.0
            tab[16, i] = 1.0 if zero else 0.0
        tab[9, i] = 1.0 if good else 0.0
        tab[14, i] = 0.0
    for h in range(nh):
        if layout == 0:
            for i in range(pairs):
                o0, o1, ok = _pair_quick(x[bi, si, h, i], x[bi, si, h, i + pairs], tab[0, i], tab[1, i], tab[2, i],
                                         tab[3, i], _QUICK_REL, _QUICK_ABS, tab[4, i], tab[5, i], tab[6, i], frel,
                                         scaled)
                zero = tab[16, i] == 1.0
                out[bi, si, h, i] = 0.0 if zero else o0
                out[bi, si, h, i + pairs] = 0.0 if zero else o1
                flags[bi, si, h, i] = 0 if ((ok & (tab[9, i] == 1.0)) | zero) else 2
        else:
            for i in range(pairs):
                o0, o1, ok = _pair_quick(x[bi, si, h, 2 * i], x[bi, si, h, 2 * i + 1], tab[0, i], tab[1, i],
                                         tab[2, i], tab[3, i], _QUICK_REL, _QUICK_ABS, tab[4, i], tab[5, i],
                                         tab[6, i], frel, scaled)
                zero = tab[16, i] == 1.0
                out[bi, si, h, 2 * i] = 0.0 if zero else o0
                out[bi, si, h, 2 * i + 1] = 0.0 if zero else o1
                flags[bi, si, h, 2 * i] = 0 if ((ok & (tab[9, i] == 1.0)) | zero) else 2
        for i in range(pairs):  # the rest: ddmath's double-double cos/sin, every case handled
            if layout == 0:
                j0 = i
                j1 = i + pairs
            else:
                j0 = 2 * i
                j1 = 2 * i + 1
            if flags[bi, si, h, j0] != 2:
                continue
            k = i if per_pair else 0
            a = x[bi, si, h, j0]
            b = x[bi, si, h, j1]
            if tab[15, i] == 1.0:  # the quick cos/sin still apply (e.g. a subnormal or zero result)
                o0, o1, ok0, ok1 = _pair_golden(a, b, tab[0, i], tab[1, i], tab[2, i], tab[3, i], _QUICK_REL,
                                                _QUICK_ABS, fac[t, k, 0], fac[t, k, 1], fac[t, k, 2], fac[t, k, 3],
                                                frel, scaled)
                if ok0 and ok1:
                    out[bi, si, h, j0] = o0
                    out[bi, si, h, j1] = o1
                    flags[bi, si, h, j0] = 0
                    continue
            if tab[14, i] != 1.0:  # one call site of the (inlined) double-double path
                sh, sl, ch, cl, _ = _sincos_golden(positions[stream_of_pair[i], t], limbs, entry_of_pair[i], scratch)
                tab[10, i] = sh
                tab[11, i] = sl
                tab[12, i] = ch
                tab[13, i] = cl
                tab[14, i] = 1.0
            o0, o1, ok0, ok1 = _pair_golden(a, b, tab[10, i], tab[11, i], tab[12, i],
                                            tab[13, i], 0.0, 0.0, fac[t, k, 0], fac[t, k, 1], fac[t, k, 2],
                                            fac[t, k, 3], frel, scaled)
            out[bi, si, h, j0] = o0
            out[bi, si, h, j1] = o1
            flags[bi, si, h, j0] = 0 if ok0 else 1
            flags[bi, si, h, j1] = 0 if ok1 else 1
        for j in range(2 * pairs, d):
            if scale_tail:
                o, ok = _tail_golden(x[bi, si, h, j], tail[t, 0], tail[t, 1], tail[t, 2], tail[t, 3], frel)
                out[bi, si, h, j] = o
                flags[bi, si, h, j] = 0 if ok else 1
            else:
                out[bi, si, h, j] = x[bi, si, h, j]


def _build_golden(digest):
    """The golden kernel as a closure over the digest of the sources it inlines (cpu_kernels.py,
    ddmath.py): Numba's disk cache keys only on this file, see cpu_kernels._build."""

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def rotate_golden_kernel(x, out, flags, positions, stream_of_pair, entry_of_pair, limbs, chunks, small_ok,
                             fac, tail, frel, scaled, scale_tail, layout, first_token):
        """x, out float64 [b, s, h, d]; flags uint8 [b, s, h, d]; positions int64 [S, b*s];
        fac float64 [b*s, F, 4] (fh, fl, fe, fd; F = P or 1), tail [b*s, 4]; see above."""
        _digest = digest  # noqa: F841
        nb, ns, nh, d = x.shape
        pairs = stream_of_pair.shape[0]
        for t in numba.prange(nb * ns):
            bi = t // ns
            si = t % ns
            if si < first_token:
                for h in range(nh):
                    for j in range(d):
                        out[bi, si, h, j] = x[bi, si, h, j]
                continue
            scratch = np.empty(_ck._MAX_LIMBS, dtype=np.uint64)
            tab = np.zeros((17, pairs))
            _token_streams_golden(x, out, flags, bi, si, t, positions, stream_of_pair, entry_of_pair, limbs,
                                  chunks, small_ok, fac, tail, frel, scaled, scale_tail, layout, scratch, tab)

    return rotate_golden_kernel


def _digest():
    import hashlib
    import pathlib

    from . import ddmath

    h = hashlib.sha256()
    for mod in (ddmath, _ck):
        h.update(pathlib.Path(mod.__file__).read_bytes())
    return h.hexdigest()


rotate_golden_kernel = _build_golden(_digest())


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of an input: Numba compiles one specialisation per writability of each
    array, and the golden kernel takes about 100 s to compile; a stored case's arrays are read-only
    where a fresh one's are not, so every input is handed over read-only (no copy)."""
    view = a.view()
    view.setflags(write=False)
    return view


def rotate_golden(x, positions, stream_of_pair, entry_of_pair, limbs, layout, *, factors=None, frel=0.0,
                  tail=None, first_token=0):
    """(out, flags): the golden rotation of x (validated float64 C-order [b, s, h, d], only read)
    into a new array, and uint8 flags [b, s, h, d], 1 where the output is not certified (the
    caller settles it in mpmath). positions int [S, b, s]; limbs: the table's (phase.py);
    factors: None or float64 [b, s, F, 4] (F = P or 1) rows (fh, fl, fe, fd) with F = 2**fe (fh + fl)
    to within frel relative (see the block comment); tail: None (copied) or [b, s, 4] likewise."""
    nb, ns, nh, d = x.shape
    out = np.empty_like(x)
    flags = np.zeros(x.shape, dtype=np.uint8)
    if x.size == 0:
        return out, flags
    tokens = nb * ns
    pairs = len(stream_of_pair)
    lim = np.ascontiguousarray(limbs, dtype=np.uint64)
    chunks, exact_rows = _ck._small_chunks(lim)
    small_ok = np.ones(lim.shape[0], dtype=np.bool_)
    small_ok[exact_rows] = False
    pos = np.ascontiguousarray(positions, dtype=np.int64).reshape(len(positions), tokens)
    # unscaled: fac and tail are never read, but every token's row must exist for the indexing
    fac = (np.ascontiguousarray(factors, dtype=np.float64).reshape(tokens, -1, 4) if factors is not None
           else np.zeros((tokens, 1, 4)))
    g = np.ascontiguousarray(tail, dtype=np.float64).reshape(tokens, 4) if tail is not None else np.zeros((tokens, 4))
    if factors is not None and fac.shape[1] not in (1, pairs):
        raise ValueError(f"factors: {fac.shape[1]} amplitudes per token for {pairs} pairs")
    work = 4 * x.size + 64 * tokens * pairs
    inputs = [x, pos, np.ascontiguousarray(stream_of_pair, dtype=np.int64),
              np.ascontiguousarray(entry_of_pair, dtype=np.int64), lim, chunks, small_ok, fac, g]
    x, pos, streams, entries, lim, chunks, small_ok, fac, g = (_read_only(a) for a in inputs)
    run_kernel(rotate_golden_kernel, work, x, out, flags, pos, streams, entries, lim, chunks, small_ok, fac, g,
               float(frel), factors is not None, tail is not None, np.int64(0 if layout == "half" else 1),
               np.int64(first_token))
    return out, flags
