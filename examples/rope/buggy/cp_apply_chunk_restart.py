"""Bug: the rank rotates its tokens by position ids built after the split, counting its own
tokens of each sequence from 0 (torch.arange over the rank's slice), as code that computes RoPE
positions on the local shard does: the chunks' offsets in their sequences are lost, so the rank's
second chunk (and every chunk of a rank past 0) turns by the wrong angles.

Adapter: cp_apply (rope.cp_apply). Expected diagnosis: ``cp-chunk-restart``.
"""

import torch

CODE = "cp-chunk-restart"
PROTOCOL = "rope.cp_apply"


def cp_apply(x, cu_seqlens, spec):
    local = torch.tensor(spec.cu_seqlens)  # the bounds of the rank's slices
    positions = torch.cat([torch.arange(int(e - s)) for s, e in zip(local[:-1], local[1:])])  # BUG: local arange
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2).float() / r))
    angles = positions.float()[:, None] * inv_freq[None, :]
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
    if spec.layout == "interleaved":
        a, b = x[..., 0:r:2].float(), x[..., 1:r:2].float()
        out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    else:
        a, b = x[..., : r // 2].float(), x[..., r // 2: r].float()
        out = torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return torch.cat((out.to(x.dtype), x[..., r:]), dim=-1)
