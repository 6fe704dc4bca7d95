"""Protocol ``rope2d.apply``: ``fn(x, coords, spec) -> tensor like x``, coords [batch, seq, 2].

Graded per pair against reference.rope2d applied to the dtype-rounded x, with RoPE's rotation
budget (conformance.rope.budgets, rotary width d/2: the ladder base^(-4k/d)) at |c theta_k|, c the
pair's coordinate; CLS tokens must come back unchanged (pass-through budget). With --grad the
gradient of x is graded against the float64 reference backward R^T g (conformance/rope2d/backward.py).
"""

from __future__ import annotations

import numpy as np

from conformance.core import tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import (abs_error, adapter_inputs, argmax_index, check_tensor, finite_max, mutation_problems,
                                      nonfinite_problem, over_budget, per_position_curve, ratio_max, token_max)
from conformance.rope import budgets
from conformance.rope.backward import RotationGradHooks
from conformance.rope2d.spec import spec_of
from reference import rope, rope2d


def reference(x, coords, spec, **changes):
    kw = dict(base=spec.base, layout=spec.layout, order=spec.order, cls_tokens=spec.cls_tokens, backend="numpy",
              freqs=None if spec.freqs is None else np.array(spec.freqs))
    kw.update(changes)
    return rope2d.apply(x, coords, **kw)


def pair_angles(coords, spec) -> np.ndarray:
    """|c theta_k| per pair [b, s, d/2]."""
    c = np.asarray(coords, dtype=np.float64)
    if tuple(spec.order) == ("y", "x"):
        c = c[..., ::-1]
    theta = rope.inv_freq(spec.head_dim // 2, spec.base)
    return np.abs(np.concatenate([c[..., :1] * theta, c[..., 1:] * theta], axis=-1))


def score(graded: Graded, profile: str, spec, dtype: str, x, coords, err) -> None:
    """Fill graded's ratio, worst index, mismatch and curve for one profile: err [b, s, h, d] against
    the rotation budget of the pairs of x at |c theta_k| (CLS tokens: the passthrough budget of x).
    (The backward grades its gradient with the cotangent as x: conformance.rope2d.backward.)"""
    d = spec.head_dim
    first, second = rope.pair_indices(d, spec.layout)
    mag = np.abs(x[..., first]) + np.abs(x[..., second])
    if spec.freqs is None:
        phi = pair_angles(coords, spec)[:, :, None, :]
    else:  # RoPE-Mixed: |x f_x| + |y f_y| per head and pair
        f = np.abs(np.array(spec.freqs))
        c = np.abs(coords.astype(np.float64))
        phi = c[:, :, None, None, 0] * f[0][None, None] + c[:, :, None, None, 1] * f[1][None, None]
    pair_err = np.maximum(err[..., first], err[..., second])
    cls = np.arange(x.shape[1]) < spec.cls_tokens
    q = d // 4  # each axis: RoPE's budget for its own ladder of d/4 frequencies
    if spec.freqs is None:
        budget = np.concatenate([budgets.rotation_budget(mag[..., sl], phi[..., sl], d // 2, spec.base, dtype, profile)
                                 for sl in (slice(0, q), slice(q, 2 * q))], axis=-1)
    else:  # given frequencies: no power to round, base 1 leaves the angle's own roundings
        budget = budgets.rotation_budget(mag, phi, d, 1.0, dtype, profile)
    through = np.maximum(tolerance.passthrough_budget(x[..., first], dtype, profile),
                         tolerance.passthrough_budget(x[..., second], dtype, profile))
    budget = np.where(cls[None, :, None, None], through, budget)
    r = tolerance.ratio(pair_err, budget)
    graded.ratio[profile] = finite_max(r)
    idx = argmax_index(r)
    idx[-1] = int(first[idx[-1]])
    graded.worst_index[profile] = idx
    graded.mismatch[profile] = over_budget(r) + ("pairs",)
    row_major = coords[..., 1] * (int(coords[..., 0].max()) + 1) + coords[..., 0]
    graded.curve[profile] = per_position_curve(row_major, token_max(err), token_max(budget), ratio_max(r))


class Rope2dApply(RotationGradHooks, Protocol):
    backward_module = "conformance.rope2d.backward"  # --grad: the gradient of x, R^T g
    position_role = "coords"
    gradcheck_what = "x [1, 5, 1, 8] float64, one CLS token and four patches up to (30, 7), interleaved layout"
    name = "rope2d.apply"
    family = "rope2d"
    signature = "fn(x, coords, spec) -> tensor like x"
    acceptable_note = "float32 angle rounding, growing with position"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, ("x",), ("coords",), dtype, device)
        return Prepared((*args, spec), inputs, watched, dtype, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        x, coords = prepared.inputs_f64["x"], prepared.inputs_f64["coords"]
        out, problems, got = check_tensor(value, "the output", x.shape, prepared.dtype, prepared.device)
        problems += mutation_problems(prepared.watched)
        graded = Graded(problems=problems, output_f64=out, output_dtype=got)
        if out is None:
            return graded
        ref = reference(x, coords, spec)
        bad = nonfinite_problem(out, ref, "the output")
        if bad is not None:
            graded.problems.append(bad)
        err = abs_error(out, ref)
        graded.max_abs_error = finite_max(err)
        for profile in tolerance.PROFILES:
            score(graded, profile, spec, prepared.dtype, x, coords, err)
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        b, s, h, d = index
        cx, cy = (int(v) for v in prepared.inputs_f64["coords"][b, s])
        token = "CLS token" if s < spec.cls_tokens else f"patch (x {cx}, y {cy})"
        return f"batch row {b}, token {s} ({token}), head {h}, dim {d}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        from conformance.rope2d import diagnosis

        return diagnosis.diagnose(spec, prepared, graded)


PROTOCOL = Rope2dApply()
