"""Bug: the rank's indices into the pack (what TransformerEngine's partitioning helper returns)
used as position ids: the offset cu_seqlens[j] of each sequence is never subtracted, so every
sequence after the first starts past 0.

Adapter: cp_positions (rope.cp_positions). Expected diagnosis: ``cp-positions-global``.
"""

import torch

CODE = "cp-positions-global"
PROTOCOL = "rope.cp_positions"


def cp_positions(cu_seqlens, spec):
    chunks = 2 * spec.cp_size if spec.split == "load_balanced" else spec.cp_size
    mine = (spec.rank, 2 * spec.cp_size - 1 - spec.rank) if spec.split == "load_balanced" else (spec.rank,)
    out = []
    for j in range(cu_seqlens.numel() - 1):
        start = int(cu_seqlens[j])
        c = (int(cu_seqlens[j + 1]) - start) // chunks
        for k in mine:
            out.append(start + torch.arange(k * c, (k + 1) * c))  # BUG: pack indices whatever spec.output asks
    return torch.cat(out)
