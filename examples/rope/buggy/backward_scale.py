"""Bug: the attention factor of a scaled RoPE (YaRN's f = 0.1 ln(factor) + 1) is applied in the
forward but forgotten in the hand-written backward, which rotates the gradient with the unscaled
tables: every gradient of a rotated pair is f times too small.

Frequencies and f come from transformers' ROPE_INIT_FUNCTIONS, as examples/rope/lib_transformers.py
gets them. The forward is right; with --grad on the YaRN cases the gradient is R_{-m} g instead of
f R_{-m} g. Expected diagnosis: ``backward-scale``.
"""

import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "backward-scale"
PROTOCOL = "rope.apply"
OPTIONS = {"grad": True, "cases": "rope.apply/qwen2.5-yarn4/*,rope.apply/gpt-oss-yarn32/*", "fresh": False}


def frequencies(spec):
    """(inv_freq float32 [r/2], attention factor) from transformers for the spec's scaling."""
    params = dict(spec.scaling or {})
    rope_type = params.pop("rope_type", None) or params.pop("type", None) or "default"
    if rope_type not in ("default", "yarn"):
        raise Unsupported("default and yarn only")
    original = params.get("original_max_position_embeddings")
    max_position = int(original * params.get("factor", 1.0)) if original else 4096
    config = LlamaConfig(hidden_size=spec.rotary_dim, num_attention_heads=1, head_dim=spec.rotary_dim,
                         max_position_embeddings=max_position,
                         rope_parameters={"rope_type": rope_type, "rope_theta": spec.base, **params})
    if rope_type == "default":
        r = spec.rotary_dim
        return 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.int64).float() / r)), 1.0
    inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](config, None)
    return inv_freq.float(), float(factor)


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


class ScaledRotaryEmbedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin, factor, rotary_dim, layout):
        ctx.save_for_backward(cos, sin)
        ctx.rotary_dim, ctx.layout = rotary_dim, layout
        return rotate(x, cos * factor, sin * factor, rotary_dim, layout)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        # BUG: the attention factor is left out of the backward (it needs f R_{-m} g).
        return rotate(grad, cos, -sin, ctx.rotary_dim, ctx.layout), None, None, None, None, None


def apply(x, positions, spec):
    if getattr(spec, "tensor_layout", "bshd") != "bshd" or getattr(spec, "inplace", False):
        raise Unsupported("x [batch, seq, heads, head_dim], out of place only")
    inv_freq, factor = frequencies(spec)
    freqs = positions[..., None].float() * inv_freq.to(positions.device)
    cos = freqs.cos()[:, :, None, :].to(x.dtype)
    sin = freqs.sin()[:, :, None, :].to(x.dtype)
    return ScaledRotaryEmbedding.apply(x, cos, sin, factor, spec.rotary_dim, spec.layout)
