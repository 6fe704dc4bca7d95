"""RoPE as a hand-written ``torch.autograd.Function``: HF's float32 tables, an explicit backward.

Training kernels (fused Triton/CUDA RoPE, e.g. in Liger or flash-attn) do not let autograd trace
the rotation: they save cos and sin and rotate the incoming gradient themselves. The forward turns
each pair (a, b) by the angle m theta_i, (a cos - b sin, a sin + b cos); the backward is the
transpose, the same rotation with the sine negated: (g_a cos + g_b sin, -g_a sin + g_b cos)
= R_{-m} g (RoFormer, arXiv 2104.09864, eq. 16: R_m is orthogonal). The tail past rotary_dim
passes through in both directions. cos and sin are HF's (float32 inv_freq and angles, as in
examples/rope/hf_rotate_half.py; scalings none, "default" and "linear"), cast to x.dtype; both
pair layouts ("half" (j, j + r/2) and "interleaved" (2i, 2i+1)) are supported.

Adapters: ``apply`` (rope.apply) and ``module`` (rope.module: the Function inside a stateless
nn.Module, as fused kernels are wrapped in models); graded with ``posref conform ... --grad``.
"""

import torch

from conformance import Unsupported


def cache(positions, spec):
    """float32 pair-order cos, sin [b, s, r/2]: theta_i = base ** (-2i / r), angles m * theta_i."""
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.int64).float() / r))
    scaling = dict(spec.scaling or {})
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type == "linear":
        inv_freq = inv_freq / scaling["factor"]
    elif rope_type != "default":
        raise Unsupported(f"rope_type {rope_type!r} is not implemented by this example")
    freqs = positions[..., None].float() * inv_freq.to(positions.device)
    return freqs.cos(), freqs.sin()


def pairs(x, rotary_dim, layout):
    """(first, second) elements of each pair: views [..., r/2]."""
    if layout == "half":
        half = rotary_dim // 2
        return x[..., :half], x[..., half:rotary_dim]
    return x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]


def rotate(x, cos, sin, rotary_dim, layout):
    """Each pair turned by (cos, sin) [b, s, 1, r/2]; the tail copied."""
    a, b = pairs(x, rotary_dim, layout)
    first, second = a * cos - b * sin, a * sin + b * cos
    out = x.clone()
    out_a, out_b = pairs(out, rotary_dim, layout)
    out_a.copy_(first)
    out_b.copy_(second)
    return out


class RotaryEmbedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin, rotary_dim, layout):
        ctx.save_for_backward(cos, sin)
        ctx.rotary_dim, ctx.layout = rotary_dim, layout
        return rotate(x, cos, sin, rotary_dim, layout)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        # The transpose of a rotation is the rotation by -m: the same tables, the sine negated.
        return rotate(grad, cos, -sin, ctx.rotary_dim, ctx.layout), None, None, None, None


def tables(positions, spec, dtype):
    """Pair-order cos, sin [b, s, 1, r/2] in dtype (attention factor included)."""
    cos, sin = cache(positions, spec)
    return cos[:, :, None, :].to(dtype), sin[:, :, None, :].to(dtype)


def apply(x, positions, spec):
    """Tensor layouts bshd, bhsd and thd as examples/rope/hf_rotate_half.py hands them over."""
    layout = getattr(spec, "tensor_layout", "bshd")
    if layout == "bhsd":
        out = apply(x.transpose(1, 2), positions, _bshd(spec)).transpose(1, 2)
    elif layout == "thd":
        out = apply(x[None], positions[None], _bshd(spec))[0]
    else:
        cos, sin = tables(positions, spec, x.dtype)
        out = RotaryEmbedding.apply(x, cos, sin, spec.rotary_dim, spec.layout)
    if getattr(spec, "inplace", False):
        x.copy_(out)
        return x
    return out


def _bshd(spec):
    import dataclasses

    return dataclasses.replace(spec, tensor_layout="bshd", cu_seqlens=None, inplace=False)


class FusedRotary(torch.nn.Module):
    """module(x, positions) -> x rotated by the Function (tables recomputed on every call)."""

    def __init__(self, spec):
        super().__init__()
        self.spec = spec

    def forward(self, x, positions):
        return apply(x, positions, self.spec)


def module(spec):
    """rope.module adapter: the factory."""
    cache(torch.zeros(1, 1, dtype=torch.int64), spec)  # an unsupported scaling raises here, once
    return FusedRotary(spec)
