"""Frequency tables and the accurate phase m * theta for any positional-encoding family.

A *frequency table* is a list of angular frequencies theta_0..theta_(n-1) (radians per unit
position), known to high precision. Everything that turns a vector by m * theta (RoPE, its scaled
variants, sinusoidal tables, xPos, 2-D RoPE) needs cos and sin of that angle for integer
positions m; this module computes them once for all families, exactly reduced, in two modes:

- ``mode="fast"`` (default): within 1 ulp of the exact value measured, 1.5 ulp enforced by tests;
- ``mode="golden"``: the correctly rounded value (the float64 nearest to the exact real).

API (shapes in the docstrings):

- ``table_from_mp(key, values)``: build (once per key) a ``FrequencyTable`` from a callable
  ``values(prec_bits)`` returning mpmath.mpf frequencies, evaluated under
  ``mpmath.workprec(prec_bits)``.
- ``ladder(rotary_dim, base)``: the RoPE ladder theta_i = base**(-2i/r) as such a table
  (RoFormer, arXiv 2104.09864, eq. 15).
- ``cos_sin_table(positions, table, *, backend, mode)``: (cos, sin) float64 [..., n].
- ``rotate_table(x, positions, table, *, layout, rotary_dim, backend, mode)``: rotate the pairs of
  x [batch, seq, heads, head_dim] by a table with n == rotary_dim // 2.

The golden building blocks, for a family whose formula puts more around the rotation (an
amplitude, a score, a gradient) and rounds its own results:

- ``to_double(x)``: the float64 nearest to an mpf;
- ``settle(compute)``: Ziv's loop, the nearest double to a real known to within a bound;
- ``exact_cos_sin(table, m, i, prec)``: mpf cos and sin of m * theta_i with an error bound;
- ``rounded_factors(factor, flat, pairs)``: fast mode's amplitudes, rounded once.

Supported range (documented limits, refused with ``ValueError`` outside): frequencies in
[2**-64, 2**20], positions |m| <= 2**53.

How a table is stored (one mpmath evaluation at ``PREC_BITS`` bits per table, cached per key):

- ``hi``, ``lo``: the double-double theta (hi correctly rounded);
- ``limbs``: v = 2 theta / pi (quarter turns per position) in fixed point, uint64 [n, 1 + F]
  of 32-bit limbs (integer limb, F fractional limbs, truncated), for the Numba kernels
  (ddmath.py, Payne-Hanek reduction with integers);
- ``chunks``: the same v as float64 [K, n] chunks of at most 26 significant bits each, for the
  NumPy twin (numpy_twin.py, exact float products and an error-free summation);
- F, K and the twin's summation depth are chosen per table from the continued fraction of each
  v_i: the smallest |m v_i mod 1| over 1 <= |m| <= 2**53 is reached at a convergent denominator
  (best-approximation theorem, e.g. Khinchin, "Continued Fractions", thm. 16-17), ``min_gap``.
  Both representations are made accurate enough that their truncation error, times 2**53, stays
  below 2**-116 of that gap: the reduced angle then has a relative error below 2**-100 for every
  accepted position, including those that land next to a zero of cos or sin.

Golden mode rounds each double-double result once and checks that the rounding is certain
(Ziv's test against the documented error bound). The rare uncertain values (an exact result
within about 2**-96 relative of a rounding boundary, or apply inputs beyond [2**-800, 2**990]) are
recomputed here in mpmath with increasing precision, so every golden output is the nearest
double.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import mpmath
import numpy as np

from . import numpy_twin
from .layouts import _rotate_in_place, pair_indices
from .validate import (
    MAX_ABS_POSITION,
    as_x,
    check_backend,
    check_base,
    check_layout,
    check_mode,
    check_positions,
    check_rotary_dim,
    resolve_rotary_dim,
)

__all__ = [
    "FrequencyTable",
    "MAX_FREQUENCY",
    "MIN_FREQUENCY",
    "MODES",
    "cos_sin_table",
    "exact_cos_sin",
    "ladder",
    "rotate_table",
    "rounded_factors",
    "rotate_streams",
    "rotate_streams_mpmath",
    "scaled_cos_sin",
    "scaled_rotate",
    "scaled_rotate_mpmath",
    "settle",
    "stream_cos_sin",
    "table_from_mp",
    "to_double",
]

MODES = ("fast", "golden")
# Working precision of a table's mpmath evaluation: v_i needs 32 * F + 20 bits (F <= 15).
PREC_BITS = 576
MAX_FREQUENCY = 2.0**20
MIN_FREQUENCY = 2.0**-64
# Truncation error of the stored v_i, times max |m|, is kept below 2**-MARGIN_BITS * min_gap.
MARGIN_BITS = 116
MIN_FRAC_LIMBS = 7
MAX_FRAC_LIMBS = 15  # ddmath.MAX_FRAC_LIMBS (ddmath is not imported here: it pulls in mpmath
# tables only, but keeping phase free of the Numba side keeps imports light)
MIN_TURN_CHUNKS = 6
MAX_TURN_CHUNKS = 16  # the twin sums 2 K <= 32 terms (numpy_twin's exact-sum precondition)
_CHUNK_BITS = 26
_CACHE_SIZE = 256


class FrequencyTable:
    """A read-only table of n frequencies theta_i > 0 (radians per unit position).

    Attributes (arrays are read-only):
      key: the cache key it was built under.
      count: n.
      hi, lo: float64 [n]; hi is theta_i correctly rounded, hi + lo equals it to ~2**-106.
      limbs: uint64 [n, 1 + frac_limbs]: 2 theta_i / pi in 32-bit fixed-point limbs.
      chunks: float64 [turn_chunks, n]: 2 theta_i / pi in chunks of <= 26 significant bits.
      frac_limbs, turn_chunks, sum_levels: sizes chosen from min_gap (see the module docstring).
      min_gap: float64 [n]: min over 1 <= |m| <= 2**53 of |m * 2 theta_i / pi - nearest integer|.
    """

    def __init__(self, key, values, arrays, sizes):
        self.key = key
        self._values = values
        self.hi, self.lo, self.limbs, self.chunks, self.min_gap = arrays
        self.frac_limbs, self.turn_chunks, self.sum_levels = sizes
        self.count = int(self.hi.shape[0])
        self._mp_cache = {}
        self._lock = threading.Lock()

    def __repr__(self):
        return f"FrequencyTable(key={self.key!r}, count={self.count})"

    def mp_values(self, prec):
        """The frequencies as mpf at ``prec`` bits (re-evaluated from the callable, cached)."""
        with self._lock:
            if prec not in self._mp_cache:
                with mpmath.workprec(prec):
                    self._mp_cache[prec] = [mpmath.mpf(v) for v in self._values(prec)]
            return self._mp_cache[prec]


_cache: OrderedDict = OrderedDict()
_cache_lock = threading.Lock()


def table_from_mp(key: Hashable, values: Callable) -> FrequencyTable:
    """The ``FrequencyTable`` for ``key``, built from ``values`` on first use and cached.

    key: any hashable that identifies the frequencies (two calls with the same key return the
    same table without calling ``values`` again). values: callable(prec_bits) -> sequence of
    mpmath.mpf (or anything mpmath.mpf accepts), evaluated under mpmath.workprec(prec_bits) and
    accurate to that precision; each must lie in [MIN_FREQUENCY, MAX_FREQUENCY] = [2**-64, 2**20].
    Errors: ``ValueError("key: ...")`` for an unhashable key, ``ValueError("values: ...")`` for
    bad frequencies.
    """
    try:
        hash(key)
    except TypeError:
        raise ValueError(f"key: must be hashable, got {type(key).__name__}") from None
    if not callable(values):
        raise ValueError(f"values: must be a callable(prec_bits) -> list of mpf, got {values!r}")
    with _cache_lock:
        table = _cache.get(key)
        if table is not None:
            _cache.move_to_end(key)
            return table
    table = _build(key, values)
    with _cache_lock:
        _cache[key] = table
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return table


def ladder(rotary_dim, base=10000.0) -> FrequencyTable:
    """The RoPE ladder theta_i = base**(-2i/r), i = 0..r/2-1 (RoFormer eq. 15), base taken exactly.

    rotary_dim: positive even integer; base: a real in [1, 2**64] (see validate.check_base).
    """
    r = check_rotary_dim(rotary_dim)
    b = check_base(base)

    def values(prec):
        bm = mpmath.mpf(b)
        rm = mpmath.mpf(r)
        return [bm ** (-(2 * i) / rm) for i in range(r // 2)]

    return table_from_mp(("rope.ladder", r, b), values)


# ---- building a table ---------------------------------------------------------------------


def _min_gap(v, n_max):
    """min over 1 <= m <= n_max of |m v - nint(m v)|, from the convergents of v (0 if v = p/q
    with q <= n_max). v: mpf > 0 at the current precision."""
    x = v
    a = mpmath.floor(x)
    p_prev, q_prev = 1, 0
    p, q = int(a), 1
    best = None
    while q <= n_max:
        qv = q * v
        gap = abs(qv - mpmath.nint(qv))
        best = gap if best is None else min(best, gap)
        frac = x - a
        if frac == 0:
            break
        x = 1 / frac
        a = mpmath.floor(x)
        ai = int(a)
        p_prev, p = p, ai * p + p_prev
        q_prev, q = q, ai * q + q_prev
    return best


def _as_mpf_list(raw):
    try:
        seq = list(raw)
    except TypeError:
        raise ValueError(f"values: must return a sequence of mpf, got {type(raw).__name__}") from None
    if not seq:
        raise ValueError("values: returned no frequencies")
    out = []
    for i, v in enumerate(seq):
        try:
            x = mpmath.mpf(v)
        except (TypeError, ValueError):
            raise ValueError(f"values: entry {i} is not a real number: {v!r}") from None
        if not mpmath.isfinite(x) or not (MIN_FREQUENCY <= x <= MAX_FREQUENCY):
            raise ValueError(
                f"values: entry {i} = {mpmath.nstr(x, 8)} is outside [2**-64, 2**20]"
            )
        out.append(x)
    return out


def _build(key, values):
    n_max = MAX_ABS_POSITION
    with mpmath.workprec(PREC_BITS):
        thetas = _as_mpf_list(values(PREC_BITS))
        n = len(thetas)
        quarter = 2 / mpmath.pi
        vs = [t * quarter for t in thetas]
        hi = np.array([float(t) for t in thetas], dtype=np.float64)
        lo = np.array([float(t - mpmath.mpf(h)) for t, h in zip(thetas, hi)], dtype=np.float64)
        gaps = []
        for i, v in enumerate(vs):
            g = _min_gap(v, n_max)
            if g == 0 or g < mpmath.mpf(2) ** -(32 * MAX_FRAC_LIMBS - 53 - MARGIN_BITS):
                raise ValueError(
                    f"values: entry {i} is (nearly) a rational multiple of pi/2: m * theta comes "
                    f"within {mpmath.nstr(g, 3)} quarter turns of a zero of cos/sin for some "
                    "|m| <= 2**53, beyond the supported accuracy"
                )
            gaps.append(g)
        # allowed absolute error of m * v for each entry, at the largest |m|
        allowed = [g * mpmath.mpf(2) ** -MARGIN_BITS for g in gaps]

        # Numba: F fractional limbs, truncated; error < 2**(-32 F) per unit of |m|.
        frac_limbs = MIN_FRAC_LIMBS
        while any(n_max * mpmath.mpf(2) ** (-32 * frac_limbs) > a for a in allowed):
            frac_limbs += 1
        scale = 2 ** (32 * frac_limbs)
        limbs = np.zeros((n, 1 + frac_limbs), dtype=np.uint64)
        for i, v in enumerate(vs):
            fixed = int(mpmath.floor(v * scale))
            for j in range(frac_limbs, -1, -1):
                limbs[i, j] = fixed & 0xFFFFFFFF
                fixed >>= 32
            assert fixed == 0  # v < 2**32: one integer limb suffices

        # NumPy twin: K chunks of 26 bits (each the remainder rounded), and sum levels.
        rests = list(vs)
        chunk_rows = []
        while True:
            row = []
            for i in range(n):
                with mpmath.workprec(_CHUNK_BITS):
                    c = +rests[i]
                row.append(float(c))
                rests[i] = rests[i] - c
            chunk_rows.append(row)
            k = len(chunk_rows)
            # half of the budget for the chunks' truncation, half for the summation
            if k >= MIN_TURN_CHUNKS and all(
                n_max * abs(r) <= a / 2 for r, a in zip(rests, allowed)
            ):
                break
            if k >= MAX_TURN_CHUNKS:
                raise ValueError(
                    "values: m * theta comes too close to a zero of cos/sin for some "
                    "|m| <= 2**53 (the NumPy twin would need more than 16 chunks)"
                )
        chunks = np.array(chunk_rows, dtype=np.float64)
        n_terms = 2 * chunks.shape[0]
        smallest = min(allowed) / 2
        sum_levels = 1
        while n_terms * mpmath.mpf(2) ** -(numpy_twin.level_bits(sum_levels) + 1) > smallest:
            sum_levels += 1
        min_gap = np.array([float(g) for g in gaps], dtype=np.float64)
    for arr in (hi, lo, limbs, chunks, min_gap):
        arr.setflags(write=False)
    return FrequencyTable(key, values, (hi, lo, limbs, chunks, min_gap), (frac_limbs, len(chunk_rows), sum_levels))


# ---- evaluating a table -------------------------------------------------------------------


def _check_table(table):
    if not isinstance(table, FrequencyTable):
        raise ValueError(f"table: must be a FrequencyTable (see table_from_mp), got {table!r}")
    return table


def cos_sin_table(positions, table, *, backend="cpu", mode="fast"):
    """(cos, sin) of m * theta_i, each float64 [..., n] for int positions [...] (|m| <= 2**53).

    fast: within 1 ulp of the exact value (measured; tests enforce 1.5 ulp). golden: the nearest
    double to the exact value. backend: "cpu" (Numba), "cuda" (numba.cuda or its simulator),
    "numpy" (the independent twin).
    """
    table = _check_table(table)
    m = check_positions(positions)
    backend = check_backend(backend)
    mode = check_mode(mode)
    return _cos_sin(m, table, backend, mode)


def _cos_sin(m, table, backend, mode):
    flat = m.reshape(-1)
    golden = mode == "golden"
    if backend == "numpy":
        c, s, flags = numpy_twin.cos_sin(flat, table, golden=golden)
    elif golden:
        c, s, flags = _kernels(backend).cos_sin_golden(flat, table.limbs)
    else:
        c, s = _kernels(backend).cos_sin_fast(flat, table.limbs)
        flags = None
    if flags is not None and flags.any():
        _fix_cos_sin(c, s, flags, flat, table)
    shape = m.shape + (table.count,)
    return c.reshape(shape), s.reshape(shape)


def rotate_table(x, positions, table, *, layout, rotary_dim=None, backend="cpu", mode="fast"):
    """Turn pair i of x by m * theta_i: (a, b) -> (a cos - b sin, a sin + b cos).

    x: [batch, seq, heads, head_dim], any real dtype (converted to float64 exactly; NaN and Inf
    propagate). positions: int [batch, seq]. layout: "half" or "interleaved" (layouts.py).
    rotary_dim: None means head_dim; the table must have rotary_dim // 2 entries; elements past
    rotary_dim are copied bit for bit. Returns a new float64 array shaped like x.
    fast: within (2 kappa + 2)(1 + 2**-50) ulps of the pair norm sqrt(a**2 + b**2), proven given
    cos/sin within kappa ulps (kappa = 1 measured on the CPU: 4 pair-ulps). golden: each output
    is the float64 nearest to the exact a cos - b sin (resp. a sin + b cos).
    """
    table = _check_table(table)
    out = as_x(x)
    r = resolve_rotary_dim(rotary_dim, out.shape[3])
    layout = check_layout(layout)
    m = check_positions(positions, out.shape[:2])
    backend = check_backend(backend)
    mode = check_mode(mode)
    if table.count != r // 2:
        raise ValueError(f"table: has {table.count} frequencies, rotary_dim {r} needs {r // 2}")
    return _rotate(out, m, table, r, layout, backend, mode, shared=True)


def _rotate(out, m, table, r, layout, backend, mode, *, shared=False):
    """The rotation of ``out`` (validated float64 C-order), returned as an array shaped like it.

    shared=False: ``out`` is the caller's private copy and may be overwritten (the numpy and
    cuda backends rotate it in place). shared=True: ``out`` may be the user's own array and is
    never written. The cpu backend always reads ``out`` and writes a new array in one pass.
    """
    if out.size == 0:
        return out.copy() if shared else out
    code = 0 if layout == "half" else 1
    if backend == "cpu":
        kernels = _kernels(backend)
        if mode == "fast":
            return kernels.apply_fast(out, m, table.limbs, code)
        rotated, flags = kernels.apply_golden(out, m, table.limbs, code)
        if flags.any():
            _fix_rotate(rotated, out, flags, m, table, r, layout)
        return rotated
    if shared:
        out = out.copy()
    if mode == "fast":
        if backend == "numpy":
            c, s, _ = numpy_twin.cos_sin(m.reshape(-1), table)
            shape = m.shape + (table.count,)
            return _rotate_in_place(out, c.reshape(shape), s.reshape(shape), r, layout)
        return _kernels(backend).apply_fast(out, m, table.limbs, code)
    original = out.copy()
    if backend == "numpy":
        flags = numpy_twin.rotate_golden(out, m, table, r, layout)
    else:
        out, flags = _kernels(backend).apply_golden(out, m, table.limbs, code)
    if flags.any():
        _fix_rotate(out, original, flags, m, table, r, layout)
    return out


def _kernels(backend):
    """The kernel module of a Numba backend, imported on first use (numba start-up cost: importing
    reference.numerics.phase compiles nothing and never imports numba.cuda)."""
    if backend == "cpu":
        from . import cpu_kernels  # numba start-up: imported on first use

        return cpu_kernels
    from . import cuda_kernels  # numba start-up: imported on first use

    return cuda_kernels


# ---- the exact last resort of golden mode -------------------------------------------------

_ZIV_PRECISIONS = (192, 384, 768, 1536, 3072)


def to_double(x) -> float:
    """The float64 nearest to the real x (an mpf): IEEE 754 round to nearest, ties to even.

    Contract: correctly rounded at every magnitude; below 2**-1022 the value is rounded once, in
    fixed point at 2**-1074 (gradual underflow, no double rounding); +-inf where x rounds to
    2**1024 or beyond; 0.0 for x == 0 (the sign of a zero is not kept). It does not depend on the
    mpmath working precision in force. Independent of golden.certify.nearest_double on purpose
    (which the oracles use): it rounds with mpmath's own 53-bit rounding instead.
    """
    if x == 0:
        return 0.0
    ax = abs(x)
    if ax >= mpmath.mpf(2) ** -1022:
        with mpmath.workprec(53):
            r = +x  # mpmath rounds to nearest, ties to even
        if abs(r) >= mpmath.mpf(2) ** 1024:
            return math.copysign(math.inf, float(mpmath.sign(x)))
        return float(r)
    # ldexp only shifts the exponent (no rounding); nint then rounds once, ties to even
    k = mpmath.nint(mpmath.ldexp(x, 1074))
    return math.ldexp(int(k), -1074)


def settle(compute) -> float:
    """The float64 nearest to an exact real y, by Ziv's rounding test (Ziv 1991, "Fast evaluation
    of elementary mathematical functions with correctly rounded last bit").

    compute: callable(prec) -> (value, err), both mpf, with |value - y| <= err, evaluated at
    about ``prec`` bits (it is called under mpmath.workprec(prec + 16)). For prec = 192, 384, ...,
    3072 in turn, the first time ``to_double(value - err) == to_double(value + err)`` the common
    rounding is returned: it is then certainly the nearest double to y. If no precision settles
    (y exactly on a rounding boundary), ``to_double(value)`` at 3072 bits, the best available.
    """
    r = 0.0
    for prec in _ZIV_PRECISIONS:
        with mpmath.workprec(prec + 16):
            value, err = compute(prec)
            lo_r = to_double(value - err)
            hi_r = to_double(value + err)
            r = to_double(value)
        if lo_r == hi_r:
            return r
    return r  # an exact result on a rounding boundary (or zero): the best available


def exact_cos_sin(table, m, i, prec):
    """(cos, sin, err): mpf cos(m theta_i) and sin(m theta_i) and an absolute bound err on the
    error of each, for the ``FrequencyTable`` table, an int position m and a pair i in
    range(table.count).

    theta_i is the table's frequency re-evaluated at ``prec`` bits (``FrequencyTable.mp_values``,
    cached per precision); err = (|m theta_i| + 1) 2**(8 - prec) covers the rounding of theta_i,
    the product and mpmath's cos and sin. Call it under mpmath.workprec(prec + 16) or more (as
    the compute of ``settle`` is): the building block of every golden value past the kernels.
    """
    theta = table.mp_values(prec)[i]
    ang = m * theta
    err = (abs(ang) + 1) * mpmath.mpf(2) ** (8 - prec)
    return mpmath.cos(ang), mpmath.sin(ang), err


def _fix_cos_sin(c, s, flags, flat, table):
    for t, i in zip(*np.nonzero(flags)):
        m = int(flat[t])

        def cos_of(prec, m=m, i=i):
            cv, _, err = exact_cos_sin(table, m, int(i), prec)
            return cv, err

        def sin_of(prec, m=m, i=i):
            _, sv, err = exact_cos_sin(table, m, int(i), prec)
            return sv, err

        c[t, i] = settle(cos_of)
        s[t, i] = settle(sin_of)


def _fix_rotate(out, original, flags, m, table, r, layout):
    half = r // 2
    for bi, si, h, i in zip(*np.nonzero(flags)):
        j0, j1 = (i, i + half) if layout == "half" else (2 * i, 2 * i + 1)
        a = float(original[bi, si, h, j0])
        b = float(original[bi, si, h, j1])
        if not (math.isfinite(a) and math.isfinite(b)):
            continue  # non-finite inputs are never flagged; kept for safety
        pos = int(m[bi, si])

        def first(prec, a=a, b=b, pos=pos, i=i):
            cv, sv, err = exact_cos_sin(table, pos, int(i), prec)
            return mpmath.mpf(a) * cv - mpmath.mpf(b) * sv, (abs(a) + abs(b)) * err

        def second(prec, a=a, b=b, pos=pos, i=i):
            cv, sv, err = exact_cos_sin(table, pos, int(i), prec)
            return mpmath.mpf(a) * sv + mpmath.mpf(b) * cv, (abs(a) + abs(b)) * err

        out[bi, si, h, j0] = settle(first)
        out[bi, si, h, j1] = settle(second)



# ---- an amplitude on the rotation (scaled RoPE's attention factor, Gaussian-kernel RoPE) -----


def scaled_cos_sin(m, table, factor, backend, mode):
    """(f cos, f sin) of m * theta_i for an amplitude f = factor(prec, m, i) (an mpf; it may depend
    on the position m and the pair i, see ``scaled_rotate``).

    fast: the fast cos/sin times float64(f) (within 1.5 ulp more). golden: each value the nearest
    double to the exact f cos (f sin), evaluated here in mpmath (Ziv's loop)."""
    flat = m.reshape(-1)
    if mode == "fast":
        f = rounded_factors(factor, flat, table.count).reshape(m.shape + (table.count,))
        c, s = _cos_sin(m, table, backend, "fast")
        return c * f, s * f
    c = np.empty((flat.size, table.count))
    s = np.empty_like(c)
    for t in range(flat.size):
        for i in range(table.count):
            c[t, i] = settle(_scaled(factor, table, int(flat[t]), i, 1, 0))
            s[t, i] = settle(_scaled(factor, table, int(flat[t]), i, 0, 1))
    shape = m.shape + (table.count,)
    return c.reshape(shape), s.reshape(shape)


def stream_cos_sin(streams, table, backend="cpu"):
    """(cos, sin [S, U, n], index [S, ...]): the fast cos/sin of each stream's distinct positions
    (stream_kernels.stream_tables), as ``scaled_rotate`` and ``rotate_streams`` use them on the cpu
    backend; a caller rotating several tensors at the same positions computes them once."""
    from . import stream_kernels  # numba start-up: imported on first use

    return stream_kernels.stream_tables(streams, lambda p: _cos_sin(p, table, backend, "fast"))


def scaled_rotate(out, m, table, factor, r, layout, backend, mode, *, scale_tail=False, per_pair=True,
                  fast_factors=None, tables=None, golden_factors=None):
    """f times the rotation of ``_rotate``, f = factor(prec, m, i) an mpf amplitude per position m
    and pair i (i None: the tail). The tail past r is copied as is, or (scale_tail) multiplied by
    factor(prec, m, None) (Gaussian-kernel RoPE scales the whole vector, an attention factor only
    cos and sin, xPos each pair by its own zeta_i). golden: every output the nearest double to
    the exact product, subnormals included; ``out`` is written in place and returned.

    fast: each output the fast rotation (a c - b s, a s + b c) times float64(f), the amplitude
    rounded once (the same operations whatever the backend). per_pair=False declares that f
    depends on the position only (the same for every pair and the tail): it is then rounded once
    per distinct position. fast_factors: None, or a callable(flat int64 positions) -> float64
    [n] (per_pair=False) or [n, r/2], the rounded amplitudes, for a family that computes them
    faster than one mpmath call per position. The cpu backend reads ``out`` once and returns a
    new array (stream_kernels.rotate: one pass; ``tables``: ``stream_cos_sin(m[None], table)``
    if the caller has it already); the others rotate ``out`` in place.

    golden on the cpu backend: stream_kernels.rotate_golden (a double-double quick phase, each
    output rounded once and certified by Ziv's test, the rest settled in mpmath), into a new array;
    the amplitudes as ``dd_factors`` gives them, or golden_factors(flat int64 positions) ->
    (float64 [n, F, 4], frel), F = r/2 or 1, rows (fh, fl, fe, fd) as ``dd_factor``'s within frel
    relative, for a family that computes them faster. The other backends: ``scaled_rotate_mpmath``.
    """
    m = np.asarray(m)
    if mode == "fast":
        flat = m.reshape(-1)
        if fast_factors is not None:
            f = np.asarray(fast_factors(flat), dtype=np.float64)
        else:
            f = rounded_factors(factor, flat, r // 2, per_pair=per_pair)
        f = f.reshape(m.shape + ((r // 2,) if per_pair else ()))
        tail = None
        if scale_tail and out.shape[3] > r:
            tail = f if not per_pair else rounded_factors(
                lambda prec, p, i: factor(prec, p, None), flat, 1, per_pair=False).reshape(m.shape)
        if backend == "cpu" and out.size:
            from . import stream_kernels  # numba start-up: imported on first use

            c, s, index = tables if tables is not None else stream_cos_sin(m[None], table, backend)
            pairs = r // 2
            return stream_kernels.rotate(out, c, s, index, np.zeros(pairs, dtype=np.int64), np.arange(pairs),
                                         layout, factor=f, tail=tail)
        rotated = _rotate(out, m, table, r, layout, backend, "fast")
        first, second = pair_indices(r, layout)
        g = f[:, :, None, :] if per_pair else f[:, :, None, None]
        rotated[..., first] *= g
        rotated[..., second] *= g
        if tail is not None:
            rotated[..., r:] *= tail[:, :, None, None]
        return rotated
    if backend == "cpu" and out.size:
        return _scaled_rotate_golden_cpu(out, m, table, factor, r, layout, scale_tail, per_pair, golden_factors)
    return scaled_rotate_mpmath(out, m, table, factor, r, layout, backend, scale_tail=scale_tail)


def scaled_rotate_mpmath(out, m, table, factor, r, layout, backend, *, scale_tail=False):
    """Golden ``scaled_rotate`` evaluated value by value in mpmath (Ziv's loop): the path of the
    numpy and cuda backends, and the oracle the cpu quick phase is tested against. ``out`` is
    written in place and returned."""
    half = r // 2
    for bi, si, h in np.ndindex(out.shape[0], out.shape[1], out.shape[2]):
        pos = int(m[bi, si])
        for i in range(half):
            j0, j1 = (i, i + half) if layout == "half" else (2 * i, 2 * i + 1)
            a, b = float(out[bi, si, h, j0]), float(out[bi, si, h, j1])
            if not (math.isfinite(a) and math.isfinite(b)):
                c, s = _cos_sin(np.array([pos]), table, backend, "golden")
                f = to_double(factor(PREC_BITS, pos, i))
                out[bi, si, h, j0], out[bi, si, h, j1] = f * (a * c[0, i] - b * s[0, i]), f * (a * s[0, i] + b * c[0, i])
                continue
            out[bi, si, h, j0] = settle(_scaled(factor, table, pos, i, a, -b))
            out[bi, si, h, j1] = settle(_scaled(factor, table, pos, i, b, a))
        if scale_tail:
            for j in range(r, out.shape[3]):
                v = float(out[bi, si, h, j])
                out[bi, si, h, j] = (to_double(factor(PREC_BITS, pos, None)) * v if not math.isfinite(v)
                                     else settle(lambda prec, v=v, pos=pos: (factor(prec, pos, None) * mpmath.mpf(v),
                                                                              abs(v) * mpmath.mpf(2) ** (8 - prec))))
    return out



# Relative error of an amplitude handed to the golden kernel by ``dd_factors``: fh + fl is the
# double-double nearest to F 2**-fe, within 2**-106 relative (plus the 576-bit evaluation's own).
DD_FACTOR_REL = 2.0**-104


def dd_factor(value):
    """(fh, fl, fe, fd) for a real F (an mpf): F = 2**fe (fh + fl) with 1 <= |fh| <= 2 and
    |fh + fl - F 2**-fe| <= 2**-106 |F 2**-fe| (fe an integer, as float64, any size: F need not be
    representable as a double), and fd = to_double(F). F = 0: all zeros."""
    if value == 0:
        return 0.0, 0.0, 0.0, 0.0
    _, exp = mpmath.frexp(value)
    fe = int(exp) - 1
    y = mpmath.ldexp(value, -fe)
    fh = to_double(y)
    with mpmath.workprec(PREC_BITS):
        fl = to_double(y - mpmath.mpf(fh))
    return fh, fl, float(fe), to_double(value)


def dd_factors(factor, flat, pairs, *, per_pair=True) -> np.ndarray:
    """The amplitudes of golden mode on the cpu: float64 [n, pairs, 4] (per_pair=False: [n, 1, 4])
    of ``dd_factor(factor(PREC_BITS, m, i))`` (i None when not per_pair), factor evaluated once per
    distinct (m, i) as in ``rounded_factors``; relative error DD_FACTOR_REL."""
    values, inverse = np.unique(flat, return_inverse=True)
    cols = range(pairs) if per_pair else (None,)
    table = np.array([[dd_factor(factor(PREC_BITS, p, i)) for i in cols] for p in values.tolist()],
                     dtype=np.float64).reshape(values.size, len(cols), 4)
    return table[inverse.reshape(-1)]


def _scaled_rotate_golden_cpu(x, m, table, factor, r, layout, scale_tail, per_pair, golden_factors):
    """Golden ``scaled_rotate`` on the cpu: stream_kernels.rotate_golden (a double-double quick
    phase, each output rounded once and certified), the uncertain outputs settled in mpmath."""
    from . import stream_kernels  # numba start-up: imported on first use

    flat = m.reshape(-1)
    pairs = r // 2
    if golden_factors is not None:
        fac, frel = golden_factors(flat)
    else:
        fac, frel = dd_factors(factor, flat, pairs, per_pair=per_pair), DD_FACTOR_REL
    fac = np.asarray(fac, dtype=np.float64).reshape(flat.size, -1, 4)
    tail = None
    if scale_tail and x.shape[3] > r:
        tail = fac[:, 0] if not per_pair else dd_factors(
            lambda prec, p, i: factor(prec, p, None), flat, 1, per_pair=False)[:, 0]
    res, flags = stream_kernels.rotate_golden(x, m[None], np.zeros(pairs, dtype=np.int64), np.arange(pairs),
                                              table.limbs, layout, factors=fac, frel=frel, tail=tail)
    if flags.any():
        first, second = pair_indices(r, layout)
        which = _column_pairs(first, second, x.shape[3])
        for bi, si, h, j in zip(*np.nonzero(flags)):
            pos = int(m[bi, si])
            i, side = which[j]
            if i < 0:
                v = float(x[bi, si, h, j])
                res[bi, si, h, j] = settle(lambda prec, v=v, pos=pos: (factor(prec, pos, None) * mpmath.mpf(v),
                                                                       abs(v) * mpmath.mpf(2) ** (8 - prec)))
                continue
            a, b = float(x[bi, si, h, first[i]]), float(x[bi, si, h, second[i]])
            u, v = (a, -b) if side == 0 else (b, a)
            res[bi, si, h, j] = settle(_scaled(factor, table, pos, int(i), u, v))
    return res


def _column_pairs(first, second, d):
    """[(pair, side)] per column j < d: side 0 for first[i], 1 for second[i]; (-1, -1) past them."""
    which = [(-1, -1)] * d
    for i, (j0, j1) in enumerate(zip(first, second)):
        which[int(j0)] = (i, 0)
        which[int(j1)] = (i, 1)
    return which


def rounded_factors(factor, flat, pairs, *, per_pair=True) -> np.ndarray:
    """The amplitudes of fast mode, each evaluated in mpmath at PREC_BITS and rounded once.

    factor: callable(prec, m, i) -> mpf, the amplitude at position m of pair i (None: the tail),
    as ``scaled_rotate`` takes it. flat: int64 positions [n]. Returns float64 [n, pairs] with
    entry [t, i] = to_double(factor(PREC_BITS, flat[t], i)), factor called once per distinct
    (m, i); per_pair=False: float64 [n], to_double(factor(PREC_BITS, flat[t], None)), once per
    distinct m. A family computing the same values faster (``scaled_rotate``'s fast_factors)
    must return exactly these.
    """
    values, inverse = np.unique(flat, return_inverse=True)
    if per_pair:
        per = [[to_double(factor(PREC_BITS, p, i)) for i in range(pairs)] for p in values.tolist()]
        table = np.array(per, dtype=np.float64).reshape(values.size, pairs)
    else:
        table = np.array([to_double(factor(PREC_BITS, p, None)) for p in values.tolist()], dtype=np.float64)
    return table[inverse.reshape(-1)]


def _scaled(factor, table, m, i, u, v):
    """compute(prec) for Ziv's loop: f (u cos + v sin) of m * theta_i, u and v exact doubles."""

    def compute(prec):
        cv, sv, err = exact_cos_sin(table, m, i, prec)
        f = factor(prec, m, i)
        return f * (mpmath.mpf(u) * cv + mpmath.mpf(v) * sv), abs(f) * (abs(u) + abs(v) + 1) * err * 2

    return compute


# ---- several position streams (M-RoPE's t, h, w; 2-D RoPE's x, y) ------------------------------


def rotate_streams(out, streams, stream_of_pair, entry_of_pair, table, layout, backend, mode, *, first_token=0):
    """Rotate pair i of ``out`` [batch, seq, heads, 2P] by m * theta_e with m the position of stream
    ``stream_of_pair[i]`` and e = ``entry_of_pair[i]`` a table entry: streams int [S, batch, seq].
    Tokens before ``first_token`` are left alone (CLS); elements past the 2P rotated ones too.
    fast: each stream's cos/sin table from the backend, picked per pair, a c - b s and a s + b c
    in float64; the cpu backend reads ``out`` once and returns a new array
    (stream_kernels.rotate: one pass), the others rotate ``out`` in place and return it.
    golden: every output the nearest double. On the cpu backend stream_kernels.rotate_golden
    (RoPE's golden quick phase and double-double path per pair, each output rounded once and
    certified by Ziv's test) writes a new array and the uncertain outputs are settled in mpmath;
    the others: ``rotate_streams_mpmath``, in place."""
    pairs = len(stream_of_pair)
    first, second = pair_indices(2 * pairs, layout)
    rows = slice(first_token, None)
    if mode == "fast":
        if backend == "cpu":
            from . import stream_kernels  # numba start-up: imported on first use

            c, s, index = stream_cos_sin(streams, table, backend)
            return stream_kernels.rotate(out, c, s, index, stream_of_pair, entry_of_pair, layout,
                                         first_token=first_token)
        cs = [_cos_sin(np.ascontiguousarray(s), table, backend, "fast") for s in streams]
        cos = np.stack([cs[s][0][..., e] for s, e in zip(stream_of_pair, entry_of_pair)], axis=-1)[:, rows, None, :]
        sin = np.stack([cs[s][1][..., e] for s, e in zip(stream_of_pair, entry_of_pair)], axis=-1)[:, rows, None, :]
        a, b = out[:, rows][..., first].copy(), out[:, rows][..., second].copy()
        out[:, rows, :, first] = a * cos - b * sin
        out[:, rows, :, second] = a * sin + b * cos
        return out
    if backend == "cpu" and out.size:
        from . import stream_kernels  # numba start-up: imported on first use

        res, flags = stream_kernels.rotate_golden(out, streams, stream_of_pair, entry_of_pair, table.limbs, layout,
                                                  first_token=first_token)
        if flags.any():
            which = _column_pairs(first, second, out.shape[3])
            for bi, si, h, j in zip(*np.nonzero(flags)):
                i, side = which[j]
                m, e = int(streams[stream_of_pair[i]][bi, si]), int(entry_of_pair[i])
                a, b = float(out[bi, si, h, first[i]]), float(out[bi, si, h, second[i]])
                u, v = (a, -b) if side == 0 else (b, a)
                res[bi, si, h, j] = settle(_scaled(_one, table, m, e, u, v))
        return res
    return rotate_streams_mpmath(out, streams, stream_of_pair, entry_of_pair, table, layout, first_token=first_token)


def _one(prec, m, i):
    """No amplitude."""
    return mpmath.mpf(1)


def rotate_streams_mpmath(out, streams, stream_of_pair, entry_of_pair, table, layout, *, first_token=0):
    """Golden ``rotate_streams`` evaluated value by value in mpmath (Ziv's loop): the path of the
    numpy and cuda backends, and the oracle the cpu quick phase is tested against; in place."""
    pairs = len(stream_of_pair)
    first, second = pair_indices(2 * pairs, layout)
    for bi, si, h in np.ndindex(out.shape[0], out.shape[1], out.shape[2]):
        if si < first_token:
            continue
        a_row, b_row = out[bi, si, h, first].copy(), out[bi, si, h, second].copy()
        for i in range(pairs):
            m, e = int(streams[stream_of_pair[i]][bi, si]), int(entry_of_pair[i])
            a, b = float(a_row[i]), float(b_row[i])
            out[bi, si, h, first[i]] = settle(_scaled(_one, table, m, e, a, -b))
            out[bi, si, h, second[i]] = settle(_scaled(_one, table, m, e, b, a))
    return out
