"""Protocol ``rope.apply_qk_fp8``: ``fn(q, k, positions, spec) -> (q8, k8)``.

RoPE on q and k fused with their quantisation to float8 e4m3fn, one per-tensor scale each (FlashInfer's
RoPE + fp8 quantize kernels, vLLM's fp8 KV cache): q [b, s, heads, head_dim] and k [b, s, kv_heads,
head_dim] in the dtype under test, positions int64 [b, s]; spec is an :class:`Fp8RopeSpec` (RopeSpec
plus ``q_scale`` and ``k_scale``). The answer is two torch.float8_e4m3fn tensors shaped like q and k,

    q8 = sat(round_e4m3(rope(q) / q_scale)),   k8 likewise with k_scale

(reference/rope/fp8.py; sat clamps to e4m3fn's largest finite value 448).

Budget (docs/tolerance.md, "RoPE then float8"): a correct kernel rounds to e4m3 some value within
the RoPE budget of the exact one, so an element passes when it is an e4m3 value in

    [round_down(lo), round_up(hi)],   lo, hi = y -+ w,   y = rope(x) / scale,
    w = b / scale + DIVISION_ROUNDINGS * u_tab * (|y| + b / scale)

with b the element's rotation budget in the input dtype (conformance.core.rotation_budgets: the
pair's budget for both of its elements, the passthrough budget past rotary_dim) and u_tab the
profile's rounding unit; both ends saturated to +-448. Its ratio is its distance from y (clamped
to +-448) over the distance from y to the accepted end on its side: <= 1 exactly when accepted. No
hand-set tolerance: the budget follows e4m3's spacing (2**-3 relative, 2**-9 among subnormals) and
the input dtype's rotation error, where a flat rtol is too loose for large values and too tight
near zero.

Diagnosis (fp8_diagnosis.py): NaN exactly where |y| > 448 with everything else accepted is
``fp8-not-saturated``; each of q8 and k8 accepted around rope(x) * scale instead is
``fp8-scale-inverted``; otherwise rope.apply's diagnosis of the dequantised q8 * q_scale and
k8 * k_scale. Worst-element indices are [tensor (0 = q, 1 = k), batch, seq, head, dim].
Not differentiable (no --grad): quantisation has no useful gradient.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from conformance.core import tolerance
from conformance.core.protocol import Graded
from conformance.core.rotation_spec import RopeSpec, from_layout, layout_shape
from conformance.core.tensors import dtype_name, mutation_problems, not_a_tensor, type_name
from conformance.results import Diagnosis
from conformance.rope import fp8_diagnosis, fp8_grading
from conformance.rope.apply_qk import ROLES, RopeApplyQk
from conformance.rope.spec import spec_of as rope_spec_of

FLOAT8 = "float8_e4m3fn"


@dataclass(frozen=True)
class Fp8RopeSpec(RopeSpec):
    """RopeSpec plus the per-tensor scales: stored = sat(round_e4m3(rope(x) / scale))."""

    q_scale: float = 1.0
    k_scale: float = 1.0


def spec_of(params) -> Fp8RopeSpec:
    base = rope_spec_of(params)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(RopeSpec)}
    return Fp8RopeSpec(**fields, q_scale=float(params["q_scale"]), k_scale=float(params["k_scale"]))


def read_float8(value, what: str, shape, device: str):
    """(float64 numpy or None, problems): a torch.float8_e4m3fn tensor of ``shape``; another dtype
    is dtype-changed (its values are still read, to explain them)."""
    import torch

    if not isinstance(value, torch.Tensor):
        return None, [Diagnosis("shape-changed", not_a_tensor(value, what))]
    if tuple(value.shape) != tuple(shape):
        return None, [Diagnosis("shape-changed", f"{what} has shape {list(value.shape)}, expected {list(shape)}")]
    problems = []
    if value.dtype != torch.float8_e4m3fn:
        problems.append(Diagnosis("dtype-changed", f"{what} has dtype {dtype_name(value.dtype)}, expected "
                                  f"{FLOAT8}"))
    if value.is_complex() or not value.is_floating_point():
        return None, problems
    if device and value.device.type != torch.device(device).type:
        problems.append(Diagnosis("dtype-changed", f"{what} is on device {value.device}, expected {device}"))
    return value.detach().to("cpu", torch.float64).numpy(), problems


class RopeApplyQkFp8(RopeApplyQk):
    name = "rope.apply_qk_fp8"
    family = "rope"
    signature = "fn(q, k, positions, spec) -> (q8, k8)"
    acceptable_note = "float32 angle rounding before the float8 rounding"
    differentiable = False

    def spec(self, case):
        return spec_of(case.params)

    def grade(self, case, spec, prepared, value) -> Graded:
        if not (isinstance(value, (tuple, list)) and len(value) == 2):
            return Graded(problems=[Diagnosis("shape-changed", f"the output is a {type_name(value)}, not a "
                                              "(q8, k8) pair")])
        graded = {}
        for i, role in enumerate(ROLES):
            x = prepared.inputs_f64[role]
            out, problems = read_float8(value[i], f"{role}8", layout_shape(x.shape, spec), prepared.device)
            g = Graded(problems=problems, output_dtype=None if out is None else dtype_name(value[i].dtype))
            if out is not None:
                g.output_f64 = from_layout(out, spec)
                fp8_grading.grade(g, spec, prepared.dtype, x, prepared.inputs_f64["positions"],
                                  _scale(spec, role), f"{role}8")
            graded[role] = g
        out = Graded(problems=[d for g in graded.values() for d in g.problems] + mutation_problems(prepared.watched))
        if any(not g.gradable for g in graded.values()):
            return out
        out.output_f64 = {role: graded[role].output_f64 for role in ROLES}
        out.output_dtype = graded["q"].output_dtype
        errs = [g.max_abs_error for g in graded.values() if g.max_abs_error is not None]
        out.max_abs_error = max(errs) if errs else None
        for profile in tolerance.PROFILES:
            ratios = {role: graded[role].ratio.get(profile) for role in ROLES}
            known = [r for r in ratios.values() if r is not None]
            out.ratio[profile] = None if len(known) < 2 else max(known)
            worst = max(ROLES, key=lambda r: np.inf if ratios[r] is None else ratios[r])
            out.worst_index[profile] = [ROLES.index(worst)] + list(graded[worst].worst_index.get(profile, []))
            counts = [graded[role].mismatch[profile] for role in ROLES]
            out.mismatch[profile] = (counts[0][0] + counts[1][0], counts[0][1] + counts[1][1], "values")
            out.curve[profile] = graded[worst].curve.get(profile, [])
        return out

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        found = []
        for role in ROLES:
            got = fp8_diagnosis.diagnose(prepared.inputs_f64[role], prepared.inputs_f64["positions"],
                                         graded.output_f64[role], spec, dtype, _scale(spec, role))
            found += [Diagnosis(d.code, f"{role}8: {d.message}") for d in got]
        return found

    def probe(self, invoker, cases, options):
        return None  # rope.apply_qk's probe grades float outputs; the pair layout is the case's

    def grad_blackbox(self, invoker, device, probe) -> list:
        return []


def _scale(spec, role: str) -> float:
    return float(spec.q_scale if role == "q" else spec.k_scale)


PROTOCOL = RopeApplyQkFp8()
