"""rope.qk_norm on transformers' own pieces, as a user wires Qwen3's and OLMo 2's query and key path:
Qwen3RMSNorm(head_dim) per head (Qwen3Attention's q_norm / k_norm) or Olmo2RMSNorm(heads *
head_dim) over the whole projection (Olmo2Attention's, before the split into heads), each holding the
given weight, then Qwen3RotaryEmbedding's cos / sin and Qwen3's apply_rotary_pos_emb (rotate_half)
on the first rotary_dim features, the rest passed through. The interleaved layout is not what these
models run: Unsupported.

Adapter: ``qk_norm`` (rope.qk_norm).
"""

import functools

import torch
from transformers import Qwen3Config
from transformers.models.olmo2.modeling_olmo2 import Olmo2RMSNorm
from transformers.models.qwen3 import modeling_qwen3 as qwen3

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "transformers"
SURVEY = [
    ("rope.apply_qk", "rope"),
    ("rope.qk_norm", "qk_norm"),
]


@functools.lru_cache(maxsize=16)
def _rotary(rotary_dim, base, scaling_items):
    rope = {"rope_type": "default", "rope_theta": base, **dict(scaling_items)}
    config = Qwen3Config(head_dim=rotary_dim, hidden_size=rotary_dim, num_attention_heads=1, num_key_value_heads=1,
                         rope_parameters=rope, num_hidden_layers=1, vocab_size=8)
    return qwen3.Qwen3RotaryEmbedding(config)


def _norm(x, weight, spec):
    """x [b, s, h, d] through the model's RMSNorm module holding ``weight``."""
    b, s, h, d = x.shape
    if spec.norm_scope == "head":
        norm = qwen3.Qwen3RMSNorm(d, eps=spec.eps)
        flat = x
    else:
        norm = Olmo2RMSNorm(h * d, eps=spec.eps)
        flat = x.reshape(b, s, h * d)
    with torch.no_grad():
        norm.weight = torch.nn.Parameter(weight.clone(), requires_grad=False)
    return norm.to(x.device)(flat).reshape(b, s, h, d)


def rope(q, k, positions, spec):
    """Qwen3's RoPE on q [b, s, hq, d] and k [b, s, hkv, d]."""
    if spec.layout != "half":
        raise Unsupported("Qwen3 and OLMo 2 rotate in the rotate_half layout only")
    r = spec.rotary_dim
    rotary = _rotary(r, spec.base, tuple(sorted((spec.scaling or {}).items()))).to(q.device)
    cos, sin = rotary(q, positions)
    # HF's layout: [batch, heads, seq, dim]; the rotary features first, the tail passed through
    qh, kh = q.transpose(1, 2), k.transpose(1, 2)
    q_rot, k_rot = qwen3.apply_rotary_pos_emb(qh[..., :r], kh[..., :r], cos, sin)
    q_out = torch.cat((q_rot, qh[..., r:]), dim=-1).transpose(1, 2)
    k_out = torch.cat((k_rot, kh[..., r:]), dim=-1).transpose(1, 2)
    return q_out, k_out


def qk_norm(q, k, positions, q_weight, k_weight, spec):
    return rope(_norm(q, q_weight, spec), _norm(k, k_weight, spec), positions, spec)
