"""xPos's backward pass for ``--grad`` (xpos.apply): the reference VJP, its grading and diagnosis.

Formula. xpos.apply maps (q, k) to (s R_m q, s^(-1) R_m k) per pair i of a token at position m,
s = s_i(m) = zeta_i^((m - c)/B) (arXiv 2212.10554), the tail copied. Each output is linear in its
own input, so for cotangents (g_q, g_k)

    grad_q = s R_{-m} g_q,     grad_k = s^(-1) R_{-m} g_k,     tails g_q, g_k

(reference.xpos.backward.apply_vjp): the rotation is transposed, the scale is not (it is a
number per pair). The centring c is the one the forward used: XposApply.grade fits it from the
outputs and records it on the Prepared (``prepared.xpos_centre``); without a gradable forward it is
fitted the same way from the gradients (rotations keep pair norms, so |grad_q| / |g_q| = s exactly
as |q_out| / |q| = s).

Budget. Autograd of the forward (x cos s + rot(x) sin s, with the scaled table cos s, sin s of
the forward, or s applied after the rotation) runs the same products and sum on the cotangent
pair, with |(-m) theta| = |m theta| and the same scale: each gradient's budget is the forward's
(XposApply.budget: RoPE's rotation budget times s, the scale's own error u_tab s (3 |e ln zeta| +
4) times the pair magnitude, the subnormal floor) with |g_a| + |g_b| in place of |a| + |b|, and
the passthrough budget of g on the tail (docs/tolerance.md, "Gradients").

Diagnosis (core codes): backward-transposed (R_m for R_{-m}), backward-layout (the other
pairing), backward-missing (zeros), backward-scale (the scale left out, or s where s^(-1) belongs:
the q and k scales swapped, or the key's scale not inverted; otherwise any constant multiple).
Each candidate is graded with the budget of its own scale. Shapes: [b, s, h, d] float64.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from conformance.core import rotation_budgets as budgets, tolerance
from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded
from conformance.core.tensors import (abs_error, argmax_index, check_tensor, finite_max, over_budget, per_position_curve, ratio_max, token_max, torch_dtype)
from conformance.core.rotation_backward import explain_gradient, missing_gradient
from conformance.training import cotangent
from conformance.xpos.rotation import fit_centre
from conformance.xpos.spec import XposSpec
from reference.numerics.frequencies import inv_freq
from reference.numerics.layouts import pair_indices
from reference.xpos import backward as reference_backward

ROLES = ("q", "k")
SIGNS = {"q": 1, "k": -1}


def vjp(g_q, g_k, positions, spec, centre, layout=None):
    """(grad_q, grad_k) float64: the reference VJP at centring c."""
    return reference_backward.apply_vjp(g_q, g_k, positions, rotary_dim=spec.rotary_dim, base=spec.base,
                                        layout=layout or spec.layout, scale_base=spec.scale_base, gamma=spec.gamma,
                                        centre=centre, backend="numpy")


def cotangents(case_id, prepared) -> tuple:
    """(g_q, g_k) like q and k in the dtype under test (g_k: the case's second stream)."""
    import torch

    shape = prepared.inputs_f64["q"].shape
    return tuple(torch.from_numpy(cotangent(case_id, shape, prepared.dtype, i)).to(torch_dtype(prepared.dtype))
                 .to(prepared.device) for i in range(2))


def _f64(t) -> np.ndarray:
    import torch

    return t.detach().to("cpu", torch.float64).numpy()


def centre_of(spec, prepared, gs, outs) -> float:
    """The forward's centring (recorded by XposApply.grade), else fitted from the gradients."""
    c = getattr(prepared, "xpos_centre", None)
    if c is not None:
        return float(c)
    if outs[0] is None or outs[1] is None:
        return 0.0
    return fit_centre(gs[0], gs[1], outs[0], outs[1], prepared.inputs_f64["positions"], spec) or 0.0


def budget(proto, g, positions, spec, centre, sign, dtype, profile):
    """The forward's budget (XposApply.budget) with the cotangent g for the input."""
    return proto.budget(g, positions, spec, centre, sign, dtype, profile)


def grade(proto, spec, prepared, cots, grads) -> dict:
    """{"q": Graded, "k": Graded} of the two gradients."""
    pos = prepared.inputs_f64["positions"]
    shape = prepared.inputs_f64["q"].shape
    gs = [_f64(c) for c in cots]
    out, vals = {}, []
    for role in ROLES:
        grad = grads.get(role)
        if grad is None:
            out[role] = missing_gradient(role)
            vals.append(None)
            continue
        val, problems, got = check_tensor(grad, f"the gradient of {role}", shape, None, prepared.device)
        out[role] = Graded(problems=problems, output_f64=val, output_dtype=got)
        vals.append(val)
    centre = centre_of(spec, prepared, gs, vals)
    refs = vjp(gs[0], gs[1], pos, spec, centre)
    for n, role in enumerate(ROLES):
        graded, val = out[role], vals[n]
        if val is None:
            continue

        def fill(profile, err):
            b = budget(proto, gs[n], pos, spec, centre, SIGNS[role], prepared.dtype, profile)
            r = tolerance.ratio(err, b)
            graded.ratio[profile] = finite_max(r)
            idx = argmax_index(r)  # in the forward's frame [which (0 q, 1 k), b, s, h, d]: XposApply.locate
            graded.worst_index[profile] = None if idx is None else [n, *idx]
            graded.mismatch[profile] = over_budget(r) + ("values",)
            graded.curve[profile] = per_position_curve(pos, token_max(err), token_max(b), ratio_max(r))
            if centre:
                graded.notes[profile] = [f"gradients graded at the forward's centring c = {centre:g}"]

        grade_profiles(graded, val, refs[n], f"the gradient of {role}", fill)
    return out


def candidates(gs, positions, spec, centre) -> list:
    """[(code, message, (wrong grad_q, wrong grad_k), (layout spec, (sign of q's scale, of k's)))]:
    reference.xpos.backward.mutants plus the key's scale left un-inverted."""
    found = reference_backward.mutants(gs[0], gs[1], positions, rotary_dim=spec.rotary_dim, base=spec.base,
                                       layout=spec.layout, scale_base=spec.scale_base, gamma=spec.gamma,
                                       centre=centre, backend="numpy")
    other = dataclasses.replace(spec, layout="interleaved" if spec.layout == "half" else "half")
    signs = {"the xPos scale is missing from the backward": (0, 0),
             "the q and k scales are swapped in the backward": (-1, 1)}
    # s where s^(-1) belongs on the key only (the forward's query table reused in k's backward).
    # Before the swap: for k alone the two are the same gradient, and the query's own gradient
    # tells them apart (a swap fails q too, and q then finds "swapped").
    same = vjp(gs[0], gs[1], positions, spec, centre)
    k_like_q = vjp(gs[1], gs[0], positions, spec, centre)[0]
    out = [("backward-scale", "the key's gradient carries zeta^((m - c)/B), the query's scale, instead of its "
            "inverse (the scale not inverted in k's backward)", (same[0], k_like_q), (spec, (1, 1)))]
    for code, items in found.items():
        if code == "backward-layout" and spec.rotary_dim < 4:
            continue
        for message, pair in items:
            key = (other if code == "backward-layout" else spec, signs.get(message, (1, -1)))
            out.append((code, message, pair, key))
    return out


def _scaled_budget(proto, g, positions, spec, centre, sign, dtype):
    """The standard budget of a gradient scaled by s^sign (sign 0: no scale)."""
    if sign == 0:
        return _unscaled_budget(g, positions, spec, dtype)
    return proto.budget(g, positions, spec, centre, sign, dtype, "standard")


def _unscaled_budget(g, positions, spec, dtype):
    """RoPE's per-element rotation budget of g at positions (the scale left out)."""
    r = spec.rotary_dim
    first, second = pair_indices(r, spec.layout)
    mag = np.abs(g[..., first]) + np.abs(g[..., second])
    phi = np.abs(np.asarray(positions, dtype=np.float64))[:, :, None, None] * inv_freq(r, spec.base)
    pair = budgets.rotation_budget(mag, phi, r, spec.base, dtype, "standard")
    out = np.empty(g.shape)
    out[..., first] = pair
    out[..., second] = pair
    out[..., r:] = tolerance.passthrough_budget(g[..., r:], dtype, "standard")
    return out


def diagnose(proto, spec, prepared, cots, graded, dtype) -> list:
    pos = prepared.inputs_f64["positions"]
    gs = [_f64(c) for c in cots]
    vals = [graded[r].output_f64 if r in graded else None for r in ROLES]
    centre = centre_of(spec, prepared, gs, vals)
    refs = vjp(gs[0], gs[1], pos, spec, centre)
    cands = candidates(gs, pos, spec, centre)
    found = []
    for n, role in enumerate(ROLES):
        g = graded.get(role)
        ratio = g.ratio.get("standard") if g is not None else None
        if g is None or g.output_f64 is None or (ratio is not None and ratio <= 1.0):
            continue
        got = g.output_f64

        def ratio_of(cand, key, n=n, got=got):
            cand_spec, signs = key if key is not None else (spec, (1, -1))
            b = _scaled_budget(proto, gs[n], pos, cand_spec, centre, signs[n], dtype)
            return finite_max(tolerance.ratio(abs_error(got, cand), b)) or 0.0

        found += explain_gradient(ratio_of, got, refs[n], [(c, m, p[n], key) for c, m, p, key in cands], role)
    return found


def gradcheck_case(layout: str):
    """(q, k [1, 4, 1, 8] float64, positions 0, 1, 7, 300, spec): rotary_dim 6 (a tail), scale base 64
    so the scales differ visibly from 1 (zeta_0^(300/64) is about 0.01)."""
    import torch

    spec = XposSpec(head_dim=8, rotary_dim=6, base=10000.0, layout=layout, scale_base=64.0, gamma=0.4)
    gen = torch.Generator().manual_seed(15)
    q = torch.randn(1, 4, 1, 8, generator=gen, dtype=torch.float64)
    k = torch.randn(1, 4, 1, 8, generator=gen, dtype=torch.float64)
    return q, k, torch.tensor([[0, 1, 7, 300]], dtype=torch.int64), spec
