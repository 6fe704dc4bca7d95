"""Bug: a rotary nn.Module around a fused RoPE kernel (a hand-written torch.autograd.Function, as
models wrap Liger's or flash-attn's) whose backward reuses the forward rotation: R_m g instead of
R_m^T g = R_{-m} g (the sine keeps its sign).

The forward is right at every step, so rope.module without --grad passes it; with --grad every
step's gradient of x is turned by 2 m theta_i too far. Half layout, whole head, no scaling (other
specs: Unsupported). Expected diagnosis: ``backward-transposed``, naming the step.
"""

import torch

from conformance import Unsupported

# What posref must report for this file, graded as <file>:module on the rope.module catalog
# (tests/test_family_contract.py checks it).
CODE = "backward-transposed"
PROTOCOL = "rope.module"
OPTIONS = {"grad": True, "fresh": False}


def turn(x, cos, sin):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


class FusedRope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(cos, sin)
        return turn(x, cos, sin)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        return turn(grad, cos, sin), None, None  # BUG: the transpose needs -sin


class Rotary(torch.nn.Module):
    def __init__(self, dim, base):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, x, positions):
        angles = positions[..., None].float() * self.inv_freq  # [b, s, d/2]
        cos, sin = angles.cos()[:, :, None, :].to(x.dtype), angles.sin()[:, :, None, :].to(x.dtype)
        return FusedRope.apply(x, cos, sin)


def module(spec):
    if spec.scaling is not None or spec.layout != "half" or spec.rotary_dim != spec.head_dim:
        raise Unsupported("unscaled RoPE, half layout, whole head only")
    return Rotary(spec.head_dim, spec.base)
