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

Budget, per gradient element: conformance.core.bias_budgets.fire_gradients (its derivation
there; shared with the attention composite).

Diagnosis (core codes): zeros (backward-missing: the parameter detached or its gradient left
out), the gradient of c without the normalizer's part or without the distance's part (one of the
two psi terms detached: backward-missing), any constant multiple (backward-scale).
"""

from __future__ import annotations

import numpy as np

from conformance.core import bias_budgets, tolerance
from conformance.core.bias_budgets import fire_weights as weights  # FIRE's float64 parameters
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
    """{role: budget shaped like the parameter} at the case's spec (conformance.core.bias_budgets)."""
    qp, kp = inputs["q_positions"], inputs["k_positions"]
    return bias_budgets.fire_gradients(qp, kp, weights(inputs), G, graded_entries(qp, kp, spec), spec.init_L,
                                       spec.eps, dtype, profile)


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
