"""transformers' own T5 attention layer (``T5Attention``) for attention.forward, as a user grades a
T5 port at its model: ``posref conform examples/attention/lib_transformers_t5.py:forward
--protocol attention.forward --model mt5-base``.

The layer is built from a ``T5Config`` with the case's heads, head size, buckets and direction
(decoder = causal) and gets the case's weights: q, k, v, o and the ``relative_attention_bias``
table. Its ``compute_bias`` takes contiguous positions 0..s-1 only, and posref's cases give any
positions, so the bias is built from the layer's own ``_relative_position_bucket`` and table at
the given positions and passed in as ``position_bias``, as a caller with position ids does. The
layer keeps its own scale (1: T5's scores are unscaled). Cases T5's layer cannot express (grouped
kv heads, a KV cache, another encoding or scale) raise Unsupported. Needs transformers 5.
"""

import torch
from transformers import T5Config
from transformers.models.t5.modeling_t5 import T5Attention

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "transformers"
SURVEY = [
    ("attention.forward", "forward"),
]


def _layer(spec, width, device, dtype):
    config = T5Config(d_model=width, d_kv=spec.head_dim, num_heads=spec.num_heads, dropout_rate=0.0,
                      relative_attention_num_buckets=spec.num_buckets,
                      relative_attention_max_distance=spec.max_distance, is_decoder=spec.causal)
    config._attn_implementation = "eager"
    return T5Attention(config, has_relative_attention_bias=True, layer_idx=0).to(device, dtype).eval()


def forward(hidden, weights, positions, spec):
    if spec.encoding != "t5" or spec.logit_scale != 1.0:
        raise Unsupported("T5Attention: T5's own layer, unscaled scores with its bucketed bias")
    if spec.num_kv_heads != spec.num_heads or spec.past_keys is not None:
        raise Unsupported("T5Attention: no grouped kv heads, no cache given as tensors")
    layer = _layer(spec, hidden.shape[-1], hidden.device, hidden.dtype)
    with torch.no_grad():
        for name, key in (("q", "wq"), ("k", "wk"), ("v", "wv"), ("o", "wo")):
            getattr(layer, name).weight.copy_(weights[key])
        layer.relative_attention_bias.weight.copy_(weights["rel_bias"])
    relative = positions[:, None, :] - positions[:, :, None]  # key minus query, [b, s, s]
    buckets = layer._relative_position_bucket(relative, bidirectional=not spec.causal,
                                              num_buckets=spec.num_buckets, max_distance=spec.max_distance)
    bias = layer.relative_attention_bias(buckets).permute(0, 3, 1, 2)  # [b, heads, s, s]
    s = hidden.shape[1]
    allowed = torch.ones(s, s, dtype=torch.bool, device=hidden.device)
    if spec.causal:
        allowed = torch.tril(allowed)
    allowed = allowed[None, None]
    if spec.attention_mask is not None:
        allowed = allowed & spec.attention_mask[:, None, None, :]
    mask = torch.zeros(allowed.shape, dtype=hidden.dtype, device=hidden.device)
    mask = mask.masked_fill(~allowed, torch.finfo(hidden.dtype).min)
    out, _, _ = layer(hidden, mask=mask, position_bias=bias)
    return out
