"""The rotation protocols' shared grading: x [batch, seq, heads, head_dim] turned pair by pair by
m theta_i (RoPE's rotation, possibly scaled per token by an amplitude K(m)), ``fn(x, positions,
spec) -> tensor like x``.

``RotationApply`` is the protocol rope.apply and gaussian_rope.apply share: the adapter's
arguments in the case's tensor layout (conformance.core.rotation_spec), the float64 reference
(conformance.core.rotation_reference) applied to the dtype-rounded x, the per-pair grading
(``rotation_ratios``, on arrays, with the budgets of conformance.core.rotation_budgets), the place
of an element in words and the pair-layout probe (conformance.core.layout_probe). With
``spec.inplace`` the adapter may write into x and return x or None: the written x is graded
(every call gets a fresh x). A family adds its name, spec, diagnosis, black-box checks and
training hooks; one whose output carries an amplitude overrides ``amplitude`` and
``amplitude_error``.
"""

from __future__ import annotations

import numpy as np

from conformance.core import layout_probe, tolerance
from conformance.core import rotation_budgets as budgets
from conformance.core import rotation_reference as reference
from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.rotation_backward import cotangent_tensor
from conformance.core.rotation_spec import from_layout, layout_shape, to_layout
from conformance.core.tensors import (argmax_index, check_tensor, mutation_problems, off_by_one_note, over_budget,
                                      per_position_curve, ratio_max, token_max, torch_dtype)


def rotation_ratios(graded, profile: str, spec, dtype: str, x, pos, err, amp=None, amp_error=None) -> None:
    """Fill graded's ratio, worst index, mismatch, curve and off-by-one note for one profile: err
    [b, s, h, d] (canonical frame) of an output of x [b, s, h, d] (or of a gradient, with the
    cotangent as x) at positions pos [b, s], against the rotation budget of each pair at |m theta_i|
    (rotation_budgets.rotation_budget, the error of a pair being the larger of its two elements')
    and the passthrough budget of the tail past rotary_dim. amp, amp_error [b, s]: a per-token
    amplitude on the whole output and its error coefficient (rotation_budgets.amplitude_budgets),
    None for plain RoPE."""
    r = spec.rotary_dim
    first, second = reference.pair_indices(r, spec.layout)
    pair_err = np.maximum(err[..., first], err[..., second])  # NaN if either is NaN
    a, b = x[..., first], x[..., second]
    mag = np.abs(a) + np.abs(b)
    tabs = reference.tables(pos, spec)
    phi = tabs.phi[:, :, None, :]
    budget = budgets.scaled_rotation_budget(mag, phi, r, spec.base, dtype, profile, tabs.attention_factor)
    tail_budget = tolerance.passthrough_budget(x[..., r:], dtype, profile)
    if amp is not None:
        budget, tail_budget = budgets.amplitude_budgets(amp, amp_error, budget, mag,
                                                        tail_budget, x[..., r:], dtype, profile)
    pair_ratio = tolerance.ratio(pair_err, budget)
    tail_err = err[..., r:]
    tail_ratio = tolerance.ratio(tail_err, tail_budget)

    finite_pair = np.where(np.isfinite(pair_ratio), pair_ratio, -1.0)
    finite_tail = np.where(np.isfinite(tail_ratio), tail_ratio, -1.0)
    best = max(finite_pair.max(initial=-1.0), finite_tail.max(initial=-1.0))
    graded.ratio[profile] = float(best) if best >= 0 else None
    # Worst element: NaN/Inf first (they decide the verdict), then the largest ratio.
    if tail_ratio.size and np.max(np.where(np.isnan(tail_ratio), np.inf, tail_ratio)) > np.max(
        np.where(np.isnan(pair_ratio), np.inf, pair_ratio)
    ):
        idx = argmax_index(tail_ratio)
        idx[-1] += r
    else:
        idx = argmax_index(pair_ratio)
        i = idx[-1]
        lead = tuple(idx[:-1])
        e1, e2 = err[lead + (first[i],)], err[lead + (second[i],)]
        idx[-1] = int(second[i] if (np.isnan(e2) or e2 > e1) else first[i])
    graded.worst_index[profile] = idx
    pairs, n_pairs = over_budget(pair_ratio)
    tail, n_tail = over_budget(tail_ratio)
    graded.mismatch[profile] = (pairs + tail, n_pairs + n_tail,
                                "pairs" if not n_tail else "pairs and pass-through values")

    # Curve and the neighbour check are per token [b, s].
    e_tok = token_max(err)
    b_tok = budget.reshape(budget.shape[0], budget.shape[1], -1).max(axis=-1)
    r_tok = np.maximum(ratio_max(pair_ratio), ratio_max(tail_ratio))
    graded.curve[profile] = per_position_curve(pos, e_tok, b_tok, r_tok)
    # |R_{m+1} x - R_m x| of a pair is 2 |sin(theta_i / 2)| sqrt(a^2 + b^2): when the budget
    # exceeds it for every pair of a token, an off-by-one position would pass there.
    step = 2.0 * np.abs(np.sin(tabs.inv_freq / 2.0)) * np.hypot(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        tok = (step / budget).reshape(step.shape[0], step.shape[1], -1).max(axis=-1)
    blind = tok <= 1.0
    if blind.any():
        graded.notes[profile] = [off_by_one_note(profile, pos[blind])]


class RotationApply(Protocol):
    """rope.apply's grading, shared (see the module docstring)."""

    signature = "fn(x, positions, spec) -> tensor like x"
    layouts = ("half", "interleaved")
    acceptable_note = "float32 angle rounding, growing with position"

    def prepare(self, case, spec, dtype, device) -> Prepared:
        return self.prepare_arrays(case.arrays["x"], case.arrays["positions"], spec, dtype, device)

    def prepare_arrays(self, x, positions, spec, dtype, device) -> Prepared:
        import torch

        x_t = torch.from_numpy(np.array(x, dtype=np.float64)).to(device=device, dtype=torch_dtype(dtype))
        pos = np.array(positions, dtype=np.int64)
        inputs = {"x": x_t.detach().to("cpu", torch.float64).numpy(), "positions": pos}
        # The adapter's own copies, contiguous in its tensor layout (a fresh x for every call).
        x_a, pos_a = to_layout(x_t, torch.from_numpy(pos.copy()), spec)
        x_a, pos_a = x_a.contiguous().clone(), pos_a.contiguous().clone().to(device)
        watched = {"positions": (pos_a, pos_a.clone())}
        if not spec.inplace:
            watched["x"] = (x_a, x_a.clone())
        return Prepared((x_a, pos_a, spec), inputs, watched, dtype, device)

    def reference(self, prepared: Prepared, spec, layout: str) -> np.ndarray:
        return reference.apply(prepared.inputs_f64["x"], prepared.inputs_f64["positions"], spec, layout)

    def grade(self, case, spec, prepared, value) -> Graded:
        x = prepared.inputs_f64["x"]
        pos = prepared.inputs_f64["positions"]
        if spec.inplace and value is None:
            value = prepared.args[0]  # an in-place kernel's result is the written x
        out, problems, got = check_tensor(value, "the output", layout_shape(x.shape, spec), prepared.dtype,
                                          prepared.device)
        if out is not None:
            out = from_layout(out, spec)
        b, s, h, _ = x.shape  # the [batch, seq, heads, head_dim] frame
        problems += mutation_problems(prepared.watched, {"x": f"{h} head{'s' if h != 1 else ''}, {s} token{'s' if s != 1 else ''}"})
        graded = Graded(problems=problems, output_f64=out, output_dtype=got)
        if out is None:
            return graded
        ref = self.reference(prepared, spec, spec.layout)
        grade_profiles(graded, out, ref, "the output",
                       lambda profile, err: self.ratios(graded, profile, spec, prepared.dtype, x, pos, err))
        return graded

    def ratios(self, graded, profile, spec, dtype, x, pos, err) -> None:
        """rotation_ratios with this protocol's amplitude (the backward grades a gradient with the
        cotangent as x)."""
        amp = self.amplitude(pos, spec)
        rotation_ratios(graded, profile, spec, dtype, x, pos, err, amp,
                        None if amp is None else self.amplitude_error(pos, spec))

    def amplitude(self, positions, spec):
        """A per-token factor [batch, seq] on the whole output, or None (plain RoPE). Variants that
        scale the rotation (Gaussian-kernel RoPE: K(m)) return it; the budgets scale with it."""
        return None

    def amplitude_error(self, positions, spec):
        """[batch, seq]: |dK| <= u * amplitude_error for the amplitude computed with unit roundoff u."""
        raise NotImplementedError("a protocol with an amplitude states its error")

    def locate(self, case, spec, prepared, index) -> str:
        b, s, h, d = index
        position = int(prepared.inputs_f64["positions"][b, s])
        where = f"batch row {b}, position {position} (token {s}), head {h}, dim {d}"
        if getattr(spec, "tensor_layout", "bshd") == "thd" and spec.cu_seqlens:
            k = int(np.searchsorted(np.asarray(spec.cu_seqlens), s, side="right")) - 1
            where = f"token {s} (sequence {k}), position {position}, head {h}, dim {d}"
        if d >= spec.rotary_dim:
            return where + " (past rotary_dim: passed through)"
        first, second = reference.pair_indices(spec.rotary_dim, spec.layout)
        pair = int(np.flatnonzero((first == d) | (second == d))[0])
        return where + f" (pair {pair}: dims {int(first[pair])} and {int(second[pair])})"

    def probe(self, invoker, cases, options):
        return layout_probe.detect(invoker, self, [self.spec(c) for c in cases], options)

    # -- training (--grad): x's gradient; the family grades it (grade_backward, diagnose_backward)

    differentiable = True

    def grad_inputs(self, case, spec, prepared) -> dict:
        # An in-place kernel writes into x: autograd refuses that on a leaf, so only its forward is graded.
        return {} if spec.inplace else {"x": 0}

    def cotangents(self, case, spec, prepared) -> tuple:
        return (cotangent_tensor(case.id, prepared.inputs_f64["x"].shape, spec, prepared.dtype, prepared.device),)
