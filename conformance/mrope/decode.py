"""Protocol ``mrope.decode``: ``fn(spec) -> session``, M-RoPE positions over two generations.

The adapter is a factory: ``fn(spec)`` builds one session per case, which the runner drives
through the case's script as a model's generation loop drives its position ids:

    session.prefill(token_types, grids) -> int64 [3, batch, seq]   (the prompt, as mrope.positions)
    session.decode(cache_position)      -> int64 [3, batch, 1]     (one generated token per row)

token_types int64 [batch, seq] (0 text, 1 image token), grids int64 [images, 3] (t, h, w after the
spatial merge, in order), cache_position a Python int: the new token's index in the sequence
(the prompt holds 0 .. seq - 1; HF's ``cache_position`` / the cache length). The script is a
prefill and 2-3 decode steps, then a second prefill of a different prompt on the same session
and its decode steps (reference.mrope.decode_vectors). The right decode position of row r is
t = h = w = c + delta_r with delta_r from the current prompt (reference.mrope.decode).

Every call's answer is graded exactly (integers, as mrope.positions); the case's output is the
calls' answers side by side [3, batch, columns], and ``locate`` names the generation, the call and
the step. Each call goes through the run's invoker (``Invoker.call_with``: per-call timeout, time
limit, process-state guard); a call that raises, hangs or returns the wrong shape ends the script
with a problem naming the generation and step. Diagnoses (decode steps): ``mrope-stale-deltas``
(a later generation decodes with an earlier prompt's deltas: transformers' bug),
``mrope-deltas-ignored`` (t = cache_position: a text-only port), ``mrope-deltas-row0`` (row 0's delta
for every row); a wrong prefill gets mrope.positions' diagnoses, named by generation.

The session lives in the runner's process: under ``--isolate`` the cases are skipped with the
reason (a session cannot cross the process boundary as plain data). Dtype-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import argmax_index, check_integer_tensor, mutation_problems, over_budget, type_name
from conformance.isolation import _call_catching
from conformance.mrope.positions import PROTOCOL as POSITIONS
from conformance.mrope.spec import spec_of
from conformance.results import Diagnosis
from reference.mrope.decode import decode_positions, deltas
from reference.mrope.decode_vectors import script
from reference.mrope.positions import rope_index

ISOLATED = ("mrope.decode drives one session across calls in the runner's process; a session cannot come back "
            "from an isolated process: run without --isolate")


@dataclass
class Call:
    """One call of the script and the columns of the case's output it fills."""

    generation: int  # 1, 2
    step: Optional[int]  # None: the prefill; k: decode step k
    cache_position: Optional[int]
    start: int  # first column in the case's output
    stop: int

    def describe(self) -> str:
        if self.step is None:
            return f"generation {self.generation}, prefill"
        return f"generation {self.generation}, decode step {self.step} (cache_position {self.cache_position})"


@dataclass
class Generation:
    index: int
    token_types: np.ndarray  # [b, s]
    grids: np.ndarray  # [images, 3]
    cache_positions: np.ndarray  # [steps]
    prompt: np.ndarray  # reference [3, b, s]
    deltas: np.ndarray  # reference [b]
    calls: list = field(default_factory=list)
    prefill_out: Optional[np.ndarray] = None  # the session's answers, once returned
    decode_out: Optional[np.ndarray] = None  # [3, b, steps]


@dataclass
class DecodePrepared(Prepared):
    generations: list = field(default_factory=list)


def _generations(case) -> list:
    out, column = [], 0
    for g, (types, grids, steps) in enumerate(script(case.arrays), start=1):
        prompt = rope_index(types, grids)
        gen = Generation(g, types, grids, steps, prompt, deltas(prompt))
        gen.calls.append(Call(g, None, None, column, column + types.shape[1]))
        column += types.shape[1]
        for k, c in enumerate(steps):
            gen.calls.append(Call(g, k, int(c), column, column + 1))
            column += 1
        out.append(gen)
    return out


def reference_output(generations) -> np.ndarray:
    return np.concatenate([np.concatenate([g.prompt, decode_positions(g.deltas, g.cache_positions)], axis=2)
                           for g in generations], axis=2)


class MropeDecode(Protocol):
    name = "mrope.decode"
    family = "mrope"
    signature = ("fn(spec) -> session; session.prefill(token_types, grids) -> [3, b, s], "
                 "session.decode(cache_position) -> [3, b, 1] (integers)")
    dtype_free = True
    drives_calls = True

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> DecodePrepared:
        gens = _generations(case)
        inputs = {f"{role}_{g.index}": getattr(g, role) for g in gens for role in ("token_types", "grids")}
        return DecodePrepared((spec,), inputs, {}, dtype, device, generations=gens)

    def excluded(self, spec, options) -> Optional[str]:
        # --isolate is the user's explicit option: a session cannot cross the wire.
        return ISOLATED if getattr(options, "isolate", False) else super().excluded(spec, options)

    # -- grading ---------------------------------------------------------------------------

    def grade(self, case, spec, prepared, value) -> Graded:
        import torch

        prefill, decode = getattr(value, "prefill", None), getattr(value, "decode", None)
        if not (callable(prefill) and callable(decode)):
            return Graded(problems=[Diagnosis("shape-changed", f"the factory returned a {type_name(value)}, not a "
                                                               "session with prefill and decode methods")])
        problems = []
        for gen in prepared.generations:
            b, s = gen.token_types.shape
            types_t, grids_t = torch.from_numpy(gen.token_types.copy()), torch.from_numpy(gen.grids.copy())
            watched = {f"token_types of generation {gen.index}": (types_t, types_t.clone()),
                       f"grids of generation {gen.index}": (grids_t, grids_t.clone())}
            gen.prefill_out = self._answer(prepared, gen.calls[0], prefill, (types_t, grids_t), (3, b, s), problems)
            problems += mutation_problems(watched)
            if gen.prefill_out is None:
                break
            answers = []
            for call in gen.calls[1:]:
                answers.append(self._answer(prepared, call, decode, (call.cache_position,), (3, b, 1), problems))
                if answers[-1] is None:
                    break
            if problems:
                break
            gen.decode_out = np.concatenate(answers, axis=2) if answers else np.zeros((3, b, 0), np.int64)
        if problems:
            return Graded(problems=problems)
        out = np.concatenate([np.concatenate([g.prefill_out, g.decode_out], axis=2) for g in prepared.generations],
                             axis=2)
        err = np.abs(out - reference_output(prepared.generations)).astype(np.float64)
        graded = Graded(output_f64=out.astype(np.float64), max_abs_error=float(err.max(initial=0)))
        ratio = err / 0.5  # any integer off by one or more is over
        for profile in ("standard", "strict"):
            graded.ratio[profile] = float(ratio.max(initial=0))
            graded.worst_index[profile] = argmax_index(ratio) if ratio.size else None
            graded.mismatch[profile] = over_budget(ratio) + ("position ids",)
        return graded

    @staticmethod
    def _answer(prepared, call, fn, args, shape, problems) -> Optional[np.ndarray]:
        """The int64 answer of one call, or None with a problem naming the call."""
        outcome = prepared.invoker.call_with(fn, *args) if prepared.invoker is not None \
            else _call_catching(fn, args)
        if outcome.kind != "ok":
            code = "raised" if outcome.kind in ("raised", "unsupported") else outcome.kind
            problems.append(Diagnosis(code, f"{call.describe()}: {outcome.error}"))
            return None
        out, found = check_integer_tensor(outcome.value, "the positions", shape)
        problems += [Diagnosis(p.code, f"{call.describe()}: {p.message}") for p in found]
        return out

    # -- explaining ------------------------------------------------------------------------

    def locate(self, case, spec, prepared, index) -> str:
        k, b, j = (int(i) for i in index)
        for gen in prepared.generations:
            for call in gen.calls:
                if call.start <= j < call.stop:
                    if call.step is None:
                        kind = "image" if gen.token_types[b, j - call.start] else "text"
                        where = f"token {j - call.start} ({kind})"
                    else:
                        where = f"delta {int(gen.deltas[b])}"
                    return f"{call.describe()}: {'thw'[k]} of batch row {b}, {where}"
        return f"column {j}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        gens = prepared.generations
        if graded.output_f64 is None:
            return []
        for gen in gens:  # a wrong prompt first: mrope.positions' diagnoses, named by generation
            if not np.array_equal(gen.prefill_out, gen.prompt):
                found = POSITIONS.diagnose(case, spec, Prepared((), {"token_types": gen.token_types,
                                                                     "grids": gen.grids}),
                                           Graded(output_f64=gen.prefill_out), dtype)
                return [Diagnosis(d.code, f"generation {gen.index}, prefill: {d.message}") for d in found]
        return diagnose_decode(gens)


# Decode candidates: the deltas each generation would decode with, one wrong thing each.
def _stale(gens, gen):
    return gens[0].deltas  # the first prompt's deltas, never recomputed (equal to the truth in generation 1)


def _ignored(gens, gen):
    return np.zeros_like(gen.deltas)


def _row0(gens, gen):
    return np.full_like(gen.deltas, gen.deltas[0])


CANDIDATES = (
    ("mrope-stale-deltas", _stale, "decodes with generation 1's deltas {used} instead of its own {right} (the "
                                   "previous prompt's rope_deltas reused)"),
    ("mrope-deltas-ignored", _ignored, "decodes at t = h = w = cache_position: deltas {used} instead of {right} "
                                       "(a text-only port)"),
    ("mrope-deltas-row0", _row0, "decodes every row with row 0's delta: {used} instead of {right}"),
)


def _list(a) -> str:
    return "[" + ", ".join(str(int(v)) for v in a) + "]"


def _first_wrong(gen) -> str:
    ref = decode_positions(gen.deltas, gen.cache_positions)
    k, b, j = np.argwhere(gen.decode_out != ref)[0]
    return (f"first wrong at decode step {j} (cache_position {int(gen.cache_positions[j])}), batch row {b}: "
            f"{'thw'[k]} = {int(gen.decode_out[k, b, j])}, expected {int(ref[k, b, j])}")


def diagnose_decode(gens) -> list:
    """Which candidate explains the decode steps: the one that gives every generation's decoded
    positions exactly (the scripts are built so that they differ), else the one that explains the
    first wrong generation; the message names the generation and the first wrong step."""
    wrong = [g for g in gens if not np.array_equal(g.decode_out, decode_positions(g.deltas, g.cache_positions))]
    if not wrong:
        return []

    def explains(fn, gen):
        return np.array_equal(gen.decode_out, decode_positions(fn(gens, gen), gen.cache_positions))

    whole = [c for c in CANDIDATES if all(explains(c[1], g) for g in gens)]
    chosen = whole or [c for c in CANDIDATES if explains(c[1], wrong[0])]
    found = []
    for code, fn, text in chosen:
        gen = next(g for g in wrong if explains(fn, g))
        what = text.format(used=_list(fn(gens, gen)), right=_list(gen.deltas))
        found.append(Diagnosis(code, f"generation {gen.index} {what}; {_first_wrong(gen)}"))
    return found


PROTOCOL = MropeDecode()
