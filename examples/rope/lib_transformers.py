"""Hugging Face transformers' Llama RoPE (LlamaRotaryEmbedding + apply_rotary_pos_emb), graded
through a thin adapter as a user would write it.

Llama rotates the whole head (no partial rotary) in the half layout (rotate_half), so the adapter
raises Unsupported for everything else; posref must still detect the layout and grade the half,
full-rotary cases. Needs ``transformers`` (the ``test`` extra); the tests skip without it.
"""

import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from conformance import Unsupported


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
