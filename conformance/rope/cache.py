"""Protocol ``rope.cache``: ``fn(positions, spec) -> (cos, sin)``, each [batch, seq, rotary_dim // 2].

Tables are in pair order (pair i turns by m * theta_i whatever the layout). The adapter receives
no tensor in a dtype under test, so the protocol is dtype-free: each case is graded once, in the
dtype the adapter returns (u_T of that dtype in the budget). (cos, sin) is the rotation of the
unit pair (1, 0), so its budget is the rotation budget with |a| + |b| = 1.
"""

from __future__ import annotations

import numpy as np

from conformance.core import rotation_budgets as budgets, rotation_reference as reference, tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import (
    type_name,
    over_budget,
    abs_error,
    argmax_index,
    check_tensor,
    finite_max,
    mutation_problems,
    nonfinite_problem,
    off_by_one_note,
    per_position_curve,
    ratio_max,
    token_max,
)
from conformance.core.tolerance import budget_dtype, unknown_dtype_problems
from conformance.results import Diagnosis
from conformance.rope.spec import spec_of
from conformance.rope import blackbox, diagnosis


class RopeCache(Protocol):
    name = "rope.cache"
    family = "rope"
    signature = "fn(positions, spec) -> (cos, sin), each [batch, seq, rotary_dim // 2]"
    dtype_free = True
    acceptable_note = "float32 angle rounding, growing with position"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        import torch

        pos = np.array(case.arrays["positions"], dtype=np.int64)
        pos_t = torch.from_numpy(pos.copy()).to(device)
        return Prepared((pos_t, spec), {"positions": pos}, {"positions": (pos_t, pos_t.clone())}, None, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        pos = prepared.inputs_f64["positions"]
        shape = pos.shape + (spec.rotary_dim // 2,)
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            what = type_name(value)
            return Graded(
                problems=[Diagnosis("shape-changed", f"the adapter returned a {what}, expected a (cos, sin) pair")]
                + mutation_problems(prepared.watched)
            )
        cos, p1, d1 = check_tensor(value[0], "cos", shape, None, prepared.device)
        sin, p2, d2 = check_tensor(value[1], "sin", shape, None, prepared.device)
        problems = p1 + p2 + mutation_problems(prepared.watched)
        if cos is not None and sin is not None:
            problems += unknown_dtype_problems(cos=d1, sin=d2)
        dtype = budget_dtype(d1, d2)
        graded = Graded(problems=problems, output_dtype=dtype)
        if cos is None or sin is None:
            return graded
        graded.output_f64 = np.stack([cos, sin])
        tabs = reference.tables(pos, spec)
        for what, out, ref in (("cos", cos, tabs.cos), ("sin", sin, tabs.sin)):
            bad = nonfinite_problem(out, ref, what)
            if bad is not None:
                graded.problems.append(bad)
        err_c, err_s = abs_error(cos, tabs.cos), abs_error(sin, tabs.sin)
        err = np.maximum(err_c, err_s)  # NaN if either is NaN
        graded.max_abs_error = finite_max(err)
        mag = np.full(err.shape, abs(tabs.attention_factor))
        step = 2.0 * np.abs(np.sin(tabs.inv_freq / 2.0)) * mag
        e_tok = token_max(err)
        for profile in tolerance.PROFILES:
            budget = budgets.rotation_budget(mag, tabs.phi, spec.rotary_dim, spec.base, dtype, profile)
            ratio = tolerance.ratio(err, budget)
            graded.ratio[profile] = finite_max(ratio)
            graded.worst_index[profile] = argmax_index(ratio)
            graded.mismatch[profile] = over_budget(ratio) + ("pairs (cos and sin)",)
            graded.curve[profile] = per_position_curve(pos, e_tok, budget.max(axis=-1), ratio_max(ratio))
            blind = (step / budget).max(axis=-1) <= 1.0
            if blind.any():
                graded.notes[profile] = [off_by_one_note(profile, pos[blind])]
        return graded


    def locate(self, case, spec, prepared, index) -> str:
        b, s, i = index
        position = int(prepared.inputs_f64["positions"][b, s])
        return f"batch row {b}, position {position} (token {s}), pair {i}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        cos, sin = graded.output_f64
        return diagnosis.explain(diagnosis.diagnose_cache, prepared.inputs_f64["positions"], (cos, sin),
                                 spec, dtype)

    def blackbox(self, invoker, dtype, device, probe) -> list:
        return blackbox.cache_checks(invoker, self.name, dtype, device)


PROTOCOL = RopeCache()
