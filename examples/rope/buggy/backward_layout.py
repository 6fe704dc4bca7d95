"""Bug: the hand-written backward pairs the gradient in the interleaved layout (2i, 2i+1) whatever
layout the forward used (a backward written for GPT-J's rotate_every_two kernel).

Right for interleaved cases; for half-layout (rotate_half) cases every gradient pair is wrong.
Expected diagnosis: ``backward-layout``.
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "backward-layout"
PROTOCOL = "rope.apply"
OPTIONS = {"grad": True, "cases": "rope.apply/llama2-d128/*", "fresh": False}


def pairs(x, rotary_dim, layout):
    if layout == "half":
        half = rotary_dim // 2
        return x[..., :half], x[..., half:rotary_dim]
    return x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]


def rotate(x, cos, sin, rotary_dim, layout):
    a, b = pairs(x, rotary_dim, layout)
    first, second = a * cos - b * sin, a * sin + b * cos
    out = x.clone()
    out_a, out_b = pairs(out, rotary_dim, layout)
    out_a.copy_(first)
    out_b.copy_(second)
    return out


def tables(positions, spec, dtype):
    r = spec.rotary_dim
    if spec.scaling is not None:
        raise Unsupported("unscaled RoPE only")
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.int64).float() / r))
    freqs = positions[..., None].float() * inv_freq.to(positions.device)
    return freqs.cos()[:, :, None, :].to(dtype), freqs.sin()[:, :, None, :].to(dtype)


class RotaryEmbedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin, rotary_dim, layout):
        ctx.save_for_backward(cos, sin)
        ctx.rotary_dim, ctx.layout = rotary_dim, layout
        return rotate(x, cos, sin, rotary_dim, layout)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        # BUG: the backward hard-codes the interleaved pairs.
        return rotate(grad, cos, -sin, ctx.rotary_dim, "interleaved"), None, None, None, None


def apply(x, positions, spec):
    if getattr(spec, "tensor_layout", "bshd") != "bshd" or getattr(spec, "inplace", False):
        raise Unsupported("x [batch, seq, heads, head_dim], out of place only")
    cos, sin = tables(positions, spec, x.dtype)
    return RotaryEmbedding.apply(x, cos, sin, spec.rotary_dim, spec.layout)
