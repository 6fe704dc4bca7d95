"""The tokens a context-parallel rank holds of a packed (THD) batch, as TransformerEngine's
``thd_get_partitioned_indices`` lays them out (and Megatron-Core's ``get_batch_on_this_cp_rank``
uses for THD), written in plain torch for the protocol, without a loop over sequences.

Each sequence of length L (cu_seqlens[j + 1] - cu_seqlens[j]) is cut into 2 * cp_size chunks of
c = L / (2 * cp_size) tokens; rank r keeps chunk r, then chunk 2 * cp_size - 1 - r ("load_balanced",
causal attention), or cp_size chunks with rank r keeping chunk r ("contiguous"). The library works
with indices into the pack; the positions within the sequence are those minus cu_seqlens[j].

Adapters: ``cp_positions`` (rope.cp_positions) and ``cp_apply`` (rope.cp_apply). Lengths not
divisible by the chunk count raise ValueError, as the libraries assert.
"""

import torch


def cp_positions(cu_seqlens, spec):
    cu = cu_seqlens.to(torch.int64)
    chunks = 2 * spec.cp_size if spec.split == "load_balanced" else spec.cp_size
    held = 2 if spec.split == "load_balanced" else 1
    lengths = cu[1:] - cu[:-1]
    if bool((lengths % chunks != 0).any()):
        raise ValueError(f"cu_seqlens: every sequence length must be divisible by {chunks}")
    chunk = lengths // chunks
    counts = chunk * held  # tokens of each sequence on this rank
    seq = torch.repeat_interleave(torch.arange(lengths.numel(), device=cu.device), counts)
    first = torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
    t = torch.arange(int(counts.sum()), device=cu.device) - first  # token number within the rank's slice
    c = chunk[seq]
    slot = t // c  # 0: the rank's first chunk, 1: its second
    mirror = 2 * spec.cp_size - 1 - spec.rank
    k = torch.where(slot == 0, torch.full_like(slot, spec.rank), torch.full_like(slot, mirror))
    positions = k * c + t % c
    return positions + cu[seq] if getattr(spec, "output", "positions") == "indices" else positions


def cp_apply(x, cu_seqlens, spec):
    """rope.cp_apply: the rank's tokens x [t_rank, heads, head_dim] turned by their positions within
    their sequences (cp_positions above), with Hugging Face's float32 inv_freq and rotate_half (or
    rotate_every_two for the interleaved layout), as Megatron applies RoPE after the split."""
    positions = cp_positions(cu_seqlens, spec)
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.int64).to(torch.float32) / r))
    angles = positions.to(torch.float32)[:, None] * inv_freq[None, :]  # [t, r/2]
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
    rot, tail = x[..., :r].to(torch.float32), x[..., r:]
    if spec.layout == "interleaved":
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    else:
        a, b = rot[..., : r // 2], rot[..., r // 2:]
        out = torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return torch.cat((out.to(x.dtype), tail), dim=-1)
