"""Protocol ``attention.mla``: DeepSeek's multi-head latent attention, its positional part.

``fn(q_nope, q_pe, k_nope, k_pe, v, positions, spec) -> out [b, s, h, d_v]``: q_nope [b, s, h,
d_nope], q_pe [b, s, h, d_rope], k_nope [b, s, h, d_nope], k_pe [b, s, 1, d_rope] (ONE rope key
per token, shared by every head), v [b, s, h, d_v] in the dtype under test; positions [b, s]
int64; spec an MlaSpec (mla_spec.py). The output must have v's shape, dtype and device. The
adapter rotates q_pe and k_pe (YaRN with its cos / sin factor mscale(s, mscale) / mscale(s,
mscale_all_dim)), forms the logits (q_nope . k_nope + q_pe' . k_pe') (d_nope + d_rope)^-1/2 m^2,
m = 0.1 mscale_all_dim ln s + 1, and attends causally (reference.attention.mla).

Grading: against reference.attention.mla on the inputs as rounded to the dtype, every query row
(row 0 of a causal case sees one key: its output is v_0 whatever the scale; the others see two or
more). Budget: attention.forward's running bound without the projections (mla_budgets.py,
docs/tolerance.md "MLA").

Diagnosis (codes in conformance/attention/__init__.py; fault models recomputed with the reference,
fitted as attention.forward fits its own: within four budgets of the model, at least twice as
close to it as to the reference, the model itself more than a budget away): ``mla-mscale-missing`` (logit scale d_qk^-1/2 without m^2:
transformers' DeepSeek-V2 and Mistral 4 before PR 47435), ``mla-mscale-wrong-field`` (m from
``mscale`` instead of ``mscale_all_dim``: Megatron-LM issue 1429), ``mla-rope-factor`` (the rope
part's cos and sin with YaRN's generic factor 0.1 ln s + 1, or with none, instead of the ratio
mscale(s, mscale) / mscale(s, mscale_all_dim)), and attention.forward's ``attention-encoding``
(q_pe and k_pe rotated in the other pair layout than spec.layout, or not rotated).
"""

from __future__ import annotations

import math

import numpy as np

from conformance.attention import mla_budgets
from conformance.attention.forward import FIT_BUDGETS
from conformance.attention.mla_spec import reference_config, spec_of
from conformance.core import tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import (adapter_inputs, argmax_index, check_tensor, finite_max, mutation_problems,
                                      over_budget)
from conformance.results import Diagnosis
from reference.attention import mla as ref
from reference.numerics import scaling as scaling_types

FLOATS = ("q_nope", "q_pe", "k_nope", "k_pe", "v")


def stages(prepared, spec) -> dict:
    """reference.attention.mla's stages of the dtype-rounded inputs, cached on prepared."""
    st = getattr(prepared, "_mla_stages", None)
    if st is None:
        x = prepared.inputs_f64
        st = ref.stages(*(x[r] for r in FLOATS), x["positions"], reference_config(spec))
        prepared._mla_stages = st
    return st


def _yarn(spec):
    """(factor, mscale, mscale_all_dim) of a YaRN spec, or None."""
    kind, params = scaling_types.resolve(spec.scaling)
    if kind != "yarn":
        return None
    return float(params["factor"]), float(params.get("mscale") or 0.0), float(params.get("mscale_all_dim") or 0.0)


def fault_models(prepared, spec) -> list:
    """[(code, what, output [b, s, h, d_v])]: the faults this case can show, recomputed with the
    reference on the case's inputs."""
    x = prepared.inputs_f64
    c = reference_config(spec)
    args = [x[r] for r in FLOATS]
    pos = x["positions"]
    qk = spec.qk_head_dim ** -0.5
    out = []
    y = _yarn(spec)
    if y is not None:
        s, ms, all_dim = y
        right = ref.softmax_scale(c)
        if not math.isclose(right, qk, rel_tol=1e-12):
            out.append(("mla-mscale-missing", f"the logits are scaled by (d_nope + d_rope)^-1/2 = {qk:.6g} without "
                        f"YaRN's m^2 = {right / qk:.6g} (m = 0.1 mscale_all_dim ln factor + 1)",
                        ref.stages(*args, pos, c, scale=qk)["out"]))
        wrong = qk * ref.mscale(s, ms) ** 2
        if ms != all_dim and not math.isclose(wrong, right, rel_tol=1e-12):
            out.append(("mla-mscale-wrong-field", f"the softmax scale's m is computed from mscale = {ms:g} "
                        f"(m^2 = {ref.mscale(s, ms) ** 2:.6g}) instead of mscale_all_dim = {all_dim:g} "
                        f"(m^2 = {ref.mscale(s, all_dim) ** 2:.6g})", ref.stages(*args, pos, c, scale=wrong)["out"]))
        ratio = ref.mscale(s, ms) / ref.mscale(s, all_dim) if ms and all_dim else ref.mscale(s)
        for factor, what in ((ref.mscale(s), "YaRN's generic attention factor 0.1 ln factor + 1"),
                             (1.0, "no attention factor")):
            if not math.isclose(factor, ratio, rel_tol=1e-12):
                k = factor / ratio  # the rotation is linear: scaling the pe inputs scales cos and sin
                model = ref.stages(x["q_nope"], x["q_pe"] * k, x["k_nope"], x["k_pe"] * k, x["v"], pos, c)["out"]
                out.append(("mla-rope-factor", f"q_pe and k_pe's cos and sin carry {what} ({factor:.6g}) instead "
                            f"of mscale(factor, mscale) / mscale(factor, mscale_all_dim) = {ratio:.6g}", model))
    other = "half" if spec.layout == "interleaved" else "interleaved"
    swapped = ref.MlaConfig(c.num_heads, c.d_nope, c.d_rope, c.d_v, c.base, other, c.scaling, c.causal)
    out.append(("attention-encoding", f"q_pe and k_pe are rotated in the {other} pair layout; spec.layout = "
                f"{spec.layout!r}", ref.stages(*args, pos, swapped)["out"]))
    st = ref.stages(*args, np.zeros_like(pos), c)  # position 0 everywhere: R(0) = f I
    out.append(("attention-encoding", "q_pe and k_pe are not rotated (every token at position 0)", st["out"]))
    return out


class AttentionMla(Protocol):
    name = "attention.mla"
    family = "attention"
    signature = "fn(q_nope, q_pe, k_nope, k_pe, v, positions, spec) -> out [batch, seq, heads, d_v]"
    acceptable_note = "float32 accumulation, softmax or RoPE tables"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, FLOATS, ("positions",), dtype, device)
        return Prepared((*args, spec), inputs, watched, dtype, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        shape = prepared.inputs_f64["v"].shape
        out, problems, got = check_tensor(value, "the output", shape, prepared.dtype, prepared.device)
        dtype = got if got in tolerance.DTYPES else prepared.dtype
        problems += mutation_problems(prepared.watched)
        graded = Graded(problems=problems, output_f64=out, output_dtype=dtype)
        if out is None:
            return graded
        ref_out = stages(prepared, spec)["out"]
        bad = ~np.isfinite(out)
        if bad.any():
            first = [int(i) for i in np.argwhere(bad)[0]]
            graded.problems.append(Diagnosis("non-finite", f"the output has {int(bad.sum())} NaN/Inf element(s) "
                                             f"(first at {first})"))
        with np.errstate(invalid="ignore"):
            err = np.where(np.isfinite(out), np.abs(out - ref_out), np.inf)
        graded.max_abs_error = finite_max(err)
        for profile in tolerance.PROFILES:
            budget = mla_budgets.forward_budget(stages(prepared, spec), spec, dtype, profile)
            r = tolerance.ratio(err, budget)
            graded.ratio[profile] = finite_max(r) if np.all(np.isfinite(r)) else float("inf")
            graded.worst_index[profile] = argmax_index(r)
            graded.mismatch[profile] = over_budget(r) + ("elements",)
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        b, i, h, e = list(index)
        pos = prepared.inputs_f64["positions"]
        return f"batch row {b}, query {i} (position {int(pos[b, i])}), head {h}, feature {e}"

    def repro_call(self) -> str:
        return "fn(*args)"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        out = graded.output_f64
        if out is None or not np.all(np.isfinite(out)):
            return []
        st = stages(prepared, spec)
        budget = mla_budgets.forward_budget(st, spec, dtype if dtype in tolerance.DTYPES else "float32", "standard")

        def gap(a, b):
            return float(np.max(np.abs(a - b) / budget, initial=0.0))

        ref_gap = gap(out, st["out"])
        if ref_gap <= 1.0:  # within the standard budget: failing for another reason (mutation, dtype)
            return []
        for code, what, model in fault_models(prepared, spec):
            if gap(model, st["out"]) > 1.0 and gap(out, model) <= min(FIT_BUDGETS, ref_gap / 2):
                return [Diagnosis(code, what)]
        return []


PROTOCOL = AttentionMla()
