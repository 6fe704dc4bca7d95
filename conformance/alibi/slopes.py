"""Protocol ``alibi.slopes``: ``fn(spec) -> slopes [num_heads]``, dtype-free.

Graded per head against the correctly rounded slopes, with a budget of 8 roundings of the output's
table roundoff relative to the slope (a power and a product or two in the implementation's
arithmetic) plus a subnormal floor.
"""

from __future__ import annotations

import numpy as np

from conformance.alibi.spec import spec_of
from conformance.core import tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import abs_error, argmax_index, check_tensor, finite_max, over_budget
from conformance.results import Diagnosis
from reference import alibi


class AlibiSlopes(Protocol):
    name = "alibi.slopes"
    family = "alibi"
    signature = "fn(spec) -> slopes [num_heads]"
    dtype_free = True
    acceptable_note = "slopes computed in float32"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        return Prepared((spec,), {}, {}, None, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        out, problems, got = check_tensor(value, "the slopes", (spec.num_heads,), None, prepared.device)
        dtype = got if got in tolerance.DTYPES else "float32"
        graded = Graded(problems=problems, output_f64=out, output_dtype=dtype)
        if out is None:
            return graded
        ref = alibi.slopes(spec.num_heads, mode="golden")
        err = abs_error(out, ref)
        graded.max_abs_error = finite_max(err)
        for profile in tolerance.PROFILES:
            budget = 8 * tolerance.table_roundoff(dtype, profile) * np.abs(ref) + tolerance.SMALLEST_SUBNORMAL[dtype]
            r = tolerance.ratio(err, budget)
            graded.ratio[profile] = finite_max(r)
            graded.worst_index[profile] = argmax_index(r)
            graded.mismatch[profile] = over_budget(r) + ("slopes",)
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        return f"head {index[0]}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        out, n = graded.output_f64, spec.num_heads
        ref = alibi.slopes(n, mode="golden")
        plain = 2.0 ** (-8.0 * np.arange(1, n + 1) / n)
        close = lambda a: np.allclose(out, a, rtol=1e-3, atol=0)  # noqa: E731
        if n & (n - 1) and close(plain):
            return [Diagnosis("slopes-power-of-two-rule", f"2^(-8k/{n}) used, but {n} heads is not a power of two: "
                              "the rule takes the slopes of the power below and every other one of twice it")]
        if n > 1 and close(ref[::-1]):
            return [Diagnosis("slopes-reversed", "the slopes are in reverse order")]
        return []


PROTOCOL = AlibiSlopes()
