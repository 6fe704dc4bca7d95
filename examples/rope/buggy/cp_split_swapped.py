"""Bug: the contiguous split whatever the spec asks: each sequence cut into cp_size chunks and rank
r keeping chunk r, where the load-balanced split (2 * cp_size chunks, rank r keeping r and
2 * cp_size - 1 - r) is asked for causal attention.

Adapter: cp_positions (rope.cp_positions). Expected diagnosis: ``cp-split-swapped``.
"""

import torch

CODE = "cp-split-swapped"
PROTOCOL = "rope.cp_positions"


def cp_positions(cu_seqlens, spec):
    out = []
    for j in range(cu_seqlens.numel() - 1):
        start = int(cu_seqlens[j])
        c = (int(cu_seqlens[j + 1]) - start) // spec.cp_size  # BUG: spec.split ignored
        local = torch.arange(spec.rank * c, (spec.rank + 1) * c)
        out.append(local + start if spec.output == "indices" else local)
    return torch.cat(out)
