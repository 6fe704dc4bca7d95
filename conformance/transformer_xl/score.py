"""Protocol ``transformer_xl.score``: ``fn(q, k, u, v, r_weight, spec) -> scores [n_head, qlen, klen]``.

q [qlen, n_head, d_head], k [klen, n_head, d_head] (klen = qlen + spec.mlen, memory first), u, v
[n_head, d_head] (r_w_bias, r_r_bias), r_weight [n_head * d_head, d_model] (r_net.weight), all in
the dtype under test; the scores ((q_i + u) . k_j + (q_i + v) . r_(i+mlen-j)) / sqrt(d_head)
(reference.transformer_xl) in that dtype. Only entries j <= i + mlen are graded: anything (the
relative shift's leftovers, -inf from the mask) is accepted above. The golden inputs are exact in
every dtype, so the reference is the stored faithfully rounded score.

Budget per score (docs/tolerance.md, Transformer-XL), u = u_tab (conformance.core.tolerance:
float32's unit roundoff or coarser in ``standard``, the dtype's own in ``strict``) for every value
stored in T, a = the accumulation unit (``accumulation_roundoff``: u_tab, but float32 for half
dtypes, as torch's matmuls and einsums accumulate), first order, with gamma_n <= n a for the
products and additions of a dot product of n terms (Higham, "Accuracy and Stability of Numerical
Algorithms", sec. 3.1):

    R_p[c]   the sinusoidal table's own budget e_R (conformance.core.sinusoid_budgets: float32 angles
             in ``standard``, sin/cos and the rounding to T);
    r_p[o] = sum_c W[o, c] R_p[c]   errs by dr[o] = sum_c |W[o,c]| (e_R[c] + (d_model a + u) |R_p[c]|)
             (the dot product, the rounding of r to T, and R's own error carried through W);
    score:  (q + u) and (q + v) round once (u), each dot product of d_head terms adds d_head a
            times its sum of |terms| and its rounding to T u, AC + BD, the scale 1/sqrt(d_head)
            (rounded to T) and the product with it 3u more:

    budget = [ (d_head a + 5 u) (S_c + S_p) + sum_e |q_e + v_e| dr_e ] / sqrt(d_head) + floor,

S_c = sum_e |q_e + u_e| |k_e|, S_p = sum_e |q_e + v_e| (|r_e| + dr_e), floor = (2 d_head + d_model
+ 4) times the dtype's smallest subnormal (products that underflow). Where the budget covers the
change an off-by-one distance makes (bfloat16 on these small cases), the case says so in a note.

--grad (conformance/transformer_xl/backward.py): the gradients of q, k, u, v and r_weight for a
cotangent drawn from the case (0 on the masked entries), graded against the float64 reference
VJP with budgets (n - 1) a + 7 u of their terms; gradcheck in float64 on a decoding case.
"""

from __future__ import annotations

import math

import numpy as np

from conformance.core import tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import adapter_inputs, check_tensor, grade_on_mask, mutation_problems
from conformance.transformer_xl import backward, diagnosis
from conformance.transformer_xl.position_term import position_terms
from conformance.transformer_xl.spec import spec_of
from conformance.training import gradcheck_identity
from reference import transformer_xl

INPUTS = ("q", "k", "u", "v", "r_weight")


def graded_entries(qlen: int, mlen: int) -> np.ndarray:
    """bool [qlen, klen]: j <= i + mlen (the rest is masked in attention)."""
    return diagnosis.raw_distances(qlen, mlen) >= 0


def reference_scores(case, spec, inputs) -> np.ndarray:
    """The golden scores of the inputs the adapter received: the stored ones when those inputs are
    the stored ones (always, for golden inputs exact in every dtype), else computed in golden mode."""
    if all(np.array_equal(inputs[r], np.asarray(case.arrays[r], dtype=np.float64)) for r in INPUTS):
        return np.asarray(case.arrays["expected"], dtype=np.float64)
    return transformer_xl.score(*(inputs[r] for r in INPUTS), mlen=spec.mlen, d_model=spec.d_model,
                                clamp_len=spec.clamp_len, mode="golden")


def budget(inputs, spec, dtype: str, profile: str, *, noise: bool = False) -> np.ndarray:
    """[n_head, qlen, klen]: the budget of the module docstring. noise=True: the typical error of a
    correct implementation instead (diagnosis's noise floor), 2 u (S_c + S_r) / sqrt(d_head) with
    S_r = sum_e |q_e + v_e| |r_e|: the stored q + u, q + v and r rounded once each, not the n
    roundings of a worst-case sum (with float32 accumulation a half-precision score is off by
    about that much)."""
    q, k, u_b, v_b, w = (inputs[r] for r in INPUTS)
    qlen, n_head, d_head = q.shape
    u = tolerance.table_roundoff(dtype, profile)
    a = tolerance.accumulation_roundoff(dtype, profile)
    pos = position_terms(qlen, w, spec, dtype, profile)
    per_key = lambda x: x.reshape(-1, n_head, d_head)[pos["index"]]  # noqa: E731
    qv = np.abs(q + v_b)
    s_c = np.einsum("ihe,jhe->hij", np.abs(q + u_b), np.abs(k))
    s_p = np.einsum("ihe,ijhe->hij", qv, per_key(pos["r"] + pos["dr"]))
    carried = np.einsum("ihe,ijhe->hij", qv, per_key(pos["dr"]))
    if noise:
        return 2 * u * (s_c + np.einsum("ihe,ijhe->hij", qv, per_key(pos["r"]))) / math.sqrt(d_head)
    floor = (2 * d_head + spec.d_model + 4) * tolerance.SMALLEST_SUBNORMAL[dtype]
    return ((d_head * a + 5 * u) * (s_c + s_p) + carried) / math.sqrt(d_head) + floor


def blind_distances(inputs, spec, budget_array, mask) -> list:
    """Relative distances p (unmasked, not clamped away) where the budget covers the change of
    every score there when the distance becomes p + 1: an off-by-one shift would pass there."""
    q, k, u, v, w = (inputs[r] for r in INPUTS)
    raw = diagnosis.raw_distances(q.shape[0], spec.mlen)
    clamp = (lambda d: np.minimum(d, spec.clamp_len)) if spec.clamp_len > 0 else (lambda d: d)  # noqa: E731
    here = diagnosis.model_scores(q, k, u, v, w, clamp(raw), spec.d_model)
    moved = diagnosis.model_scores(q, k, u, v, w, clamp(raw + 1), spec.d_model)
    covered = np.all(budget_array >= np.abs(moved - here), axis=0)  # [qlen, klen], every head
    live = mask & (clamp(raw + 1) != clamp(raw))
    blind = sorted({int(p) for p in raw[live]} - {int(p) for p in raw[live & ~covered]})
    return blind


class TransformerXLScore(Protocol):
    name = "transformer_xl.score"
    family = "transformer_xl"
    signature = "fn(q, k, u, v, r_weight, spec) -> scores [n_head, qlen, klen]"
    acceptable_note = "float32 sinusoid angles or accumulation"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, INPUTS, (), dtype, device)
        return Prepared((*args, spec), inputs, watched, dtype, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        q, k = prepared.inputs_f64["q"], prepared.inputs_f64["k"]
        shape = (q.shape[1], q.shape[0], k.shape[0])
        out, problems, got = check_tensor(value, "the scores", shape, prepared.dtype, prepared.device)
        problems += mutation_problems(prepared.watched)
        graded = Graded(problems=problems, output_f64=out, output_dtype=got)
        if out is None:
            return graded
        mask = np.broadcast_to(graded_entries(q.shape[0], spec.mlen), shape)
        ref = reference_scores(case, spec, prepared.inputs_f64)
        budgets = {profile: budget(prepared.inputs_f64, spec, prepared.dtype, profile) for profile in tolerance.PROFILES}
        grade_on_mask(graded, out, ref, mask, budgets.get, "the scores (unmasked)", "scores")
        for profile, b in budgets.items():
            blind = blind_distances(prepared.inputs_f64, spec, b, mask[0])
            if blind:
                graded.notes[profile] = [f"the {profile} budget at relative distance(s) {blind} exceeds the change "
                                         "from distance p to p + 1, so an off-by-one shift would pass there"]
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        if isinstance(index, backward.GradIndex):
            return backward.locate(spec, prepared.inputs_f64, index)
        h, i, j = index
        where = f"memory slot {j}" if j < spec.mlen else f"segment token {j - spec.mlen}"
        return f"head {h}, query {i}, key {j} ({where}), relative distance {i + spec.mlen - j}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        out = graded.output_f64
        if out is None:
            return []
        inputs = prepared.inputs_f64
        mask = graded_entries(inputs["q"].shape[0], spec.mlen)
        if not np.all(np.isfinite(out[:, mask])):
            return []
        ref = reference_scores(case, spec, inputs)
        b = budget(inputs, spec, dtype if dtype in tolerance.DTYPES else "float32", "standard", noise=True)
        floor = float(np.sqrt(np.mean(np.square(b[:, mask]))))
        return diagnosis.diagnose(out, ref, mask, inputs, spec, floor)

    def repro_call(self) -> str:
        return "fn(*args)"

    # -- training (--grad): conformance/transformer_xl/backward.py ---------------------------------

    differentiable = True

    def grad_inputs(self, case, spec, prepared) -> dict:
        return {role: i for i, role in enumerate(INPUTS)}

    def cotangents(self, case, spec, prepared) -> tuple:
        return (backward.cotangent_tensor(case.id, prepared.inputs_f64, spec, prepared.dtype, prepared.device),)

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        return backward.grade(prepared.inputs_f64, backward.cotangent_f64(cotangents[0]), spec, prepared.dtype,
                              prepared.device, grads)

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        dtype = dtype if dtype in tolerance.DTYPES else "float32"
        return backward.diagnose(prepared.inputs_f64, backward.cotangent_f64(cotangents[0]), spec, dtype, graded)

    def grad_blackbox(self, invoker, device, probe) -> list:
        *args, spec = backward.gradcheck_case()
        return [gradcheck_identity(invoker, (*(a.to(device) for a in args), spec), tuple(range(len(INPUTS))), device,
                                   "transformer_xl.score.gradcheck", "q [1, 2, 4], k [4, 2, 4] (mlen 3), u, v [2, 4], "
                                   "r_weight [8, 8] in float64, d_model 8")]


PROTOCOL = TransformerXLScore()
