"""Protocol ``learned.lookup``: ``fn(x, positions, table, spec) -> tensor like x``.

x [batch, seq, d_model] and table [num_positions, d_model] in the dtype under test, positions
int64 [batch, seq] on the same device, spec a :class:`LearnedSpec` (num_positions, d_model,
variant, padding_idx). The right answer is x + table[row] with row = position (variant
"absolute": BERT, GPT-2) or position + padding_idx + 1 (variant "roberta"; padding marked -1 reads
row padding_idx).

Value cases are graded elementwise against the reference applied to the dtype-rounded inputs
(reference.learned, NumPy backend), with the budget of conformance.learned.budgets (one rounding of
the sum; ``standard`` also admits a float32 intermediate). Wall cases (``must_raise``: some
position's row is outside the table) have an exception as their right answer: raising passes,
returning anything fails with ``length-wall-missing`` (Protocol.expected_error). A failing value
is explained by the closest shifted-row mutant (``position-offset``, conformance.learned.diagnosis).
A zoo model's committed case names its table by a seed (reference.golden.seeded): the
adapter gets the derived table, checked against the case's ``table_sha256``.
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
    mutation_problems,
    per_position_curve,
    ratio_max,
    token_max,
    torch_dtype,
)
from conformance.learned import backward, blackbox, budgets, diagnosis
from conformance.learned.spec import spec_of
from conformance.learned.backward import gradcheck_case
from conformance.learned.diagnosis import reference_rows
from conformance.training import gradcheck_identity
from reference import learned as learned_reference
from reference.learned.vectors import table_of


class LearnedLookup(Protocol):
    name = "learned.lookup"
    family = "learned"
    signature = "fn(x, positions, table, spec) -> tensor like x"
    layouts = ()
    dtype_free = False
    acceptable_note = "a float32 intermediate: float64 computed in float32, or a float32 sum rounded again"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        # A zoo model's committed case names its table by a seed (reference.golden.seeded).
        table = table_of(case.params, case.arrays["table"])
        return self.prepare_arrays(case.arrays["x"], case.arrays["positions"], table, spec, dtype, device)

    def prepare_arrays(self, x, positions, table, spec, dtype, device) -> Prepared:
        """Tensors for the adapter (x and table in ``dtype``), and their float64 values."""
        import torch

        tdtype = torch_dtype(dtype)
        x_t = torch.from_numpy(np.array(x, dtype=np.float64)).to(device=device, dtype=tdtype)
        table_t = torch.from_numpy(np.array(table, dtype=np.float64)).to(device=device, dtype=tdtype)
        pos = np.array(positions, dtype=np.int64)
        pos_t = torch.from_numpy(pos.copy()).to(device)
        inputs = {"x": x_t.detach().to("cpu", torch.float64).numpy(), "positions": pos,
                  "table": table_t.detach().to("cpu", torch.float64).numpy()}
        watched = {"x": (x_t, x_t.clone()), "positions": (pos_t, pos_t.clone()),
                   "table": (table_t, table_t.clone())}
        return Prepared((x_t, pos_t, table_t, spec), inputs, watched, dtype, device)

    def expected_error(self, case, spec):
        if not case.params.get("must_raise"):
            return None

        return diagnosis.missing_wall(case.arrays["positions"], spec)

    def reference(self, prepared: Prepared, spec) -> np.ndarray:
        i = prepared.inputs_f64
        return learned_reference.lookup(i["x"], i["positions"], i["table"], variant=spec.variant,
                                        padding_idx=spec.padding_idx, backend="numpy")

    def grade(self, case, spec, prepared, value) -> Graded:
        x = prepared.inputs_f64["x"]
        pos = prepared.inputs_f64["positions"]
        table = prepared.inputs_f64["table"]
        out, problems, got = check_tensor(value, "the output", x.shape, prepared.dtype, prepared.device)
        problems += mutation_problems(prepared.watched)
        graded = Graded(problems=problems, output_f64=out, output_dtype=got)
        if out is None:
            return graded
        ref = self.reference(prepared, spec)
        t = table[reference_rows(pos, spec)]

        def fill(profile, err):
            budget = budgets.sum_budget(x, t, prepared.dtype, profile)
            r = tolerance.ratio(err, budget)
            finite = np.where(np.isfinite(r), r, -1.0)
            best = finite.max(initial=-1.0)
            graded.ratio[profile] = float(best) if best >= 0 else None
            graded.worst_index[profile] = argmax_index(r) if r.size else None
            graded.mismatch[profile] = over_budget(r) + ("values",)
            graded.curve[profile] = per_position_curve(pos, token_max(err), token_max(budget), ratio_max(r))

        grade_profiles(graded, out, ref, "the output", fill)
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        if len(index) == 2:  # an element of the table's gradient (--grad)
            return f"table row {int(index[0])}, feature {int(index[1])}"
        b, s, d = index
        position = int(prepared.inputs_f64["positions"][b, s])
        return f"batch row {b}, position {position} (token {s}), feature {d}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        i = prepared.inputs_f64
        try:
            return diagnosis.diagnose_lookup(i["x"], i["positions"], i["table"], graded.output_f64, spec, dtype)
        except (ValueError, TypeError, IndexError, FloatingPointError, OverflowError):
            return []  # odd data defeat the analysis: a diagnosis must never stop the run

    def blackbox(self, invoker, dtype, device, probe) -> list:
        return blackbox.lookup_checks(invoker, self.name, dtype, device)

    # -- training (--grad): conformance/learned/backward.py ---------------------------------------

    differentiable = True

    def grad_inputs(self, case, spec, prepared) -> dict:
        # A wall case's right answer is an exception: there is no output to differentiate.
        return {} if case.params.get("must_raise") else {"x": 0, "table": 2}

    def cotangents(self, case, spec, prepared) -> tuple:
        return (backward.cotangent(case.id, prepared),)

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        return backward.grade(spec, prepared, cotangents, grads)

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        return backward.diagnose(spec, prepared, cotangents, graded, dtype)

    def grad_blackbox(self, invoker, device, probe) -> list:
        x, positions, table, spec = gradcheck_case()
        return [gradcheck_identity(invoker, (x.to(device), positions.to(device), table.to(device), spec), (0, 2),
                                   device, f"{self.name}.gradcheck", "x [1, 4, 3] and table [8, 3] float64 at "
                                   "positions 0, 2, 2, 5 (row 2 read twice)")]


PROTOCOL = LearnedLookup()
