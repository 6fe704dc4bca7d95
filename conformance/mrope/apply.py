"""Protocol ``mrope.apply``: ``fn(x, positions, spec) -> tensor like x``, positions [3, batch, seq].

Graded per pair (the larger error of its two elements) against reference.mrope applied to the
dtype-rounded x, with RoPE's rotation budget (conformance.rope.budgets) at |p_s(i) theta_i|, the
pair's own stream position; the tail past rotary_dim must pass through. With --grad the gradient
of x is graded against the float64 reference backward R^T g (conformance/mrope/backward.py).
"""

from __future__ import annotations

import numpy as np

from conformance.core import tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import (abs_error, adapter_inputs, argmax_index, check_tensor, finite_max, mutation_problems,
                                      nonfinite_problem, over_budget, per_position_curve, ratio_max, token_max)
from conformance.mrope.spec import spec_of
from conformance.rope import budgets
from conformance.rope.backward import RotationGradHooks
from reference import mrope, rope


def reference(x, positions, spec, **changes):
    kw = dict(mrope_section=spec.mrope_section, variant=spec.variant, rotary_dim=spec.rotary_dim, base=spec.base,
              layout=spec.layout, backend="numpy")
    kw.update(changes)
    return mrope.apply(x, positions, **kw)


def score(graded: Graded, profile: str, spec, dtype: str, x, pos, err) -> None:
    """Fill graded's ratio, worst index, mismatch and curve for one profile: err [b, s, h, d] against
    the rotation budget of the pairs of x at |p_s(i) theta_i| and the passthrough budget of x's tail.
    (The backward grades its gradient with the cotangent as x: conformance.mrope.backward.)"""
    r = spec.rotary_dim
    first, second = rope.pair_indices(r, spec.layout)
    which = mrope.streams(r, spec.mrope_section, spec.variant)
    theta = rope.inv_freq(r, spec.base)
    phi = np.abs(pos[which, :, :].transpose(1, 2, 0).astype(np.float64)) * theta  # [b, s, r/2]
    mag = np.abs(x[..., first]) + np.abs(x[..., second])
    pair_err = np.maximum(err[..., first], err[..., second])
    budget = budgets.rotation_budget(mag, phi[:, :, None, :], r, spec.base, dtype, profile)
    pr = tolerance.ratio(pair_err, budget)
    tr = tolerance.ratio(err[..., r:], tolerance.passthrough_budget(x[..., r:], dtype, profile))
    both = np.concatenate([pr, tr], axis=-1)
    graded.ratio[profile] = finite_max(both)
    idx = argmax_index(both)
    idx[-1] = int(first[idx[-1]]) if idx[-1] < r // 2 else r + idx[-1] - r // 2
    graded.worst_index[profile] = idx
    graded.mismatch[profile] = over_budget(pr, tr) + ("pairs and pass-through values" if tr.size else "pairs",)
    graded.curve[profile] = per_position_curve(pos[0], token_max(err), token_max(budget), ratio_max(both))


class MropeApply(RotationGradHooks, Protocol):
    backward_module = "conformance.mrope.backward"  # --grad: the gradient of x, R^T g
    position_role = "positions"
    gradcheck_what = "x [1, 4, 1, 8] float64, Qwen2-VL sections (1, 1, 1) over rotary_dim 6, t positions 0, 1, 7, 1000"
    name = "mrope.apply"
    family = "mrope"
    signature = "fn(x, positions, spec) -> tensor like x"
    acceptable_note = "float32 angle rounding, growing with position"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, ("x",), ("positions",), dtype, device)
        return Prepared((*args, spec), inputs, watched, dtype, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        x, pos = prepared.inputs_f64["x"], prepared.inputs_f64["positions"]
        out, problems, got = check_tensor(value, "the output", x.shape, prepared.dtype, prepared.device)
        problems += mutation_problems(prepared.watched)
        graded = Graded(problems=problems, output_f64=out, output_dtype=got)
        if out is None:
            return graded
        ref = reference(x, pos, spec)
        bad = nonfinite_problem(out, ref, "the output")
        if bad is not None:
            graded.problems.append(bad)
        err = abs_error(out, ref)
        graded.max_abs_error = finite_max(err)
        for profile in tolerance.PROFILES:
            score(graded, profile, spec, prepared.dtype, x, pos, err)
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        b, s, h, d = index
        t, hh, w = (int(prepared.inputs_f64["positions"][k, b, s]) for k in range(3))
        return f"batch row {b}, token {s} (t {t}, h {hh}, w {w}), head {h}, dim {d}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        from conformance.mrope import diagnosis

        return diagnosis.diagnose(spec, prepared, graded, dtype)


PROTOCOL = MropeApply()
