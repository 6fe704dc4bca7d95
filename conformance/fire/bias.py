"""Protocol ``fire.bias``: ``fn(q_positions, k_positions, params, spec) -> bias [num_heads, sq, sk]``.

q_positions, k_positions int64 [sq], [sk] (0-based); params a dict of tensors in the dtype under
test: ``c`` and ``L_multiplier`` (0-d), ``W1`` [hidden, 1], ``b1`` [hidden], ``W2`` [num_heads,
hidden], ``b2`` [num_heads] (the stored values are exact in every dtype, so nothing is lost in the
cast); spec a FireSpec. Graded against reference.fire (NumPy backend, within a few u_64 of the
exact values) on the keys j <= i (causal) or every key.

Budget per entry: conformance.core.bias_budgets.fire_bias (its derivation there; shared with the
attention composite).

--grad (conformance/fire/backward.py): the gradients of c, L_multiplier, W1, b1, W2 and b2 for a
cotangent drawn from the case (0 on the keys not graded), against the float64 reference VJP
(torch's conventions at relu's kink and at a tie i = L), with budgets derived there; gradcheck in
float64. Needs conformance.training to accept (argument, key) leaves (backward.keyed_grad_args).
"""

from __future__ import annotations

import numpy as np

from conformance.core import bias_budgets, tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import check_tensor, grade_on_mask, mutation_problems, torch_dtype
from conformance.fire import backward
from conformance.fire.spec import spec_of
from conformance.results import Diagnosis
from conformance.training import gradcheck_identity
from reference import fire
from reference.fire.vectors import WEIGHTS


def graded_entries(qp, kp, spec) -> np.ndarray:
    """bool [sq, sk]: the entries that count (causal: key position <= query position)."""
    return (kp[None, :] <= qp[:, None]) if spec.causal else np.ones((qp.size, kp.size), dtype=bool)


def weights(inputs) -> dict:
    """The float64 weights (as the adapter received them) in reference.fire's form."""
    w = {name: inputs[name] for name in WEIGHTS.values()}
    return {**w, "c": float(np.ravel(w["c"])[0]), "L_multiplier": float(np.ravel(w["L_multiplier"])[0])}


def mlp(x, w) -> np.ndarray:
    """[H, sq, sk] from the feature x [sq, sk], in float64 (non-finite x propagates)."""
    with np.errstate(all="ignore"):
        act = np.maximum(w["W1"][:, 0] * x[..., None] + w["b1"], 0.0)
        return np.moveaxis(act @ w["W2"].T + w["b2"], -1, 0)


def budget(qp, kp, w, spec, ref, dtype, profile, features=None) -> np.ndarray:
    """[H, sq, sk]: the budget per entry at the case's spec (conformance.core.bias_budgets)."""
    return bias_budgets.fire_bias(qp, kp, w, spec.init_L, spec.eps, ref, dtype, profile, features)


class FireBias(Protocol):
    name = "fire.bias"
    family = "fire"
    signature = "fn(q_positions, k_positions, params, spec) -> bias [num_heads, sq, sk]"
    acceptable_note = "float32 intermediate arithmetic"
    curve_axis = "distance"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        import torch

        inputs, watched, params = {}, {}, {}
        for role in ("q_positions", "k_positions"):
            t = torch.from_numpy(np.array(case.arrays[role], dtype=np.int64)).to(device)
            inputs[role], watched[role] = t.cpu().numpy().astype(np.int64), (t, t.clone())
        for role, name in WEIGHTS.items():
            t = torch.from_numpy(np.array(case.arrays[role], dtype=np.float64)).to(device).to(torch_dtype(dtype))
            if name in ("c", "L_multiplier"):
                t = t.reshape(())
            params[name] = t
            inputs[name] = t.detach().to("cpu", torch.float64).numpy()
            watched[name] = (t, t.clone())
        return Prepared((watched["q_positions"][0], watched["k_positions"][0], params, spec), inputs, watched,
                        dtype, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        qp, kp = prepared.inputs_f64["q_positions"], prepared.inputs_f64["k_positions"]
        out, problems, got = check_tensor(value, "the bias", (spec.num_heads, qp.size, kp.size), prepared.dtype,
                                          prepared.device)
        problems += mutation_problems(prepared.watched)
        graded = Graded(problems=problems, output_f64=out, output_dtype=got)
        if out is None:
            return graded
        w = weights(prepared.inputs_f64)
        ref = fire.bias(qp, kp, w, init_L=spec.init_L, eps=spec.eps, backend="numpy")
        return grade_on_mask(graded, out, ref, graded_entries(qp, kp, spec)[None],
                             lambda profile: budget(qp, kp, w, spec, ref, prepared.dtype, profile), "the bias",
                             "entries", distance=np.abs(qp[:, None] - kp[None, :])[None])

    def locate(self, case, spec, prepared, index) -> str:
        if isinstance(index, backward.GradIndex):
            return backward.locate(spec, index)
        h, i, j = index
        qp, kp = prepared.inputs_f64["q_positions"], prepared.inputs_f64["k_positions"]
        return f"head {h}, query {i} (position {int(qp[i])}), key {j} (position {int(kp[j])})"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        qp, kp, out = prepared.inputs_f64["q_positions"], prepared.inputs_f64["k_positions"], graded.output_f64
        if out is None:
            return []
        w = weights(prepared.inputs_f64)
        mask = graded_entries(qp, kp, spec)[None]
        ref = fire.bias(qp, kp, w, init_L=spec.init_L, eps=spec.eps, backend="numpy")
        c, L, eps = w["c"], abs(w["L_multiplier"] * spec.init_L), spec.eps
        n = np.abs(qp[:, None] - kp[None, :]).astype(np.float64)
        psi = lambda v: np.log1p(np.abs(c * v))  # noqa: E731
        q = qp.astype(np.float64)
        with np.errstate(all="ignore"):
            candidates = (  # (code, psi of the distance, normalizer [sq, 1], what it means)
                ("fire-threshold-missing", psi(n), (psi(q) + eps)[:, None],
                 "the normalizer is psi(i), not psi(max(i, L)): queries below L = %g are not interpolated" % L),
                ("fire-plus-one-missing", np.log(np.abs(c * n)), (np.log(np.abs(c * np.maximum(q, L))) + eps)[:, None],
                 "psi(x) = log(|c x|) without the + 1 (-inf at distance 0)"),
                ("fire-one-based-positions", psi(n), (psi(np.maximum(q + 1.0, L)) + eps)[:, None],
                 "the positions are counted from 1: the normalizer is psi(max(i + 1, L))"),
            )
            for code, psi_n, norm, message in candidates:
                model = mlp(psi_n / norm, w)
                # out must be the candidate formula computed as a correct one is: within its budget
                within = budget(qp, kp, w, spec, model, dtype, "standard", features=(psi_n, norm))
                if _explains(out, model, ref, mask, within):
                    return [Diagnosis(code, message)]
        return []

    # -- training (--grad): conformance/fire/backward.py ----------------------------------------

    @property
    def differentiable(self) -> bool:
        # The parameters live inside the params dict: graded once the runner can make them leaves.
        return backward.keyed_grad_args()

    def grad_inputs(self, case, spec, prepared) -> dict:
        return {role: (backward.PARAMS_ARG, role) for role in backward.ROLES}

    def cotangents(self, case, spec, prepared) -> tuple:
        return (backward.cotangent_tensor(case.id, prepared.inputs_f64, spec, prepared.dtype, prepared.device),)

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        return backward.grade(prepared.inputs_f64, backward.cotangent_f64(cotangents[0]), spec, prepared.dtype,
                              prepared.device, grads)

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        dtype = dtype if dtype in tolerance.DTYPES else "float32"
        return backward.diagnose(prepared.inputs_f64, backward.cotangent_f64(cotangents[0]), spec, dtype, graded)

    def grad_blackbox(self, invoker, device, probe) -> list:
        q, k, params, spec = backward.gradcheck_case()
        args = (q.to(device), k.to(device), {r: t.to(device) for r, t in params.items()}, spec)
        return [gradcheck_identity(invoker, args, tuple(self.grad_inputs(None, spec, None).values()), device,
                                   "fire.bias.gradcheck", "c, L_multiplier, W1 [6, 1], b1, W2 [3, 6], b2 in float64 "
                                   "at queries 1, 3, 9 (L = 3.5), keys 0..9")]


def _explains(out, model, ref, mask, within) -> bool:
    """The model differs from the reference, out is non-finite exactly where the model is, and on
    the finite entries out is within the budget ``within`` of the model (the dtype's own rounding
    of it) and closer to it than to ref."""
    fin_model, fin_out = np.isfinite(model), np.isfinite(out)
    if np.any(mask & (fin_model != fin_out)):
        return False
    sel = mask & fin_model
    if not sel.any():
        return bool(np.any(mask))
    to_model = np.abs(out[sel] - model[sel])
    to_ref = float(np.max(np.abs(out[sel] - ref[sel])))
    if np.any(mask & ~fin_model):
        to_ref = float("inf")  # the reference is finite everywhere
    return to_ref > 0 and bool(np.all(to_model <= within[sel])) and float(np.max(to_model)) < to_ref


PROTOCOL = FireBias()
