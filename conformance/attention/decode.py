"""Protocol ``attention.decode``: ``fn(weights, spec) -> layer``, an attention layer with its own KV
cache, driven through a script as a serving loop drives it.

The adapter is a factory: ``fn(weights, spec)`` builds the layer once per case (and dtype), with
``weights`` attention.forward's dict ({"wq" [hq d, D], "wk", "wv" [hkv d, D], "wo" [D, hq d]},
nn.Linear layout, in the dtype under test) and ``spec`` a DecodeSpec (decode_spec.py: the static
configuration, ``semantics`` and ``max_model_len``). The runner then calls that one instance step
after step (a prefill, then decode steps):

    layer(hidden, positions, attention_mask) -> out

hidden [b, s_t, D] (the step's new tokens), positions int64 [b, s_t], attention_mask bool
[b, total so far] (True = a real token; rows left-padded), out [b, s_t, D]. The keys and values
stay in the layer's own cache between steps (HF: a DynamicCache the layer owns).

Reference (reference/attention/decode_vectors.py): step t's expected output is
reference.attention.forward over ALL tokens so far, without a cache (the whole history re-run),
the rows of step t's tokens; seq_len (what dynamic NTK and LongRoPE read) by the case's
``semantics``: "recompute" (default; HF's) the largest position so far + 1, every key rotated
again with the current length's table; "fixed" (vLLM's) ``max_model_len`` for the whole run. A
case carries one semantics and is graded against it only; a layer that implements the other one
raises conformance.Unsupported (a skip), and ``--cases '*-recompute'`` or ``'*-fixed'`` picks them.

Grading: each step as attention.forward grades the history's output restricted to the step's rows
(forward.py, with attention.forward's budget: budgets.forward_budget on the stages of the full
history, the step's seq_len); the case's ratio is its worst step's, the worst element
``[step, batch, token of the step, feature]``. Rows of padded queries are not graded. A step that
raises or hangs ends the script naming the step (conformance/core/scripted.py).

Diagnosis (the first failing step a fault model explains, the model recomputed from the
reference's stages, as models.py does; the same fit rule as attention.forward): ``cache-stale-base`` (dynamic NTK: each
token's q and k rotated with the table of its own step's length, so cached keys keep an old base;
HF #25104), ``cache-table-mismatch`` (LongRoPE: the same with the short and long tables, keys
cached with the short table while queries use the long one; vLLM #27414),
``decode-position-off-by-one`` (every decode token at its position + 1 or - 1, kept in the cache:
tt-metal's Falcon), then attention.forward's own codes on the step.

The layer lives in the runner's process: cases are skipped under ``--isolate`` with the reason.
Under ``--autocast`` each step runs inside torch.autocast (conformance.training.TrainingCall) and
its output is graded with the budget of the dtype it arrived in. No ``--grad``: the protocol is
not differentiable (attention.forward grades the layer's gradients).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from conformance.attention import budgets, models
from conformance.attention.decode_spec import forward_spec, spec_of
from conformance.attention.forward import FIT_BUDGETS, PROTOCOL as FORWARD
from conformance.attention.stages import WEIGHTS, reference_args
from conformance.core import tolerance
from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.scripted import call_step, merge_step, step_failure
from conformance.core.tensors import adapter_inputs, check_tensor, mutation_problems, type_name
from conformance.results import Diagnosis
from conformance.training import TrainingCall, budget_dtype, unpack
from reference import attention
from reference.attention.decode_vectors import step_bounds

ISOLATED = ("attention.decode drives the layer and its cache across calls in the runner's process; a layer cannot "
            "come back from an isolated process: run without --isolate")
STALE_CODES = {"dynamic": "cache-stale-base", "longrope": "cache-table-mismatch"}


@dataclass
class DecodeStep:
    """One call of the script: tokens [start, stop) of the case, and what grading found."""

    index: int
    start: int
    stop: int
    positions: np.ndarray  # int64 [b, s_t], the step's
    length: int  # largest position so far + 1
    seq_len: int  # the reference's (by the semantics)
    stages: Optional[dict] = None  # reference.attention.stages of the history (+ "reference", rows restricted)
    graded: Optional[Graded] = None
    output: Optional[np.ndarray] = None  # float64 [b, s_t, D]

    def describe(self) -> str:
        lo, hi = int(self.positions.min()), int(self.positions.max())
        where = f"position {lo}" if lo == hi else f"positions {lo}..{hi}"
        return f"step {self.index} ({self.positions.shape[1]} token(s) at {where}, length {self.length})"


@dataclass
class DecodePrepared(Prepared):
    steps: list = field(default_factory=list)
    tensors: dict = field(default_factory=dict)  # hidden, positions, attention_mask as torch tensors


def script(case, spec) -> list:
    pos = np.asarray(case.arrays["positions"], dtype=np.int64)
    out = []
    for k, (start, stop) in enumerate(step_bounds(case.params["steps"])):
        largest = int(pos[:, :stop].max())
        out.append(DecodeStep(k, start, stop, pos[:, start:stop], largest + 1, spec.step_seq_len(largest)))
    return out


class AttentionDecode(Protocol):
    name = "attention.decode"
    family = "attention"
    signature = "fn(weights, spec) -> layer; layer(hidden, positions, attention_mask) -> out [batch, step, d_model]"
    drives_calls = True
    acceptable_note = "float32 accumulation, softmax or RoPE tables"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> DecodePrepared:
        import torch

        args, inputs, watched = adapter_inputs(case.arrays, ("hidden", *WEIGHTS), ("positions", "attention_mask"),
                                               dtype, device)
        t = dict(zip(("hidden", *WEIGHTS, "positions", "attention_mask"), args))
        weights = {n: t[n] for n in WEIGHTS}
        tensors = {"hidden": t["hidden"], "positions": t["positions"], "attention_mask": t["attention_mask"].to(torch.bool)}
        watched = {n: watched[n] for n in WEIGHTS}  # the factory's arguments; each step gets fresh tensors
        return DecodePrepared((weights, spec), inputs, watched, dtype, device, steps=script(case, spec),
                              tensors=tensors)

    def excluded(self, spec, options) -> Optional[str]:
        # --isolate is the user's explicit option: a layer with its cache cannot cross the wire.
        return ISOLATED if getattr(options, "isolate", False) else super().excluded(spec, options)

    # -- grading ---------------------------------------------------------------------------

    def grade(self, case, spec, prepared, value) -> Graded:
        if not callable(value):
            return Graded(problems=[Diagnosis("shape-changed", f"the factory returned a {type_name(value)}, not a "
                                                               "callable layer")])
        plan = prepared.plan
        call = value if plan is None else TrainingCall(value)
        extra = () if plan is None else (dict(plan, grad_args=(), cotangents=()),)
        autocast = plan.get("autocast") if plan is not None else None
        t = prepared.tensors
        graded = Graded()
        for step in prepared.steps:
            a, z = step.start, step.stop
            args = (t["hidden"][:, a:z].clone(), t["positions"][:, a:z].clone(), t["attention_mask"][:, :z].clone())
            outcome = call_step(prepared, call, args + extra)
            if outcome.kind != "ok":
                graded.problems.append(step_failure(step, outcome))
                break
            out, _ = unpack(outcome.value)
            dtype = budget_dtype(out, prepared.dtype, autocast)
            step.graded = self._grade_step(case, spec, prepared, step, out, dtype)
            merge_step(graded, step, step.graded)
        graded.problems += mutation_problems(prepared.watched)
        chosen = {s.graded.output_dtype for s in prepared.steps if s.graded is not None and s.graded.output_dtype}
        if autocast and chosen == {autocast}:
            prepared.dtype = autocast
        return graded

    def history(self, spec, prepared, step) -> tuple:
        """(attention.forward's spec of the step, a Prepared of the history with its stages cached,
        graded rows restricted to the step's tokens)."""
        fspec = forward_spec(spec, step.seq_len)
        x = prepared.inputs_f64
        inputs = {"hidden": x["hidden"][:, :step.stop], **{n: x[n] for n in WEIGHTS},
                  "positions": x["positions"][:, :step.stop], "attention_mask": x["attention_mask"][:, :step.stop],
                  "past_keys": None, "past_values": None}
        pseudo = Prepared((), inputs, {}, prepared.dtype, prepared.device)
        if step.stages is None:
            args, kw = reference_args(inputs, fspec)
            st = attention.stages(*args, **kw)
            st["reference"] = attention.forward(*args, **kw, backend="cpu")
            rows = np.zeros_like(st["rows"])
            rows[:, step.start:] = st["rows"][:, step.start:]
            st["rows"] = rows
            step.stages = st
        pseudo._attention_stages = step.stages  # read by attention.forward's grade and diagnose
        return fspec, pseudo

    def _grade_step(self, case, spec, prepared, step, value, dtype) -> Graded:
        import torch

        b, T, D = prepared.inputs_f64["hidden"].shape
        shape = (b, step.stop - step.start, D)
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
            _, problems, _ = check_tensor(value, "the output", shape, dtype, prepared.device)
            return Graded(problems=problems)
        fspec, pseudo = self.history(spec, prepared, step)
        pseudo.dtype = dtype
        full = torch.zeros((b, step.stop, D), dtype=value.dtype, device=value.device)
        full[:, step.start:] = value.detach()
        g = FORWARD.grade(case, fspec, pseudo, full)
        if g.output_f64 is not None:
            step.output = g.output_f64[:, step.start:]
            g.output_f64 = step.output
            for profile, index in g.worst_index.items():
                if index is not None:
                    # (all ratios 0: argmax may land before the step's rows, which are the graded ones)
                    g.worst_index[profile] = [index[0], max(index[1] - step.start, 0), index[2]]
        return g

    # -- explaining ------------------------------------------------------------------------

    def locate(self, case, spec, prepared, index) -> str:
        k, b, i, c = (int(v) for v in index)
        step = prepared.steps[k]
        return (f"{step.describe()}: batch row {b}, token {i} of the step (position {int(step.positions[b, i])}), "
                f"output feature {c}")

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        """The first step over budget that a cache fault model explains; else attention.forward's
        diagnosis of the first step over budget. (A fault may show first at a step where its model
        is still within a budget of the reference: the next steps tell it.)"""
        use = dtype if dtype in tolerance.DTYPES else "float32"
        failing = [s for s in prepared.steps if s.graded is not None and s.output is not None
                   and (s.graded.ratio.get("standard") or 0.0) > 1.0]
        if not failing or not np.all(np.isfinite(failing[0].output)):
            return []
        for step in failing:
            if not np.all(np.isfinite(step.output)):
                break
            fspec, pseudo, full, gap = self._step_gaps(spec, prepared, step, use)
            st = step.stages
            ref_gap = gap(full, st["reference"])
            positions = pseudo.inputs_f64["positions"]
            for code, what, model in cache_models(st, fspec, prepared.steps[:step.index + 1], positions):
                if gap(model, st["reference"]) > 1.0 and gap(full, model) <= min(FIT_BUDGETS, ref_gap / 2):
                    return [Diagnosis(code, f"{step.describe()}: {what}")]
        step = failing[0]
        fspec, pseudo, full, _ = self._step_gaps(spec, prepared, step, use)
        found = FORWARD.diagnose(case, fspec, pseudo, Graded(output_f64=full), use)
        return [Diagnosis(d.code, f"{step.describe()}: {d.message}") for d in found]

    def _step_gaps(self, spec, prepared, step, dtype) -> tuple:
        """(forward spec, history Prepared, the step's output in the history's shape (the reference
        on the other rows), gap(x, y): the largest |x - y| / budget on the step's graded rows)."""
        fspec, pseudo = self.history(spec, prepared, step)
        st = step.stages
        full = st["reference"].copy()
        full[:, step.start:] = step.output
        rows = st["rows"][:, :, None]
        budget = budgets.forward_budget(st, fspec, pseudo.inputs_f64["positions"], dtype, "standard")

        def gap(x, y):
            return np.where(rows, np.abs(x - y) / budget, 0.0).max(initial=0.0)

        return fspec, pseudo, full, gap

    def repro_call(self) -> str:
        return "layer = fn(*args)  # then layer(hidden, positions, attention_mask) for each step of the case"


def cache_models(st, fspec, steps, positions) -> list:
    """(code, description, output of the history [b, T, D]) of the cache faults at the last of
    ``steps`` (the steps so far; ``positions`` [b, T] of the history): recomputed from the
    reference's stages (models.recompute) with the rotated queries and keys replaced."""
    out = []
    kind = (fspec.scaling or {}).get("rope_type") or (fspec.scaling or {}).get("type")
    if fspec.encoding != "rope":
        return out
    if kind in STALE_CODES and len({s.length for s in steps}) > 1:
        # Each token rotated with the table of its own step's length (the call's largest position + 1),
        # its key kept so in the cache: HF's dynamic_rope_update and vLLM's per-call LongRoPE choice.
        qr, kr = st["qr"].copy(), st["kr"].copy()
        for s in steps:
            at = slice(s.start, s.stop)
            own = dataclasses.replace(fspec, seq_len=s.length)
            qr[:, at] = models._rope(st["q"][:, at], positions[:, at], own)
            kr[:, at] = models._rope(st["k"][:, at], positions[:, at], own)
        what = ("the cached keys kept the dynamic-NTK base of the step that computed them (each token rotated "
                "with its own step's length), not the current one" if kind == "dynamic" else
                "keys cached with the LongRoPE table of their own step's length (short) while the queries use the "
                "current one (long): each token's table chosen by its own call")
        out.append((STALE_CODES[kind], what, models.recompute(st, fspec, qr=qr, kr=kr)))
    first = steps[0].stop  # the prefill's tokens; every later token is a decode token
    if positions.shape[1] > first:
        for delta, word in ((1, "one past"), (-1, "one short of")):  # the cache length + 1, - 1
            shifted = positions.copy()
            shifted[:, first:] += delta
            qr = models._rope(st["q"], shifted, fspec)
            kr = models._rope(st["k"], shifted, fspec)
            out.append(("decode-position-off-by-one", f"every decode token rotated at the position {word} the "
                        "right one, its key kept so in the cache",
                        models.recompute(st, fspec, qr=qr, kr=kr)))
    return out


PROTOCOL = AttentionDecode()
