"""Protocol ``alibi.bias``: ``fn(q_positions, k_positions, spec) -> bias [num_heads, sq, sk]``.

q_positions, k_positions int64 [sq], [sk]. Graded up to a per-row constant (softmax over the keys
ignores it): per head and query row, the median of output - reference over the graded entries is
taken out first. Causal cases grade the entries with key position <= query position only (the
rest is masked by the caller). Budget per entry: (4 u_tab + K_h u_a) times (|reference| + |row
constant| + the row's largest |reference|), plus a subnormal floor: 4 roundings of the output's
table roundoff, and the relative error a slope computed as pow(r, K_h) carries
(slopes.ladder_powers; transformers' BLOOM ``build_alibi_tensor``); the fitted constant is a
median of errors, so it may carry the rounding of the row's largest entry (a float32 slope times
the longest distance) to every entry, the diagonal included. Dtype-free.
"""

from __future__ import annotations

import numpy as np

from conformance.alibi.slopes import ladder_powers
from conformance.alibi.spec import spec_of
from conformance.core import tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import adapter_inputs, argmax_index, check_tensor, distance_curve, finite_max, over_budget
from conformance.results import Diagnosis
from reference import alibi


def graded_entries(qp, kp, spec) -> np.ndarray:
    """bool [sq, sk]: the entries that count (causal: key position <= query position)."""
    return (kp[None, :] <= qp[:, None]) if spec.causal else np.ones((qp.size, kp.size), dtype=bool)


def row_constant(diff, mask) -> np.ndarray:
    """[h, sq, 1]: the median of diff over each row's graded entries (0 for an empty row)."""
    masked = np.where(mask[None], diff, np.nan)
    if not masked.size:
        return np.zeros(masked.shape[:-1] + (1,))
    c = np.zeros(masked.shape[:-1] + (1,))
    rows = mask.any(axis=-1)  # a causal row may have no key at or before its query
    c[:, rows] = np.nanmedian(masked[:, rows], axis=-1, keepdims=True)
    return np.where(np.isfinite(c), c, 0.0)


class AlibiBias(Protocol):
    name = "alibi.bias"
    family = "alibi"
    signature = "fn(q_positions, k_positions, spec) -> bias [num_heads, sq, sk]"
    dtype_free = True
    acceptable_note = "bias computed in float32"
    curve_axis = "distance"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, (), ("q_positions", "k_positions"), dtype, device)
        return Prepared((*args, spec), inputs, watched, None, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        qp, kp = prepared.inputs_f64["q_positions"], prepared.inputs_f64["k_positions"]
        out, problems, got = check_tensor(value, "the bias", (spec.num_heads, qp.size, kp.size), None,
                                          prepared.device)
        dtype = got if got in tolerance.DTYPES else "float32"
        graded = Graded(problems=problems, output_f64=out, output_dtype=dtype)
        if out is None:
            return graded
        ref = alibi.bias(spec.num_heads, qp, kp, causal=spec.causal, backend="numpy")
        mask = graded_entries(qp, kp, spec)
        diff = np.where(np.isfinite(out), out - ref, np.inf)
        c = row_constant(diff, mask)
        err = np.where(mask[None], np.abs(diff - c), 0.0)
        graded.max_abs_error = finite_max(err)
        for profile in tolerance.PROFILES:
            rel = (4 * tolerance.table_roundoff(dtype, profile)
                   + ladder_powers(spec.num_heads) * tolerance.angle_roundoff(profile))
            row_max = np.max(np.where(mask[None], np.abs(ref), 0.0), axis=-1, keepdims=True)
            budget = rel[:, None, None] * (np.abs(ref) + np.abs(c) + row_max) + tolerance.SMALLEST_SUBNORMAL[dtype]
            r = tolerance.ratio(err, budget)
            graded.ratio[profile] = finite_max(r)
            graded.worst_index[profile] = argmax_index(r)
            graded.mismatch[profile] = over_budget(np.where(mask[None], r, 0.0)) + ("entries",)
            graded.curve[profile] = distance_curve(np.abs(qp[:, None] - kp[None, :])[None], err, budget, r, mask[None])
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        h, i, j = index
        qp, kp = prepared.inputs_f64["q_positions"], prepared.inputs_f64["k_positions"]
        return f"head {h}, query {i} (position {int(qp[i])}), key {j} (position {int(kp[j])})"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        qp, kp, out = prepared.inputs_f64["q_positions"], prepared.inputs_f64["k_positions"], graded.output_f64
        if out is None or not np.all(np.isfinite(out)):
            return []
        mask = graded_entries(qp, kp, spec)

        def fits(model):
            d = out - model
            rest = np.where(mask[None], np.abs(d - row_constant(d, mask)), 0.0)
            return float(np.max(rest, initial=0.0)) <= 1e-3 * max(float(np.max(np.abs(model))), 1e-300)

        ref = alibi.bias(spec.num_heads, qp, kp, causal=spec.causal, backend="numpy")
        if fits(-ref):
            return [Diagnosis("bias-sign", "the bias has the opposite sign: +m |i - j|, growing with the distance")]
        if not spec.causal and fits(alibi.bias(spec.num_heads, qp, kp, causal=True, backend="numpy")):
            return [Diagnosis("bias-varies-in-row", "the causal form -m (i - j) (or m j) used for bidirectional "
                              "attention: the bias keeps growing toward later keys instead of decaying both ways")]
        return []


PROTOCOL = AlibiBias()
