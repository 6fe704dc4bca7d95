"""Hugging Face transformers' ``LlamaRotaryEmbedding`` as a stateful rope.module, in the cache
form: it returns ``(cos, sin)``, each [batch, seq, head_dim] (``cat(freqs, freqs)``, the half
layout), and keeps state between calls (``dynamic_rope_update``: dynamic NTK grows and resets
``inv_freq``, LongRoPE switches between short and long factors by the current length).

Needs ``transformers`` (the ``test`` extra); the tests skip without it. HF reads the original
context of dynamic NTK from ``config.max_position_embeddings``, so the config is built
accordingly. Llama rotates the whole head in the half layout: everything else is Unsupported.

Finding (transformers 5.x): ``inv_freq`` and ``original_inv_freq`` are non-persistent buffers,
and ``module.to(torch.bfloat16)`` casts non-persistent buffers too, so after
``model.to(torch.bfloat16)`` the frequencies are rounded to bfloat16; rope.module's ``cast-*``
cases diagnose this as ``angle-precision`` naming the buffers (from_pretrained with
``torch_dtype=torch.bfloat16`` keeps them in float32: it never casts the module).
"""

from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "transformers"
SURVEY = [
    ("rope.module", "module"),
]
SURVEY_NOTES = {
    "module": "A documented behaviour: inv_freq is a non-persistent buffer, so module.to(bfloat16) "
              "casts it and the cast scripts fail in bfloat16 with angle-precision (from_pretrained "
              "with torch_dtype keeps it in float32); every other script passes.",
}


def module(spec):
    if spec.layout != "half" or spec.rotary_dim != spec.head_dim:
        raise Unsupported("Llama: half layout, whole head rotated")
    params = dict(spec.scaling or {"rope_type": "default"})
    length = params.get("original_max_position_embeddings", 4096)
    if params["rope_type"] == "dynamic":
        length = params.pop("original_max_position_embeddings")  # HF: config.max_position_embeddings
    config = LlamaConfig(head_dim=spec.head_dim, hidden_size=spec.head_dim, num_attention_heads=1,
                         max_position_embeddings=length, rope_parameters={"rope_theta": spec.base, **params})
    rope = LlamaRotaryEmbedding(config)
    rope.posref_output = "cos_sin"  # rope(x, position_ids) -> (cos, sin)
    return rope
