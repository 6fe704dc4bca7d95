"""Protocol ``gaussian_rope.score``: ``fn(q, k, q_positions, k_positions, spec) -> scores``.

q [batch, sq, heads, head_dim] at q_positions int64 [batch, sq] (m), k [batch, sk, heads, head_dim]
at k_positions [batch, sk] (n), in the dtype under test; the scores [batch, heads, sq, sk] are the
score form K(n - m) q_m^T R_(n-m) k_n (seed document 002), graded against the reference applied to
the dtype-rounded inputs.

Budget per score (docs/tolerance.md, section 11): K(n - m) times the error a rotation of q and a
rotation of k may carry (RoPE's rotation budget per pair, times the other vector's pair magnitude,
both elements), plus a dot product of head_dim terms accumulated in the accumulation unit a
(conformance.core.tolerance.accumulation_roundoff: float32 for half dtypes) and rounded to T
((head_dim a + u_tab) sum |q_j k_j|), plus the kernel's own error at the distance (u_tab A(n - m) times
the unscaled score), plus a subnormal floor.
"""

from __future__ import annotations

import numpy as np

from conformance.core import rotation_budgets as budgets, tolerance
from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import (adapter_inputs, argmax_index, check_tensor, finite_max, mutation_problems,
                                      over_budget, per_position_curve, ratio_max, token_max)
from conformance.gaussian_rope.kernel import distances, kernel_error
from conformance.gaussian_rope.spec import spec_of
from conformance.results import Diagnosis
from conformance.gaussian_rope.backward import diagnose_score, grade_score, score_cotangent, score_gradcheck_case
from conformance.training import gradcheck_identity
from reference import gaussian_rope
from reference.numerics.frequencies import inv_freq
from reference.numerics.layouts import pair_indices
from reference.numerics import rotation


def plain_scores(q, k, qp, kp, spec) -> np.ndarray:
    """<R_m q, R_n k> [b, h, sq, sk] in float64, no kernel."""
    qr = rotation.apply(q, qp, rotary_dim=spec.rotary_dim, base=spec.base, layout=spec.layout, backend="numpy")
    kr = rotation.apply(k, kp, rotary_dim=spec.rotary_dim, base=spec.base, layout=spec.layout, backend="numpy")
    return np.einsum("bihd,bjhd->bhij", qr, kr)


class GaussianRopeScore(Protocol):
    name = "gaussian_rope.score"
    family = "gaussian_rope"
    signature = "fn(q, k, q_positions, k_positions, spec) -> scores [batch, heads, sq, sk]"
    acceptable_note = "float32 angle rounding, growing with position"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, ("q", "k"), ("q_positions", "k_positions"), dtype, device)
        return Prepared((*args, spec), inputs, watched, dtype, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        q, k = prepared.inputs_f64["q"], prepared.inputs_f64["k"]
        qp, kp = prepared.inputs_f64["q_positions"], prepared.inputs_f64["k_positions"]
        shape = (q.shape[0], q.shape[2], q.shape[1], k.shape[1])
        out, problems, got = check_tensor(value, "the scores", shape, prepared.dtype, prepared.device)
        problems += mutation_problems(prepared.watched)
        graded = Graded(problems=problems, output_f64=out, output_dtype=got)
        if out is None:
            return graded
        kern = gaussian_rope.kernel(distances(qp, kp), dict(spec.kernel))  # [b, sq, sk]
        plain = plain_scores(q, k, qp, kp, spec)
        ref = kern[:, None] * plain
        dist = distances(qp, kp)

        def fill(profile, err):
            budget = self.budget(q, k, qp, kp, spec, kern, plain, prepared.dtype, profile)
            r = tolerance.ratio(err, budget)
            graded.ratio[profile] = finite_max(r)
            graded.worst_index[profile] = argmax_index(r)
            graded.mismatch[profile] = over_budget(r) + ("scores",)
            by_distance = lambda a: np.moveaxis(a, 1, -1).reshape(1, -1, a.shape[1])  # noqa: E731
            graded.curve[profile] = per_position_curve(
                dist.reshape(1, -1), token_max(by_distance(err)), token_max(by_distance(budget)),
                ratio_max(by_distance(r)))

        grade_profiles(graded, out, ref, "the scores", fill)
        return graded

    @staticmethod
    def budget(q, k, qp, kp, spec, kern, plain, dtype, profile) -> np.ndarray:
        r = spec.rotary_dim
        first, second = pair_indices(r, spec.layout)
        theta = inv_freq(r, spec.base)

        def pair_parts(x, pos):
            mag = np.abs(x[..., first]) + np.abs(x[..., second])  # [b, s, h, r/2]
            phi = np.abs(np.asarray(pos, dtype=np.float64))[:, :, None, None] * theta
            return mag, budgets.rotation_budget(mag, phi, r, spec.base, dtype, profile)

        qm, qb = pair_parts(q, qp)
        km, kb = pair_parts(k, kp)
        rotation = 2 * (np.einsum("bihp,bjhp->bhij", qb, km) + np.einsum("bihp,bjhp->bhij", qm, kb))
        u = tolerance.table_roundoff(dtype, profile)
        a = tolerance.accumulation_roundoff(dtype, profile)
        terms = np.einsum("bihd,bjhd->bhij", np.abs(q), np.abs(k))
        dot = (q.shape[3] * a + u) * terms
        amp_err = kernel_error(distances(qp, kp), spec.kernel)
        floor = tolerance.SMALLEST_SUBNORMAL[dtype] * (1.0 + terms)
        return kern[:, None] * (rotation + dot) + u * amp_err[:, None] * np.abs(plain) + floor

    def locate(self, case, spec, prepared, index) -> str:
        if len(index) == 5:  # an element of q's or k's gradient (--grad): [which, b, s, h, d]
            which, b, s, h, d = (int(v) for v in index)
            role, pos = (("query", "q_positions"), ("key", "k_positions"))[which]
            return (f"gradient of the {role}, batch row {b}, position {int(prepared.inputs_f64[pos][b, s])} "
                    f"(token {s}), head {h}, dim {d}")
        b, h, i, j = index
        m = int(prepared.inputs_f64["q_positions"][b, i])
        n = int(prepared.inputs_f64["k_positions"][b, j])
        return f"batch row {b}, head {h}, query {i} (position {m}), key {j} (position {n}), n - m = {n - m}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        q, k = prepared.inputs_f64["q"], prepared.inputs_f64["k"]
        qp, kp = prepared.inputs_f64["q_positions"], prepared.inputs_f64["k_positions"]
        out = graded.output_f64
        if out is None or not np.all(np.isfinite(out)):
            return []
        plain = plain_scores(q, k, qp, kp, spec)
        kern = dict(spec.kernel)
        km = gaussian_rope.kernel(np.asarray(qp), kern)[:, :, None]
        kn = gaussian_rope.kernel(np.asarray(kp), kern)[:, None, :]
        truth = gaussian_rope.kernel(distances(qp, kp), kern)
        candidates = (
            ("K(m) K(n): the absolute form's kernels on the score instead of K(n - m)", km * kn),
            ("the kernel is missing (K = 1)", np.ones(truth.shape)),
            ("K(n - m) squared (the kernel applied to both q and k)", truth * truth),
        )
        base = np.linalg.norm(out - truth[:, None] * plain)
        for message, cand in candidates:
            model = cand[:, None] * plain
            fit = np.linalg.norm(out - model) / max(np.linalg.norm(model), 1e-300)
            if fit <= 1e-2 and np.linalg.norm(out - model) <= 0.1 * base:
                return [Diagnosis("kernel-mismatch", message)]
        return []

    # -- training (--grad): conformance/gaussian_rope/backward.py --------------------------------

    differentiable = True

    def grad_inputs(self, case, spec, prepared) -> dict:
        return {"q": 0, "k": 1}

    def cotangents(self, case, spec, prepared) -> tuple:
        return (score_cotangent(case.id, prepared),)

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        return grade_score(spec, prepared, _f64(cotangents[0]), grads)

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        return diagnose_score(spec, prepared, _f64(cotangents[0]), graded)

    def grad_blackbox(self, invoker, device, probe) -> list:
        q, k, qp, kp, spec = score_gradcheck_case("half")
        return [gradcheck_identity(invoker, (q.to(device), k.to(device), qp.to(device), kp.to(device), spec),
                                   (0, 1), device, f"{self.name}.gradcheck",
                                   "q [1, 3, 1, 8] and k [1, 4, 1, 8] float64 at positions 0, 5, 9 and 0, 3, 7, 12 "
                                   "(half layout, rotary_dim 6)")]


def _f64(t) -> np.ndarray:
    """A cotangent tensor as the backward received it, float64 numpy."""
    import torch

    return t.detach().to("cpu", torch.float64).numpy()


PROTOCOL = GaussianRopeScore()
