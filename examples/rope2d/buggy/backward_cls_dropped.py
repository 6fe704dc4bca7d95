"""Bug: a hand-written 2-D RoPE ``torch.autograd.Function`` (a fused ViT kernel's shape) whose
backward writes the rotated-back gradient of the patch tokens into a zero-initialised buffer and
forgets the CLS tokens: their forward is a copy, so their gradient must be g itself, but it comes
back zero. Patch tokens get R^T g, right.

The forward is RoPE-ViT's (the angles of examples/rope2d/rope_vit.py), so posref without --grad
passes it; cases without a CLS token pass with --grad too. Adapter: apply (rope2d.apply). Expected
diagnosis with --grad: ``backward-missing`` ("the CLS tokens get no gradient").
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "backward-missing"
PROTOCOL = "rope2d.apply"
OPTIONS = {"grad": True, "fresh": False}

angles = load_target(f"{Path(__file__).resolve().parents[1] / 'rope_vit.py'}:angles")


def pairs(x, layout):
    """(first, second) elements of each pair: views [..., d/2]."""
    if layout == "half":
        half = x.shape[-1] // 2
        return x[..., :half], x[..., half:]
    return x[..., 0::2], x[..., 1::2]


def rotate(x, cos, sin, layout):
    a, b = pairs(x, layout)
    out = torch.empty_like(x)
    out_a, out_b = pairs(out, layout)
    out_a.copy_(a * cos - b * sin)
    out_b.copy_(a * sin + b * cos)
    return out


class Rotary2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin, layout, cls_tokens):
        ctx.save_for_backward(cos, sin)
        ctx.layout, ctx.cls_tokens = layout, cls_tokens
        out = x.clone()  # CLS tokens: copied
        out[:, cls_tokens:] = rotate(x[:, cls_tokens:], cos[:, cls_tokens:], sin[:, cls_tokens:], layout)
        return out

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        n = ctx.cls_tokens
        grad_x = torch.zeros_like(grad)
        grad_x[:, n:] = rotate(grad[:, n:], cos[:, n:], -sin[:, n:], ctx.layout)
        # BUG: grad_x[:, :n] = grad[:, :n] is missing: the copied CLS tokens get no gradient.
        return grad_x, None, None, None, None


def apply(x, coords, spec):
    ang = angles(coords, spec)
    if ang.dim() == 3:
        ang = ang[:, :, None, :]  # the same angles for every head
    return Rotary2d.apply(x, ang.cos().to(x.dtype), ang.sin().to(x.dtype), spec.layout, spec.cls_tokens)
