"""Context-parallel position gather for a packed (THD) batch: which tokens one rank holds.

A packed batch holds n sequences back to back; ``cu_seqlens`` (int [n + 1], cu_seqlens[0] = 0,
non-decreasing) gives sequence j the tokens cu_seqlens[j] <= t < cu_seqlens[j + 1] of the pack,
L_j = cu_seqlens[j + 1] - cu_seqlens[j] of them. Context parallelism over ``cp_size`` ranks cuts
every sequence into chunks and gives rank ``rank`` some of them:

- ``split="load_balanced"`` (causal attention: TransformerEngine's ``thd_get_partitioned_indices``,
  Megatron-Core's ``get_batch_on_this_cp_rank``): sequence j is cut into 2 * cp_size chunks of
  c_j = L_j / (2 * cp_size) tokens; rank r holds chunk r, then chunk 2 * cp_size - 1 - r (the
  early and the late chunk, so each rank does the same causal work). Requires L_j divisible by
  2 * cp_size.
- ``split="contiguous"``: cp_size chunks of c_j = L_j / cp_size; rank r holds chunk r. Requires
  L_j divisible by cp_size.

The rank's tokens are listed sequence by sequence, and within a sequence chunk by chunk in the
order above. ``output="positions"`` gives each one's position within its own sequence (what RoPE
turns it by when position ids restart per sequence); ``output="indices"`` its index in the pack,
position + cu_seqlens[j] (what TransformerEngine's helper returns, and what a per-token table of
the whole pack is indexed by: Megatron-LM PR #5243 fixed a rank that indexed such a table by the
positions, so that with cu_seqlens [0, 4, 8], cp_size 2, rank 0 read rows [0, 3, 0, 3] instead
of [0, 3, 4, 7]).

Returns int64 [t_rank], t_rank = sum_j L_j / cp_size. Inputs that break a precondition are refused
with a one-line ValueError naming the argument (the libraries assert the same divisibility).
"""

from __future__ import annotations

import numpy as np

SPLITS = ("load_balanced", "contiguous")
OUTPUTS = ("positions", "indices")


def check(cu_seqlens, cp_size: int, rank: int, split: str, output: str = "positions") -> np.ndarray:
    """The validated ``cu_seqlens`` as int64 [n + 1]; a one-line ValueError for anything else."""
    cu = np.asarray(cu_seqlens)
    if cu.ndim != 1 or cu.size < 1 or not np.issubdtype(cu.dtype, np.integer):
        raise ValueError("cu_seqlens: must be a 1-D integer array [n + 1]")
    cu = cu.astype(np.int64)
    if cu[0] != 0 or np.any(np.diff(cu) < 0):
        raise ValueError("cu_seqlens: must start at 0 and never decrease")
    if split not in SPLITS:
        raise ValueError(f"split: {split!r} is not one of {SPLITS}")
    if output not in OUTPUTS:
        raise ValueError(f"output: {output!r} is not one of {OUTPUTS}")
    if int(cp_size) != cp_size or cp_size < 1:
        raise ValueError(f"cp_size: {cp_size!r} must be a positive integer")
    if int(rank) != rank or not 0 <= rank < cp_size:
        raise ValueError(f"rank: {rank!r} must be an integer in [0, cp_size = {cp_size})")
    chunks = chunk_count(cp_size, split)
    lengths = np.diff(cu)
    bad = np.nonzero(lengths % chunks)[0]
    if bad.size:
        raise ValueError(f"cu_seqlens: sequence {int(bad[0])} has length {int(lengths[bad[0]])}, not divisible by "
                         f"{chunks} (the {split} split of cp_size {cp_size} needs {chunks} equal chunks)")
    return cu


def chunk_count(cp_size: int, split: str) -> int:
    """Chunks per sequence: 2 * cp_size (load_balanced) or cp_size (contiguous)."""
    return 2 * int(cp_size) if split == "load_balanced" else int(cp_size)


def rank_chunks(cp_size: int, rank: int, split: str) -> tuple:
    """The chunk numbers rank ``rank`` holds, in order: (r, 2 cp - 1 - r) or (r,)."""
    if split == "load_balanced":
        return (int(rank), 2 * int(cp_size) - 1 - int(rank))
    return (int(rank),)


def cp_positions(cu_seqlens, cp_size: int, rank: int, split: str = "load_balanced",
                 output: str = "positions") -> np.ndarray:
    """int64 [t_rank]: the positions (or pack indices) of the tokens rank ``rank`` holds, in the
    order it holds them (module docstring)."""
    cu = check(cu_seqlens, cp_size, rank, split, output)
    return gather(cu, chunk_count(cp_size, split), rank_chunks(cp_size, rank, split), output)


def gather(cu: np.ndarray, chunks: int, held, output: str = "positions") -> np.ndarray:
    """int64: sequence by sequence, the tokens of chunks ``held`` (in that order) when each sequence
    of ``cu`` (int64 [n + 1], lengths divisible by ``chunks``) is cut into ``chunks`` equal chunks;
    their positions, or pack indices (``output``). cp_positions' rule with the chunks given, so the
    diagnosis can name the chunks another answer holds."""
    parts = [np.zeros(0, dtype=np.int64)]
    for start, end in zip(cu[:-1], cu[1:]):
        c = (end - start) // chunks
        for k in held:
            local = np.arange(k * c, (k + 1) * c, dtype=np.int64)
            parts.append(local + start if output == "indices" else local)
    return np.concatenate(parts)

def owner(position: int, length: int, cp_size: int, split: str) -> tuple:
    """(rank, slot) of the token at ``position`` of a sequence of ``length`` tokens: the rank whose
    chunks hold it and the place of its chunk among that rank's chunks (0 or 1)."""
    chunks = chunk_count(cp_size, split)
    k = position // (length // chunks)
    if split == "contiguous" or k < cp_size:
        return k, 0
    return 2 * cp_size - 1 - k, 1


def cp_positions_bruteforce(cu_seqlens, cp_size: int, rank: int, split: str = "load_balanced",
                            output: str = "positions") -> list:
    """The same answer by the other route, token by token: walk the pack, ask each token's owner
    (``owner``), keep the rank's, and order them by (sequence, slot, position). Python ints; the
    certificate of the stored vectors and the tests' definition."""
    cu = [int(v) for v in check(cu_seqlens, cp_size, rank, split, output)]
    held = []
    for j in range(len(cu) - 1):
        for t in range(cu[j], cu[j + 1]):
            m = t - cu[j]
            r, slot = owner(m, cu[j + 1] - cu[j], cp_size, split)
            if r == rank:
                held.append(((j, slot, m), t if output == "indices" else m))
    return [value for _, value in sorted(held)]
