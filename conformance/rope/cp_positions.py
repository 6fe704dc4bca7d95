"""Protocol ``rope.cp_positions``: ``fn(cu_seqlens, spec) -> int64 [t_rank]``.

Context parallelism over a packed (THD) batch: cu_seqlens int64 [n + 1] bounds the packed
sequences; spec is a :class:`CpSpec` (cp_size, rank, split "load_balanced" or "contiguous", output
"positions" or "indices"). The answer is the rank's tokens, sequence by sequence and chunk by chunk
in the rank's order, as their positions within their sequences or their indices in the pack
(reference.rope.cp_positions states the rule: load-balanced rank r holds chunks r and
2 * cp_size - 1 - r of 2 * cp_size, as TransformerEngine's thd_get_partitioned_indices).

Graded exactly, once per case (dtype-free): an integer tensor of shape [sum(L_j) / cp_size], equal
element for element. The cases hold only valid inputs (every length divisible by the chunk
count): what the adapter does with others (raise, or conformance.Unsupported) is its own business.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from conformance.core.protocol import Graded, Prepared, Protocol
from conformance.core.tensors import adapter_inputs, argmax_index, check_integer_tensor, mutation_problems, \
    over_budget
from conformance.results import Diagnosis
from reference.rope.cp_positions import chunk_count, cp_positions, gather, rank_chunks


@dataclass(frozen=True)
class CpSpec:
    """cp_size (ranks), rank (0 <= rank < cp_size), split ("load_balanced": 2 * cp_size chunks per
    sequence, rank r holds r and 2 * cp_size - 1 - r; "contiguous": cp_size chunks, rank r holds r)
    and output ("positions" within the sequence, or "indices" into the pack)."""

    cp_size: int
    rank: int
    split: str = "load_balanced"
    output: str = "positions"


def spec_of(params) -> CpSpec:
    return CpSpec(int(params["cp_size"]), int(params["rank"]), str(params["split"]), str(params["output"]))


def _answer(cu, fields: dict, **change):
    """The reference answer with some of its arguments changed (None where the inputs do not
    allow that split)."""
    try:
        return cp_positions(cu, **{**fields, **change})
    except ValueError:
        return None


def _restarted(cu, spec, output: str, per_chunk: bool) -> np.ndarray:
    """The positions counted afresh on the rank: from 0 in every held chunk (``per_chunk``), or
    over the rank's whole slice of each sequence; plus the sequence's offset for output indices."""
    chunks = chunk_count(spec.cp_size, spec.split)
    held = len(rank_chunks(spec.cp_size, spec.rank, spec.split))
    parts = [np.zeros(0, dtype=np.int64)]
    for start, end in zip(cu[:-1], cu[1:]):
        c = (end - start) // chunks
        local = np.concatenate([np.arange(c)] * held) if per_chunk else np.arange(c * held)
        parts.append(local + (start if output == "indices" else 0))
    return np.concatenate(parts).astype(np.int64)


# The chunks a rank holds, in words that stay the same from case to case (the report groups the
# messages of a cause, and numbers that differ between cases would read as ranges).
_COUNT = {"load_balanced": "2 * cp_size", "contiguous": "cp_size"}
_HOLDS = {"load_balanced": "chunks r and 2 * cp_size - 1 - r of 2 * cp_size", "contiguous": "chunk r of cp_size"}
_NAMES = (("r", lambda r, cp: r), ("2 * cp_size - 1 - r", lambda r, cp: 2 * cp - 1 - r),
          ("cp_size + r", lambda r, cp: cp + r), ("cp_size - 1 - r", lambda r, cp: cp - 1 - r),
          ("2r", lambda r, cp: 2 * r), ("2r + 1", lambda r, cp: 2 * r + 1), ("r + 1", lambda r, cp: r + 1),
          ("r - 1", lambda r, cp: r - 1))


def _chunk_name(k: int, spec) -> str:
    """Chunk ``k`` of the rank as an expression in r and cp_size where one of the usual ones fits."""
    for name, rule in _NAMES:
        if rule(spec.rank, spec.cp_size) == k:
            return name
    return f"chunk {k}"


def candidates(cu, spec):
    """(Diagnosis, answer) of each mutant of the rank's answer, most specific first: the reference
    with one thing changed. ``spec`` needs cp_size, rank and split; its ``output`` defaults to
    positions (rope.cp_apply turns tokens by positions). A generator: the chunk search comes last."""
    cu = np.asarray(cu, dtype=np.int64)
    output = getattr(spec, "output", "positions")
    fields = {"cp_size": spec.cp_size, "rank": spec.rank, "split": spec.split, "output": output}
    if output == "indices":
        yield (Diagnosis("cp-sequence-offset", "pack indices without the sequence's offset cu_seqlens[j]: every "
                         "sequence reads sequence 0's rows (Megatron-LM PR #5243's [0, 3, 0, 3] for [0, 3, 4, 7])"),
               _answer(cu, fields, output="positions"))
    else:
        yield (Diagnosis("cp-positions-global", "indices into the pack returned as positions: the sequence's offset "
                         "cu_seqlens[j] is not subtracted, so sequences after the first do not start at 0"),
               _answer(cu, fields, output="indices"))
    other = "contiguous" if spec.split == "load_balanced" else "load_balanced"
    if spec.cp_size > 1:
        # Rank 0's contiguous chunk is its first two load-balanced chunks: the same answer as
        # counting its own tokens from 0, which the message says.
        same = (" (for rank 0 the same as counting the rank's own tokens from 0)"
                if spec.rank == 0 and other == "contiguous" else "")
        yield (Diagnosis("cp-split-swapped", f"the {other} split where {spec.split} was asked: rank r holds "
                         f"{_HOLDS[other]}, not {_HOLDS[spec.split]}{same}"), _answer(cu, fields, split=other))
    # Before the chunk search: counting from 0 is also the gather of chunk 0 (twice) or of chunks 0
    # and 1, and the counting is the fault to name.
    for per_chunk, how in ((True, "restart at 0 in every chunk the rank holds: the chunk's offset in its "
                            "sequence is not added"),
                           (False, "count the rank's own tokens of each sequence from 0 (position ids built "
                            "after the split)")):
        yield Diagnosis("cp-chunk-restart", f"positions {how}"), _restarted(cu, spec, output, per_chunk)
    chunks = chunk_count(spec.cp_size, spec.split)
    right = rank_chunks(spec.cp_size, spec.rank, spec.split)
    choices = ([(a, b) for a in range(chunks) for b in range(chunks)] if len(right) == 2
               else [(a,) for a in range(chunks)])
    for held in choices:
        if held != right:
            named = ", ".join(_chunk_name(k, spec) for k in held)
            yield (Diagnosis("cp-wrong-chunks", f"rank r returns chunk(s) {named} of each sequence's "
                             f"{_COUNT[spec.split]} instead of {_HOLDS[spec.split].split(' of ')[0]}"),
                   gather(cu, chunks, held, output))


class CpPositions(Protocol):
    name = "rope.cp_positions"
    family = "rope"
    signature = "fn(cu_seqlens, spec) -> positions [t_rank] (integers)"
    dtype_free = True

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> Prepared:
        args, inputs, watched = adapter_inputs(case.arrays, (), ("cu_seqlens",), dtype, device)
        return Prepared((*args, spec), inputs, watched, None, device)

    def grade(self, case, spec, prepared, value) -> Graded:
        cu = prepared.inputs_f64["cu_seqlens"]
        ref = cp_positions(cu, spec.cp_size, spec.rank, spec.split, spec.output)
        out, problems = check_integer_tensor(value, f"the rank's {spec.output}", ref.shape)
        problems += mutation_problems(prepared.watched)
        if out is None:
            return Graded(problems=problems)
        err = np.abs(out - ref).astype(np.float64)
        graded = Graded(problems=problems, output_f64=out.astype(np.float64), max_abs_error=float(err.max(initial=0)))
        ratio = err / 0.5  # exact: any integer off by one or more is over
        for profile in ("standard", "strict"):
            graded.ratio[profile] = float(ratio.max(initial=0))
            graded.worst_index[profile] = argmax_index(ratio) if ratio.size else None
            graded.mismatch[profile] = over_budget(ratio) + (spec.output,)
        return graded

    def locate(self, case, spec, prepared, index) -> str:
        cu = prepared.inputs_f64["cu_seqlens"]
        (i,) = index
        pos = cp_positions(cu, spec.cp_size, spec.rank, spec.split, "positions")
        idx = cp_positions(cu, spec.cp_size, spec.rank, spec.split, "indices")
        j = int(np.searchsorted(cu, idx[i], side="right")) - 1
        c = int(cu[j + 1] - cu[j]) // chunk_count(spec.cp_size, spec.split)
        return f"token {i} of rank {spec.rank}: sequence {j}, chunk {int(pos[i]) // c}, position {int(pos[i])}"

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        if graded.output_f64 is None:
            return []
        out = graded.output_f64.astype(np.int64)
        for diagnosis, answer in candidates(prepared.inputs_f64["cu_seqlens"], spec):
            if np.array_equal(out, answer):
                return [diagnosis]
        return []


PROTOCOL = CpPositions()
