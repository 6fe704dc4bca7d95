"""Bug (Megatron-LM PR #5243): the rank reads a per-token table of the whole pack with the
positions of its tokens within their sequences instead of their indices in the pack: the offset
cu_seqlens[j] of each sequence is not added, so every later sequence reads sequence 0's rows
(cu_seqlens [0, 4, 8], cp_size 2, rank 0: [0, 3, 0, 3] instead of [0, 3, 4, 7]).

Adapter: cp_positions (rope.cp_positions). Expected diagnosis: ``cp-sequence-offset``.
"""

import torch

CODE = "cp-sequence-offset"
PROTOCOL = "rope.cp_positions"


def cp_positions(cu_seqlens, spec):
    chunks = 2 * spec.cp_size if spec.split == "load_balanced" else spec.cp_size
    mine = (spec.rank, 2 * spec.cp_size - 1 - spec.rank) if spec.split == "load_balanced" else (spec.rank,)
    out = []
    for j in range(cu_seqlens.numel() - 1):
        c = int(cu_seqlens[j + 1] - cu_seqlens[j]) // chunks
        for k in mine:
            out.append(torch.arange(k * c, (k + 1) * c))  # BUG: + cu_seqlens[j] missing for output "indices"
    return torch.cat(out)
