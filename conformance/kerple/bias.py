"""Protocol ``kerple.bias``: ``fn(q_positions, k_positions, spec) -> bias [num_heads, sq, sk]``.

q_positions, k_positions int64 [sq], [sk]; spec a KerpleSpec. The reference is
reference.kerple.bias (NumPy backend, within 4 ulp of float64) after the clamps. Causal cases
grade the keys j <= i only. Dtype-free: graded in the dtype returned, with u = that dtype's
table roundoff (standard: at least u_32; strict: u of the dtype).

Budget per entry: conformance.core.bias_budgets.kerple_bias (its derivation there; shared with
the attention composite).
"""

from __future__ import annotations

import numpy as np

from conformance.core import bias_budgets, tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import adapter_inputs, check_tensor, grade_on_mask
from conformance.kerple.spec import spec_of
from conformance.results import Diagnosis
from reference import kerple


def graded_entries(qp, kp, spec) -> np.ndarray:
    """bool [sq, sk]: the entries that count (causal: key position <= query position)."""
    return (kp[None, :] <= qp[:, None]) if spec.causal else np.ones((qp.size, kp.size), dtype=bool)


def reference(qp, kp, spec, variant=None, clamped=True) -> np.ndarray:
    """The bias of ``variant`` (default: the spec's), with the clamps or (clamped=False) without."""
    variant = variant or spec.variant
    if clamped:
        return kerple.bias(qp.astype(np.int64), kp.astype(np.int64), variant, spec.r1, spec.r2, backend="numpy")
    r1, r2 = np.array(spec.r1)[:, None, None], np.array(spec.r2)[:, None, None]
    n = np.abs(qp[:, None] - kp[None, :])[None]
    with np.errstate(all="ignore"):
        return -r1 * (np.log1p(r2 * n) if variant == "log" else np.power(n, r2))


def budget(qp, kp, spec, ref, dtype, profile) -> np.ndarray:
    """[H, sq, sk]: the budget per entry at the case's spec (conformance.core.bias_budgets)."""
    return bias_budgets.kerple_bias(qp, kp, spec.variant, spec.r1, spec.r2, ref, dtype, profile)


class KerpleBias(Protocol):
    name = "kerple.bias"
    family = "kerple"
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
        ref = reference(qp, kp, spec)
        return grade_on_mask(graded, out, ref, graded_entries(qp, kp, spec)[None],
                             lambda profile: budget(qp, kp, spec, ref, dtype, profile), "the bias", "entries",
                             distance=np.abs(qp[:, None] - kp[None, :])[None])

    def locate(self, case, spec, prepared, index) -> str:
        h, i, j = index
        qp, kp = prepared.inputs_f64["q_positions"], prepared.inputs_f64["k_positions"]
        return f"head {h}, query {i} (position {int(qp[i])}), key {j} (position {int(kp[j])})"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        qp, kp, out = prepared.inputs_f64["q_positions"], prepared.inputs_f64["k_positions"], graded.output_f64
        if out is None:
            return []
        mask = graded_entries(qp, kp, spec)[None]
        ref = reference(qp, kp, spec)
        scale = max(float(np.max(np.where(mask, np.abs(ref), 0.0), initial=0.0)), 1e-300)
        other = "power" if spec.variant == "log" else "log"
        candidates = (
            ("kerple-sign", -ref, "the bias has the opposite sign: +r1 f(|i - j|), growing with the distance"),
            ("kerple-clamp-missing", reference(qp, kp, spec, clamped=False),
             "the parameters are used without the code's clamps (" + ("r1, r2 >= 1e-2" if spec.variant == "log"
                                                                      else "r1 >= 1e-2, r2 in [1e-2, 2]") + ")"),
            ("kerple-variant-swapped", reference(qp, kp, spec, variant=other),
             f"the {other} variant's formula used for the {spec.variant} variant"),
        )
        for code, model, message in candidates:
            if _distinct(model, ref, mask, scale) and _fits(out, model, mask):
                return [Diagnosis(code, message)]
        return []


def _fits(out, model, mask) -> bool:
    """out matches model on the graded entries: non-finite where it is, within 1e-3 elsewhere."""
    finite = np.isfinite(model)
    if np.any(mask & (finite != np.isfinite(out))):
        return False
    sel = mask & finite
    if not sel.any():
        return True
    size = float(np.max(np.abs(model[sel])))
    return float(np.max(np.abs(out[sel] - model[sel]))) <= 1e-3 * max(size, 1e-300)


def _distinct(model, ref, mask, scale) -> bool:
    """model differs from the reference by more than 1 %, so that fitting it says something."""
    finite = np.isfinite(model)
    if np.any(mask & ~finite):
        return True
    return float(np.max(np.where(mask, np.abs(model - ref), 0.0), initial=0.0)) > 1e-2 * scale


PROTOCOL = KerpleBias()
