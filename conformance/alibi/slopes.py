"""Protocol ``alibi.slopes``: ``fn(spec) -> slopes [num_heads]``, dtype-free.

Graded per head against the correctly rounded slopes. Budget of head h, relative to its slope:

    8 u_tab  +  K_h u_a

8 roundings of the output's table roundoff (a power and a product or two in the implementation's
arithmetic), plus the error a rounded ratio takes to the power K_h: slope h is r**K_h on its
ladder (r = 2^(-8/P), P the power of two whose ladder it is on; see ``ladder_powers``), and
code that rounds r (or 2^(8/P), MLX) to float32 and raises it to K_h with ``pow`` (transformers'
BLOOM ``_get_alibi_slopes``, MLX ``ALiBi.create_alibi_slope``) carries K_h times r's relative
rounding into the slope. A float32 exponent 8k/P instead (2^(-8k/P)) errs by ln 2 * 8k/P * u <=
5.6 u, inside the same term. u_a is float32's unit roundoff in ``standard`` and float64's in
``strict`` (as for angles), plus a subnormal floor. Calibration in docs/tolerance.md, its ALiBi section.
"""

from __future__ import annotations

import numpy as np

from conformance.alibi.spec import spec_of
from conformance.core import tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import abs_error, argmax_index, check_tensor, finite_max, over_budget
from conformance.results import Diagnosis
from reference import alibi


def ladder_powers(n: int) -> np.ndarray:
    """int64 [n]: K_h, the power of its ladder's ratio that slope h is (fairseq's rule).

    n a power of two: slope h = r**(h + 1), r = 2^(-8/n). Otherwise, with c the power of two
    below n: the first c slopes are r_c**(h + 1); the rest are every other slope of 2c heads,
    r_2c**(2j + 1) for j = 0 .. n - c - 1.
    """
    if n & (n - 1) == 0:
        return np.arange(1, n + 1, dtype=np.int64)
    c = 1 << (n.bit_length() - 1)
    return np.concatenate([np.arange(1, c + 1), 2 * np.arange(n - c) + 1]).astype(np.int64)


def relative_budget(n: int, dtype: str, profile: str) -> np.ndarray:
    """float64 [n]: 8 u_tab + K_h u_a, the budget of slope h relative to |slope|."""
    return 8 * tolerance.table_roundoff(dtype, profile) + ladder_powers(n) * tolerance.angle_roundoff(profile)


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
            budget = relative_budget(spec.num_heads, dtype, profile) * np.abs(ref) + tolerance.SMALLEST_SUBNORMAL[dtype]
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
