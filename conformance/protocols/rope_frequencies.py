"""Protocol ``rope.frequencies``: ``fn(spec, seq_len) -> (inv_freq [rotary_dim // 2], attention_factor)``.

inv_freq is a torch tensor; attention_factor a Python number or a 0-d tensor. The adapter gets no
tensor in a dtype under test, so the protocol is dtype-free: each case is graded once, in the
dtype of the returned inv_freq. inv_freq_i is graded with a relative budget (frequency_budget in
conformance.tolerance), the attention factor with a few roundings. worst_index is [i] for
inv_freq_i and [rotary_dim // 2] for the attention factor.
"""

from __future__ import annotations

import numpy as np

from conformance import tolerance
from conformance.protocols import rope_reference
from conformance.protocols.base import (
    Graded,
    Prepared,
    Protocol,
    abs_error,
    argmax_index,
    check_tensor,
    finite_max,
    nonfinite_problem,
)
from conformance.protocols.rope_cache import budget_dtype, unknown_dtype_problems
from conformance.results import Diagnosis


def as_number(value):
    """float of a Python number, numpy scalar or one-element tensor; None otherwise."""
    try:
        import torch

        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                return None
            return float(value.detach().to("cpu", torch.float64).reshape(()))
    except ImportError:  # pragma: no cover - torch is always there when grading
        pass
    if isinstance(value, (bool, str, bytes, bytearray)):  # float("1.0") works, but "1.0" is no number
        return None
    try:
        return float(value)
    except OverflowError:  # an int past float range, e.g. 10**400: graded as the infinity it rounds to
        return float("inf") if value > 0 else float("-inf")
    except (TypeError, ValueError):
        return None


class RopeFrequencies(Protocol):
    name = "rope.frequencies"
    signature = "fn(spec, seq_len) -> (inv_freq [rotary_dim // 2], attention_factor)"
    has_layout = False
    dtype_free = True
    acceptable_note = "frequencies computed in float32: the angle multiplies their error by the position"

    def prepare(self, case, spec, dtype, device) -> Prepared:
        return Prepared((spec, spec.seq_len), {}, {}, None, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        half = spec.rotary_dim // 2
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            what = type(value).__name__
            return Graded(
                problems=[
                    Diagnosis("shape-changed", f"the adapter returned a {what}, expected (inv_freq, attention_factor)")
                ]
            )
        inv, problems, got = check_tensor(value[0], "inv_freq", (half,), None, "")
        factor = as_number(value[1])
        if factor is None:
            problems.append(
                Diagnosis("shape-changed", f"attention_factor is a {type(value[1]).__name__}, not a number")
            )
        if inv is not None:
            problems += unknown_dtype_problems(inv_freq=got)
        dtype = budget_dtype(got)
        graded = Graded(problems=problems, output_dtype=dtype)
        if inv is None or factor is None:
            return graded
        graded.output_f64 = np.concatenate([inv, [factor]])
        ref_inv, ref_factor = rope_reference.frequencies(spec)
        ref = np.concatenate([ref_inv, [ref_factor]])
        bad = nonfinite_problem(graded.output_f64, ref, "the output")
        if bad is not None:
            graded.problems.append(bad)
        err = abs_error(graded.output_f64, ref)
        graded.max_abs_error = finite_max(err)
        for profile in tolerance.PROFILES:
            budget = np.concatenate(
                [
                    tolerance.frequency_budget(ref_inv, spec.rotary_dim, spec.base, dtype, profile),
                    [tolerance.attention_factor_budget(ref_factor, profile)],
                ]
            )
            ratio = tolerance.ratio(err, budget)
            graded.ratio[profile] = finite_max(ratio)
            graded.worst_index[profile] = argmax_index(ratio)
            graded.curve[profile] = []
        return graded

    def repro_call(self) -> str:
        return "fn(spec, spec.seq_len)"


PROTOCOL = RopeFrequencies()
