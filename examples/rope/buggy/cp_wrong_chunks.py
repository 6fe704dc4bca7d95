"""Bug: the load-balanced rank keeps chunks r and cp_size + r (the mirror 2 * cp_size - 1 - r
mistaken for a shift), so ranks share no causal work evenly and the positions are another rank's.

Adapter: cp_positions (rope.cp_positions). Expected diagnosis: ``cp-wrong-chunks``.
"""

import torch

CODE = "cp-wrong-chunks"
PROTOCOL = "rope.cp_positions"


def cp_positions(cu_seqlens, spec):
    chunks = 2 * spec.cp_size if spec.split == "load_balanced" else spec.cp_size
    mine = (spec.rank, spec.cp_size + spec.rank) if spec.split == "load_balanced" else (spec.rank,)  # BUG
    out = []
    for j in range(cu_seqlens.numel() - 1):
        start = int(cu_seqlens[j])
        c = (int(cu_seqlens[j + 1]) - start) // chunks
        for k in mine:
            local = torch.arange(k * c, (k + 1) * c)
            out.append(local + start if spec.output == "indices" else local)
    return torch.cat(out)
