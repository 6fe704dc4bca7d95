"""torchtune-style RoPE: a module with a cos/sin cache built for ``max_seq_len`` positions and
indexed by position, pairs read by reshaping the head to [..., d/2, 2] (interleaved layout), the
whole head rotated, computed in float32 and cast back.

Like torchtune's RotaryPositionalEmbeddings it supports neither partial rotary nor the half
layout, and positions past its cache: the adapter says so with Unsupported, as a user would. The
runner must detect the layout from the full-rotary cases and grade those.
"""

import torch

from conformance import Unsupported

MAX_SEQ_LEN = 8192  # the cache covers positions 0 .. MAX_SEQ_LEN - 1 (a typical max_seq_len)


class RotaryPositionalEmbeddings(torch.nn.Module):
    def __init__(self, dim, max_seq_len=4096, base=10000.0):
        super().__init__()
        theta = 1.0 / (base ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), theta)
        self.register_buffer("cache", torch.stack([angles.cos(), angles.sin()], dim=-1), persistent=False)

    def forward(self, x, input_pos):
        """x [b, s, h, d]; input_pos [b, s] int64."""
        rope = self.cache[input_pos]  # [b, s, d/2, 2]
        xs = x.float().reshape(*x.shape[:-1], -1, 2)
        rope = rope.unsqueeze(2)  # broadcast over heads
        out = torch.stack([xs[..., 0] * rope[..., 0] - xs[..., 1] * rope[..., 1],
                           xs[..., 1] * rope[..., 0] + xs[..., 0] * rope[..., 1]], dim=-1)
        return out.flatten(3).type_as(x)


def apply(x, positions, spec):
    if getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("x [batch, seq, heads, head_dim] only")
    if spec.layout != "interleaved":
        raise Unsupported("pairs are read as reshape(..., d/2, 2): interleaved layout only")
    if spec.rotary_dim != spec.head_dim:
        raise Unsupported("the whole head is rotated: no partial rotary")
    if spec.scaling is not None:
        raise Unsupported("no RoPE scaling")
    if int(positions.min()) < 0 or int(positions.max()) >= MAX_SEQ_LEN:
        raise Unsupported(f"positions must lie in the cache, 0 .. {MAX_SEQ_LEN - 1}")
    return RotaryPositionalEmbeddings(spec.head_dim, MAX_SEQ_LEN, spec.base).to(x.device)(x, positions)
