"""Gaussian-kernel RoPE's backward pass for ``--grad``: gaussian_rope.apply and gaussian_rope.score.

apply. f(x, m) = K(m) R_m x is linear in x, so its VJP with a cotangent g is K(m) R_{-m} g on the
pairs and K(m) g on the tail (reference.gaussian_rope.backward.apply_vjp, which is the forward at
-m because K is even). Budget: autograd runs the forward's arithmetic on g (the same cos/sin
table, the same K(m), two products and a sum per element, the product by K), and |(-m) theta| =
|m theta|, so the gradient's budget is the forward's (RoPE's rotation budget scaled by K(m), plus
u_tab A(m) |g| for the kernel's own rounding and the subnormal floor: conformance.core.rotation_budgets
.amplitude_budgets) with |g_a| + |g_b| in place of |a| + |b|. ``_apply_ratios`` computes it
(conformance.core.rotation_apply.rotation_ratios with K(m)) when handed g for x.

score. S_ij = K(d_ij) <R_m q_i, R_n k_j>, d_ij = n_j - m_i, per batch row and head; for a
cotangent G [b, h, sq, sk], W_ij = G_ij K(d_ij) and

    grad_q_i = R_{-m_i} a_i,  a_i = sum_j W_ij R_{n_j} k_j;     grad_k_j = R_{-n_j} c_j,  c_j = sum_i W_ij R_{m_i} q_i

(reference.gaussian_rope.backward.score_vjp). Budget of grad_q (grad_k symmetric, q and k and
m and n exchanged), for an element of pair p (dims e, e') of query i, with M_j = |k_je| + |k_je'|
the key's pair magnitude, kb_j its RoPE rotation budget at |n_j theta_p| (conformance.core.rotation_budgets
.rotation_budget), u = u_tab, A(d) the kernel's error coefficient (|dK| <= u A(d)):

    the rotated key (each element within kb_j)           sum_j |W_ij| kb_j
    W_ij = G_ij K(d_ij) rounded, K's own error            sum_j (u |W_ij| + u |G_ij| A(d_ij)) M_j
    the sum over sk keys (recursive summation), in the    (sk a + 2 u) sum_j |W_ij| M_j
    accumulation unit a (float32 for half dtypes), and its rounding to T
    a_i is then rotated by R_{-m_i}: both errors of a pair reach each element, and the rotation's
    own budget applies to |a_e| + |a_e'| <= 2 S_i, S_i = sum_j |W_ij| M_j:
                                 2 (the three lines above) + rotation_budget(2 S_i, |m_i theta_p|)
    the cast to the dtype under test                      u_T 2 S_i, and the subnormal floor.

On the tail (past rotary_dim) the pair terms are the plain sums with M_j = |k_je| and no rotation.
Every term is a derived worst case (never a sampled maximum).

Diagnosis (core codes): backward-transposed (R_m for R_{-m}, apply; R_{-d} for R_d, score),
backward-layout (the other pairing), backward-missing (zeros), backward-scale (K missing from or
squared in the backward; otherwise any constant multiple). Shapes: apply's g and gradient
[b, s, h, d] float64 (bshd); score's G [b, h, sq, sk].
"""

from __future__ import annotations

import dataclasses

import numpy as np

from conformance.core import rotation_budgets as budgets, tolerance
from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded
from conformance.core.tensors import (abs_error, argmax_index, check_tensor, finite_max, over_budget, per_position_curve, ratio_max, token_max, torch_dtype)
from conformance.core.rotation_apply import rotation_ratios
from conformance.core.rotation_backward import explain_gradient, missing_gradient
from conformance.core.rotation_spec import from_layout, layout_shape
from conformance.gaussian_rope.kernel import amplitude, distances, kernel_error
from conformance.gaussian_rope.spec import GaussianRopeSpec
from conformance.training import cotangent
from reference import gaussian_rope
from reference.numerics.frequencies import inv_freq
from reference.numerics.layouts import pair_indices
from reference.gaussian_rope import backward as reference_backward

GRADCHECK_KERNEL = {"a1": 0.7, "a2": 0.3, "s1": 5.0, "s2": 20.0}


# ------------------------------------------------------------------------------------------
# apply


def apply_vjp(g, positions, spec, layout: str) -> np.ndarray:
    """grad_x = K(m) R_{-m} g (pairs), K(m) g (tail): float64 [b, s, h, d]."""
    return reference_backward.apply_vjp(np.asarray(g, dtype=np.float64), positions, kernel=dict(spec.kernel),
                                        rotary_dim=spec.rotary_dim, base=spec.base, layout=layout,
                                        backend="numpy")


def _apply_ratios(graded, profile, spec, dtype, g, pos, err, plain: bool = False) -> None:
    """The forward's budget (rotation_ratios with K(m) and its error coefficient) with g for x;
    plain: RoPE's budget without K (a candidate gradient that lacks K)."""
    amp = None if plain else amplitude(pos, spec)
    rotation_ratios(graded, profile, spec, dtype, g, pos, err, amp, None if plain else kernel_error(pos, spec.kernel))


def grade_apply(spec, prepared, g, grad) -> Graded:
    """Graded of x's gradient: the forward's budget with g for x."""
    if grad is None:
        return missing_gradient("x")
    x_shape = prepared.inputs_f64["x"].shape
    out, problems, got = check_tensor(grad, "the gradient of x", layout_shape(x_shape, spec), None, prepared.device)
    graded = Graded(problems=problems, output_dtype=got)
    if out is None:
        return graded
    out = from_layout(out, spec)
    graded.output_f64 = out
    pos = prepared.inputs_f64["positions"]
    grade_profiles(graded, out, apply_vjp(g, pos, spec, spec.layout), "the gradient of x",
                   lambda profile, err: _apply_ratios(graded, profile, spec, prepared.dtype, g, pos, err))
    graded.notes = {}  # the forward's off-by-one note speaks of x, not of g
    return graded


def apply_candidates(g, positions, spec) -> list:
    """[(code, message, wrong gradient, (spec whose pair layout the budget uses, whether the
    budget is RoPE's without K))] from reference.gaussian_rope.backward.mutants. The gradient
    without K is graded with the budget of a gradient without K (a decayed K(m) would otherwise
    shrink the budget below the float rounding of R_{-m} g itself)."""
    found = reference_backward.mutants(g, positions, kernel=dict(spec.kernel), rotary_dim=spec.rotary_dim,
                                       base=spec.base, layout=spec.layout, backend="numpy")
    other = dataclasses.replace(spec, layout="interleaved" if spec.layout == "half" else "half")
    out = []
    for code, items in found.items():
        if code == "backward-layout" and spec.rotary_dim < 4:
            continue
        for message, cand in items:
            plain = code == "backward-scale" and "missing" in message
            out.append((code, message, cand, (other if code == "backward-layout" else spec, plain)))
    return out


def diagnose_apply(spec, dtype, g, positions, got) -> list:
    ref = apply_vjp(g, positions, spec, spec.layout)

    def ratio_of(cand, key):
        cand_spec, plain = key if key is not None else (spec, False)
        scratch = Graded()
        _apply_ratios(scratch, "standard", cand_spec, dtype, g, positions, abs_error(got, cand), plain)
        r = scratch.ratio.get("standard")
        return np.inf if r is None else float(r)

    return explain_gradient(ratio_of, got, ref, apply_candidates(g, positions, spec), "x")


def apply_gradcheck_case(layout: str):
    """(x [1, 4, 1, 8] float64, positions 0, 1, 7, 30, spec): K(30) is about 0.1 with the seed's
    kernel, so every token's gradient is far from zero and m = 0 alone cannot hide R_m."""
    import torch

    spec = GaussianRopeSpec(head_dim=8, rotary_dim=6, base=10000.0, layout=layout, kernel=dict(GRADCHECK_KERNEL))
    gen = torch.Generator().manual_seed(15)
    x = torch.randn(1, 4, 1, 8, generator=gen, dtype=torch.float64)
    return x, torch.tensor([[0, 1, 7, 30]], dtype=torch.int64), spec


# ------------------------------------------------------------------------------------------
# score

SCORE_ROLES = ("q", "k")


def score_cotangent(case_id, prepared):
    """G [b, h, sq, sk] in the dtype under test, drawn from the case."""
    import torch

    q, k = prepared.inputs_f64["q"], prepared.inputs_f64["k"]
    shape = (q.shape[0], q.shape[2], q.shape[1], k.shape[1])
    g = cotangent(case_id, shape, prepared.dtype)
    return torch.from_numpy(g).to(dtype=torch_dtype(prepared.dtype)).to(prepared.device)


def score_vjp(G, q, k, qp, kp, spec, layout=None):
    return reference_backward.score_vjp(G, q, k, qp, kp, kernel=dict(spec.kernel), rotary_dim=spec.rotary_dim,
                                        base=spec.base, layout=layout or spec.layout)


def _pair_magnitude(x, spec):
    """[b, s, h, d]: |x_e| + |x_e'| on each element of a pair, |x_e| on the tail."""
    first, second = pair_indices(spec.rotary_dim, spec.layout)
    out = np.abs(np.asarray(x, dtype=np.float64))
    mag = out[..., first] + out[..., second]
    out = out.copy()
    out[..., first] = mag
    out[..., second] = mag
    return out


def _rotation_budget(mag, pos, spec, dtype, profile):
    """Element budget [b, s, h, d] of rotating pairs of magnitude mag (per element, as
    _pair_magnitude) at positions pos [b, s]; 0 on the tail (no rotation there)."""
    r = spec.rotary_dim
    first, _ = pair_indices(r, spec.layout)
    theta = inv_freq(r, spec.base)
    phi = np.abs(np.asarray(pos, dtype=np.float64))[:, :, None, None] * theta
    pair = budgets.rotation_budget(mag[..., first], phi, r, spec.base, dtype, profile)
    out = np.zeros(mag.shape)
    out[..., :r] = pair[..., _pair_of(spec)]
    return out


def _pair_of(spec):
    """For each rotated dim, the index of its pair."""
    first, second = pair_indices(spec.rotary_dim, spec.layout)
    idx = np.empty(spec.rotary_dim, dtype=np.int64)
    idx[first] = np.arange(len(first))
    idx[second] = np.arange(len(second))
    return idx


def score_budget(G, q, k, qp, kp, spec, dtype, profile, role: str) -> np.ndarray:
    """Budget of grad_q (role "q") or grad_k (role "k"), shaped like q or k (module docstring)."""
    u = tolerance.table_roundoff(dtype, profile)
    a = tolerance.accumulation_roundoff(dtype, profile)
    dist = distances(qp, kp)  # [b, sq, sk]
    kern = np.abs(gaussian_rope.kernel(dist, dict(spec.kernel)))[:, None]  # [b, 1, sq, sk]
    amp = np.abs(kernel_error(dist, spec.kernel))[:, None]
    G = np.abs(np.asarray(G, dtype=np.float64))
    W = G * kern
    if role == "q":
        own_pos, other, other_pos, eq = qp, k, kp, "bhij,bjhd->bihd"
    else:
        own_pos, other, other_pos, eq = kp, q, qp, "bhij,bihd->bjhd"
        W, G, amp = (np.swapaxes(a, 2, 3) for a in (W, G, amp))  # [b, h, sk, sq]: sum over the queries
        eq = "bhij,bjhd->bihd"
    n_terms = other.shape[1]
    M = _pair_magnitude(other, spec)
    rot_other = _rotation_budget(M, other_pos, spec, dtype, profile)
    S = np.einsum(eq, W, M)
    inner = (np.einsum(eq, W, rot_other) + (n_terms * a + 2 * u) * S
             + u * np.einsum(eq, G * amp, M))
    r = spec.rotary_dim
    out = inner.copy()
    out[..., :r] = 2.0 * inner[..., :r] + _rotation_budget(2.0 * S, own_pos, spec, dtype, profile)[..., :r]
    return out + tolerance.unit_roundoff(dtype) * 2.0 * S + 2.0 * tolerance.SMALLEST_SUBNORMAL[dtype] * (1.0 + S)


def _fill(graded, profile, err, budget, pos, which: int) -> None:
    """Ratios of one gradient; its worst index is [which (0 q, 1 k), b, s, h, d] (score's locate
    tells a gradient's five entries from the scores' four)."""
    r = tolerance.ratio(err, budget)
    graded.ratio[profile] = finite_max(r)
    idx = argmax_index(r)
    graded.worst_index[profile] = None if idx is None else [which, *idx]
    graded.mismatch[profile] = over_budget(r) + ("values",)
    graded.curve[profile] = per_position_curve(pos, token_max(err), token_max(budget), ratio_max(r))


def grade_score(spec, prepared, G, grads) -> dict:
    """{"q": Graded, "k": Graded}; G float64 [b, h, sq, sk] as the backward received it."""
    i = prepared.inputs_f64
    q, k, qp, kp = i["q"], i["k"], i["q_positions"], i["k_positions"]
    refs = dict(zip(SCORE_ROLES, score_vjp(G, q, k, qp, kp, spec)))
    out = {}
    for which, (role, x, pos) in enumerate((("q", q, qp), ("k", k, kp))):
        grad = grads.get(role)
        if grad is None:
            out[role] = missing_gradient(role)
            continue
        val, problems, got = check_tensor(grad, f"the gradient of {role}", x.shape, None, prepared.device)
        graded = Graded(problems=problems, output_f64=val, output_dtype=got)
        out[role] = graded
        if val is None:
            continue

        def fill(profile, err):
            _fill(graded, profile, err, score_budget(G, q, k, qp, kp, spec, prepared.dtype, profile, role), pos,
                  which)

        grade_profiles(graded, val, refs[role], f"the gradient of {role}", fill)
    return out


def score_candidates(G, q, k, qp, kp, spec) -> list:
    """[(code, message, (wrong grad_q, wrong grad_k))]: the usual wrong backwards of the score."""
    kern = gaussian_rope.kernel(distances(qp, kp), dict(spec.kernel))[:, None]
    # R_{-d} for R_d: every rotation of the backward turns the wrong way, which is the right VJP
    # at the negated positions (K is even, so W is unchanged).
    out = [("backward-transposed", "the rotations in the backward turn the wrong way (R_m where R_m^T = R_{-m} "
            "belongs)", score_vjp(G, q, k, -np.asarray(qp), -np.asarray(kp), spec))]
    if spec.rotary_dim >= 4:
        other = "interleaved" if spec.layout == "half" else "half"
        out.append(("backward-layout", f"the gradient is paired in the {other} layout",
                    score_vjp(G, q, k, qp, kp, spec, other)))
    out.append(("backward-missing", "no gradient reaches q and k", (np.zeros_like(q), np.zeros_like(k))))
    # The kernel left out of the backward (W = G): the VJP through a unit kernel (s1 so large
    # that K = 1 exactly in float64).
    unit = dataclasses.replace(spec, kernel={"a1": 1.0, "a2": 0.0, "s1": 1.0e150, "s2": 1.0})
    out.append(("backward-scale", "the kernel K(n - m) is missing from the backward",
                 score_vjp(G, q, k, qp, kp, unit)))
    out.append(("backward-scale", "the kernel K(n - m) is applied twice in the backward",
                 score_vjp(G * kern, q, k, qp, kp, spec)))
    return out


def diagnose_score(spec, prepared, G, graded) -> list:
    i = prepared.inputs_f64
    q, k, qp, kp = i["q"], i["k"], i["q_positions"], i["k_positions"]
    refs = dict(zip(SCORE_ROLES, score_vjp(G, q, k, qp, kp, spec)))
    cands = score_candidates(G, q, k, qp, kp, spec)
    found = []
    for n, (role, pos) in enumerate((("q", qp), ("k", kp))):
        g = graded.get(role)
        ratio = g.ratio.get("standard") if g is not None else None
        if g is None or g.output_f64 is None or (ratio is not None and ratio <= 1.0):
            continue
        got = g.output_f64

        def ratio_of(cand, key, role=role, got=got):
            budget = score_budget(G, q, k, qp, kp, key or spec, prepared.dtype, "standard", role)
            return finite_max(tolerance.ratio(abs_error(got, cand), budget)) or 0.0

        role_cands = [(code, msg, pair[n], spec if code != "backward-layout" else
                       dataclasses.replace(spec, layout="interleaved" if spec.layout == "half" else "half"))
                      for code, msg, pair in cands]
        found += explain_gradient(ratio_of, got, refs[role], role_cands, role)
    return found


def score_gradcheck_case(layout: str):
    """(q [1, 3, 1, 8], k [1, 4, 1, 8] float64, q_positions 0, 5, 9, k_positions 0, 3, 7, 12, spec)."""
    import torch

    spec = GaussianRopeSpec(head_dim=8, rotary_dim=6, base=10000.0, layout=layout, kernel=dict(GRADCHECK_KERNEL))
    gen = torch.Generator().manual_seed(15)
    q = torch.randn(1, 3, 1, 8, generator=gen, dtype=torch.float64)
    k = torch.randn(1, 4, 1, 8, generator=gen, dtype=torch.float64)
    return (q, k, torch.tensor([[0, 5, 9]], dtype=torch.int64), torch.tensor([[0, 3, 7, 12]], dtype=torch.int64),
            spec)
