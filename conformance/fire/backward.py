"""fire.bias's backward pass for ``--grad``: cotangent, reference VJP, gradient budgets, diagnosis
and the gradcheck case.

The gradients graded are those of the six float parameters in the adapter's ``params`` dict (c,
L_multiplier, W1, b1, W2, b2); positions are integers. ``grad_inputs`` names them as (argument
index, key) pairs: the runner's TrainingCall must make the tensors *inside* the params dict
autograd leaves (``keyed_grad_args``: True once conformance.training accepts such pairs; until
then the protocol says it has no backward and ``--grad`` is refused for it).

Cotangent. G [H, sq, sk] drawn from the case (conformance.training.cotangent), 0 on the entries
the protocol does not grade (causal cases: keys j > i).

Reference. reference.fire.backward.bias_vjp in golden mode on the weights and G as received
(exact in every dtype). Non-differentiable points follow torch: relu'(0) = 0, abs'(0) = 0, and
at a tie i = L torch.max(q, threshold) gives each side half the gradient (dm/dL = 1/2).

Budget, per gradient element, first order in u = u_tab (the dtype's table roundoff: standard
admits float32 intermediates, strict the dtype's own; the module computes the feature in
float32, or float64 for a float64 model, never coarser than u) for each value rounded to T, and
a = the accumulation unit (conformance.core.tolerance.accumulation_roundoff: float32 for half
dtypes, as torch's matmuls and sums accumulate) for the additions of a sum: a sum of n terms
with k roundings to T around it costs n a + k u of its terms' magnitudes. Notation as fire.bias's budget:
n = |i - j|, A = psi(n), D = psi(max(i, L)) + eps, x = A / D, p_k = W1_k x + b1_k, with the
forward's errors e_A = 3u + 2u A, e_D = 3u + 3u D, err_x = u (3 (1 + x) / D + 6 x) and
err_p_k = |W1_k| err_x + 2u |W1_k x| + u |b1_k|; n_e the number of graded entries (the sums over
entries run over them, in any order: recursive summation's gamma_{n_e}, Higham sec. 4.2).
Autograd through the module (Linear -> ReLU -> Linear in T, the feature in float32) computes:

- delta_k = [p_k > 0] sum_h G_hk W2_hk (G W2 over H heads, then the ReLU mask of the *computed*
  p_k): magnitude S_k = sum_h |G_h W2_hk|, error (H a + u) S_k where p_k > 0; where
  |p_k| <= err_p_k the mask may differ from the exact one (the kink): error S_k there.
- grad_b2 = sum_ij G: (n_e a + 2 u) sum |G|.
- grad_W2 = sum_ij G a_k: sum |G| (err_p_k + (n_e a + 2 u) |a_k|) (a_k carries the forward's error).
- grad_b1 = sum_ij delta_k: its errors plus (n_e a + 2 u) sum S_k.
- grad_W1 = sum_ij delta_k x_T: its errors times |x|, S_k (err_x + u |x|) (x rounded to T),
  (n_e a + 3 u) sum S_k |x|.
- gx = sum_k delta_k W1_k (the feature's gradient, cast to float32): magnitude S_x = sum_k S_k
  |W1_k| over the units active or at the kink, error E_x = sum_k |W1_k| err_delta_k + (hidden a
  + 2 u) S_x; the computed gx is at most g_x = |gx| + E_x in size.
- grad_c = sum_ij gx sign(c) (t1 - t2), t1 = n / ((|c| n + 1) D), t2 = A t2', t2' = m / ((|c| m
  + 1) D^2): error sum_ij [E_x |t1 - t2| (gx's error goes down both paths) + g_x (|t1| (e_D / D
  + 8u) + e_A t2' + |t2| (2 e_D / D + 10u))] + (n_e a + 4 u) sum_ij g_x (|t1| + |t2|) (the
  backward's log, abs, mul and div steps
  round a few times each, with D's and A's own errors; the sums over entries, over keys for the
  normalizer, and the cast to c's dtype). The two paths (through psi(n) and through the
  normalizer) are summed separately, so the bound is relative to |t1| + |t2|, not to their
  difference: c's gradient is ill-conditioned where they nearly cancel (small D: L close to 0).
- grad_L_multiplier = -init_L sign(L_mult) sum_ij gx t_L dm/dL, t_L = A |c| / ((|c| m + 1) D^2):
  likewise with e_A |c| / ((|c| m + 1) D^2) and |t_L| (2 e_D / D + 10u), (n_e a + 5 u); at a tie
  i = L any one-sided convention (torch.clamp(min=L) gives 0, torch.where 1, torch.max 1/2) is a
  valid subgradient, so each row i = L adds half its exact one-sided contribution,
  |sum_j gx t_L| / 2 (and its errors counted in full).
- plus (n_e + hidden + H + 10) times the dtype's smallest subnormal.

Diagnosis (core codes): zeros (backward-missing: the parameter detached or its gradient left
out), the gradient of c without the normalizer's part or without the distance's part (one of the
two psi terms detached: backward-missing), any constant multiple (backward-scale).
"""

from __future__ import annotations

import numpy as np

from conformance.core import tolerance
from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded
from conformance.core.tensors import (argmax_index, check_tensor, finite_max, over_budget, torch_dtype)
from conformance.results import Diagnosis
from conformance import training
from conformance.fire.spec import FireSpec
from conformance.training import cotangent
from reference.fire import backward as reference_backward

ROLES = reference_backward.ROLES  # the params dict's keys
PARAMS_ARG = 2  # params is the adapter's third argument


def keyed_grad_args() -> bool:
    """True when conformance.training accepts (argument index, key) pairs in grad_args (leaves
    inside a dict argument)."""
    try:
        training.make_plan(((PARAMS_ARG, "c"),))
    except (TypeError, ValueError):
        return False
    return True


class GradIndex(list):
    """A gradient's worst index (plain ints in the report) remembering its parameter."""

    def __init__(self, index, role=None):
        # (index) alone too: dataclasses.asdict rebuilds list subclasses from their items
        super().__init__(int(i) for i in index)
        self.role = role


def graded_entries(qp, kp, spec) -> np.ndarray:
    return (kp[None, :] <= qp[:, None]) if spec.causal else np.ones((qp.size, kp.size), dtype=bool)


def weights(inputs) -> dict:
    w = {r: np.asarray(inputs[r], dtype=np.float64) for r in ROLES}
    return {**w, "c": float(w["c"].reshape(())), "L_multiplier": float(w["L_multiplier"].reshape(()))}


def cotangent_tensor(case_id: str, inputs: dict, spec, dtype: str, device: str):
    """G [H, sq, sk] in the dtype under test, 0 on the entries not graded."""
    import torch

    qp, kp = inputs["q_positions"], inputs["k_positions"]
    g = cotangent(case_id, (spec.num_heads, qp.size, kp.size), dtype) * graded_entries(qp, kp, spec)[None]
    return torch.from_numpy(g).to(device=device, dtype=torch_dtype(dtype))


def cotangent_f64(g) -> np.ndarray:
    import torch

    return g.detach().to("cpu", torch.float64).numpy()


_CACHE: dict = {}


def reference_grads(inputs: dict, G: np.ndarray, spec) -> dict:
    """Golden VJP (cached: weights and G are the same in every dtype)."""
    key = (spec, G.tobytes(), inputs["q_positions"].tobytes(), inputs["k_positions"].tobytes(),
           *(np.asarray(inputs[r]).tobytes() for r in ROLES))
    if key not in _CACHE:
        if len(_CACHE) > 64:
            _CACHE.clear()
        _CACHE[key] = reference_backward.bias_vjp(G, inputs["q_positions"], inputs["k_positions"], weights(inputs),
                                                  init_L=spec.init_L, eps=spec.eps, mode="golden")
    return _CACHE[key]


def budgets(inputs: dict, G: np.ndarray, spec, dtype: str, profile: str) -> dict:
    """{role: budget shaped like the parameter} (module docstring)."""
    qp, kp = inputs["q_positions"], inputs["k_positions"]
    w = weights(inputs)
    f = reference_backward.features(qp, kp, w, init_L=spec.init_L, eps=spec.eps)
    u = tolerance.table_roundoff(dtype, profile)
    a = tolerance.accumulation_roundoff(dtype, profile)
    A, D, x, m, n = f["A"], f["D"], f["x"], f["m"], f["n"]
    ac = abs(w["c"])
    w1, b1 = np.abs(w["W1"][:, 0]), np.abs(w["b1"])
    heads, hidden = w["W2"].shape
    e_A, e_D = 3 * u + 2 * u * A, 3 * u + 3 * u * D
    err_x = u * (3 * (1 + x) / D + 6 * x)
    err_p = w1 * err_x[..., None] + 2 * u * w1 * np.abs(x)[..., None] + u * b1  # [sq, sk, hidden]
    active = f["active"]
    kink = np.abs(f["p"]) <= err_p
    graded = graded_entries(qp, kp, spec)
    n_e = int(graded.sum())
    Gm = np.moveaxis(np.abs(G) * graded[None], 0, -1)  # [sq, sk, H]
    S = Gm @ np.abs(w["W2"])  # [sq, sk, hidden]
    err_delta = (heads * a + u) * S * active + S * kink
    live = active | kink
    S_x = (S * live) @ w1
    E_x = err_delta @ w1 + (hidden * a + 2 * u) * S_x
    # |gx| (exact, float64) plus its error bounds the gradient the feature's backward receives
    gx = ((np.moveaxis(G * graded[None], 0, -1) @ w["W2"]) * active) @ w["W1"][:, 0]
    g_x = np.abs(gx) + E_x
    t1 = n / ((ac * n + 1) * D)
    t2p = m / ((ac * m + 1) * D * D)
    t2 = A * t2p
    tLp = ac / ((ac * m + 1) * D * D)
    tL = A * tLp
    rel_D = e_D / D
    c_err = E_x * np.abs(t1 - t2) + g_x * (t1 * (rel_D + 8 * u) + e_A * t2p + t2 * (2 * rel_D + 10 * u)) \
        + (n_e * a + 4 * u) * g_x * (t1 + t2)
    dm = f["dm_dL"]  # [sq, 1]: 1 below L, 1/2 at a tie, 0 past it
    tie = (dm == 0.5)[:, 0]
    # any convention at a tie: the rows i = L may carry 0 to 1 times their one-sided derivative
    L_err = np.sum((E_x * tL + g_x * (e_A * tLp + tL * (2 * rel_D + 10 * u)) + (n_e * a + 5 * u) * g_x * tL) * (dm > 0)) \
        + 0.5 * np.sum(np.abs(np.sum(gx * tL, axis=1))[tie])
    floor = (n_e + hidden + heads + 10) * tolerance.SMALLEST_SUBNORMAL[dtype]
    out = {
        "c": np.array(np.sum(c_err)),
        "L_multiplier": np.array(np.sum(L_err) * spec.init_L),
        "W1": (np.einsum("ijk,ij->k", err_delta, np.abs(x)) + np.einsum("ijk,ij->k", S * live, err_x + u * np.abs(x))
               + (n_e * a + 3 * u) * np.einsum("ijk,ij->k", S * active, np.abs(x)))[:, None],
        "b1": (err_delta + (n_e * a + 2 * u) * S * active).sum(axis=(0, 1)),
        "W2": np.einsum("ijh,ijk->hk", Gm, err_p + (n_e * a + 2 * u) * f["a"]),
        "b2": (n_e * a + 2 * u) * Gm.sum(axis=(0, 1)),
    }
    return {role: b + floor for role, b in out.items()}


def grade(inputs: dict, G: np.ndarray, spec, dtype: str, device: str, grads: dict) -> dict:
    """{role: Graded}; a None gradient (nothing reaches the parameter through autograd) is graded as
    zeros, and is backward-missing where zeros are over budget (not, e.g., for L_multiplier when
    every query is past the threshold, where the right gradient is 0)."""
    ref = reference_grads(inputs, G, spec)
    out = {}
    for role in ROLES:
        what = f"the gradient of {role}"
        grad = grads.get(role)
        want = np.asarray(ref[role])
        if grad is None:
            got, problems, got_dtype = np.zeros_like(want), [], None
        else:
            got, problems, got_dtype = check_tensor(grad, what, want.shape, None, device)
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

        grade_profiles(graded, got, want, what, fill)
        if grad is None and not graded.ratio["standard"] <= 1.0:
            graded.problems.append(Diagnosis("backward-missing", f"no gradient reaches {role} (autograd returned "
                                             "None: the bias does not depend on it through autograd)"))
    return out


def locate(spec, index: GradIndex) -> str:
    role, idx = index.role, list(index)
    if role in ("c", "L_multiplier"):
        return f"gradient of {role}"
    if role in ("W1", "b1"):
        return f"gradient of {role}: hidden unit {idx[0]}"
    if role == "W2":
        return f"gradient of W2: head {idx[0]}, hidden unit {idx[1]}"
    return f"gradient of b2: head {idx[0]}"


def _c_parts(inputs, G, spec) -> tuple:
    """grad_c from the distance's psi alone, and from the normalizer's alone (float64, fast)."""
    qp, kp = inputs["q_positions"], inputs["k_positions"]
    w = weights(inputs)
    f = reference_backward.features(qp, kp, w, init_L=spec.init_L, eps=spec.eps)
    delta = (np.moveaxis(G, 0, -1) @ w["W2"]) * f["active"]
    gx = delta @ w["W1"][:, 0]
    ac, n, m, A, D = abs(w["c"]), f["n"], f["m"], f["A"], f["D"]
    s = np.sign(w["c"])
    return (np.array(np.sum(gx * s * n / ((ac * n + 1) * D))),
            np.array(-np.sum(gx * s * A * m / ((ac * m + 1) * D * D))))


def candidates(role: str, inputs: dict, G: np.ndarray, spec) -> list:
    """[(code, message, float64 gradient)] the failing gradient of ``role`` is compared with."""
    ref = np.asarray(reference_grads(inputs, G, spec)[role])
    out = [("backward-missing", f"no gradient reaches {role}: it is zero (the parameter detached, or its "
            "gradient left out of a hand-written backward)", np.zeros_like(ref))]
    if role == "c":
        distance, normalizer = _c_parts(inputs, G, spec)
        out.append(("backward-missing", "the gradient of c lacks the normalizer's part: psi(max(i, L)) is "
                    "detached (or not differentiated) while psi(i - j) is", distance))
        out.append(("backward-missing", "the gradient of c lacks the distance's part: psi(i - j) is detached "
                    "(or not differentiated) while the normalizer is", normalizer))
    return out


def diagnose(inputs: dict, G: np.ndarray, spec, dtype: str, graded: dict) -> list:
    """[Diagnosis] per code: the first failing gradient a candidate of that code explains within
    budget, naming the other parameters the same kind of candidate explains."""
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
            ref = np.asarray(reference_grads(inputs, G, spec)[role])
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
    """(q_positions, k_positions, params float64, spec) for torch.autograd.gradcheck: queries 1, 3
    and 9 with L = 3.5 (L_multiplier 7/1024 of init_L 512: two queries below the threshold, one
    past it, and no tie i = L, where finite differences see only the mean of the one-sided
    derivatives), keys 0..9 (bidirectional), 3 heads, hidden 6."""
    import torch

    gen = torch.Generator().manual_seed(15)
    rand = lambda *shape, scale=1.0: scale * torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    params = {"c": torch.tensor(0.1, dtype=torch.float64), "L_multiplier": torch.tensor(7 / 1024, dtype=torch.float64),
              "W1": rand(6, 1), "b1": rand(6, scale=0.5), "W2": rand(3, 6, scale=0.5), "b2": rand(3, scale=0.1)}
    q = torch.tensor([1, 3, 9], dtype=torch.int64)
    k = torch.arange(10, dtype=torch.int64)
    return q, k, params, FireSpec(num_heads=3, hidden=6, init_L=512.0, eps=1e-6, causal=False)
