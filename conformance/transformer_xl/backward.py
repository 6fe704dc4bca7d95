"""transformer_xl.score's backward pass for ``--grad``: cotangent, reference VJP, gradient budgets,
diagnosis and the gradcheck case.

Cotangent. G [n_head, qlen, klen] drawn from the case (conformance.training.cotangent: values in
[-2, 2] exact in every dtype) and set to 0 on the masked entries j > i + mlen: the protocol does
not grade the output there (the shift's leftovers and the mask's -inf are both accepted), so no
gradient may depend on them.

Reference. reference.transformer_xl.backward.score_vjp in golden mode (each element within one
float64 ulp of the exact sum) on the inputs and G as the adapter and autograd received them
(exact: the golden inputs and G are representable in every dtype). Per head, with Gs = G /
sqrt(d_head), a = q + u, b = q + v, r_t = W R_t:

    grad_q_i = sum_j Gs_ij (k_j + r_tij)   grad_u = sum_ij Gs_ij k_j    grad_v = sum_ij Gs_ij r_tij
    grad_k_j = sum_i Gs_ij a_i             grad_W[o, c] = sum_ij Gs_ij b_i[e] R_tij[c]  (o = h d_head + e)

Budget, per gradient element, first order in u = u_tab (conformance.core.tolerance: float32's unit
roundoff or coarser in ``standard``, the dtype's own in ``strict``). Autograd through the
mainstream implementation (mem_transformer.py: AC and BD by einsum, ``_rel_shift``, ``* scale``,
masked_fill; examples/transformer_xl/mem_transformer_style.py) runs, for each gradient, a sum of
n products, n the number of graded (i, j) entries it sums over (n_q = i + mlen + 1 keys of query
i, n_k = the queries that see key j, n_pairs = every graded entry for u, v and W). Each term goes
through at most n - 1 additions in any order (recursive summation, gamma_{n-1}; Higham, Accuracy
and Stability of Numerical Algorithms, sec. 4.2: it holds for every order and tree, so matmul
blocking, scatter-add or a gathered r_ij all fit) and at most 7 more roundings: the scale rounded
to T and the product G * scale (2), the forward's q + u or q + v (1), the products (at most 2:
Gs b and then R for W), an intermediate rounding to T between two reductions (grad_r before the
Linear's weight gradient, or grad_(q+u) before the sum over queries that gives grad_u) (1), and the
output's (grad_q: the two contributions added) (1). Hence (n + 6) u times the sum of the terms'
absolute values. The position quantities carry their forward errors: r_T = W R_T in T errs by
dr_e = sum_c |W_ec| (e_R[c] + (d_model + 1) u |R_c|) (transformer_xl.score's own budget, e_R the
sinusoidal table's budget), and R_T itself by e_R. So

    q:  (n_q + 6) u sum_j |Gs| (|k_e| + |r_e| + dr_e) + sum_j |Gs| dr_e
    k:  (n_k + 6) u sum_i |Gs| |a_e|
    u:  (n_pairs + 6) u sum_ij |Gs| |k_e|
    v:  (n_pairs + 6) u sum_ij |Gs| (|r_e| + dr_e) + sum_ij |Gs| dr_e
    W:  sum_ij |Gs| |b_e| ((n_pairs + 6) u |R_c| + e_R[c])

plus (n_pairs + d_model + 6) times the dtype's smallest subnormal (products that underflow).

Diagnosis (core codes): each failing gradient is compared, with its own budget, with zeros or one
of q's two terms alone (backward-missing), the gradient times sqrt(d_head) or divided by it (the
scale missing from or applied twice in the backward) or any constant multiple
(backward-scale), and for r_weight its transpose (square W only: backward-transposed) and R
built interleaved in the backward (backward-layout).
"""

from __future__ import annotations

import math

import numpy as np

from conformance.core import tolerance
from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded
from conformance.core.tensors import (argmax_index, check_tensor, finite_max, over_budget, torch_dtype)
from conformance.results import Diagnosis
from conformance.transformer_xl.position_term import position_terms
from conformance.training import cotangent
from conformance.transformer_xl.spec import TransformerXLSpec
from reference import transformer_xl
from reference.numerics.sinusoid import table as sinusoid_table
from reference.transformer_xl import backward as reference_backward

ROLES = reference_backward.ROLES
EXTRA_ROUNDINGS = 6


class GradIndex(list):
    """A gradient's worst index (plain ints in the report) that remembers its input role, so that
    the protocol's ``locate`` can name the element."""

    def __init__(self, index, role=None):
        # (index) alone too: dataclasses.asdict rebuilds list subclasses from their items
        super().__init__(int(i) for i in index)
        self.role = role


def mask(qlen: int, mlen: int) -> np.ndarray:
    """bool [qlen, klen]: the graded entries j <= i + mlen."""
    return np.arange(qlen)[:, None] + mlen - np.arange(qlen + mlen)[None, :] >= 0


def cotangent_tensor(case_id: str, inputs: dict, spec, dtype: str, device: str):
    """G as a tensor [n_head, qlen, klen] in the dtype under test, 0 on the masked entries."""
    import torch

    qlen, n_head, _ = inputs["q"].shape
    shape = (n_head, qlen, inputs["k"].shape[0])
    g = cotangent(case_id, shape, dtype) * mask(qlen, spec.mlen)[None]
    return torch.from_numpy(g).to(device=device, dtype=torch_dtype(dtype))


def cotangent_f64(g) -> np.ndarray:
    import torch

    return g.detach().to("cpu", torch.float64).numpy()


_CACHE: dict = {}


def reference_grads(inputs: dict, G: np.ndarray, spec) -> dict:
    """Golden VJP (cached: the golden inputs and G are the same in every dtype)."""
    key = (spec, G.tobytes(), *(inputs[r].tobytes() for r in ROLES))
    if key not in _CACHE:
        if len(_CACHE) > 64:
            _CACHE.clear()
        _CACHE[key] = reference_backward.score_vjp(G, *(inputs[r] for r in ROLES), mlen=spec.mlen,
                                                   d_model=spec.d_model, clamp_len=spec.clamp_len, mode="golden")
    return _CACHE[key]


def budgets(inputs: dict, G: np.ndarray, spec, dtype: str, profile: str) -> dict:
    """{role: budget array shaped like the input} (module docstring)."""
    q, k, u_b, v_b, w = (inputs[r] for r in ROLES)
    qlen, n_head, d_head = q.shape
    u = tolerance.table_roundoff(dtype, profile)
    a = tolerance.accumulation_roundoff(dtype, profile)
    pos = position_terms(qlen, w, spec, dtype, profile)
    values, index, R, e_R = pos["values"], pos["index"], pos["R"], pos["e_R"]
    per_key = lambda x: x.reshape(-1, n_head, d_head)[index]  # noqa: E731  [qlen, klen, n_head, d_head]
    r, dr = per_key(pos["r"]), per_key(pos["dr"])
    graded = mask(qlen, spec.mlen)
    gs = np.abs(G) * graded[None] / math.sqrt(d_head)
    n_q = graded.sum(axis=1)[:, None, None]  # [qlen, 1, 1]
    n_k = graded.sum(axis=0)[:, None, None]
    n_pairs = int(graded.sum())
    floor = (n_pairs + spec.d_model + EXTRA_ROUNDINGS) * tolerance.SMALLEST_SUBNORMAL[dtype]
    def rel(n):  # n - 1 additions in the accumulation unit, the other roundings in T's
        return (n - 1) * a + (EXTRA_ROUNDINGS + 1) * u

    out = {
        "q": rel(n_q) * np.einsum("hij,ijhe->ihe", gs, np.abs(k)[None] + r + dr) + np.einsum("hij,ijhe->ihe", gs, dr),
        "k": rel(n_k) * np.einsum("hij,ihe->jhe", gs, np.abs(q + u_b)),
        "u": rel(n_pairs) * np.einsum("hij,jhe->he", gs, np.abs(k)),
        "v": rel(n_pairs) * np.einsum("hij,ijhe->he", gs, r + dr) + np.einsum("hij,ijhe->he", gs, dr),
    }
    A = np.zeros((values.size, n_head, d_head))
    np.add.at(A, index, np.einsum("hij,ihe->ijhe", gs, np.abs(q + v_b)))
    A = A.reshape(values.size, n_head * d_head).T
    out["r_weight"] = A @ (rel(n_pairs) * R + e_R)
    return {role: b + floor for role, b in out.items()}


def grade(inputs: dict, G: np.ndarray, spec, dtype: str, device: str, grads: dict) -> dict:
    """{role: Graded} of each returned gradient; None (nothing reaches the input through autograd) is
    graded as zeros and is backward-missing where zeros are over budget."""
    ref = reference_grads(inputs, G, spec)
    out = {}
    for role in ROLES:
        what = f"the gradient of {role}"
        grad = grads.get(role)
        if grad is None:
            got, problems, got_dtype = np.zeros_like(ref[role]), [], None
        else:
            got, problems, got_dtype = check_tensor(grad, what, inputs[role].shape, None, device)
        graded = Graded(problems=problems, output_dtype=got_dtype)
        out[role] = graded
        if got is None:
            continue
        graded.output_f64 = got

        def fill(profile, err):
            r = tolerance.ratio(err, budgets(inputs, G, spec, dtype, profile)[role])
            graded.ratio[profile] = finite_max(r)
            graded.worst_index[profile] = GradIndex(argmax_index(r), role)
            graded.mismatch[profile] = (*over_budget(r), "elements")

        grade_profiles(graded, got, ref[role], what, fill)
        if grad is None and not graded.ratio["standard"] <= 1.0:
            graded.problems.append(Diagnosis("backward-missing", f"no gradient reaches {role} (autograd returned "
                                             "None: the scores do not depend on it through autograd)"))
    return out


def locate(spec, inputs, index: GradIndex) -> str:
    """The gradient element in words (query/key/head/channel, or W's row and R's column)."""
    role, idx = index.role, list(index)
    if role == "q":
        return f"gradient of q: query {idx[0]}, head {idx[1]}, channel {idx[2]}"
    if role == "k":
        where = f"memory slot {idx[0]}" if idx[0] < spec.mlen else f"segment token {idx[0] - spec.mlen}"
        return f"gradient of k: key {idx[0]} ({where}), head {idx[1]}, channel {idx[2]}"
    if role in ("u", "v"):
        return f"gradient of {role}: head {idx[0]}, channel {idx[1]}"
    d_head = inputs["q"].shape[2]
    half = spec.d_model // 2
    col = f"sin w_{idx[1]}" if idx[1] < half else f"cos w_{idx[1] - half}"
    return (f"gradient of r_weight: row {idx[0]} (head {idx[0] // d_head}, channel {idx[0] % d_head}), "
            f"column {idx[1]} ({col})")


def _interleaved_w_grad(inputs, G, spec) -> np.ndarray:
    """grad_W with R built interleaved [sin w_0, cos w_0, ...] in the backward."""
    q, v = inputs["q"], inputs["v"]
    qlen, n_head, d_head = q.shape
    dist = transformer_xl.distances(qlen, spec.mlen, spec.clamp_len)
    values, index = np.unique(dist, return_inverse=True)
    R = sinusoid_table(values, spec.d_model, layout="interleaved", exponent="2i/d", base=transformer_xl.BASE,
                       backend="numpy")
    A = np.zeros((values.size, n_head, d_head))
    np.add.at(A, index.reshape(dist.shape), np.einsum("hij,ihe->ijhe", G / math.sqrt(d_head), q + v))
    return A.reshape(values.size, n_head * d_head).T @ R


def candidates(role: str, inputs: dict, G: np.ndarray, spec) -> list:
    """[(code, message, float64 gradient)] the failing gradient of ``role`` is compared with."""
    ref = reference_grads(inputs, G, spec)[role]
    root = math.sqrt(inputs["q"].shape[2])
    out = [("backward-missing", f"no gradient reaches {role}: it is zero (detached, or left out of the backward)",
            np.zeros_like(ref)),
           ("backward-scale", f"the gradient of {role} lacks the scale 1/sqrt(d_head) = 1/{root:g} (the forward "
            "applies it, the backward does not)", ref * root),
           ("backward-scale", f"the gradient of {role} carries the scale 1/sqrt(d_head) twice", ref / root)]
    if role == "q":
        zero_k = {**inputs, "k": np.zeros_like(inputs["k"])}
        zero_w = {**inputs, "r_weight": np.zeros_like(inputs["r_weight"])}
        position = reference_backward.score_vjp(G, *(zero_k[r] for r in ROLES), mlen=spec.mlen, d_model=spec.d_model,
                                                clamp_len=spec.clamp_len)["q"]
        content = reference_backward.score_vjp(G, *(zero_w[r] for r in ROLES), mlen=spec.mlen, d_model=spec.d_model,
                                               clamp_len=spec.clamp_len)["q"]
        out.append(("backward-missing", "the gradient of q lacks the content term's part sum_j Gs_ij k_j (q + u "
                    "detached in AC)", position))
        out.append(("backward-missing", "the gradient of q lacks the position term's part sum_j Gs_ij r_ij (q + v "
                    "detached in BD)", content))
    if role == "r_weight":
        if ref.shape[0] == ref.shape[1]:
            out.append(("backward-transposed", "the gradient of r_weight is transposed: R^T A instead of A^T R "
                        "(the weight gradient of the Linear r_net laid out [d_model, n_head * d_head])", ref.T))
        out.append(("backward-layout", "the gradient of r_weight pairs R's columns interleaved [sin w_0, cos w_0, "
                    "...] while the forward uses the concatenated [sin | cos] halves",
                    _interleaved_w_grad(inputs, G, spec)))
    return out


def diagnose(inputs: dict, G: np.ndarray, spec, dtype: str, graded: dict) -> list:
    """[Diagnosis] per code: the first failing gradient a candidate of that code explains within
    budget, naming the other inputs the same kind of candidate explains."""
    hits = {}
    for role in ROLES:
        g = graded.get(role)
        if g is None or g.output_f64 is None:
            continue
        ratio = g.ratio.get("standard")
        if ratio is not None and ratio <= 1.0:
            continue
        got = g.output_f64
        if not np.all(np.isfinite(got)):
            continue
        b = budgets(inputs, G, spec, dtype, "standard")[role]
        within = lambda cand: np.all(np.isfinite(cand)) and np.all(np.abs(got - cand) <= b)  # noqa: E731
        hit = next(((code, msg) for code, msg, cand in candidates(role, inputs, G, spec) if within(cand)), None)
        if hit is None:
            ref = reference_grads(inputs, G, spec)[role]
            den = float(np.vdot(ref, ref))
            c = float(np.vdot(got, ref)) / den if den > 0 else 0.0
            if den > 0 and abs(c - 1.0) > 1e-3 and within(c * ref):
                hit = ("backward-scale", f"the gradient of {role} is {c:.6g} times the right one")
        if hit is not None:
            hits.setdefault(hit[0], []).append((role, hit[1]))
    found = []
    for code, explained in hits.items():
        (role, message), others = explained[0], [r for r, _ in explained[1:]]
        also = f" (so are the gradients of {', '.join(others)})" if others else ""
        found.append(Diagnosis(code, f"{role}: {message}{also}"))
    return found


def gradcheck_case():
    """(q, k, u, v, r_weight, spec) float64 for torch.autograd.gradcheck: one query (decoding) after
    3 memory slots, so every entry is graded (no -inf from the mask for finite differences to meet),
    distances 3..0; 2 heads of 4, d_model 8."""
    import torch

    gen = torch.Generator().manual_seed(15)
    rand = lambda *shape, scale=1.0: scale * torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    args = (rand(1, 2, 4), rand(4, 2, 4), rand(2, 4, scale=0.5), rand(2, 4, scale=0.5), rand(8, 8, scale=0.25))
    return (*args, TransformerXLSpec(mlen=3, d_model=8, clamp_len=0))
