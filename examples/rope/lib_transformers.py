"""Hugging Face transformers' Llama RoPE (LlamaRotaryEmbedding + apply_rotary_pos_emb), graded
through a thin adapter as a user would write it; and HF's own scaling functions
(``ROPE_INIT_FUNCTIONS``: linear, dynamic, yarn, longrope, llama3) as ``frequencies``.

Llama rotates the whole head (no partial rotary) in the half layout (rotate_half), so the adapter
raises Unsupported for everything else; posref must still detect the layout and grade the half,
full-rotary cases. Needs ``transformers`` (the ``test`` extra); the tests skip without it.
"""

import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "transformers"
SURVEY = [
    ("rope.apply", "apply"),
    ("rope.cache", "cache"),
    ("rope.frequencies", "frequencies"),
]


def _rotary(spec, heads):
    if spec.layout != "half":
        raise Unsupported("Llama uses rotate_half: half layout only")
    if spec.rotary_dim != spec.head_dim:
        raise Unsupported("Llama rotates the whole head: no partial rotary")
    if spec.scaling is not None:
        raise Unsupported("only unscaled RoPE is wired up in this adapter")
    config = LlamaConfig(hidden_size=spec.head_dim * heads, num_attention_heads=heads, head_dim=spec.head_dim,
                         rope_theta=spec.base, max_position_embeddings=max(spec.seq_len, 1))
    return LlamaRotaryEmbedding(config)


def apply(x, positions, spec):
    """x [b, s, h, d] -> HF's [b, h, s, d] and back."""
    if getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("x [batch, seq, heads, head_dim] only")
    rope = _rotary(spec, x.shape[2])
    cos, sin = rope(x, positions)
    q = x.transpose(1, 2)
    q_rot, _ = apply_rotary_pos_emb(q, q, cos, sin)
    return q_rot.transpose(1, 2)


def cache(positions, spec):
    """HF's cos/sin are [b, s, d] = cat(freqs, freqs): the first half is the pair-order table."""
    rope = _rotary(spec, 1)
    cos, sin = rope(torch.empty(0, dtype=torch.float32), positions)
    half = spec.rotary_dim // 2
    return cos[..., :half], sin[..., :half]


def frequencies(spec, seq_len):
    """rope.frequencies through HF: the default parameters, or ROPE_INIT_FUNCTIONS[rope_type].

    HF reads the original context of dynamic NTK from ``config.max_position_embeddings``, and
    LongRoPE's default attention factor from max / original; the config is built accordingly.
    """
    params = dict(spec.scaling or {})
    rope_type = params.pop("rope_type", None) or params.pop("type", None) or "default"
    if rope_type != "default" and rope_type not in ROPE_INIT_FUNCTIONS:
        raise Unsupported(f"transformers has no rope_type {rope_type!r}")
    max_position = params.pop("max_position_embeddings", None)
    if rope_type == "dynamic":
        max_position = params.pop("original_max_position_embeddings")
    elif max_position is None and "original_max_position_embeddings" in params:
        max_position = int(params["original_max_position_embeddings"] * params.get("factor", 1.0)) + 1
    config = LlamaConfig(hidden_size=spec.rotary_dim, num_attention_heads=1, head_dim=spec.rotary_dim,
                         max_position_embeddings=max_position or 4096,
                         rope_parameters={"rope_type": rope_type, "rope_theta": spec.base, **params})
    if rope_type == "default":
        inv_freq, factor = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    else:
        inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](config, None, seq_len=seq_len or None)
    return inv_freq, float(factor)
