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

A case at a model's full shape (``--model transfo-xl-wt103``: reference/transformer_xl/model_cases.py)
names a subgrid (parameters ``heads``, ``rows``, ``keys``) and its inputs by their seed: the adapter
gets the whole inputs and computes every score, and ``View`` grades, budgets and diagnoses the
subgrid only, with the same formulas at its entries' distances.

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
from reference.transformer_xl import vectors as xl_vectors

INPUTS = ("q", "k", "u", "v", "r_weight")


_DERIVED: dict = {}


def case_inputs(case) -> dict:
    """{role: float64 array}: the case's inputs, stored or named by their seed (a model's case,
    reference.golden.seeded; the last one derived is kept: every dtype reads it)."""
    key = (case.id, case.params.get("inputs_sha256"))
    if key not in _DERIVED:
        _DERIVED.clear()
        _DERIVED[key] = xl_vectors.inputs_of(case.params, case.arrays)
    return _DERIVED[key]


class View:
    """The graded subgrid of a case: ``heads``, ``rows`` (queries) and ``keys`` (index arrays; the
    whole case unless its parameters name them), ``inputs`` restricted to them (q [rows, heads],
    k [keys, heads], u, v [heads], r_weight's rows of those heads), the unclamped distances ``raw``
    [rows, keys] and ``mask`` (raw >= 0: the entries attention does not mask). Grading, budgets and
    diagnosis work on the view, so a case at a model's full shape costs what its subgrid costs."""

    def __init__(self, case, spec, inputs):
        q = inputs["q"]
        qlen, n_head, d_head = q.shape
        self.heads, self.rows, self.keys = subgrid(case.params, q.shape, inputs["k"].shape[0])
        w = inputs["r_weight"].reshape(n_head, d_head, -1)[self.heads].reshape(len(self.heads) * d_head, -1)
        self.inputs = {"q": q[self.rows][:, self.heads], "k": inputs["k"][self.keys][:, self.heads],
                       "u": inputs["u"][self.heads], "v": inputs["v"][self.heads], "r_weight": w}
        self.raw = self.rows[:, None] + spec.mlen - self.keys[None, :]
        self.mask = self.raw >= 0
        self.dist = np.minimum(self.raw, spec.clamp_len) if spec.clamp_len > 0 else self.raw

    def select(self, out: np.ndarray) -> np.ndarray:
        """[heads, rows, keys] of a full [n_head, qlen, klen] score array."""
        return out[np.ix_(self.heads, self.rows, self.keys)]


def subgrid(params, q_shape, klen: int) -> tuple:
    """(heads, rows, keys) int64 arrays of the graded entries (all when the case names none)."""
    qlen, n_head, _ = q_shape
    return tuple(np.asarray(params[name] if params.get(name) is not None else range(size), dtype=np.int64)
                 for name, size in (("heads", n_head), ("rows", qlen), ("keys", klen)))


def reference_scores(case, spec, inputs) -> np.ndarray:
    """The golden scores of the inputs the adapter received (of the case's subgrid): the stored ones
    when those inputs are the case's (always, for golden inputs exact in every dtype), else
    computed in golden mode."""
    if all(np.array_equal(inputs[r], case_inputs(case)[r]) for r in INPUTS):
        return np.asarray(case.arrays["expected"], dtype=np.float64)
    return transformer_xl.score_entries(*(inputs[r] for r in INPUTS), mlen=spec.mlen, d_model=spec.d_model,
                                        clamp_len=spec.clamp_len, **xl_vectors.subset(case.params))


def budget(inputs, spec, dtype: str, profile: str, *, noise: bool = False, view: View | None = None) -> np.ndarray:
    """[n_head, qlen, klen]: the budget of the module docstring. noise=True: the typical error of a
    correct implementation instead (diagnosis's noise floor), 2 u (S_c + S_r) / sqrt(d_head) with
    S_r = sum_e |q_e + v_e| |r_e|: the stored q + u, q + v and r rounded once each, not the n
    roundings of a worst-case sum (with float32 accumulation a half-precision score is off by
    about that much)."""
    if view is not None:  # a subgrid: its own inputs and distances
        inputs = view.inputs
    q, k, u_b, v_b, w = (inputs[r] for r in INPUTS)
    qlen, n_head, d_head = q.shape
    u = tolerance.table_roundoff(dtype, profile)
    a = tolerance.accumulation_roundoff(dtype, profile)
    pos = position_terms(qlen, w, spec, dtype, profile, None if view is None else view.dist)
    per_key = lambda x: x.reshape(-1, n_head, d_head)[pos["index"]]  # noqa: E731
    qv = np.abs(q + v_b)
    s_c = np.einsum("ihe,jhe->hij", np.abs(q + u_b), np.abs(k))
    s_p = np.einsum("ihe,ijhe->hij", qv, per_key(pos["r"] + pos["dr"]))
    carried = np.einsum("ihe,ijhe->hij", qv, per_key(pos["dr"]))
    if noise:
        return 2 * u * (s_c + np.einsum("ihe,ijhe->hij", qv, per_key(pos["r"]))) / math.sqrt(d_head)
    floor = (2 * d_head + spec.d_model + 4) * tolerance.SMALLEST_SUBNORMAL[dtype]
    return ((d_head * a + 5 * u) * (s_c + s_p) + carried) / math.sqrt(d_head) + floor


def blind_distances(inputs, spec, budget_array, mask, raw=None) -> list:
    """Relative distances p (unmasked, not clamped away) where the budget covers the change of
    every score there when the distance becomes p + 1: an off-by-one shift would pass there.
    ``raw``: the subgrid's unclamped distances (View.raw) with ``inputs`` its View.inputs."""
    q, k, u, v, w = (inputs[r] for r in INPUTS)
    raw = diagnosis.raw_distances(q.shape[0], spec.mlen) if raw is None else raw
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
        args, inputs, watched = adapter_inputs(case_inputs(case), INPUTS, (), dtype, device)
        return Prepared((*args, spec), inputs, watched, dtype, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        q, k = prepared.inputs_f64["q"], prepared.inputs_f64["k"]
        shape = (q.shape[1], q.shape[0], k.shape[0])
        out, problems, got = check_tensor(value, "the scores", shape, prepared.dtype, prepared.device)
        problems += mutation_problems(prepared.watched)
        if out is None:
            return Graded(problems=problems, output_f64=out, output_dtype=got)
        view = View(case, spec, prepared.inputs_f64)
        out = view.select(out)  # the graded subgrid (the whole case unless it names one)
        graded = Graded(problems=problems, output_f64=out, output_dtype=got)
        mask = np.broadcast_to(view.mask, out.shape)
        ref = reference_scores(case, spec, prepared.inputs_f64)
        budgets = {profile: budget(None, spec, prepared.dtype, profile, view=view) for profile in tolerance.PROFILES}
        grade_on_mask(graded, out, ref, mask, budgets.get, "the scores (unmasked)", "scores")
        for profile, b in budgets.items():
            blind = blind_distances(view.inputs, spec, b, view.mask, view.raw)
            if blind:
                graded.notes[profile] = [f"the {profile} budget at relative distance(s) {blind} exceeds the change "
                                         "from distance p to p + 1, so an off-by-one shift would pass there"]
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        if isinstance(index, backward.GradIndex):
            return backward.locate(spec, prepared.inputs_f64, index)
        heads, rows, keys = subgrid(case.params, prepared.inputs_f64["q"].shape, prepared.inputs_f64["k"].shape[0])
        h, i, j = int(heads[index[0]]), int(rows[index[1]]), int(keys[index[2]])  # the subgrid's in the case's
        where = f"memory slot {j}" if j < spec.mlen else f"segment token {j - spec.mlen}"
        return f"head {h}, query {i}, key {j} ({where}), relative distance {i + spec.mlen - j}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        out = graded.output_f64
        if out is None:
            return []
        inputs = prepared.inputs_f64
        view = View(case, spec, inputs)  # out is already the graded subgrid (grade)
        mask = view.mask
        if not np.all(np.isfinite(out[:, mask])):
            return []
        ref = reference_scores(case, spec, inputs)
        b = budget(None, spec, dtype if dtype in tolerance.DTYPES else "float32", "standard", noise=True, view=view)
        floor = float(np.sqrt(np.mean(np.square(b[:, mask]))))
        return diagnosis.diagnose(out, ref, mask, view.inputs, spec, floor, view.raw)

    def repro_call(self) -> str:
        return "fn(*args)"

    # -- training (--grad): conformance/transformer_xl/backward.py ---------------------------------

    differentiable = True

    def grad_inputs(self, case, spec, prepared) -> dict:
        # A case at a model's full shape grades a subgrid of its scores: --grad grades the catalog's.
        if any(v is not None for v in xl_vectors.subset(case.params).values()):
            return {}
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
