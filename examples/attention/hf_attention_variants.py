"""transformers' attention layers of three model families as the layer under test, each with its
eager and SDPA paths: Llama (LlamaAttention), Qwen2 (Qwen2Attention: q, k, v biases, set to 0
because the protocol's weights have none) and Mistral (MistralAttention), each built from a
config of the case's shape (no download), the given weights loaded into q_proj ... o_proj,
position_embeddings from the family's rotary embedding (rope_parameters carry the case's
scaling), the KV cache in a DynamicCache and the causal and padding masks as one 4-D mask.

These families have RoPE only, rotate_half pairs, full rotary: other cases raise
conformance.Unsupported. Adapters: ``llama_eager``, ``llama_sdpa``, ``qwen2_eager``,
``qwen2_sdpa``, ``mistral_eager``, ``mistral_sdpa`` (attention.forward).
"""

import importlib

import torch

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "transformers"
SURVEY = [
    ("attention.forward", "llama_eager"),
    ("attention.forward", "llama_sdpa"),
    ("attention.forward", "qwen2_eager"),
    ("attention.forward", "qwen2_sdpa"),
    ("attention.forward", "mistral_eager"),
    ("attention.forward", "mistral_sdpa"),
]

FAMILIES = {"llama": ("LlamaConfig", "llama", "Llama"), "qwen2": ("Qwen2Config", "qwen2", "Qwen2"),
            "mistral": ("MistralConfig", "mistral", "Mistral")}


def _config(family, impl, spec, d_model):
    import transformers

    rope = {"rope_type": "default"}
    rope.update({k: v for k, v in dict(spec.scaling or {}).items() if k != "type"})
    rope["rope_theta"] = spec.base
    longest = int(rope["factor"] * rope["original_max_position_embeddings"]) if "factor" in rope and \
        "original_max_position_embeddings" in rope else 8192
    config = getattr(transformers, FAMILIES[family][0])(
        hidden_size=d_model, num_attention_heads=spec.num_heads, num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.head_dim, max_position_embeddings=longest, rope_parameters=rope)
    config._attn_implementation = impl
    return config


def _mask(spec, b, s, past, dtype, device):
    """Additive [b, 1, s, past + s]: 0 where a key is visible, dtype's lowest elsewhere."""
    allowed = torch.ones(b, 1, s, past + s, dtype=torch.bool, device=device)
    if spec.causal:
        allowed &= torch.ones(s, past + s, dtype=torch.bool, device=device).tril(past)
    if spec.attention_mask is not None:
        allowed &= spec.attention_mask[:, None, None, :]
    return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)


def _forward(family, impl, hidden, weights, positions, spec):
    from transformers import DynamicCache

    if spec.encoding != "rope" or spec.layout != "half" or spec.rotary_dim != spec.head_dim:
        raise Unsupported(f"{FAMILIES[family][2]}Attention: full rotate_half RoPE only")
    module = importlib.import_module(f"transformers.models.{FAMILIES[family][1]}.modeling_{FAMILIES[family][1]}")
    name = FAMILIES[family][2]
    b, s, d_model = hidden.shape
    config = _config(family, impl, spec, d_model)
    layer = getattr(module, f"{name}Attention")(config, layer_idx=0).to(device=hidden.device, dtype=hidden.dtype).eval()
    params = {f"{n}_proj.weight": weights[f"w{n}"] for n in ("q", "k", "v", "o")}
    for n in ("q", "k", "v", "o"):  # Qwen2's projection biases: the protocol's layer has none
        bias = getattr(layer, f"{n}_proj").bias
        if bias is not None:
            params[f"{n}_proj.bias"] = torch.zeros_like(bias)
    with torch.no_grad():
        cos, sin = getattr(module, f"{name}RotaryEmbedding")(config).to(hidden.device)(hidden, positions)
        cache, past = None, 0
        if spec.past_keys is not None:
            cache = DynamicCache(config=config)
            cache.update(spec.past_keys.clone(), spec.past_values.clone(), 0)
            past = spec.past_keys.shape[2]
        mask = _mask(spec, b, s, past, hidden.dtype, hidden.device)
    out, _ = torch.func.functional_call(layer, params, (hidden,), dict(position_embeddings=(cos, sin),
                                                                       attention_mask=mask, past_key_values=cache))
    return out


def _adapter(family, impl):
    def forward(hidden, weights, positions, spec):
        return _forward(family, impl, hidden, weights, positions, spec)

    forward.__name__ = f"{family}_{impl}"
    forward.__doc__ = f"transformers' {FAMILIES[family][2]}Attention, {impl} path (attention.forward)."
    return forward


llama_eager, llama_sdpa = _adapter("llama", "eager"), _adapter("llama", "sdpa")
qwen2_eager, qwen2_sdpa = _adapter("qwen2", "eager"), _adapter("qwen2", "sdpa")
mistral_eager, mistral_sdpa = _adapter("mistral", "eager"), _adapter("mistral", "sdpa")
