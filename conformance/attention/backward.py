"""The attention layer's backward pass for ``--grad`` (attention.forward): cotangent, reference
gradients, their budget, diagnosis and the gradcheck case.

Gradients graded: of hidden (argument 0) and of the four weights, reached by the paths
(1, "wq"), (1, "wk"), (1, "wv"), (1, "wo") into the weights dict (conformance.training's path
form), and of the bias's learned parameters where the weights dict holds them: T5's (1,
"rel_bias"), FIRE's (1, "c"), (1, "L_multiplier"), (1, "W1"), (1, "b1"), (1, "W2"), (1, "b2").
ALiBi's slopes and KERPLE's r1, r2 are configuration (the spec), not tensors: no gradient. The
cache, positions and mask are not differentiated.

Cotangent: the case's draw (conformance.training.cotangent, representable in every dtype), zero
on the rows that are not graded (padded queries, queries that see no key): a training loss masks
them, and their output is not defined (0/0) in every implementation.

Reference: reference.attention.backward.vjp_from_stages on the dtype-rounded inputs and the
cotangent as the backward received it (cast to the output's dtype), from the forward's stages.

Budget (docs/tolerance.md, "Attention gradients"): a running bound through the backward,
element by element, started from the forward's stage bounds (budgets.forward_bounds) and written
out in budgets.gradient_budget: gamma(n) = n a / (1 - n a) for every n-term dot product (dO over
D, dP and delta over d, dQ over the visible keys, dK and dV over the s hq/hkv (query, head) pairs
of a kv head, dX over hq d + 2 hkv d, weight gradients over the b s tokens), one u per stored
intermediate, the softmax backward's difference, product and scale, the bias's parameters from
dS's bound (T5's scatter-add, FIRE's VJP), RoPE's VJP with the forward's
per-pair bound (same angles), in the forward's units: u = u_T, a = min(t, u_32) (the
fp32-accumulation assumption for float16 / bfloat16: every torch matmul, softmax and SDPA
backward accumulates half precision in float32), t = table_roundoff, the profile's angle unit.
Both ways of forming delta (rowsum(dO o o) as FlashAttention, sum_j P dP as the math path) are
covered (the larger bound).

Diagnosis (core codes): a failing gradient is compared with fault models computed from the same
stages, each graded with the same budget: the logit scale 1/sqrt(d) missing from the backward only
(or applied twice): backward-scale; RoPE's backward rotating by R_m instead of R_{-m}:
backward-transposed; a zero gradient where the reference is not: backward-missing; otherwise a
gradient that is c times the right one: backward-scale.
"""

from __future__ import annotations

import math

import numpy as np

from conformance.attention.budgets import gradient_budget
from conformance.attention.spec import AttentionSpec
from conformance.attention.stages import reference_config
from conformance.attention.stages import stages as forward_stages
from conformance.core import tolerance
from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded
from conformance.core.tensors import (abs_error, argmax_index, check_tensor, finite_max, over_budget,
                                      torch_dtype)
from conformance.results import Diagnosis
from conformance.training import cotangent
from reference.attention.backward import bias_roles as reference_roles
from reference.attention.backward import vjp_from_stages
from reference.numerics import rotation

WEIGHTS = ("wq", "wk", "wv", "wo")
ROLES = ("hidden", *WEIGHTS)
GRAD_ARGS = {"hidden": 0, **{n: (1, n) for n in WEIGHTS}}


def bias_roles(spec) -> tuple:
    """The bias's parameters graded for this spec: T5's rel_bias, FIRE's c, L_multiplier, W1, b1,
    W2, b2 (entries of the weights dict); none for the other encodings (ALiBi's slopes, KERPLE's
    r1 and r2 are configuration, not tensors)."""
    return reference_roles(reference_config(spec))


def roles(spec) -> tuple:
    return ROLES + bias_roles(spec)


def grad_args(spec) -> dict:
    """{role: argument index or (1, key)}: GRAD_ARGS plus the bias's parameters' paths."""
    return {**GRAD_ARGS, **{n: (1, n) for n in bias_roles(spec)}}


class GradIndex(list):
    """A gradient's worst index (plain ints in the report) remembering its role, for locate."""

    def __init__(self, index, role=None):
        super().__init__(int(i) for i in index)
        self.role = role


def stages(prepared, spec) -> dict:
    """The forward's stages (conformance.attention.stages, cached on prepared) with the positions added."""
    st = forward_stages(prepared, spec)
    st.setdefault("positions", np.asarray(prepared.inputs_f64["positions"], dtype=np.int64))
    return st


def cotangent_tensor(case, spec, prepared):
    """g [b, s, D] in the dtype under test on the case's device, zero on the rows not graded."""
    import torch

    shape = prepared.inputs_f64["hidden"].shape
    g = cotangent(case.id, shape, prepared.dtype) * stages(prepared, spec)["rows"][:, :, None]
    return torch.from_numpy(np.ascontiguousarray(g)).to(dtype=torch_dtype(prepared.dtype), device=prepared.device)


def cotangent_f64(g_tensor) -> np.ndarray:
    import torch

    return g_tensor.detach().to("cpu", torch.float64).numpy()


def reference_gradients(st, g, spec, **faults) -> dict:
    return vjp_from_stages(st, g, reference_config(spec), **faults)


def budgets(st, g, spec, dtype: str, profile: str, ref: dict, back: dict) -> dict:
    """{role: budget array}: conformance.attention.budgets.gradient_budget (module docstring)."""
    return gradient_budget(st, spec, st["positions"], g, back, ref, dtype, profile)


def grade_gradients(case, spec, prepared, cotangents, grads) -> dict:
    """{role: Graded} of the five gradients and the bias's parameters' (``roles``); prepared.dtype
    is the budget's dtype."""
    st = stages(prepared, spec)
    g = cotangent_f64(cotangents[0])
    back = {}
    ref = reference_gradients(st, g, spec, keep=back)
    dtype = prepared.dtype if prepared.dtype in tolerance.DTYPES else "float32"
    bud = {p: budgets(st, g, spec, dtype, p, ref, back) for p in tolerance.PROFILES}
    out = {}
    for role in roles(spec):
        what = f"the gradient of {role}"
        missing = False
        grad = grads.get(role)
        if grad is None and role not in ROLES:
            # a bias parameter's right gradient can be exactly 0 (FIRE's b2 always: the softmax ignores a
            # constant per row; L_multiplier when every query is past the threshold): None is graded as 0
            import torch

            grad = torch.zeros(np.shape(ref[role]), dtype=torch.float64, device=prepared.device)
            missing = True
        elif grad is None:
            out[role] = Graded(problems=[Diagnosis("backward-missing", f"no gradient reaches {role} (autograd "
                                                   "returned None: the output does not depend on it through "
                                                   "autograd)")])
            continue
        arr, problems, got = check_tensor(grad, what, np.shape(ref[role]), None, prepared.device)
        graded = Graded(problems=problems, output_f64=arr, output_dtype=None if missing else got)
        out[role] = graded
        if arr is None:
            continue

        def fill(profile, err):
            r = tolerance.ratio(err, bud[profile][role])
            graded.ratio[profile] = finite_max(r) if np.all(np.isfinite(r)) else float("inf")
            graded.worst_index[profile] = GradIndex(argmax_index(r), role)
            graded.mismatch[profile] = over_budget(r) + ("elements",)

        grade_profiles(graded, arr, ref[role], what, fill)
        if role not in ROLES and missing and not graded.ratio["standard"] <= 1.0:
            graded.problems.append(Diagnosis("backward-missing", f"no gradient reaches {role} (autograd returned "
                                             "None: the bias does not depend on it through autograd)"))
    return out


def _forward_rotation(x, positions, c):
    """R_m x: RoPE's forward applied in the backward (the transposed mistake)."""
    return rotation.apply(x, positions, rotary_dim=c.rot, base=c.base, layout=c.layout, scaling=c.scaling,
                          seq_len=c.seq_len or None, backend="numpy")


def _model(st, g, spec, **faults):
    back = {}
    return reference_gradients(st, g, spec, keep=back, **faults), back


def fault_models(st, g, spec) -> list:
    """[(code, message, {role: gradient}, {intermediates})]: the wrong backwards a failing gradient
    is compared with (each graded with the running budget of its own intermediates)."""
    d = spec.head_dim
    out = [("backward-scale", f"the backward omits the logit scale 1/sqrt(head_dim) = 1/{math.sqrt(d):.6g} "
            "that the forward applies (the gradients of q and k are sqrt(d) times too large)",
            *_model(st, g, spec, logit_scale=1.0)),
           ("backward-scale", "the backward applies the logit scale 1/sqrt(head_dim) twice",
            *_model(st, g, spec, logit_scale=1.0 / d))]
    if spec.encoding == "rope":
        out.append(("backward-transposed", "RoPE's backward rotates the gradients of q and k by R_m (the forward "
                    "rotation) instead of R_m^T = R_{-m}", *_model(st, g, spec, rope_back=_forward_rotation)))
    return out


def diagnose_gradients(case, spec, prepared, cotangents, grads, graded, dtype) -> list:
    """Diagnoses of the failing gradients (module docstring)."""
    st = stages(prepared, spec)
    g = cotangent_f64(cotangents[0])
    ref, back = _model(st, g, spec)
    dtype = dtype if dtype in tolerance.DTYPES else "float32"
    failing = [r for r in roles(spec) if r in graded and (graded[r].ratio.get("standard") or 0.0) > 1.0]
    if not failing:
        return []
    found = []
    zero = [r for r in failing if not np.any(graded[r].output_f64) and np.any(ref[r])]
    if zero:
        found.append(Diagnosis("backward-missing", f"{', '.join(zero)}: the gradient is zero everywhere: "
                               "nothing flows back"))
        failing = [r for r in failing if r not in zero]
        if not failing:
            return found

    def fits(model, model_back) -> bool:
        bud = budgets(st, g, spec, dtype, "standard", model, model_back)
        return all(np.max(tolerance.ratio(abs_error(graded[r].output_f64, model[r]), bud[r]), initial=0.0) <= 1.0
                   for r in failing)

    for code, message, model, model_back in fault_models(st, g, spec):
        if fits(model, model_back):
            return found + [Diagnosis(code, f"{', '.join(failing)}: {message}")]
    bud = budgets(st, g, spec, dtype, "standard", ref, back)
    for r in failing:
        got = graded[r].output_f64
        den = float(np.vdot(ref[r], ref[r]))
        if den > 0.0 and np.all(np.isfinite(got)):
            c = float(np.vdot(got, ref[r])) / den
            if abs(c - 1.0) > 1e-3 and np.max(tolerance.ratio(abs_error(got, c * ref[r]), bud[r])) <= 1.0:
                found.append(Diagnosis("backward-scale", f"{r}: the gradient is {c:.6g} times the right one"))
    return found


def gradcheck_case(device: str):
    """(args, what) for torch.autograd.gradcheck: hidden [1, 3, 8] float64, 2 query heads over 1 kv
    head of size 4, causal RoPE at positions 0, 1, 7 (m = 0 alone cannot tell R_m from R_{-m})."""
    import torch

    gen = torch.Generator().manual_seed(15)

    def draw(*shape, scale=1.0):
        return (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1).mul(scale).to(device)

    hidden = draw(1, 3, 8)
    weights = {"wq": draw(8, 8, scale=0.5), "wk": draw(4, 8, scale=0.5), "wv": draw(4, 8, scale=0.5),
               "wo": draw(8, 8, scale=0.5)}
    positions = torch.tensor([[0, 1, 7]], dtype=torch.int64, device=device)
    spec = AttentionSpec(num_heads=2, num_kv_heads=1, head_dim=4, causal=True, encoding="rope", rotary_dim=4)
    what = "hidden [1, 3, 8] and the four weights, float64, 2 heads over 1 kv head (d = 4), causal RoPE at 0, 1, 7"
    return (hidden, weights, positions, spec), what
