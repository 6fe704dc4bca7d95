"""Protocol ``rope.qk_norm``: ``fn(q, k, positions, q_weight, k_weight, spec) -> (q_out, k_out)``.

QK-norm then RoPE, as Qwen3 and OLMo 2 run their query and key: q [b, s, hq, d] and k [b, s, hkv,
d] in the dtype under test, positions int64 [b, s], the RMSNorm weights q_weight, k_weight ([d]
for spec.norm_scope "head": Qwen3's Qwen3RMSNorm(head_dim) per head; [h d] for "full": OLMo 2's
norm over the whole projection before it is split into heads); the outputs have q's and k's
shapes and dtype. Reference: reference.rope.qk_norm (y = x / sqrt(mean(x^2) + eps) * w, then
reference.rope.apply).

Why the RoPE family: the protocol grades what a rotary layer returns for q and k (rope.apply_qk's
signature with the norm's weights added), with RoPE's rotation budget; no attention is computed.

Budget (docs/tolerance.md, "QK-norm then RoPE", after section 8), per element of the normalised y with
the norm's group size n (d or h d) and a = accumulation_roundoff (float32 for half inputs, as
both models' norms upcast), u = u_T:

    E_y = |y| (gamma(n) / 2 + 4 a + 2 u)
    (the sum of squares gamma(n) and the mean and eps' sum a, halved by the square root; rsqrt
    2 a; x times it a; the cast to T and the weight's product u each)

and per rotated pair (a, b), with M = |y| + E_y, the rope.apply budget on M plus the norm's error
turned: scaled_rotation_budget(M_a + M_b, |m theta|, ...) + f (E_a + E_b); the tail past
rotary_dim keeps E_y. The case's ratio is the larger of q's and k's.

Diagnosis (fault models recomputed with the reference, fitted as attention.forward fits its own):
``norm-after-rope`` (RoPE first, the norm on the rotated vector: equal in exact arithmetic only for a
uniform weight, so the cases draw non-uniform ones) and ``norm-scope`` (the norm over the other
group: per head where the spec says the whole projection, or the reverse, with the weight read
per head or tiled over the heads).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import numpy as np

from conformance.core import tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.rotation_budgets import scaled_rotation_budget
from conformance.core.tensors import (adapter_inputs, argmax_index, check_tensor, finite_max, mutation_problems,
                                      over_budget, type_name)
from conformance.results import Diagnosis
from reference.numerics import rotation
from reference.numerics.frequencies import frequencies
from reference.numerics.layouts import pair_indices
from reference.rope import qk_norm as ref

FIT_BUDGETS = 4.0  # as attention.forward's fault models
ROLES = ("q", "k")


@dataclass(frozen=True)
class QkNormSpec:
    """QK-norm then RoPE.

    num_heads, num_kv_heads, head_dim   q has num_heads heads, k num_kv_heads, each of head_dim
    rotary_dim, base, layout, scaling   RoPE's (as RopeSpec: "half" rotate_half pairs or
                                        "interleaved"; scaling in HF rope_parameters form)
    eps          RMSNorm's epsilon (added to the mean of squares)
    norm_scope   "head": y = x / rms(x) * w over each head's head_dim features, w [head_dim]
                 (Qwen3); "full": over the token's heads * head_dim features, w [heads * head_dim]
                 (OLMo 2, normalising the projection before the split into heads)
    """

    num_heads: int
    num_kv_heads: int
    head_dim: int
    rotary_dim: int = 0
    base: float = 10000.0
    layout: str = "half"
    scaling: Optional[Mapping[str, Any]] = field(default=None, hash=False, compare=False)
    eps: float = 1e-6
    norm_scope: str = "head"


def spec_of(p) -> QkNormSpec:
    return QkNormSpec(int(p["num_heads"]), int(p["num_kv_heads"]), int(p["head_dim"]),
                      int(p.get("rotary_dim") or p["head_dim"]), float(p.get("base", 10000.0)),
                      str(p.get("layout", "half")), copy.deepcopy(p.get("scaling")), float(p["eps"]),
                      str(p["norm_scope"]))


def _rope(y, positions, spec):
    return rotation.apply(y, positions, rotary_dim=spec.rotary_dim, base=spec.base, layout=spec.layout,
                          scaling=spec.scaling, backend="numpy")


def budget(y, positions, spec, dtype, profile):
    """float64 [b, s, h, d]: the budget of each output element given the exact normalised y."""
    u = tolerance.unit_roundoff(dtype)
    a = tolerance.accumulation_roundoff(dtype, profile)
    n = spec.head_dim if spec.norm_scope == "head" else y.shape[2] * spec.head_dim
    gam = n * a / (1 - n * a)
    E = np.abs(y) * (gam / 2 + 4 * a + 2 * u)
    M = np.abs(y) + E
    r = spec.rotary_dim
    theta, f = frequencies(r, spec.base, spec.scaling)
    first, second = pair_indices(r, spec.layout)
    phi = np.abs(np.asarray(positions, dtype=np.float64))[:, :, None, None] * theta
    pair = scaled_rotation_budget(M[..., first] + M[..., second], phi, r, spec.base, dtype, profile, f) \
        + abs(f) * (E[..., first] + E[..., second])
    out = E + tolerance.SMALLEST_SUBNORMAL[dtype]
    out[..., first] = pair
    out[..., second] = pair
    return out


def _normalised(prepared, spec):
    """{role: exact normalised y} of the dtype-rounded inputs (cached)."""
    got = getattr(prepared, "_qk_norm", None)
    if got is None:
        x = prepared.inputs_f64
        got = {role: ref.rms_norm(x[role], x[f"{role}_weight"], spec.eps, spec.norm_scope) for role in ROLES}
        got["reference"] = {role: _rope(got[role], x["positions"], spec) for role in ROLES}
        prepared._qk_norm = got
    return got


def fault_models(prepared, spec) -> list:
    """[(code, what, {role: output})]."""
    x = prepared.inputs_f64
    pos = x["positions"]
    after = {role: ref.rms_norm(_rope(x[role], pos, spec), x[f"{role}_weight"], spec.eps, spec.norm_scope)
             for role in ROLES}
    models = [("norm-after-rope", "RoPE is applied before the norm (the norm's weight meets rotated features)",
               after)]
    other = {}
    for role in ROLES:
        w, h, d = x[f"{role}_weight"], x[role].shape[2], spec.head_dim
        if spec.norm_scope == "head":  # over the whole projection, the head's weight tiled over the heads
            other[role] = _rope(ref.rms_norm(x[role], np.tile(w, h), spec.eps, "full"), pos, spec)
        else:  # per head, each head reading its slice of the projection's weight
            other[role] = _rope(ref.rms_norm(x[role], w.reshape(h, d), spec.eps, "head"), pos, spec)
    wrong = "the whole projection (heads x head_dim)" if spec.norm_scope == "head" else "each head"
    models.append(("norm-scope", f"the norm is taken over {wrong}; spec.norm_scope = {spec.norm_scope!r}", other))
    return models


class RopeQkNorm(Protocol):
    name = "rope.qk_norm"
    family = "rope"
    signature = "fn(q, k, positions, q_weight, k_weight, spec) -> (q_out, k_out)"
    acceptable_note = "float32 norm or RoPE tables"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, ("q", "k", "q_weight", "k_weight"), ("positions",),
                                               dtype, device)
        q, k, qw, kw, pos = args
        return Prepared((q, k, pos, qw, kw, spec), inputs, watched, dtype, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        if not (isinstance(value, (tuple, list)) and len(value) == 2):
            return Graded(problems=[Diagnosis("shape-changed", f"the output is a {type_name(value)}, not a "
                                              "(q_out, k_out) pair")])
        outs, problems, got = {}, [], None
        for role, v in zip(ROLES, value):
            out, probs, dt = check_tensor(v, f"{role}_out", prepared.inputs_f64[role].shape, prepared.dtype,
                                          prepared.device)
            outs[role], got = out, got or dt
            problems += probs
        problems += mutation_problems(prepared.watched)
        dtype = got if got in tolerance.DTYPES else prepared.dtype
        graded = Graded(problems=problems, output_dtype=dtype)
        if any(o is None for o in outs.values()):
            return graded
        graded.output_f64 = outs
        norm = _normalised(prepared, spec)
        errs = {}
        for role in ROLES:
            o = outs[role]
            with np.errstate(invalid="ignore"):
                errs[role] = np.where(np.isfinite(o), np.abs(o - norm["reference"][role]), np.inf)
            if not np.all(np.isfinite(o)):
                graded.problems.append(Diagnosis("non-finite", f"{role}_out has {int((~np.isfinite(o)).sum())} "
                                                 "NaN/Inf element(s)"))
        graded.max_abs_error = max(finite_max(e) for e in errs.values())
        pos = prepared.inputs_f64["positions"]
        for profile in tolerance.PROFILES:
            rs = {role: tolerance.ratio(errs[role], budget(norm[role], pos, spec, dtype, profile)) for role in ROLES}
            worst = max(ROLES, key=lambda r_: finite_max(rs[r_]) if np.all(np.isfinite(rs[r_])) else np.inf)
            graded.ratio[profile] = finite_max(rs[worst]) if np.all(np.isfinite(rs[worst])) else float("inf")
            graded.worst_index[profile] = [ROLES.index(worst)] + list(argmax_index(rs[worst]))
            graded.mismatch[profile] = over_budget(rs["q"], rs["k"]) + ("elements",)
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        role = ROLES[int(index[0])]
        b, i, h, e = (int(v) for v in index[1:])
        pos = prepared.inputs_f64["positions"]
        return f"{role}: batch row {b}, token {i} (position {int(pos[b, i])}), head {h}, feature {e}"

    def repro_call(self) -> str:
        return "fn(*args)"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        outs = graded.output_f64
        if not outs or not all(np.all(np.isfinite(o)) for o in outs.values()):
            return []
        norm = _normalised(prepared, spec)
        pos = prepared.inputs_f64["positions"]
        dt = dtype if dtype in tolerance.DTYPES else "float32"
        buds = {role: budget(norm[role], pos, spec, dt, "standard") for role in ROLES}

        def gap(a, b, bud=buds):
            return max(float(np.max(np.abs(a[r] - b[r]) / bud[r], initial=0.0)) for r in ROLES)

        ref_gap = gap(outs, norm["reference"])
        if ref_gap <= 1.0:
            return []
        for code, what, model in fault_models(prepared, spec):
            # the fit is measured on the model's magnitudes too: a faulty weight may put a large value
            # where the reference has a small one, and the implementation's roundings scale with it
            wide = {r: budget(np.maximum(np.abs(norm[r]), np.abs(model[r])), pos, spec, dt, "standard")
                    for r in ROLES}
            if gap(model, norm["reference"]) > 1.0 and gap(outs, model, wide) <= min(FIT_BUDGETS, ref_gap / 2):
                return [Diagnosis(code, what)]
        return []


PROTOCOL = RopeQkNorm()
