"""Protocol ``sinusoidal.table``: ``fn(positions, spec) -> tensor [n, d_model]``.

positions: int64 [n] (1-D tables) or [n, 2] (2-D: the two coordinates of each token); spec a
:class:`SinusoidalSpec` (d_model, layout, exponent, base, dims). The adapter receives no tensor in
a dtype under test, so the protocol is dtype-free: each case is graded once, in the dtype the
adapter returns, against the stored correctly rounded table, with the budget of
conformance.core.sinusoid_budgets. A failing table is explained by the closest mutant
(conformance.sinusoidal.diagnosis).
"""

from __future__ import annotations

import numpy as np

from conformance.core import tolerance
from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import (
    over_budget,
    argmax_index,
    check_tensor,
    finite_max,
    mutation_problems,
    per_position_curve,
    ratio_max,
    token_max,
)
from conformance.core.tolerance import budget_dtype, unknown_dtype_problems
from conformance.core import sinusoid_budgets as budgets
from conformance.sinusoidal import blackbox, diagnosis
from conformance.sinusoidal.spec import spec_of


class SinusoidalTable(Protocol):
    name = "sinusoidal.table"
    family = "sinusoidal"
    signature = "fn(positions, spec) -> tensor [n, d_model]"
    dtype_free = True
    acceptable_note = "float32 angle rounding, growing with position"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        import torch

        pos = np.array(case.arrays["positions"], dtype=np.int64)
        pos_t = torch.from_numpy(pos.copy()).to(device)
        # The expected table is read in grade(), after the call: it is not in memory while an
        # in-process adapter runs (reference.golden.store.CaseArrays).
        return Prepared((pos_t, spec), {"positions": pos}, {"positions": (pos_t, pos_t.clone())}, None, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        pos = prepared.inputs_f64["positions"]
        ref = np.asarray(case.arrays["expected"], dtype=np.float64)
        out, problems, got = check_tensor(value, "the table", ref.shape, None, prepared.device)
        problems += mutation_problems(prepared.watched)
        if out is not None:
            problems += unknown_dtype_problems(table=got)
        dtype = budget_dtype(got)
        graded = Graded(problems=problems, output_f64=out, output_dtype=dtype)
        if out is None:
            return graded
        where = pos if spec.dims == 1 else np.abs(pos).max(axis=-1)  # the curve's position axis

        def fill(profile, err):
            budget = budgets.table_budget(pos, spec, dtype, profile)
            r = tolerance.ratio(err, budget)
            graded.ratio[profile] = finite_max(r)
            graded.worst_index[profile] = argmax_index(r)
            graded.mismatch[profile] = over_budget(r) + ("values",)
            graded.curve[profile] = per_position_curve(where[None], token_max(err[None]),
                                                       budget.max(axis=-1)[None], ratio_max(r[None]))

        grade_profiles(graded, out, ref, "the table", fill)
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        n, col = index
        position = prepared.inputs_f64["positions"][n]
        shown = tuple(int(v) for v in position) if np.ndim(position) else int(position)
        return f"row {n} (position {shown}), column {col}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        standard = graded.ratio.get("standard")
        profile = "strict" if standard is not None and standard <= 1.0 else "standard"
        try:
            return diagnosis.diagnose_table(prepared.inputs_f64["positions"], graded.output_f64, spec,
                                            graded.output_dtype or "float32", profile)
        except (ValueError, TypeError, IndexError, FloatingPointError, OverflowError):
            return []  # odd data defeat the analysis: a diagnosis must never stop the run

    def blackbox(self, invoker, dtype, device, probe) -> list:
        return blackbox.table_checks(invoker, self.name, dtype, device)


PROTOCOL = SinusoidalTable()
