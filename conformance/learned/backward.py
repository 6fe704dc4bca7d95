"""The learned lookup's backward pass for ``--grad`` (learned.lookup): gradients of x and the table.

Formula. out[b, s] = x[b, s] + table[row(b, s)] is linear in both inputs; for a cotangent g
[batch, seq, d_model] (reference.learned.backward.lookup_vjp)

    grad_x = g,         grad_table[r] = sum over the tokens t with row(t) = r of g_t

(the scatter-add of g into the rows the tokens read; rows no token reads get exactly 0). RoBERTa's
``nn.Embedding(padding_idx=p)`` never accumulates into row p: for the roberta variant a padding
row that comes back exactly zero is graded against that convention (``freeze_padding``), with a
note; any other value of it against the plain sum.

Budgets (T the dtype under test, u_T its unit roundoff, u = u_tab = table_roundoff(T, profile):
u_T in ``strict``, max(u_T, u_32) in ``standard``, which admits float32 accumulation):
- grad_x, a copy of g: the passthrough budget u |g| + tiny_T (one rounding at most: a float32
  round trip of a float64 g in ``standard``; 0 error in T arithmetic).
- grad_table[r], a sum of the n_r cotangent rows of the tokens reading r, accumulated in any order
  (embedding_dense_backward, index_add_, index_put_(accumulate=True) or a sort-and-sum) in
  arithmetic of unit roundoff u, then rounded to T:

      |error| <= gamma_(n_r - 1) sum_t |g_t|  +  u |S_r|  +  tiny_T,     gamma_k = k u / (1 - k u)

  (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. 4.4: any summation
  order of n terms is within gamma_(n-1) sum |g_t|; the final rounding to T, u |S|, costs nothing
  when the sum already ran in T but is kept so one bound covers both). n_r = 1 leaves u |g|:
  a single token's row is a copy. When (n_r - 1) u >= 1 the bound says nothing and is infinite.
  A row no token reads must be 0 (budget tiny_T).

Diagnosis: backward-missing (no gradient to the table, or to x: zeros), backward-scale (the mean of
a row's tokens instead of their sum, or any constant multiple), ``backward-overwrite`` (family code:
each row holds one of its tokens' g, not their sum: a scatter without accumulation, whichever
token won). Shapes: g, grad_x [b, s, d]; grad_table [num_positions, d]; float64.
"""

from __future__ import annotations

import numpy as np

from conformance.core import tolerance
from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded
from conformance.core.tensors import (abs_error, argmax_index, check_tensor, finite_max, over_budget, per_position_curve, ratio_max, token_max, torch_dtype)
from conformance.results import Diagnosis
from conformance.core.rotation_backward import explain_gradient, missing_gradient
from conformance.learned.spec import LearnedSpec
from conformance.training import cotangent as draw
from reference.learned import backward as reference_backward

ROLES = ("x", "table")


def cotangent(case_id, prepared):
    """g like x in the dtype under test, drawn from the case."""
    import torch

    g = draw(case_id, prepared.inputs_f64["x"].shape, prepared.dtype)
    return torch.from_numpy(g).to(torch_dtype(prepared.dtype)).to(prepared.device)


def _f64(t) -> np.ndarray:
    import torch

    return t.detach().to("cpu", torch.float64).numpy()


def vjp(g, positions, spec, freeze_padding=False):
    """(grad_x, grad_table) float64 (reference.learned.backward.lookup_vjp, fast mode)."""
    return reference_backward.lookup_vjp(g, positions, spec.num_positions, variant=spec.variant,
                                         padding_idx=spec.padding_idx, freeze_padding=freeze_padding)


def rows(g, positions, spec) -> np.ndarray:
    return reference_backward.rows_of(g, positions, spec.num_positions, spec.variant, spec.padding_idx).reshape(-1)


def table_budget(g, positions, spec, dtype: str, profile: str) -> np.ndarray:
    """[num_positions, d]: gamma_(n_r - 1) sum_t |g_t| + u |S_r| + tiny_T (module docstring)."""
    u = tolerance.table_roundoff(dtype, profile)
    r = rows(g, positions, spec)
    flat = np.abs(g.reshape(-1, g.shape[-1]))
    n = np.bincount(r, minlength=spec.num_positions).astype(np.float64)[:, None]
    abs_sum = np.zeros((spec.num_positions, g.shape[-1]))
    np.add.at(abs_sum, r, flat)
    s = np.zeros_like(abs_sum)
    np.add.at(s, r, g.reshape(-1, g.shape[-1]))
    k = np.maximum(n - 1.0, 0.0) * u
    gamma = np.full(k.shape, np.inf)
    np.divide(k, 1.0 - k, out=gamma, where=k < 1.0)
    return gamma * abs_sum + u * np.abs(s) + tolerance.SMALLEST_SUBNORMAL[dtype]


def x_budget(g, dtype: str, profile: str) -> np.ndarray:
    return tolerance.passthrough_budget(g, dtype, profile)


def _padding_frozen(val, spec) -> bool:
    return spec.variant == "roberta" and spec.padding_idx is not None and not np.any(val[int(spec.padding_idx)])


def grade(spec, prepared, cots, grads) -> dict:
    """{"x": Graded, "table": Graded}."""
    g = _f64(cots[0])
    pos = prepared.inputs_f64["positions"]
    shapes = {"x": prepared.inputs_f64["x"].shape, "table": prepared.inputs_f64["table"].shape}
    out = {}
    for role in ROLES:
        grad = grads.get(role)
        if grad is None:
            out[role] = missing_gradient(role)
            continue
        val, problems, got = check_tensor(grad, f"the gradient of {role}", shapes[role], None, prepared.device)
        graded = Graded(problems=problems, output_f64=val, output_dtype=got)
        out[role] = graded
        if val is None:
            continue
        frozen = role == "table" and _padding_frozen(val, spec)
        ref = vjp(g, pos, spec, freeze_padding=frozen)[ROLES.index(role)]

        def fill(profile, err):
            budget = x_budget(g, prepared.dtype, profile) if role == "x" else \
                table_budget(g, pos, spec, prepared.dtype, profile)
            r = tolerance.ratio(err, budget)
            graded.ratio[profile] = finite_max(r)
            graded.worst_index[profile] = argmax_index(r)
            graded.mismatch[profile] = over_budget(r) + ("values" if role == "x" else "table values",)
            if role == "x":
                graded.curve[profile] = per_position_curve(pos, token_max(err), token_max(budget), ratio_max(r))
            if frozen and np.any(vjp(g, pos, spec)[1][int(spec.padding_idx)]):
                graded.notes[profile] = [f"the padding row {spec.padding_idx} gets no gradient (nn.Embedding("
                                         "padding_idx) convention): graded as 0 there"]

        grade_profiles(graded, val, ref, f"the gradient of {role}", fill)
    return out


def overwritten(got, g, positions, spec, budget) -> bool:
    """True when every row read by several tokens holds one of its tokens' g (within budget) and
    at least one such row differs from the sum: a scatter without accumulation."""
    r = rows(g, positions, spec)
    flat = g.reshape(-1, g.shape[-1])
    shared = [row for row in np.unique(r) if np.count_nonzero(r == row) > 1]
    if not shared:
        return False
    for row in shared:
        tokens = flat[r == row]
        if not any(np.all(np.abs(got[row] - t) <= budget[row]) for t in tokens):
            return False
    return True


def diagnose(spec, prepared, cots, graded, dtype) -> list:
    g = _f64(cots[0])
    pos = prepared.inputs_f64["positions"]
    found = []
    for n, role in enumerate(ROLES):
        gr = graded.get(role)
        ratio = gr.ratio.get("standard") if gr is not None else None
        if gr is None or gr.output_f64 is None or (ratio is not None and ratio <= 1.0):
            continue
        got = gr.output_f64
        frozen = role == "table" and _padding_frozen(got, spec)
        ref = vjp(g, pos, spec, freeze_padding=frozen)[n]
        budget = x_budget(g, dtype, "standard") if role == "x" else table_budget(g, pos, spec, dtype, "standard")
        if role == "table" and overwritten(got, g, pos, spec, budget):
            found.append(Diagnosis("backward-overwrite", "table: each table row read by several tokens holds "
                                   "one token's gradient instead of the sum over its tokens (a scatter without "
                                   "accumulation: index_put_ / index_copy_ / assignment instead of index_add_)"))
            continue
        mutants = reference_backward.mutants(g, pos, spec.num_positions, variant=spec.variant,
                                             padding_idx=spec.padding_idx, freeze_padding=frozen)
        cands = [(code, msg, pair[n], None) for code, items in mutants.items() if code != "backward-overwrite"
                 for msg, pair in items if not np.array_equal(pair[n], ref)]

        def ratio_of(cand, key, got=got, budget=budget):
            return finite_max(tolerance.ratio(abs_error(got, cand), budget)) or 0.0

        found += explain_gradient(ratio_of, got, ref, cands, role)
    return found


def gradcheck_case():
    """(x [1, 4, 3], positions 0, 2, 2, 5 (row 2 read twice), table [8, 3], spec) float64."""
    import torch

    spec = LearnedSpec(num_positions=8, d_model=3)
    gen = torch.Generator().manual_seed(15)
    x = torch.randn(1, 4, 3, generator=gen, dtype=torch.float64)
    table = torch.randn(8, 3, generator=gen, dtype=torch.float64)
    return x, torch.tensor([[0, 2, 2, 5]], dtype=torch.int64), table, spec
