"""Protocol ``rope.apply_qk``: ``fn(q, k, positions, spec) -> (q_rot, k_rot)``.

Fused query/key RoPE as attention layers call it: q [batch, seq, heads, head_dim] and k [batch,
seq, kv_heads, head_dim] with kv_heads dividing heads (grouped-query attention, down to a single
KV head: multi-query), positions int64 [batch, seq] shared by both. Each of q_rot and k_rot is
graded exactly as rope.apply grades its output (conformance.rope.apply: per pair, the rotation
budget of conformance.core.rotation_budgets, the tail past rotary_dim unchanged); the case's budget ratio
is the larger of the two. spec.tensor_layout and spec.inplace apply to q and k alike.

Output dict: Graded.output_f64 is {"q": ..., "k": ...} (float64, [batch, seq, heads, head_dim]
frame). Diagnosis: k returned unrotated (k_rot == k) while q is right is ``k-unrotated``; otherwise each
tensor is diagnosed as a rope.apply output (conformance.rope.diagnosis) and the message says
which one. Worst-element indices are [tensor (0 = q, 1 = k), batch, seq, head, dim].

With --grad the gradients of q and k (cotangents g_q, g_k: two streams of the case) are each graded
as rope.apply grades x's (conformance/rope/backward.py, qk_*: f R_{-m} g against the forward's
per-pair budget with g for x); an in-place case grades its forward only. Under --autocast each of
q_rot and k_rot is graded with the budget of the dtype the output arrived in.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import abs_error, finite_max, mutation_problems, type_name
from conformance.results import Diagnosis
from conformance.rope.apply import RopeApply
from conformance.rope.spec import spec_of
from conformance.core import layout_probe as probe
from conformance.rope import backward, diagnosis
from conformance.rope.backward import gradcheck_case
from conformance.training import gradcheck_identity

ROLES = ("q", "k")


class RopeApplyQk(Protocol):
    name = "rope.apply_qk"
    family = "rope"
    signature = "fn(q, k, positions, spec) -> (q_rot, k_rot)"
    layouts = ("half", "interleaved")
    dtype_free = False
    acceptable_note = RopeApply.acceptable_note

    def __init__(self):
        self._one = RopeApply()  # grades each of q and k

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        return self._prepare(case.arrays["q"], case.arrays["k"], case.arrays["positions"], spec, dtype, device)

    def prepare_arrays(self, x, positions, spec, dtype, device) -> Prepared:
        """The layout probe's entry (conformance.core.layout_probe): q = x, k = x with its heads in
        reverse order (as many heads as q: the probe asks about the pair layout only, not about
        grouped-query head counts)."""
        x = np.asarray(x, dtype=np.float64)
        return self._prepare(x, x[:, :, ::-1], positions, spec, dtype, device)

    def _prepare(self, q, k, positions, spec, dtype, device) -> Prepared:
        parts = {role: self._one.prepare_arrays(a, positions, spec, dtype, device) for role, a in (("q", q), ("k", k))}
        pos_t = parts["q"].args[1]
        inputs = {"q": parts["q"].inputs_f64["x"], "k": parts["k"].inputs_f64["x"],
                  "positions": parts["q"].inputs_f64["positions"], "parts": parts}
        watched = {"positions": parts["q"].watched["positions"]}
        for role in ROLES:
            if "x" in parts[role].watched:
                watched[role] = parts[role].watched["x"]
        return Prepared((parts["q"].args[0], parts["k"].args[0], pos_t, spec), inputs, watched, dtype, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        parts = prepared.inputs_f64["parts"]
        if value is None and spec.inplace:
            value = (None, None)
        if not (isinstance(value, (tuple, list)) and len(value) == 2):
            return Graded(problems=[Diagnosis("shape-changed", f"the output is a {type_name(value)}, not a "
                                              "(q_rot, k_rot) pair")])
        graded = {}
        for i, role in enumerate(ROLES):
            # The case's dtype, not the part's: under --autocast it is the dtype the output arrived in.
            sub = dataclasses.replace(parts[role], dtype=prepared.dtype)
            sub.watched = {}  # mutation is checked once below, by name
            g = self._one.grade(case, spec, sub, value[i])
            for d in g.problems:
                d.message = d.message.replace("the output", f"{role}_rot")
            graded[role] = g

        out = Graded(problems=[d for g in graded.values() for d in g.problems]
                     + mutation_problems(prepared.watched, self._shapes(prepared)))
        if any(not g.gradable for g in graded.values()):
            return out
        out.output_f64 = {role: graded[role].output_f64 for role in ROLES}
        out.output_dtype = graded["q"].output_dtype
        errs = [g.max_abs_error for g in graded.values() if g.max_abs_error is not None]
        out.max_abs_error = max(errs) if errs else None
        for profile in graded["q"].ratio:
            ratios = {role: graded[role].ratio.get(profile) for role in ROLES}
            known = [r for r in ratios.values() if r is not None]
            out.ratio[profile] = None if len(known) < 2 else max(known)
            worst = max(ROLES, key=lambda r: np.inf if ratios[r] is None else ratios[r])
            out.worst_index[profile] = [ROLES.index(worst)] + list(graded[worst].worst_index.get(profile, []))
            counts = [graded[role].mismatch.get(profile) for role in ROLES]
            if all(c is not None for c in counts):
                out.mismatch[profile] = (counts[0][0] + counts[1][0], counts[0][1] + counts[1][1], counts[0][2])
            out.curve[profile] = graded[worst].curve.get(profile, [])
            out.notes[profile] = graded["q"].notes.get(profile, [])
        return out

    @staticmethod
    def _shapes(prepared) -> dict:
        """Head and token counts of q and k, for the input-mutated message (whether a kernel writes
        into its input can depend on them)."""
        q, k = prepared.inputs_f64["q"].shape, prepared.inputs_f64["k"].shape  # [b, s, h, d] frame
        tokens = f"{q[1]} token{'s' if q[1] != 1 else ''}"
        return {"q": f"{q[2]} query head{'s' if q[2] != 1 else ''}, {tokens}",
                "k": f"{k[2]} KV head{'s' if k[2] != 1 else ''} for {q[2]} query head{'s' if q[2] != 1 else ''}, "
                     f"{tokens}"}

    def locate(self, case, spec, prepared, index) -> str:
        role = ROLES[int(index[0])]
        return f"{role}: " + self._one.locate(case, spec, prepared.inputs_f64["parts"][role], index[1:])

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        k_in, k_out = prepared.inputs_f64["k"], graded.output_f64["k"]
        q_ok = self._within(prepared, spec, "q", graded.output_f64["q"])
        if q_ok and finite_max(abs_error(k_out, k_in)) == 0.0 and not self._within(prepared, spec, "k", k_out):
            heads = k_in.shape[2]
            return [Diagnosis("k-unrotated", f"k comes back unrotated ({heads} KV head{'s' if heads > 1 else ''} "
                              f"for {prepared.inputs_f64['q'].shape[2]} query heads) while q is rotated")]
        found = []
        for role in ROLES:
            got = diagnosis.explain(diagnosis.diagnose_apply, prepared.inputs_f64[role],
                                    prepared.inputs_f64["positions"], graded.output_f64[role], spec, dtype)
            found += [Diagnosis(d.code, f"{role}: {d.message}") for d in got]
        return found

    def _within(self, prepared, spec, role, out) -> bool:
        ref = self._one.reference(prepared.inputs_f64["parts"][role], spec, spec.layout)
        err = abs_error(out, ref)
        scale = np.max(np.abs(prepared.inputs_f64[role]), initial=0.0)
        return finite_max(err) is not None and finite_max(err) <= 0.05 * max(scale, 1e-30)

    def probe(self, invoker, cases, options):
        return probe.detect(invoker, self, [self.spec(c) for c in cases], options)

    def repro_call(self) -> str:
        return "fn(*args)"

    # -- training (--grad): q and k each graded as rope.apply's x (conformance/rope/backward.py) ----

    differentiable = True

    def grad_inputs(self, case, spec, prepared) -> dict:
        # An in-place kernel writes into q and k: autograd refuses that on leaves, so only its forward is graded.
        return {} if spec.inplace else {"q": 0, "k": 1}

    def cotangents(self, case, spec, prepared) -> tuple:
        return backward.qk_cotangents(case, spec, prepared)

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        graded = backward.qk_grade_backward(self._one, case, spec, prepared, cotangents, grads)
        # Worst-element indices in this protocol's frame, [tensor (0 = q, 1 = k), batch, seq, head, dim].
        for i, role in enumerate(ROLES):
            g = graded.get(role)
            if g is not None:
                g.worst_index = {p: None if idx is None else [i] + list(idx) for p, idx in g.worst_index.items()}
        return graded

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        return backward.qk_diagnose_backward(self._one, case, spec, prepared, cotangents, grads, graded, dtype)

    def grad_blackbox(self, invoker, device, probe) -> list:
        layout = probe.blackbox_options.get("layout", "half") if probe is not None else "half"
        q, positions, spec = gradcheck_case(layout)
        k = q.flip(1).contiguous()  # its own values: the tokens in reverse order
        return [gradcheck_identity(invoker, (q.to(device), k.to(device), positions.to(device), spec), (0, 1),
                                   device, "rope.apply_qk.gradcheck",
                                   f"q and k [1, 4, 1, 8] float64 at positions 0, 1, 7, 1000 ({layout} layout, "
                                   "rotary_dim 6)")]


PROTOCOL = RopeApplyQk()
