"""RoPE identities (RoFormer, arXiv 2104.09864, eqs. 15-16 and 34-37), checked on the reference.

Every check draws its inputs from a generator seeded by the identity's id, so a run is
reproducible, and measures its residual with the float64 reference (``reference.rope`` and
``reference.rope.decay``, whose functions are looked up as module attributes at call time, so
that a replaced function is what gets checked).

Error model behind the bounds (u = 2^-53, the float64 unit roundoff):

* ``cos_sin`` is accurate to about 1 ulp; we allow 1.5 ulp, i.e. a relative error of at most 3u
  in each of cos and sin (for |v| <= 1, 1 ulp <= 2u|v|).
* A rotated pair (a c - b s, a s + b c) then errs by at most 5u (|a c| + |b s|) <= 5u |(a, b)| per
  component (two products with 3u + u, one sum with u), so by at most 5 sqrt(2) u ~ 7.1u |(a, b)|
  as a vector. Over a whole vector: |fl(R x) - R x| <= 7.1u |x|.
* Dot products are summed with ``math.fsum`` (correctly rounded), so a dot product of computed
  factors adds at most 2u |q| |k| (one rounding per product, one for the sum).

Each docstring gives the residual's definition and the bound derived from these rules.
"""

from __future__ import annotations

import functools
import itertools
import math
import zlib

import numpy as np

from reference import rope
from reference.identities import register
from reference.numerics import rotation_backward
from reference.rope import LAYOUTS, backward, decay

U = 2.0 ** -53  # float64 unit roundoff

# (head_dim, rotary_dim, base, layout): Llama-2, Llama-3 (interleaved here, as in Meta's code),
# GPT-NeoX (25% partial, half), GPT-J (rotary 64 of head 256, interleaved), and Qwen2's base 1e6
# at head 96 (48 pairs, not a power of two).
CONFIGS = (
    (128, 128, 1e4, "half"),
    (128, 128, 5e5, "interleaved"),
    (64, 16, 1e4, "half"),
    (256, 64, 1e4, "interleaved"),
    (96, 96, 1e6, "half"),
)
SMALL_DIMS = (2, 4, 8, 16)
# Edges: 0, small, the float16 / float32 integer limits 2^11 and 2^24, and 2^16, 2^20.
EDGE_POSITIONS = (0, 1, 2, 3, 7, 2**11 - 1, 2**11, 2**11 + 1, 2**16, 2**20 + 1,
                  2**24 - 1, 2**24, 2**24 + 1)
MAX_POSITION = 2**24 + 1
MAX_SHIFT = 2**20
# apply is checked on the Numba CPU kernels and on the independent NumPy twin. The CUDA backend
# is left to reference.rope's own tests: under the simulator it would take minutes here.
APPLY_BACKENDS = ("cpu", "numpy")


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _positions(rng, count: int, high: int = MAX_POSITION) -> np.ndarray:
    """The edge positions up to ``high`` followed by ``count`` uniform draws in [0, high]."""
    edges = [p for p in EDGE_POSITIONS if p <= high]
    return np.concatenate([edges, rng.integers(0, high, size=count, endpoint=True)]).astype(np.int64)


def _apply(x, positions, rotary_dim, base, layout, backend="cpu"):
    """reference.rope.apply on x [n, head_dim] at positions [n] (one token per row, one head)."""
    n, head_dim = x.shape
    out = rope.apply(x.reshape(1, n, 1, head_dim), np.asarray(positions, np.int64).reshape(1, n),
                     rotary_dim=rotary_dim, base=base, layout=layout, backend=backend)
    return np.asarray(out, dtype=np.float64).reshape(n, head_dim)


def _pairs(x, rotary_dim, layout):
    """The rotary pairs of x [..., head_dim] as (first, second) arrays [..., r/2]."""
    h = rotary_dim // 2
    if layout == "half":
        return x[..., :h], x[..., h:rotary_dim]
    return x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]


def _dot(a, b) -> np.ndarray:
    """Row-wise dot products, each summed with math.fsum (correctly rounded)."""
    return np.array([math.fsum(row) for row in (a * b)])


# ---------------------------------------------------------------------------------------------
# Dense rotation matrices (small d)


def _matrices():
    """(layout, d, m, R_m) for small d, both layouts, edge and random positions up to 2^24."""
    rng = _rng("rope.matrices")
    for d in SMALL_DIMS:
        for layout in LAYOUTS:
            for m in _positions(rng, 8):
                yield layout, d, int(m), rope.rotation_matrix(int(m), d, 1e4, layout=layout)


@register(id="rope.orthogonality", bound=8 * U,
          statement="R_m^T R_m = I for the dense rotation (d = 2..16, both layouts, m up to 2^24)")
def orthogonality() -> float:
    """Residual: max_ij |(R_m^T R_m - I)_ij|.

    Bound 8u: a diagonal entry is c^2 + s^2 with c, s within 3u: each square errs by at most
    (6u + u) times itself and the sum adds u, so 7u (c^2 + s^2) + u = 8u. Off the diagonal the
    two products cancel up to one rounding (u/2). Zero entries of the dense matrix add nothing.
    """
    worst = 0.0
    for _, d, _, R in _matrices():
        worst = max(worst, float(np.max(np.abs(R.T @ R - np.eye(d)))))
    return worst


@register(id="rope.determinant", bound=6 * 16 * U,
          statement="det R_m = +1 (a proper rotation; d = 2..16, both layouts, m up to 2^24)")
def determinant() -> float:
    """Residual: max |det(R_m) - 1| with numpy's LU determinant.

    Bound 6 d u = 96u for d <= 16: each of the d/2 plane rotations has determinant c^2 + s^2 =
    1 +- 8u (see rope.orthogonality); LU with partial pivoting on a 2x2 rotation block adds at
    most about 4u more (one division, one product, one subtraction, the final product), so
    (d/2) * 12u = 6 d u.
    """
    worst = 0.0
    for _, _, _, R in _matrices():
        worst = max(worst, abs(float(np.linalg.det(R)) - 1.0))
    return worst


@register(id="rope.identity-at-zero", bound=0.0,
          statement="R_0 = I exactly: rotation_matrix(0) is the identity and apply at position 0 returns x unchanged")
def identity_at_zero() -> float:
    """Residual: max |R_0 - I| and max |apply(x, 0) - x| (cpu and numpy backends).

    Bound 0: cos 0 = 1 and sin 0 = 0 exactly, and a * 1 - b * 0 = a, a * 0 + b * 1 = b exactly in
    IEEE arithmetic for finite a, b, so nothing may round. Only the sign of a zero may change
    (a = b = -0.0 gives -0.0 - (-0.0) = +0.0), which is equal in value and not counted.
    """
    rng = _rng("rope.identity-at-zero")
    worst = 0.0
    for d in SMALL_DIMS + (128,):
        for layout in LAYOUTS:
            worst = max(worst, float(np.max(np.abs(rope.rotation_matrix(0, d, 1e4, layout=layout) - np.eye(d)))))
    for head_dim, rotary_dim, base, layout in CONFIGS:
        x = rng.standard_normal((16, head_dim))
        x[0, :] = -0.0
        for backend in APPLY_BACKENDS:
            out = _apply(x, np.zeros(16, np.int64), rotary_dim, base, layout, backend)
            worst = max(worst, float(np.max(np.abs(out - x))))
    return worst


def _bit_residual(out, expected) -> float:
    """0 when out and expected are bit-identical, else the largest difference (at least 2^-1074;
    infinity where a NaN appears on one side only or the NaN payloads differ)."""
    out = np.asarray(out, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if out.shape != expected.shape:
        return math.inf
    same = out.view(np.uint64) == expected.view(np.uint64)
    if np.all(same):
        return 0.0
    if np.any(np.isnan(out[~same]) | np.isnan(expected[~same])):
        return math.inf
    return max(float(np.max(np.abs(out[~same] - expected[~same]))), 2.0 ** -1074)


@register(id="rope.inverse", bound=6 * U,
          statement="R_{-m} = R_m^T (d = 2..16, both layouts, m up to 2^24)")
def inverse() -> float:
    """Residual: max_ij |R_{-m} - R_m^T|.

    Bound 6u: entries are +-cos(m theta_i) or +-sin(m theta_i), each within 3u of the exact value,
    and the exact entries of the two sides are equal (cos even, sin odd).
    """
    worst = 0.0
    for layout, d, m, R in _matrices():
        R_neg = rope.rotation_matrix(-m, d, 1e4, layout=layout)
        worst = max(worst, float(np.max(np.abs(R_neg - R.T))))
    return worst


@register(id="rope.composition", bound=11 * U,
          statement="R_m R_n = R_{m+n} (d = 2..16, both layouts, m, n up to 2^23)")
def composition() -> float:
    """Residual: max_ij |R_m R_n - R_{m+n}|.

    Bound 11u: a nonzero entry of the product is cos a cos b - sin a sin b (or the sine form): each
    product errs by at most 7u times itself (3u + 3u + u), and |cos a cos b| + |sin a sin b| <= 1,
    so 7u + u for the subtraction = 8u; R_{m+n} adds its own 3u. Zero entries add nothing.
    """
    rng = _rng("rope.composition")
    worst = 0.0
    for d in SMALL_DIMS:
        for layout in LAYOUTS:
            ms = _positions(rng, 6, high=2**23)
            ns = rng.permutation(_positions(rng, 6, high=2**23))
            for m, n in zip(ms.tolist(), ns.tolist()):
                R = rope.rotation_matrix
                lhs = R(m, d, 1e4, layout=layout) @ R(n, d, 1e4, layout=layout)
                worst = max(worst, float(np.max(np.abs(lhs - R(m + n, d, 1e4, layout=layout)))))
    return worst


@register(id="rope.matrix-form", bound=15 * U,
          statement="apply(x, m) = R_m x: the efficient form (RoFormer eq. 34) equals the dense rotation (eq. 15)")
def matrix_form() -> float:
    """Residual: max over pairs of |apply(x, m) - R_m x| / |x_pair| (Euclidean norms per pair).

    Bound 15u: both sides compute each pair from the same two inputs with two products and one
    sum (the dense matrix's zeros add exactly nothing), so each is within 7.1u |x_pair| of the
    exact rotation and their difference within 14.2u.
    """
    rng = _rng("rope.matrix-form")
    worst = 0.0
    for d in SMALL_DIMS + (64,):
        for layout in LAYOUTS:
            ms = _positions(rng, 8)
            x = rng.standard_normal((ms.size, d))
            dense = np.stack([rope.rotation_matrix(int(m), d, 1e4, layout=layout) @ row
                              for m, row in zip(ms, x)])
            for backend in APPLY_BACKENDS:
                out = _apply(x, ms, d, 1e4, layout, backend)
                worst = max(worst, _pair_relative(out - dense, x, d, layout))
    return worst


def _pair_relative(diff, x, rotary_dim, layout) -> float:
    """max over pairs of |diff_pair| / |x_pair|."""
    d0, d1 = _pairs(diff, rotary_dim, layout)
    x0, x1 = _pairs(x, rotary_dim, layout)
    return float(np.max(np.hypot(d0, d1) / np.hypot(x0, x1)))


# ---------------------------------------------------------------------------------------------
# apply on realistic configurations


@register(id="rope.norm-per-pair", bound=10 * U,
          statement="|RoPE(x, m)_pair| = |x_pair| for every rotated pair (5 model configs, m up to 2^24)")
def norm_per_pair() -> float:
    """Residual: max over pairs of | |out_pair| - |x_pair| | / |x_pair|.

    Bound 10u: the computed pair is within 7.1u |x_pair| of the exact rotation, whose norm is
    |x_pair|; each np.hypot adds at most about 1u.
    """
    rng = _rng("rope.norm-per-pair")
    worst = 0.0
    for (head_dim, rotary_dim, base, layout), backend in itertools.product(CONFIGS, APPLY_BACKENDS):
        ms = _positions(rng, 64)
        x = rng.standard_normal((ms.size, head_dim))
        out = _apply(x, ms, rotary_dim, base, layout, backend)
        o0, o1 = _pairs(out, rotary_dim, layout)
        x0, x1 = _pairs(x, rotary_dim, layout)
        norm_in = np.hypot(x0, x1)
        worst = max(worst, float(np.max(np.abs(np.hypot(o0, o1) - norm_in) / norm_in)))
    return worst


@register(id="rope.relative-position", bound=26 * U,
          statement="<R_m q, R_n k> = <q, R_{n-m} k> for |n - m| up to 2^20 (5 model configs, m, n up to 2^24)")
def relative_position() -> float:
    """Residual: max |<R_m q, R_n k> - <q, R_{n-m} k>| / (|q| |k|) (RoFormer eq. 16).

    Bound 26u: the left side has two rotated vectors (7.1u each) and an fsum dot (2u): 16.2u |q| |k|
    by Cauchy-Schwarz; the right side one rotated vector and one dot: 9.1u |q| |k|.
    Shifts n - m take both signs, so R_{n-m} is evaluated at negative positions too.
    """
    rng = _rng("rope.relative-position")
    worst = 0.0
    for (head_dim, rotary_dim, base, layout), backend in itertools.product(CONFIGS, APPLY_BACKENDS):
        m = _positions(rng, 96, high=2**24 - MAX_SHIFT)
        shift = rng.integers(-MAX_SHIFT, MAX_SHIFT, size=m.size, endpoint=True)
        shift[:6] = (0, 1, -1, MAX_SHIFT, -MAX_SHIFT, 4095)
        shift = np.where(m + shift < 0, -shift, shift)  # keep n >= 0; n - m still takes both signs
        n = m + shift
        q = rng.standard_normal((m.size, head_dim))
        k = rng.standard_normal((m.size, head_dim))
        rotate = functools.partial(_apply, rotary_dim=rotary_dim, base=base, layout=layout, backend=backend)
        lhs = _dot(rotate(q, m), rotate(k, n))
        rhs = _dot(q, rotate(k, n - m))
        scale = np.linalg.norm(q, axis=1) * np.linalg.norm(k, axis=1)
        worst = max(worst, float(np.max(np.abs(lhs - rhs) / scale)))
    return worst


@register(id="rope.layout-equivalence", bound=0.0,
          statement='RoPE_half(x[perm]) = RoPE_interleaved(x)[perm] bit for bit, perm = [0,2,..,r-2,1,3,..,r-1]')
def layout_equivalence() -> float:
    """Residual: largest difference between the two sides (0 when bit-identical).

    Bound 0: the permutation only reorders the pairs' storage. Both layouts compute every output
    element from the same two inputs and the same cos, sin with the same product-sum, so IEEE
    arithmetic gives identical bits. The check also pins layout_permutation to the formula above
    and leaves a partial-rotary tail in place.
    """
    rng = _rng("rope.layout-equivalence")
    worst = 0.0
    for (head_dim, rotary_dim, base, _), backend in itertools.product(CONFIGS, APPLY_BACKENDS):
        perm = np.asarray(rope.layout_permutation(rotary_dim))
        expected_perm = np.concatenate([np.arange(0, rotary_dim, 2), np.arange(1, rotary_dim, 2)])
        if perm.shape != expected_perm.shape or np.any(perm != expected_perm):
            return math.inf
        full = np.concatenate([perm, np.arange(rotary_dim, head_dim)])  # the tail stays put
        ms = _positions(rng, 64)
        x = rng.standard_normal((ms.size, head_dim))
        lhs = _apply(x[:, full], ms, rotary_dim, base, "half", backend)
        rhs = _apply(x, ms, rotary_dim, base, "interleaved", backend)[:, full]
        worst = max(worst, _bit_residual(lhs, rhs))
    return worst


@register(id="rope.complex-form", bound=15 * U,
          statement="apply_complex(x, m) = apply(x, m, layout=interleaved) and freqs_cis = cos + i sin (Meta form)")
def complex_form() -> float:
    """Residual: max of (a) max over pairs |apply_complex - apply| / |x_pair| and (b)
    max |freqs_cis - (cos + i sin)| from cos_sin.

    Bound 15u: (a) each side is within 7.1u |x_pair| of the exact rotation, so 14.2u apart;
    (b) both are within 3u per component of e^{i m theta}, so at most 6 sqrt(2) u ~ 8.5u apart.
    """
    rng = _rng("rope.complex-form")
    worst = 0.0
    for head_dim, rotary_dim, base, _ in CONFIGS:
        ms = _positions(rng, 64)
        x = rng.standard_normal((ms.size, head_dim))
        out_c = rope.apply_complex(x.reshape(1, ms.size, 1, head_dim), ms.reshape(1, -1),
                                   rotary_dim=rotary_dim, base=base)
        out_c = np.asarray(out_c, dtype=np.float64).reshape(ms.size, head_dim)
        out = _apply(x, ms, rotary_dim, base, "interleaved")
        worst = max(worst, _pair_relative(out_c - out, x, rotary_dim, "interleaved"))
        tail = _bit_residual(out_c[:, rotary_dim:], x[:, rotary_dim:])
        worst = max(worst, tail)
        cis = np.asarray(rope.freqs_cis(ms, rotary_dim, base))
        cos, sin = rope.cos_sin(ms, rotary_dim, base)
        worst = max(worst, float(np.max(np.abs(cis - (cos + 1j * sin)))))
    return worst


@register(id="rope.partial-rotary-tail", bound=0.0,
          statement="rotary_dim < head_dim: the tail x[..., r:] passes through bit for bit (float64/32/16 input, NaN, inf, -0.0)")
def partial_rotary_tail() -> float:
    """Residual: largest difference between out[..., r:] and x[..., r:] converted to float64.

    Bound 0: the tail is copied, never computed on, so its bits (signed zeros, infinities, NaNs,
    subnormals) must survive exactly. A NaN in the rotated part must not leak into the tail.
    """
    rng = _rng("rope.partial-rotary-tail")
    worst = 0.0
    shapes = ((64, 16), (256, 64), (80, 64), (8, 2))
    for (head_dim, rotary_dim), layout, dtype, backend in itertools.product(
            shapes, LAYOUTS, (np.float64, np.float32, np.float16), APPLY_BACKENDS):
        info = np.finfo(dtype)
        specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, info.smallest_subnormal,
                             -info.smallest_normal / 3, info.max], dtype=dtype)
        x = rng.standard_normal((2, 5, 3, head_dim)).astype(dtype)
        tail = x[..., rotary_dim:].reshape(-1)
        tail[: specials.size] = specials[: tail.size]
        x[..., rotary_dim:] = tail.reshape(x[..., rotary_dim:].shape)
        x[0, 0, 0, 0] = np.nan  # must stay inside the rotated part
        positions = np.stack([_positions(rng, 0)[:5], rng.integers(0, MAX_POSITION, 5)])
        out = rope.apply(x, positions, rotary_dim=rotary_dim, base=1e4, layout=layout, backend=backend)
        worst = max(worst, _bit_residual(np.asarray(out)[..., rotary_dim:],
                                         x[..., rotary_dim:].astype(np.float64)))
    return worst


# ---------------------------------------------------------------------------------------------
# RoFormer long-term decay (section 3.4.3, eqs. 35-37; reference/rope/decay.py)

DECAY_CONFIGS = ((128, 1e4), (64, 1e4), (128, 5e5))
DECAY_MAX_DIM = max(r for r, _ in DECAY_CONFIGS)


def _decay_inputs(name: str, rotary_dim: int, base: float):
    """Distances 0..1024, negatives, and log-spread ones up to 2^20; four random h per distance:
    complex normals, and h_i = q~_i conj(k~_i) from random q, k, some with decreasing |h_i|."""
    rng = _rng(f"{name}/{rotary_dim}/{base:g}")
    far = np.unique(np.round(np.exp(rng.uniform(np.log(1025), np.log(MAX_SHIFT), 256))))
    distance = np.concatenate([np.arange(0, 1025), far, -far[::16], [MAX_SHIFT, -MAX_SHIFT]]).astype(np.int64)
    half = rotary_dim // 2
    h = rng.standard_normal((distance.size, 4, half)) + 1j * rng.standard_normal((distance.size, 4, half))
    q = rng.standard_normal((distance.size, 2, rotary_dim))
    k = rng.standard_normal((distance.size, 2, rotary_dim))
    h[:, 2:] = decay.score_coefficients(q, k)
    h[:, 3] *= np.linspace(1.0, 0.0, half, endpoint=False)  # decreasing envelope: tighter bound
    return distance[:, None], h


def _decay_scale(h) -> np.ndarray:
    """sum_i |h_i| + sum_j j |h_j - h_{j-1}|: the magnitudes both sides of eq. 36 are built from."""
    steps = np.abs(np.diff(h, axis=-1, append=np.zeros_like(h[..., :1])))
    return np.sum(np.abs(h), axis=-1) + np.sum(np.arange(1, h.shape[-1] + 1) * steps, axis=-1)


@register(id="rope.abel-summation", bound=(DECAY_MAX_DIM + 4) * U,
          statement="sum_i h_i e^{i(m-n)theta_i} = -sum_i S_{i+1}(h_{i+1} - h_i) (RoFormer eq. 36; |m-n| up to 2^20)")
def abel_summation() -> float:
    """Residual: max |phase_sum - abel_sum| / (sum_i |h_i| + sum_j j |h_j - h_{j-1}|).

    Bound (r + 4)u with r = 128: the left side is r/2 products with phases within 3u, summed
    ((r/2 + 3)u sum_i |h_i|). On the right, S_j sums j unit phases: |dS_j| <= (j + 1) j u, and
    |S_j| <= j, so the sum of S_j (h_{j} - h_{j-1}) errs by at most (r + 4)u sum_j j |h_j - h_{j-1}|.
    """
    worst = 0.0
    for rotary_dim, base in DECAY_CONFIGS:
        distance, h = _decay_inputs("rope.abel-summation", rotary_dim, base)
        lhs = decay.phase_sum(h, distance, rotary_dim, base)
        rhs = decay.abel_sum(h, distance, rotary_dim, base)
        worst = max(worst, float(np.max(np.abs(lhs - rhs) / _decay_scale(h))))
    return worst


@register(id="rope.long-term-decay-bound", bound=(DECAY_MAX_DIM + 4) * U,
          statement="|sum_i h_i e^{i(m-n)theta_i}| and |<R_m q, R_n k>| <= max_i|h_{i+1}-h_i| sum_j |S_j| (eq. 37)")
def long_term_decay_bound() -> float:
    """Residual: the largest violation max(0, lhs - bound) / (sum_i |h_i| + sum_j j |h_j - h_{j-1}|),
    for random h at 1 300 distances, and for real RoPE scores computed with apply (interleaved,
    h = q~ conj(k~), m, n up to 2^24 with |m - n| up to 2^20).

    Bound (r + 4)u, r = 128: as for rope.abel-summation, each side is computed within that
    tolerance of its exact value, and the exact values satisfy lhs <= bound.
    """
    rng = _rng("rope.long-term-decay-bound")
    worst = 0.0
    for rotary_dim, base in DECAY_CONFIGS:
        distance, h = _decay_inputs("rope.long-term-decay-bound", rotary_dim, base)
        lhs = np.abs(decay.phase_sum(h, distance, rotary_dim, base))
        rhs = decay.abel_bound(h, distance, rotary_dim, base)
        worst = max(worst, float(np.max(np.maximum(lhs - rhs, 0.0) / _decay_scale(h))))

        n = _positions(rng, 256, high=2**24 - MAX_SHIFT)
        m = n + rng.integers(-MAX_SHIFT, MAX_SHIFT, size=n.size, endpoint=True)
        m = np.abs(m)
        q = rng.standard_normal((n.size, rotary_dim))
        k = rng.standard_normal((n.size, rotary_dim))
        score = _dot(_apply(q, m, rotary_dim, base, "interleaved"), _apply(k, n, rotary_dim, base, "interleaved"))
        hq = decay.score_coefficients(q, k)
        rhs = decay.abel_bound(hq, m - n, rotary_dim, base)
        worst = max(worst, float(np.max(np.maximum(np.abs(score) - rhs, 0.0) / _decay_scale(hq))))
    return worst


@register(id="rope.complex-score", bound=(DECAY_MAX_DIM // 2 + 22) * U,
          statement="<R_m q, R_n k> = Re sum_i q~_i conj(k~_i) e^{i(m-n)theta_i}, q~_i = q_2i + i q_2i+1 (eq. 35)")
def complex_score() -> float:
    """Residual: max |<R_m q, R_n k> - Re phase_sum(q~ conj(k~), m - n)| / (|q| |k|).

    Bound (r/2 + 22)u, r = 128: the score is within 16.2u |q| |k| (two rotations, fsum dot); the
    phase sum has r/2 complex products h_i e_i, each within about 5u |q~_i| |k~_i|, summed by
    numpy with at most (r/2)u growth, so (r/2 + 5)u sum_i |q~_i| |k~_i| <= (r/2 + 5)u |q| |k|.
    """
    rng = _rng("rope.complex-score")
    worst = 0.0
    for rotary_dim, base in DECAY_CONFIGS:
        n = _positions(rng, 256, high=2**24 - MAX_SHIFT)
        m = np.abs(n + rng.integers(-MAX_SHIFT, MAX_SHIFT, size=n.size, endpoint=True))
        q = rng.standard_normal((n.size, rotary_dim))
        k = rng.standard_normal((n.size, rotary_dim))
        score = _dot(_apply(q, m, rotary_dim, base, "interleaved"), _apply(k, n, rotary_dim, base, "interleaved"))
        form = decay.phase_sum(decay.score_coefficients(q, k), m - n, rotary_dim, base).real
        scale = np.linalg.norm(q, axis=1) * np.linalg.norm(k, axis=1)
        worst = max(worst, float(np.max(np.abs(score - form) / scale)))
    return worst


CURVE_DISTANCES = (0, 1, 2, 10, 50, 100, 250, 1000, 4096, 65536, 2**20)


def _curve_oracle(distance: int, rotary_dim: int, base: float) -> float:
    """(1/(r/2)) sum_j |S_j| in 40-digit mpmath, theta_i = base^(-2i/r) computed there too."""
    import mpmath

    with mpmath.workdps(40):
        total, s = mpmath.mpf(0), mpmath.mpc(0)
        for i in range(rotary_dim // 2):
            s += mpmath.expj(distance * mpmath.power(mpmath.mpf(base), mpmath.mpf(-2 * i) / rotary_dim))
            total += abs(s)
        return float(total / (rotary_dim // 2))


@register(id="rope.decay-curve", bound=(5 + (DECAY_MAX_DIM // 2 + 2) / 3) * U,
          statement="decay curve (1/(d/2)) sum_j |S_j| matches mpmath: 32.5 = (d/2+1)/2 at 0, 4.47 at 1000 (d=128, base 1e4)")
def decay_curve() -> float:
    """Residual: max |curve(dist) - oracle(dist)| / curve_exact(0) at 11 distances 0..2^20, for
    d = 128 and 64, base 1e4 and 5e5; the oracle sums the same series in 40-digit mpmath and
    curve_exact(0) = (d/2 + 1)/2 (|S_j| = j at distance 0).

    Bound (5 + (d/2 + 2)/3)u = 27u for d = 128: S_j (a running sum of j phases within 3u) errs by
    at most 3ju + u sum_{k<=j} |S_k| <= (3j + j(j+1)/2)u; averaging over j and dividing by the
    mean of j gives 3 + (d/2 + 2)/3, plus 2u for |.| and the mean.
    """
    worst = 0.0
    for rotary_dim, base in DECAY_CONFIGS:
        values = decay.relative_upper_bound(np.array(CURVE_DISTANCES), rotary_dim, base)
        at_zero = (rotary_dim // 2 + 1) / 2
        for dist, value in zip(CURVE_DISTANCES, values):
            worst = max(worst, abs(float(value) - _curve_oracle(dist, rotary_dim, base)) / at_zero)
    return worst


# The scaling types' identities live with them (reference/rope/scaling_identities.py).
from reference.rope import scaling_identities as _scaling_identities  # noqa: E402,F401


# ---------------------------------------------------------------------------------------------
# The backward pass (reference/rope/backward.py): the VJP of apply

BACKWARD_SCALINGS = (
    None,
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 8192},
)


def _backward_case(name, head_dim, tokens=48):
    rng = _rng(name + str(head_dim))
    ms = _positions(rng, tokens - len(EDGE_POSITIONS))
    return rng, ms.reshape(1, -1), rng.standard_normal((1, ms.size, 2, head_dim))


@register(id="rope.backward-is-inverse-rotation", bound=0.0,
          statement="the VJP of apply, computed as apply at -m, equals bit for bit R_m^T g built from the "
          "forward's own cos/sin table at +m (tail passed through; 5 model configs, cpu and numpy)")
def backward_is_inverse_rotation() -> float:
    """Residual: largest difference between backward.apply_vjp(g, m) (the forward kernels at -m) and
    backward.transposed_rotation(g, m) = pairs (a c + b s, b c - a s) with (c, s) = cos_sin(m), the
    tail copied (0 when bit-identical).

    Bound 0: R_m^T = R_{-m}; the reduction of m theta is exact and the kernels evaluate cos and
    sin of -phi as cos phi and -sin phi bit for bit (an even/odd evaluation on |phi|), and both sides
    then do the same two products and one sum per element (a c - b (-s) = a c + b s and
    a (-s) + b c = b c - a s exactly: a negation never rounds). The tail is copied by both.
    """
    worst = 0.0
    for (head_dim, rotary_dim, base, layout), be in itertools.product(CONFIGS, APPLY_BACKENDS):
        _, ms, g = _backward_case("rope.backward-is-inverse-rotation", head_dim)
        kw = dict(rotary_dim=rotary_dim, base=base, layout=layout, backend=be)
        worst = max(worst, _bit_residual(backward.apply_vjp(g, ms, **kw), backward.transposed_rotation(g, ms, **kw)))
        worst = max(worst, _bit_residual(backward.apply_vjp(g, ms, **kw)[..., rotary_dim:], g[..., rotary_dim:]))
    return worst


@register(id="rope.backward-scaled-inverse-rotation", bound=14 * U,
          statement="with a scaling type (linear, yarn, llama3: attention factor f), the VJP f R_{-m} g "
          "equals R_m^T g built from the forward's (f cos, f sin) table within 14u f (|a| + |b|)")
def backward_scaled_inverse_rotation() -> float:
    """Residual: max over pair elements of |apply_vjp - transposed_rotation| / (f (|a| + |b|)), (a, b)
    the pair of g; the tail must be bit-identical (else infinity).

    Bound 14u: apply_vjp rotates (5u (|a c| + |b s|) per element, RoPE's count) then multiplies by f
    rounded once (u) with one more rounding (u): 7u f (|a| + |b|). transposed_rotation's table
    f cos, f sin is within 1.5 ulp + 1.5 ulp of the exact (3u + 3u relative, reference.rope.cos_sin),
    then two products and a sum: (6u + u) f (|a| + |b|) (the sum's rounding is relative to its
    result, at most f(|a| + |b|)). Both within 7u f (|a| + |b|) of f R_{-m} g: 14u apart.
    """
    worst = 0.0
    for (head_dim, rotary_dim, base, layout), scaling in itertools.product(CONFIGS[:3], BACKWARD_SCALINGS[1:]):
        _, ms, g = _backward_case("rope.backward-scaled-inverse-rotation", head_dim)
        kw = dict(rotary_dim=rotary_dim, base=base, layout=layout, scaling=scaling, seq_len=None)
        got = backward.apply_vjp(g, ms, **kw)
        ref = backward.transposed_rotation(g, ms, **kw)
        f = rope.frequencies(rotary_dim, base, scaling)[1]
        a, b = _pairs(g, rotary_dim, layout)
        mag = np.concatenate([np.abs(a) + np.abs(b)] * 2, axis=-1)
        d0, d1 = _pairs(got - ref, rotary_dim, layout)
        worst = max(worst, float(np.max(np.abs(np.concatenate([d0, d1], axis=-1)) / (f * mag))))
        if _bit_residual(got[..., rotary_dim:], g[..., rotary_dim:]) != 0.0:
            return math.inf
    return worst


@register(id="rope.backward-adjoint", bound=24 * U,
          statement="<VJP(g), dx> = <g, J dx> with J dx = apply(dx) (apply is linear), per token and head "
          "(5 model configs, default and 3 scaling types, cpu and numpy, m up to 2^24)")
def backward_adjoint() -> float:
    """Residual: max over tokens and heads of |<apply_vjp(g), dx> - <g, apply(dx)>| / N with
    N = sum_pairs f |g_pair| |dx_pair| + sum_tail |g_j| |dx_j| (rotation_backward.adjoint_residual).

    Bound 24u: each side is a computed linear map (per pair element within 7u f |pair| of the exact:
    RoPE's 5u with |a c| + |b s| <= |(a, b)|, plus 2u for the factor f rounded and applied, so 9.9u f
    |pair| per pair as a vector, which Cauchy-Schwarz turns into 9.9u N in the dot product) and an fsum
    dot (each product rounded, the sum once: 2u N). Both sides 11.9u N: 23.8u N apart.
    """
    worst = 0.0
    for (head_dim, rotary_dim, base, layout), scaling, be in itertools.product(CONFIGS, BACKWARD_SCALINGS,
                                                                                APPLY_BACKENDS):
        rng, ms, g = _backward_case("rope.backward-adjoint", head_dim)
        dx = rng.standard_normal(g.shape)
        kw = dict(rotary_dim=rotary_dim, base=base, layout=layout, scaling=scaling, backend=be)
        grad = backward.apply_vjp(g, ms, **kw)
        jdx = backward.apply_jvp(dx, ms, **kw)
        f = rope.frequencies(rotary_dim, base, scaling)[1]
        weights = rotation_backward.pair_weights(g, dx, rotary_dim, layout, (f, 1.0))
        worst = max(worst, rotation_backward.adjoint_residual(grad, dx, g, jdx, weights))
    return worst
