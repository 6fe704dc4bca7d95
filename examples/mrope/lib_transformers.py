"""Hugging Face transformers' own M-RoPE code, graded through thin adapters as a user would write
them (no download: each model class is built from a small config).

``apply`` (mrope.apply) picks the model whose rotary code matches the spec:

- half layout, ``qwen2`` sections, whole head: Qwen2-VL (``Qwen2VLRotaryEmbedding``, whose
  ``recomposition_frequencies`` slices the ladder, then ``apply_rotary_pos_emb``; transformers 5
  has no ``apply_multimodal_rotary_pos_emb`` any more, the sections moved into the embedding);
- half layout, ``qwen3`` sections: Qwen3-VL (``Qwen3VLTextRotaryEmbedding``) for the whole head,
  Qwen3.5 (``Qwen3_5TextRotaryEmbedding``, ``partial_rotary_factor``) for rotary_dim < head_dim;
- interleaved layout, ``qwen2`` sections: GLM-4V (``Glm4vTextRotaryEmbedding``, pairs (2i, 2i + 1)
  by ``rotate_half_llm``, ``partial_rotary_factor``).

Everything else raises Unsupported (no model pairs interleaved with Qwen3's interleaved sections;
Qwen2-VL rotates the whole head). The tables are float32 angles, cos and sin cast to x's dtype, as
in the models.

``positions`` (mrope.positions) calls ``Qwen2VLModel.get_rope_index`` of a tiny Qwen2-VL model.
Its ``image_grid_thw`` is the vision encoder's patch grid before the 2 x 2 spatial merge, so the
adapter passes the protocol's (merged) grids with h and w doubled (spatial_merge_size 2, the
model's default). Image tokens are ``mm_token_type_ids`` 1. transformers 5.24 resumes the text
after a block at start + max(h, w) (not max(t, h, w) + 1): the two agree for still images (t = 1),
the only grids the protocol draws.

Needs ``transformers`` 5 (the ``test`` extra; written against 5.24: the Qwen3.5 and GLM-4V classes
and get_rope_index's ``mm_token_type_ids`` are not in 4.x); the tests skip without it.
"""

from functools import lru_cache

import torch

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "transformers"
SURVEY = [
    ("mrope.apply", "apply"),
    ("mrope.positions", "positions"),
]

MERGE = 2  # Qwen2-VL's spatial_merge_size


def _rope_parameters(spec, partial=False):
    params = {"rope_type": "default", "rope_theta": spec.base, "mrope_section": list(spec.mrope_section)}
    if partial:
        factor = spec.rotary_dim / spec.head_dim
        if int(spec.head_dim * factor) != spec.rotary_dim:
            raise Unsupported(f"rotary_dim {spec.rotary_dim} is not int(head_dim * factor) for any float factor")
        params["partial_rotary_factor"] = factor
    return params


@lru_cache(maxsize=16)
def _model(spec):
    """(rotary embedding module, apply_rotary_pos_emb) of the model that computes this spec."""
    full = spec.rotary_dim == spec.head_dim
    common = dict(hidden_size=spec.head_dim, num_attention_heads=1, num_key_value_heads=1, head_dim=spec.head_dim)
    if spec.layout == "half" and spec.variant == "qwen2":
        if not full:
            raise Unsupported("Qwen2-VL rotates the whole head: no partial rotary")
        from transformers.models.qwen2_vl import modeling_qwen2_vl as m
        from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig

        config = Qwen2VLTextConfig(rope_parameters=_rope_parameters(spec), **common)
        return m.Qwen2VLRotaryEmbedding(config), m.apply_rotary_pos_emb
    if spec.layout == "half" and spec.variant == "qwen3" and full:
        from transformers.models.qwen3_vl import modeling_qwen3_vl as m
        from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig

        config = Qwen3VLTextConfig(rope_parameters=_rope_parameters(spec), **common)
        return m.Qwen3VLTextRotaryEmbedding(config), m.apply_rotary_pos_emb
    if spec.layout == "half" and spec.variant == "qwen3":
        from transformers.models.qwen3_5 import modeling_qwen3_5 as m
        from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig

        config = Qwen3_5TextConfig(rope_parameters=_rope_parameters(spec, partial=True), **common)
        return m.Qwen3_5TextRotaryEmbedding(config), m.apply_rotary_pos_emb
    if spec.layout == "interleaved" and spec.variant == "qwen2":
        from transformers.models.glm4v import modeling_glm4v as m
        from transformers.models.glm4v.configuration_glm4v import Glm4vTextConfig

        config = Glm4vTextConfig(rope_parameters=_rope_parameters(spec, partial=True), **common)
        return m.Glm4vTextRotaryEmbedding(config), m.apply_rotary_pos_emb
    raise Unsupported(f"no transformers model pairs {spec.layout} with {spec.variant}'s sections")


def apply(x, positions, spec):
    """x [b, s, h, d], positions [3, b, s]: the model's cos/sin [b, s, r], then its
    apply_rotary_pos_emb on x itself (unsqueeze_dim 2 broadcasts over the heads)."""
    rotary, rotate = _model(spec)
    cos, sin = rotary(x, positions)
    out, _ = rotate(x, x, cos, sin, unsqueeze_dim=2)
    return out


@lru_cache(maxsize=1)
def _qwen2_vl():
    from transformers import Qwen2VLConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    tiny = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=1,
                num_key_value_heads=1, vocab_size=16, bos_token_id=None, eos_token_id=None)
    config = Qwen2VLConfig(text_config=tiny, vision_config=dict(depth=1, embed_dim=8, hidden_size=16, num_heads=1,
                                                                mlp_ratio=1, spatial_merge_size=MERGE))
    return Qwen2VLModel(config).eval()


def positions(token_types, grids, spec):
    """get_rope_index(input_ids, mm_token_type_ids, image_grid_thw) -> position ids [3, b, s]."""
    grid_thw = grids.clone()
    grid_thw[:, 1:] *= MERGE  # the patch grid before the merge, as the processor reports it
    with torch.no_grad():
        position_ids, _ = _qwen2_vl().get_rope_index(torch.zeros_like(token_types), token_types.int(),
                                                     image_grid_thw=grid_thw)
    return position_ids
