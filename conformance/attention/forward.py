"""Protocol ``attention.forward``: ``fn(hidden, weights, positions, spec) -> out [batch, seq, d_model]``.

hidden [b, s, D] and the weights dict {"wq" [hq d, D], "wk" [hkv d, D], "wv" [hkv d, D],
"wo" [D, hq d]} (nn.Linear layout, no biases) in the dtype under test; positions [b, s] int64;
spec an AttentionSpec (spec.py) carrying the padding mask and the KV cache as tensors. The output
must have hidden's shape, dtype and device.

Grading: against the float64 reference (reference.attention, Dot2 fast path) on the inputs as
rounded to the dtype, on the rows of real query tokens that see a key. Budget: a running bound
through projections, RoPE, logits, softmax, the weighted sum and the output projection, derived
from the arithmetic in the dtype (budgets.py and docs/tolerance.md, "Attention"): gamma_n
accumulation terms in the accumulation unit (float32 admitted by the standard profile), one u_T
per stored intermediate, RoPE table and angle errors growing with |m| theta, an additive bias's
own forward budget in the table unit (ALiBi; KERPLE and FIRE from conformance.kerple.bias and
conformance.fire.bias; T5 exact) plus its cast and sum, and the softmax's exact perturbation
bound |dp_j| <= p_j (exp(E_j + log sum_k p_k e^(E_k)) - 1).

Bias encodings: KERPLE's parameters travel in the spec (kerple_variant, kerple_r1, kerple_r2);
FIRE's MLP (c, L_multiplier 0-d; W1, b1, W2, b2) and T5's table (rel_bias [num_buckets,
num_heads]) are extra entries of the weights dict (learned weights, in the dtype under test).

Training (--grad, backward.py): the gradients of hidden and of the four weights (paths (1, "wq")
... into the weights dict), and of T5's table and FIRE's six MLP parameters (paths (1, "rel_bias"),
(1, "c") ...; KERPLE's and ALiBi's parameters are configuration, not tensors), graded against
reference.attention.backward with a budget derived from the backward's arithmetic; diagnoses
backward-scale, backward-transposed, backward-missing; the float64 gradcheck as a black-box check.

Diagnosis (models.py): the output is recomputed with each usual fault; a failing output within
four budgets of a fault model that itself differs from the reference by more than a budget, and
at least twice as close to the model as to the reference, gets its code: ``attention-encoding``
(RoPE positions restarting from 0 or off by one, other layout, none; a bias with the opposite
sign, KERPLE's other variant, T5's buckets of the other direction, no bias), ``attention-causal-off-by-one``,
``attention-padding-ignored``, ``attention-scale-missing`` (``attention-scale-wrong`` where the layer
has its own logit scale), ``attention-factor-twice``,
``attention-heads-permuted`` (q or k projection rows permuted within heads: the other pair
layout's order, or a converter's per-head permutation with a wrong head count; query heads
grouped onto kv head h % hkv).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from conformance.attention import backward, budgets, models
from conformance.attention.spec import spec_of
from conformance.attention.stages import WEIGHTS, bias_weights, stages
from conformance.core import tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import (adapter_inputs, argmax_index, check_tensor, finite_max, mutation_problems,
                                      over_budget)
from conformance.results import Diagnosis
from conformance.training import gradcheck_identity

FIT_BUDGETS = 4.0


class AttentionForward(Protocol):
    name = "attention.forward"
    family = "attention"
    signature = "fn(hidden, weights, positions, spec) -> out [batch, seq, d_model]"
    acceptable_note = "float32 accumulation, softmax or RoPE tables"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        import torch

        extra = bias_weights(spec)
        floats = ("hidden", *WEIGHTS, *extra, "past_keys", "past_values")
        args, inputs, watched = adapter_inputs(case.arrays, floats, ("positions", "attention_mask"), dtype, device)
        t = dict(zip((*floats, "positions", "attention_mask"), args))
        P = int(case.params.get("past_len", 0))
        mask = t["attention_mask"].to(torch.bool) if case.params.get("padding") else None
        full = replace(spec, attention_mask=mask, past_keys=t["past_keys"] if P else None,
                       past_values=t["past_values"] if P else None)
        watched = {k: v for k, v in watched.items() if k != "attention_mask"}
        if mask is not None:
            watched["attention_mask"] = (mask, mask.clone())
        if not P:
            watched = {k: v for k, v in watched.items() if k not in ("past_keys", "past_values")}
        weights = {n: t[n] for n in WEIGHTS}
        for role, key in extra.items():
            weights[key] = t[role].reshape(()) if key in ("c", "L_multiplier") else t[role]
        return Prepared((t["hidden"], weights, t["positions"], full), inputs, watched, dtype, device)

    def _stages(self, prepared, spec):
        return stages(prepared, spec)

    def grade(self, case, spec, prepared, value) -> Graded:
        shape = prepared.inputs_f64["hidden"].shape
        out, problems, got = check_tensor(value, "the output", shape, prepared.dtype, prepared.device)
        dtype = got if got in tolerance.DTYPES else prepared.dtype
        problems += mutation_problems(prepared.watched)
        graded = Graded(problems=problems, output_f64=out, output_dtype=dtype)
        if out is None:
            return graded
        st = self._stages(prepared, spec)
        rows = st["rows"][:, :, None]
        ref = st["reference"]
        bad = rows & ~np.isfinite(out)
        if bad.any():
            first = [int(i) for i in np.argwhere(bad)[0]]
            graded.problems.append(Diagnosis("non-finite", f"the output has {int(bad.sum())} NaN/Inf element(s) "
                                             f"in rows of real query tokens (first at {first})"))
        with np.errstate(invalid="ignore"):
            err = np.where(rows, np.where(np.isfinite(out), np.abs(out - ref), np.inf), 0.0)
        graded.max_abs_error = finite_max(err)
        positions = prepared.inputs_f64["positions"]
        for profile in tolerance.PROFILES:
            budget = budgets.forward_budget(st, spec, positions, dtype, profile)
            r = np.where(rows, tolerance.ratio(err, budget), 0.0)
            graded.ratio[profile] = finite_max(r) if np.all(np.isfinite(r)) else float("inf")
            graded.worst_index[profile] = argmax_index(r)
            graded.mismatch[profile] = over_budget(r[np.broadcast_to(rows, r.shape)]) + ("elements",)
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        """An output element [b, i, c], or a gradient's (a backward.GradIndex: in the words of its role)."""
        role = getattr(index, "role", None)
        idx = list(index)
        if role == "rel_bias":
            return f"rel_bias bucket {idx[0]}, head {idx[1]}"
        if role in ("c", "L_multiplier"):
            return f"the gradient of {role}"
        if role in ("W1", "b1"):
            return f"{role}: hidden unit {idx[0]}"
        if role == "W2":
            return f"W2: head {idx[0]}, hidden unit {idx[1]}"
        if role == "b2":
            return f"b2: head {idx[0]}"
        if len(idx) == 2:  # a projection's gradient [out_features, in_features]
            return f"weight row {idx[0]}, column {idx[1]}"
        b, i, c = idx
        pos = prepared.inputs_f64["positions"]
        return f"batch row {b}, query {i} (position {int(pos[b, i])}), output feature {c}"

    def repro_call(self) -> str:
        return "fn(*args)"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        out = graded.output_f64
        if out is None:
            return []
        st = self._stages(prepared, spec)
        rows = st["rows"][:, :, None]
        if not np.all(np.isfinite(np.where(rows, out, 0.0))):
            return []
        positions = prepared.inputs_f64["positions"]
        mask = st["mask"]
        budget = budgets.forward_budget(st, spec, positions, dtype if dtype in tolerance.DTYPES else "float32",
                                        "standard")
        def gap(a, b):
            return np.where(rows, np.abs(a - b) / budget, 0.0).max(initial=0.0)

        ref_gap = gap(out, st["reference"])
        if ref_gap <= 1.0:  # within the standard budget: failing for another reason (mutation, dtype)
            return []

        def fits(model):
            # the model must differ from the reference (a fault this case can show) and explain the output
            # and the output must be at least twice as close to it as to the reference
            return gap(model, st["reference"]) > 1.0 and gap(out, model) <= min(FIT_BUDGETS, ref_gap / 2)

        candidates = [models.scale_models(st, spec),
                      ("attention-factor-twice", models.factor_models(st, spec)),
                      ("attention-causal-off-by-one", models.causal_models(st, spec, mask)),
                      ("attention-padding-ignored", models.padding_models(st, spec, mask)),
                      ("attention-encoding", models.encoding_models(st, spec, positions)),
                      ("attention-heads-permuted", models.head_models(st, spec, positions))]
        for code, fault_models in candidates:
            for what, model in fault_models:
                if fits(model):
                    return [Diagnosis(code, what)]
        return []

    # -- training (--grad): conformance/attention/backward.py ------------------------------------

    differentiable = True

    def grad_inputs(self, case, spec, prepared) -> dict:
        return backward.grad_args(spec)

    def cotangents(self, case, spec, prepared) -> tuple:
        return (backward.cotangent_tensor(case, spec, prepared),)

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        return backward.grade_gradients(case, spec, prepared, cotangents, grads)

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        return backward.diagnose_gradients(case, spec, prepared, cotangents, grads, graded, dtype)

    def grad_blackbox(self, invoker, device, probe) -> list:
        args, what = backward.gradcheck_case(device)
        return [gradcheck_identity(invoker, args, tuple(backward.GRAD_ARGS.values()), device, "attention.forward.gradcheck",
                                   what)]


PROTOCOL = AttentionForward()
