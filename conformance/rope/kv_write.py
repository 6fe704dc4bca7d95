"""Protocol ``rope.kv_write``: ``fn(q, k, v, positions, k_cache, v_cache, slot_mapping, spec) -> q_rot``.

The serving step that fuses RoPE with the paged KV-cache write (vLLM's ``rotary_embedding`` then
``reshape_and_cache``, FlashInfer's ``apply_rope_with_cos_sin_cache_inplace`` then
``append_paged_kv_cache``, xformers' ``rope_padded``): over a packed batch of t tokens (THD),

- q [t, heads, head_dim], k and v [t, kv_heads, head_dim] in the dtype under test, positions int64
  [t] (each token's position in its own sequence; padding tokens have 0);
- k_cache, v_cache [num_blocks, block_size, kv_heads, head_dim] (vLLM's NHD layout) in the dtype
  under test, filled by posref with the sentinel NaN;
- slot_mapping int64 [t]: token i goes to slot s = slot_mapping[i], block s // block_size, offset
  s % block_size (reference/rope/kv_write.py derives it from the case's block tables); -1 marks a
  padding token, for which nothing may be written.

The adapter writes the rotated k and v itself into the caches, in place, and returns q rotated.
spec is a :class:`KvWriteSpec`: RopeSpec (tensor_layout "thd", cu_seqlens the sequences' bounds in
the pack, padding after the last) plus block_size and num_blocks.

Grading (every part must pass): q_rot as rope.apply grades a thd output (conformance.core
.rotation_apply, the rotation budgets of conformance.core.rotation_budgets); k_cache at each real
token's slot as the rotation of that token's k, with the same budget; v_cache there exactly v (a
copy in the same dtype: budget 0); every other slot of both caches still NaN. Worst-element indices
are [part (0 = q_rot, 1 = k_cache, 2 = v_cache), 0, token, head, dim]. Diagnosis
(conformance/rope/kv_placement.py): where each token's k and v went (``kv-padding-written``,
``kv-wrong-slot``), what was written at the right slots (``kv-written-unrotated``,
``kv-value-rotated``), then rope.apply's diagnosis of q_rot and of the written keys.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from conformance.core import rotation_reference as reference
from conformance.core.grading import grade_profiles
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.rotation_apply import rotation_ratios
from conformance.core.rotation_spec import RopeSpec
from conformance.core.tensors import argmax_index, mutation_problems, over_budget, torch_dtype
from conformance.core import tolerance
from conformance.results import Diagnosis
from conformance.rope import diagnosis, kv_placement
from conformance.rope.apply import RopeApply

PARTS = ("q_rot", "k_cache", "v_cache")
SENTINEL = float("nan")


@dataclass(frozen=True)
class KvWriteSpec(RopeSpec):
    """RopeSpec (tensor_layout "thd") plus the paged cache's block_size and num_blocks."""

    block_size: int = 16
    num_blocks: int = 0


def spec_of(params) -> KvWriteSpec:
    return KvWriteSpec(head_dim=int(params["head_dim"]), rotary_dim=int(params["rotary_dim"]),
                       base=float(params["base"]), layout=str(params["layout"]), scaling=None,
                       seq_len=int(params.get("seq_len") or 0), tensor_layout="thd",
                       cu_seqlens=tuple(int(c) for c in params["cu_seqlens"]),
                       block_size=int(params["block_size"]), num_blocks=int(params["num_blocks"]))


def _fresh_cache(shape, dtype, device):
    import torch

    return torch.full(shape, SENTINEL, dtype=torch_dtype(dtype), device=device)


class KvWrite(Protocol):
    name = "rope.kv_write"
    family = "rope"
    signature = "fn(q, k, v, positions, k_cache, v_cache, slot_mapping, spec) -> q_rot"
    layouts = ("half", "interleaved")
    acceptable_note = RopeApply.acceptable_note

    def __init__(self):
        self._one = RopeApply()  # grades q_rot, and the keys as rotations

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        import torch

        a = case.arrays
        pos = np.asarray(a["positions"], dtype=np.int64)
        parts = {role: self._one.prepare_arrays(np.asarray(a[role])[None], pos[None], spec, dtype, device)
                 for role in ("q", "k")}
        v = torch.from_numpy(np.array(a["v"], dtype=np.float64)).to(device=device, dtype=torch_dtype(dtype))
        slots = np.asarray(a["slot_mapping"], dtype=np.int64)
        slots_t = torch.from_numpy(slots.copy()).to(device)
        shape = (spec.num_blocks, spec.block_size, v.shape[1], spec.head_dim)
        k_cache, v_cache = _fresh_cache(shape, dtype, device), _fresh_cache(shape, dtype, device)
        q_t, pos_t = parts["q"].args[0], parts["q"].args[1]
        k_t = parts["k"].args[0]
        watched = {"q": parts["q"].watched["x"], "k": parts["k"].watched["x"], "v": (v, v.clone()),
                   "positions": parts["q"].watched["positions"], "slot_mapping": (slots_t, slots_t.clone())}
        inputs = {"q": parts["q"].inputs_f64["x"], "k": parts["k"].inputs_f64["x"],
                  "v": v.detach().to("cpu", torch.float64).numpy()[None], "positions": pos[None],
                  "slot_mapping": slots, "parts": parts}
        return Prepared((q_t, k_t, v, pos_t, k_cache, v_cache, slots_t, spec), inputs, watched, dtype, device)

    # -- grading -----------------------------------------------------------------------------

    def grade(self, case, spec, prepared, value) -> Graded:
        parts = prepared.inputs_f64["parts"]
        sub = dataclasses.replace(parts["q"], dtype=prepared.dtype)
        sub.watched = {}  # mutation is checked once below, by name
        q = self._one.grade(case, spec, sub, value)
        for d in q.problems:
            d.message = d.message.replace("the output", "q_rot")
        out = Graded(problems=list(q.problems) + mutation_problems(prepared.watched))
        caches = kv_placement.read_caches(prepared)
        if q.output_f64 is None:
            return out
        k_rows, v_rows, tokens = kv_placement.written_rows(prepared, caches)
        graded = {"q_rot": q, "k_cache": self._grade_keys(spec, prepared, k_rows, tokens),
                  "v_cache": self._grade_values(prepared, v_rows, tokens)}
        for part in PARTS[1:]:
            out.problems += graded[part].problems
        out.problems += kv_placement.sentinel_problems(prepared, caches)
        out.output_f64 = {"q": q.output_f64, "k_cache": caches[0], "v_cache": caches[1]}
        out.output_dtype = q.output_dtype
        errs = [g.max_abs_error for g in graded.values() if g.max_abs_error is not None]
        out.max_abs_error = max(errs) if errs else None
        for profile in tolerance.PROFILES:
            ratios = {p: graded[p].ratio.get(profile) for p in PARTS}
            known = [r for r in ratios.values() if r is not None]
            out.ratio[profile] = max(known) if len(known) == len(PARTS) else None
            worst = max(PARTS, key=lambda p: np.inf if ratios[p] is None else ratios[p])
            index = list(graded[worst].worst_index.get(profile) or [0, 0, 0, 0])
            if worst != "q_rot":
                index[1] = int(tokens[index[1]]) if len(tokens) else 0  # the row back to its token
            out.worst_index[profile] = [PARTS.index(worst)] + index
            counts = [graded[p].mismatch.get(profile) for p in PARTS]
            if all(c is not None for c in counts):
                out.mismatch[profile] = (sum(c[0] for c in counts), sum(c[1] for c in counts),
                                          "pairs of q_rot and k_cache, values of v_cache")
            out.curve[profile] = q.curve.get(profile, [])
            out.notes[profile] = q.notes.get(profile, [])
        return out

    def _grade_keys(self, spec, prepared, k_rows, tokens) -> Graded:
        """The keys at the real tokens' slots against the rotation of their k (rope.apply's budget)."""
        k = prepared.inputs_f64["k"][:, tokens]
        pos = prepared.inputs_f64["positions"][:, tokens]
        graded = Graded(output_f64=k_rows)
        if not len(tokens):
            graded.ratio = {p: 0.0 for p in tolerance.PROFILES}
            graded.mismatch = {p: (0, 0, "values") for p in tolerance.PROFILES}
            return graded
        ref = reference.apply(k, pos, spec, spec.layout)
        grade_profiles(graded, k_rows, ref, "k_cache at the tokens' slots",
                       lambda profile, err: rotation_ratios(graded, profile, spec, prepared.dtype, k, pos, err))
        return graded

    def _grade_values(self, prepared, v_rows, tokens) -> Graded:
        """The values at the real tokens' slots against v itself: a copy in the same dtype, exact."""
        v = prepared.inputs_f64["v"][:, tokens]
        graded = Graded(output_f64=v_rows)
        err = grade_profiles(graded, v_rows, v, "v_cache at the tokens' slots", lambda profile, err: None)
        r = tolerance.ratio(err, np.zeros_like(err))  # 0 where exact, inf elsewhere
        for profile in tolerance.PROFILES:
            graded.ratio[profile] = float(np.max(r, initial=0.0)) if r.size else 0.0
            graded.worst_index[profile] = argmax_index(r) if r.size else [0, 0, 0, 0]
            graded.mismatch[profile] = over_budget(r) + ("values",)
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        part, rest = PARTS[int(index[0])], list(index[1:])
        where = self._one.locate(case, spec, prepared.inputs_f64["parts"]["q" if part == "q_rot" else "k"], rest)
        if part == "q_rot":
            return "q_rot: " + where
        slot = int(prepared.inputs_f64["slot_mapping"][rest[1]])
        return f"{part} slot {slot} (block {slot // spec.block_size}, offset {slot % spec.block_size}): " + where

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        found = kv_placement.diagnose(prepared, spec, graded, dtype)
        if found:
            return found
        tokens = np.flatnonzero(prepared.inputs_f64["slot_mapping"] >= 0)
        k_rows = graded.output_f64["k_cache"][prepared.inputs_f64["slot_mapping"][tokens]][None]
        out = []
        for role, x, pos, y in (("q_rot", prepared.inputs_f64["q"], prepared.inputs_f64["positions"],
                                 graded.output_f64["q"]),
                                ("k_cache", prepared.inputs_f64["k"][:, tokens],
                                 prepared.inputs_f64["positions"][:, tokens], k_rows)):
            got = diagnosis.explain(diagnosis.diagnose_apply, x, pos, y, spec, dtype)
            out += [Diagnosis(d.code, f"{role}: {d.message}") for d in got]
        return out

    def probe(self, invoker, cases, options):
        return None  # the pair layout is the case's; rope.apply's probe calls fn(x, positions, spec)

    def repro_call(self) -> str:
        return "fn(*args)"


PROTOCOL = KvWrite()
