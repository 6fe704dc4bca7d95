"""attention.mla on transformers' own DeepSeek-V3 code, as a user wires it: a tiny DeepseekV3Config
carrying the spec's MLA dims and rope_parameters, DeepseekV3RotaryEmbedding for cos and sin (YaRN
with mscale / mscale_all_dim), apply_rotary_pos_emb_interleave (rope_interleave=True: DeepSeek's
interleaved pairs, returned de-interleaved for q and k alike, so q . k is unchanged) or
apply_rotary_pos_emb, DeepseekV3Attention's own ``scaling`` (yarn_apply_mscale: d_qk^-1/2 m^2), and
eager_attention_forward with a causal additive mask. Only the parts are taken: the adapter is
given q_nope, q_pe, k_nope, k_pe and v, not the hidden states the projections would make them from.

Adapter: ``mla`` (attention.mla).
"""

import functools

import torch
from transformers import DeepseekV3Config
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as ds

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "transformers"
SURVEY = [
    ("attention.mla", "mla"),
]


@functools.lru_cache(maxsize=32)
def _layer(heads, d_nope, d_rope, d_v, base, layout, scaling_items):
    rope = {"rope_type": "default", "rope_theta": base}
    longest = 163840
    if scaling_items:
        rope = dict(scaling_items)
        rope["rope_type"] = rope.pop("type", None) or rope.get("rope_type")
        rope["rope_theta"] = base
        longest = int(rope["factor"] * rope["original_max_position_embeddings"])  # YaRN's own ratio
    config = DeepseekV3Config(hidden_size=16, num_attention_heads=heads, num_key_value_heads=heads,
                              qk_nope_head_dim=d_nope, qk_rope_head_dim=d_rope, v_head_dim=d_v, kv_lora_rank=8,
                              q_lora_rank=None, rope_parameters=rope, rope_interleave=layout == "interleaved",
                              max_position_embeddings=longest, num_hidden_layers=1, vocab_size=8,
                              attn_implementation="eager")
    attention = ds.DeepseekV3Attention(config, layer_idx=0).eval()
    return config, attention, ds.DeepseekV3RotaryEmbedding(config)


def mla(q_nope, q_pe, k_nope, k_pe, v, positions, spec):
    items = tuple(sorted((spec.scaling or {}).items()))
    config, attention, rotary = _layer(spec.num_heads, spec.d_nope, spec.d_rope, spec.d_v, spec.base, spec.layout,
                                       items)
    rotary = rotary.to(q_pe.device)
    # HF's layout: [batch, heads, seq, dim]
    q_pass, q_rot, k_pass, k_rot, value = (t.transpose(1, 2) for t in (q_nope, q_pe, k_nope, k_pe, v))
    cos, sin = rotary(q_rot, positions)
    if config.rope_interleave:
        q_rot, k_rot = ds.apply_rotary_pos_emb_interleave(q_rot, k_rot, cos, sin)
    else:
        q_rot, k_rot = ds.apply_rotary_pos_emb(q_rot, k_rot, cos, sin)
    query = torch.cat((q_pass, q_rot), dim=-1)
    key = torch.cat((k_pass, k_rot.expand(-1, spec.num_heads, -1, -1)), dim=-1)
    s = q_nope.shape[1]
    mask = None
    if spec.causal:
        hide = torch.ones(s, s, dtype=torch.bool, device=v.device).triu(1)
        mask = torch.zeros(s, s, dtype=query.dtype, device=v.device).masked_fill(hide, torch.finfo(query.dtype).min)
        mask = mask[None, None]
    out, _ = ds.eager_attention_forward(attention, query, key, value, mask, scaling=attention.scaling, dropout=0.0)
    return out  # eager_attention_forward returns [batch, seq, heads, d_v]
