"""transformers' Qwen2-VL vision RoPE, ``Qwen2VLVisionRotaryEmbedding`` + ``apply_rotary_pos_emb_vision``
(transformers.models.qwen2_vl.modeling_qwen2_vl), graded as axial 2-D RoPE. Graded at transformers
5.24.0.

The module is built from a ``Qwen2VLVisionConfig`` (head_dim = embed_dim / num_heads, rope_parameters
{"rope_type": "axial", "rope_theta": base}); its inv_freq is 1 / base ** (arange(0, d/2, 2) / (d/2))
in float32 (base^(-4k/d), the same ladder for both axes), and ``forward(x, position_ids)`` with
position_ids [tokens, 2] (the vision encoder's (row, column) of each patch) gives cos / sin [tokens,
d]: the first d/4 pairs at the first column, the last d/4 at the second, the halves repeated
(rotate_half pairs (i, i + d/2): the half layout). ``apply_rotary_pos_emb_vision(q, k, cos, sin)``
rotates [tokens, heads, d] in float32 and casts back. The spec's order says which of (x, y) is the
first column (Qwen2-VL: rows, y first); leading CLS tokens get (0, 0), a rotation by 0 (the
encoder has none). The interleaved layout and RoPE-Mixed are not what it computes: Unsupported.

Adapter: ``apply`` (rope2d.apply). Needs ``transformers`` (the ``test`` extra); the tests skip
without it.
"""

from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLVisionRotaryEmbedding, apply_rotary_pos_emb_vision

from conformance import Unsupported

LIBRARY = "transformers"
SURVEY = [("rope2d.apply", "apply")]
SURVEY_NOTES = {"rope2d.apply": "Qwen2-VL's vision RoPE rotates rotate_half pairs (i, i + d/2): the interleaved and "
                                "RoPE-Mixed cases are unsupported."}


def apply(x, coords, spec):
    if spec.freqs is not None:
        raise Unsupported("Qwen2-VL's vision frequencies are fixed: no RoPE-Mixed")
    if spec.layout != "half":
        raise Unsupported("Qwen2-VL's vision RoPE rotates pairs (i, i + d/2): half layout only")
    b, s, heads, d = x.shape
    config = Qwen2VLVisionConfig(embed_dim=d * heads, num_heads=heads,
                                 rope_parameters={"rope_type": "axial", "rope_theta": spec.base})
    rotary = Qwen2VLVisionRotaryEmbedding(config).to(x.device)
    ids = coords.flip(-1) if tuple(spec.order) == ("y", "x") else coords  # the first d/4 pairs' coordinate first
    ids = ids.clone()
    ids[:, :spec.cls_tokens] = 0  # a rotation by 0 leaves the CLS tokens as they are
    cos, sin = rotary(x, ids.reshape(b * s, 2))  # [tokens, d]
    flat = x.reshape(b * s, heads, d)
    out, _ = apply_rotary_pos_emb_vision(flat, flat, cos, sin)
    return out.reshape(x.shape)
