"""Protocol ``rope.frequencies``: ``fn(spec, seq_len) -> (inv_freq [rotary_dim // 2], attention_factor)``.

inv_freq is a torch tensor; attention_factor a Python number or a 0-d tensor. The adapter gets no
tensor in a dtype under test, so the protocol is dtype-free: each case is graded once, in the
dtype of the returned inv_freq. inv_freq_i is graded with a relative budget (frequency_budget in
conformance.core.rotation_budgets), the attention factor with a few roundings. worst_index is [i] for
inv_freq_i and [rotary_dim // 2] for the attention factor.
"""

from __future__ import annotations

import numpy as np

from conformance.core import rotation_budgets as budgets, rotation_reference as reference, tolerance
from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import (
    type_name,
    over_budget,
    argmax_index,
    as_number,
    check_tensor,
    finite_max,
)
from conformance.core.tolerance import budget_dtype, unknown_dtype_problems
from conformance.results import Diagnosis
from conformance.rope.spec import spec_of
from conformance.rope import blackbox, diagnosis


class RopeFrequencies(Protocol):
    name = "rope.frequencies"
    family = "rope"
    signature = "fn(spec, seq_len) -> (inv_freq [rotary_dim // 2], attention_factor)"
    dtype_free = True

    def spec(self, case):
        return spec_of(case.params)
    acceptable_note = "frequencies computed in float32: the angle multiplies their error by the position"

    def prepare(self, case, spec, dtype, device) -> Prepared:
        return Prepared((spec, spec.seq_len), {}, {}, None, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        half = spec.rotary_dim // 2
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            what = type_name(value)
            return Graded(
                problems=[
                    Diagnosis("shape-changed", f"the adapter returned a {what}, expected (inv_freq, attention_factor)")
                ]
            )
        inv, problems, got = check_tensor(value[0], "inv_freq", (half,), None, "")
        factor = as_number(value[1])
        if factor is None:
            problems.append(
                Diagnosis("shape-changed", f"attention_factor is a {type_name(value[1])}, not a number")
            )
        if inv is not None:
            problems += unknown_dtype_problems(inv_freq=got)
        dtype = budget_dtype(got)
        graded = Graded(problems=problems, output_dtype=dtype)
        if inv is None or factor is None:
            return graded
        graded.output_f64 = np.concatenate([inv, [factor]])
        ref_inv, ref_factor = reference.frequencies(spec)
        ref = np.concatenate([ref_inv, [ref_factor]])

        def fill(profile, err):
            budget = np.concatenate(
                [
                    budgets.frequency_budget(ref_inv, spec.rotary_dim, spec.base, dtype, profile),
                    [budgets.attention_factor_budget(ref_factor, profile)],
                ]
            )
            ratio = tolerance.ratio(err, budget)
            graded.ratio[profile] = finite_max(ratio)
            graded.worst_index[profile] = argmax_index(ratio)
            graded.mismatch[profile] = over_budget(ratio) + ("values",)
            graded.curve[profile] = []

        grade_profiles(graded, graded.output_f64, ref, "the output", fill)
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        (i,) = index
        half = spec.rotary_dim // 2
        return f"inv_freq[{i}] (pair {i})" if i < half else "attention_factor"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        out = graded.output_f64
        return diagnosis.explain(diagnosis.diagnose_frequencies, (out[:-1], out[-1]), spec, dtype)

    def blackbox(self, invoker, dtype, device, probe) -> list:
        return blackbox.frequency_checks(invoker, self.name, dtype, device)

    def repro_call(self) -> str:
        return "fn(spec, spec.seq_len)"


PROTOCOL = RopeFrequencies()
