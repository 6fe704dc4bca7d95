"""Paged KV-cache addressing: where a serving kernel that fuses RoPE with the cache write puts each
token's rotated key and its value.

A paged cache (vLLM's PagedAttention, FlashInfer's paged KV, xformers' ``rope_padded``) holds
``num_blocks`` physical blocks of ``block_size`` token slots each; the caches are
[num_blocks, block_size, kv_heads, head_dim] (vLLM's NHD layout), so slot s is block
s // block_size, offset s % block_size, row s of the cache flattened to [num_blocks * block_size,
kv_heads, head_dim]. A sequence's *block table* lists its physical blocks in logical order (any
order of physical blocks: the allocator hands out whatever is free). The token of sequence j at
position p (its index in that sequence's cache) goes to

    slot = block_table[j, p // block_size] * block_size + p % block_size

(vLLM's ``slot_mapping``, built per step from the block tables, and what its ``reshape_and_cache``
and FlashInfer's ``append_paged_kv_cache`` write through). A batch padded to a fixed size (CUDA
graphs) gives its padding tokens slot -1: nothing may be written for them.

Integers only (numpy, never torch). ``slot_mapping`` computes slots from the tables;
``slot_mapping_bruteforce`` finds each token's slot the other way round, by walking every physical
slot and asking which (sequence, position) owns it, so that the two can check each other.
"""

from __future__ import annotations

import numpy as np

PADDING_SLOT = -1


def blocks_needed(length: int, block_size: int) -> int:
    """Blocks that hold positions 0..length-1: ceil(length / block_size)."""
    return -(-int(length) // int(block_size))


def block_tables(lengths, block_size: int, physical) -> np.ndarray:
    """int64 [n, max_blocks]: sequence j (``lengths[j]`` tokens in its cache after this step) gets
    the next blocks_needed(lengths[j]) physical blocks of ``physical``, in that order; unused
    entries are -1. ``physical`` must hold enough distinct block ids."""
    physical = [int(b) for b in physical]
    if len(set(physical)) != len(physical) or any(b < 0 for b in physical):
        raise ValueError("physical: block ids must be distinct and non-negative")
    need = [blocks_needed(n, block_size) for n in lengths]
    if sum(need) > len(physical):
        raise ValueError(f"physical: {len(physical)} block(s) for {sum(need)} needed")
    table = np.full((len(lengths), max(need, default=0)), -1, dtype=np.int64)
    at = 0
    for j, k in enumerate(need):
        table[j, :k] = physical[at:at + k]
        at += k
    return table


def slot_mapping(table, sequence, positions, block_size: int) -> np.ndarray:
    """int64 [t]: the slot of each token (``sequence[i]`` its sequence, -1 for padding, and
    ``positions[i]`` its position), block_table[j, p // bs] * bs + p % bs; -1 for padding."""
    table = np.asarray(table, dtype=np.int64)
    seq = np.asarray(sequence, dtype=np.int64)
    pos = np.asarray(positions, dtype=np.int64)
    out = np.full(seq.shape, PADDING_SLOT, dtype=np.int64)
    real = seq >= 0
    if np.any(pos[real] < 0):
        raise ValueError("positions: a real token's position must be >= 0")
    logical = pos[real] // block_size
    if np.any(logical >= table.shape[1]) or np.any(table[seq[real], np.minimum(logical, table.shape[1] - 1)] < 0):
        raise ValueError("block_table: a token's position lies past its sequence's blocks")
    out[real] = table[seq[real], logical] * block_size + pos[real] % block_size
    return out


def slot_mapping_bruteforce(table, sequence, positions, block_size: int, num_blocks: int) -> np.ndarray:
    """slot_mapping found slot by slot: every physical slot s = b * bs + o is owned by the
    (sequence j, position l * bs + o) whose table entry l is b; each token takes the slot its
    (sequence, position) owns."""
    table = np.asarray(table, dtype=np.int64)
    owner = {}
    for s in range(num_blocks * block_size):
        b, o = divmod(s, block_size)
        for j, l in zip(*np.nonzero(table == b)):
            owner[(int(j), int(l) * block_size + o)] = s
    return np.array([owner[(int(j), int(p))] if j >= 0 else PADDING_SLOT
                     for j, p in zip(sequence, positions)], dtype=np.int64)
