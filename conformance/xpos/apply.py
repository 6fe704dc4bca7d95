"""Protocol ``xpos.apply``: ``fn(q, k, positions, spec) -> (q_out, k_out)``, graded up to a common
centring.

q, k [batch, seq, heads, head_dim] in the dtype under test, positions int64 [batch, seq] shared by
both. Grading:
1. the centring c is fitted: per pair, half the difference of log(|q_out| / |q_0|) and
   log(|k_out| / |k_0|) (q_0, k_0: the reference with c = 0) is -(c / B) ln zeta_i; c is the median
   over the pairs whose |ln zeta_i| >= 0.05, snapped to a multiple of 1/2 within 1e-3;
2. q and k are graded against the reference centred at c (reference.xpos), per pair, with RoPE's
   rotation budget times the pair's scale, plus the scale's own error u_tab s (3 |e ln zeta| + 4)
   (the exponent e = (m - c)/B rounded once, the power, its product), plus a subnormal floor
   (docs/tolerance.md, section 12).
The report notes the centring found.
"""

from __future__ import annotations

import numpy as np

from conformance.core import tolerance
from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import (type_name, adapter_inputs, argmax_index, check_tensor, finite_max, mutation_problems,
                                      over_budget, per_position_curve, ratio_max, token_max)
from conformance.xpos.spec import spec_of
from conformance.results import Diagnosis
from conformance.training import gradcheck_identity
from conformance.xpos import backward, diagnosis, rotation
from conformance.xpos.backward import gradcheck_case
from conformance.xpos.rotation import fit_centre, reference
from reference.numerics.layouts import pair_indices


class XposApply(Protocol):
    name = "xpos.apply"
    family = "xpos"
    signature = "fn(q, k, positions, spec) -> (q_out, k_out), each like q"
    acceptable_note = "float32 angle rounding, growing with position"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, ("q", "k"), ("positions",), dtype, device)
        return Prepared((*args, spec), inputs, watched, dtype, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        q, k, pos = (prepared.inputs_f64[r] for r in ("q", "k", "positions"))
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            outs, problems, got = [None, None], [], None

            problems.append(Diagnosis("shape-changed", f"expected a pair (q_out, k_out), got {type_name(value)}"))
        else:
            checked = [check_tensor(v, f"the {w}", q.shape, prepared.dtype, prepared.device)
                       for v, w in zip(value, ("query", "key"))]
            outs = [c[0] for c in checked]
            problems = checked[0][1] + checked[1][1]
            got = checked[0][2]
        problems += mutation_problems(prepared.watched)
        graded = Graded(problems=problems, output_dtype=got)
        if outs[0] is None or outs[1] is None:
            return graded
        qo, ko = outs
        graded.output_f64 = np.stack([qo, ko])
        centre = fit_centre(q, k, qo, ko, pos, spec) or 0.0
        prepared.xpos_centre = centre  # the backward is graded at the forward's centring (backward.py)
        qr, kr = reference(q, k, pos, spec, centre)
        ref = np.stack([qr, kr])
        note = [f"centring c = {centre:g} found (common to q and k; it cancels in q . k)"] if centre else []

        def fill(profile, err):
            budget = np.stack([self.budget(x, pos, spec, centre, sign, prepared.dtype, profile)
                               for x, sign in ((q, 1), (k, -1))])
            r = tolerance.ratio(err, budget)
            graded.ratio[profile] = finite_max(r)
            graded.worst_index[profile] = argmax_index(r)
            graded.mismatch[profile] = over_budget(r) + ("values",)
            both = np.concatenate([r[0], r[1]], axis=2)  # [b, s, 2h, d]: per token over q and k
            graded.curve[profile] = per_position_curve(pos, token_max(np.concatenate([err[0], err[1]], axis=2)),
                                                       token_max(np.concatenate([budget[0], budget[1]], axis=2)),
                                                       ratio_max(both))
            if note:
                graded.notes[profile] = list(note)

        grade_profiles(graded, graded.output_f64, ref, "the (q_out, k_out) pair", fill)
        return graded

    budget = staticmethod(rotation.budget)  # the backward grades a gradient with the cotangent as x

    def locate(self, case, spec, prepared, index) -> str:
        which, b, s, h, d = index
        m = int(prepared.inputs_f64["positions"][b, s])
        first, second = pair_indices(spec.rotary_dim, spec.layout)
        pair = int(np.flatnonzero((first == d) | (second == d))[0]) if d < spec.rotary_dim else None
        where = f"{('query', 'key')[which]}, batch row {b}, position {m} (token {s}), head {h}, dim {d}"
        return where + (f" (pair {pair})" if pair is not None else " (past rotary_dim)")

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        return diagnosis.diagnose(spec, prepared, graded, dtype)

    # -- training (--grad): conformance/xpos/backward.py ------------------------------------------

    differentiable = True

    def grad_inputs(self, case, spec, prepared) -> dict:
        return {"q": 0, "k": 1}

    def cotangents(self, case, spec, prepared) -> tuple:
        return backward.cotangents(case.id, prepared)

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        return backward.grade(self, spec, prepared, cotangents, grads)

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        return backward.diagnose(self, spec, prepared, cotangents, graded, dtype)

    def grad_blackbox(self, invoker, device, probe) -> list:
        q, k, positions, spec = gradcheck_case("interleaved")
        return [gradcheck_identity(invoker, (q.to(device), k.to(device), positions.to(device), spec), (0, 1), device,
                                   f"{self.name}.gradcheck", "q and k [1, 4, 1, 8] float64 at positions 0, 1, 7, 300 "
                                   "(interleaved layout, rotary_dim 6, scale base 64)")]


PROTOCOL = XposApply()
