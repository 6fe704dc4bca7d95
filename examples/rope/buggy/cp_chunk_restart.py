"""Bug: the positions of each chunk the rank holds count from 0 (the chunk's own arange): the
chunk's offset k * c in its sequence is not added, so the rank's second chunk (and every chunk of
a rank other than 0) restarts at position 0.

Adapter: cp_positions (rope.cp_positions). Expected diagnosis: ``cp-chunk-restart``.
"""

import torch

CODE = "cp-chunk-restart"
PROTOCOL = "rope.cp_positions"


def cp_positions(cu_seqlens, spec):
    chunks = 2 * spec.cp_size if spec.split == "load_balanced" else spec.cp_size
    held = 2 if spec.split == "load_balanced" else 1
    out = []
    for j in range(cu_seqlens.numel() - 1):
        start = int(cu_seqlens[j])
        c = (int(cu_seqlens[j + 1]) - start) // chunks
        for _ in range(held):
            local = torch.arange(c)  # BUG: k * c, the chunk's offset, missing
            out.append(local + start if spec.output == "indices" else local)
    return torch.cat(out)
