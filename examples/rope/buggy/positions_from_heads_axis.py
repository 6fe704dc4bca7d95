"""Bug: the position of a token is read with the head index instead of the token index.

A fused kernel over (row, token, head) that computes the address of the position from the head
program id: head h of every token of a row turns by the position of token min(h, seq - 1).
Decode steps (one token) are right whatever the head count. Expected diagnosis:
``positions-from-heads-axis``.
"""

import torch

from conformance import Unsupported

CODE = "positions-from-heads-axis"
PROTOCOL = "rope.apply"


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply(x, positions, spec):
    if spec.layout != "half" or getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("half layout, x [b, s, h, d] only")
    if spec.scaling is not None:
        raise Unsupported("no RoPE scaling")
    b, s, h, _ = x.shape
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    head = torch.arange(h, device=x.device).clamp(max=s - 1)
    pos = positions[:, head][:, None, :].expand(b, s, h)  # BUG: indexed by head, not by token
    freqs = pos[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
