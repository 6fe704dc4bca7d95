"""transformers' LlamaAttention as the layer under test: a LlamaConfig of the case's shape, the
given weights loaded into q_proj / k_proj / v_proj / o_proj, position_embeddings from
LlamaRotaryEmbedding (its rope_parameters carry the case's scaling), the KV cache in a
DynamicCache and the causal and padding masks as one additive 4-D mask (eager attention).

Llama has RoPE only, in the rotate_half layout with full rotary: other cases raise
conformance.Unsupported (skipped, not failed). Adapter: ``forward`` (attention.forward).
"""

import torch

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "transformers"
SURVEY = [
    ("attention.forward", "forward"),
]


def _config(spec, d_model):
    from transformers import LlamaConfig

    rope = {"rope_type": "default", "rope_theta": spec.base}
    rope.update({k: v for k, v in dict(spec.scaling or {}).items() if k != "type"})
    rope["rope_theta"] = spec.base
    # HF checks YaRN's factor against max_position_embeddings / original_max_position_embeddings.
    longest = int(rope["factor"] * rope["original_max_position_embeddings"]) if "factor" in rope and \
        "original_max_position_embeddings" in rope else 8192
    config = LlamaConfig(hidden_size=d_model, num_attention_heads=spec.num_heads,
                         num_key_value_heads=spec.num_kv_heads, head_dim=spec.head_dim, attention_bias=False,
                         max_position_embeddings=longest, rope_parameters=rope)
    config._attn_implementation = "eager"
    return config


def forward(hidden, weights, positions, spec):
    from transformers import DynamicCache
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

    if spec.encoding != "rope" or spec.layout != "half" or spec.rotary_dim != spec.head_dim:
        raise Unsupported("LlamaAttention: full rotate_half RoPE only")
    b, s, d_model = hidden.shape
    config = _config(spec, d_model)
    layer = LlamaAttention(config, layer_idx=0).to(device=hidden.device, dtype=hidden.dtype).eval()
    # The given tensors are the layer's weights (torch.func.functional_call below), so that under
    # autograd their gradients are the layer's; everything else is a constant.
    params = {f"{name}_proj.weight": weights[f"w{name}"] for name in ("q", "k", "v", "o")}
    with torch.no_grad():
        rotary = LlamaRotaryEmbedding(config).to(hidden.device)
        cos, sin = rotary(hidden, positions)
        cache, past = None, 0
        if spec.past_keys is not None:
            cache = DynamicCache(config=config)
            cache.update(spec.past_keys.clone(), spec.past_values.clone(), 0)
            past = spec.past_keys.shape[2]
        K = past + s
        allowed = torch.ones(b, 1, s, K, dtype=torch.bool, device=hidden.device)
        if spec.causal:
            allowed &= torch.ones(s, K, dtype=torch.bool, device=hidden.device).tril(past)
        if spec.attention_mask is not None:
            allowed &= spec.attention_mask[:, None, None, :]
        mask = torch.zeros(b, 1, s, K, dtype=hidden.dtype, device=hidden.device)
        mask = mask.masked_fill(~allowed, torch.finfo(hidden.dtype).min)
    out, _ = torch.func.functional_call(layer, params, (hidden,), dict(position_embeddings=(cos, sin),
                                                                       attention_mask=mask, past_key_values=cache))
    return out
