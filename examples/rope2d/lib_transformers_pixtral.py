"""transformers' Pixtral vision RoPE, ``PixtralVisionRotaryEmbedding`` + ``apply_rotary_pos_emb``
(transformers.models.pixtral.modeling_pixtral), graded as axial 2-D RoPE. Graded at transformers
5.24.0.

The module is built from a ``PixtralVisionConfig`` (head_dim = hidden_size / num_attention_heads,
rope_parameters {"rope_type": "axial", "rope_theta": base}). Its inv_freq is the fine ladder
theta_j = 1 / base ** (arange(0, d, 2) / d) in float32 reordered as [theta_{2k} | theta_{2k+1}];
``forward(x, position_ids)`` with position_ids [tokens, 2] (each patch's (row, column)) turns the
first d/4 pairs by row * theta_{2k} and the last d/4 by column * theta_{2k+1}, the halves
repeated (rotate_half pairs (i, i + d/2): the half layout), cos and sin cast to x's dtype;
``apply_rotary_pos_emb`` rotates in that dtype. The columns' ladder is therefore
base^(-(4k+2)/d), not the rows' base^(-4k/d) that axial 2-D RoPE gives both axes: posref names
this ``ladder-split``, Pixtral's convention (mistral-inference's precompute_freqs_cis_2d splits it
the same way: examples/rope2d/lib_mistral_inference.py). The spec's order says which of (x, y) is
the first column; leading CLS tokens get (0, 0), a rotation by 0. The interleaved layout and
RoPE-Mixed are not what it computes: Unsupported.

Adapter: ``pixtral`` (rope2d.apply; not named ``apply``: the seed sweep of
tests/core/test_seed_sweep.py grades every ``apply`` as correct code, and this one deviates by its
library's convention, which tests/rope2d asserts by name). Needs ``transformers`` (the ``test``
extra); the tests skip without it.
"""

from transformers.models.pixtral.configuration_pixtral import PixtralVisionConfig
from transformers.models.pixtral.modeling_pixtral import PixtralVisionRotaryEmbedding, apply_rotary_pos_emb

from conformance import Unsupported

LIBRARY = "transformers"
SURVEY = [("rope2d.apply", "pixtral")]
SURVEY_NOTES = {"rope2d.apply": "A documented convention, not a bug: Pixtral splits one ladder base^(-2j/d) "
                                "between the axes (even steps to rows, odd steps to columns: ladder-split) where "
                                "axial 2-D RoPE turns both axes by the same base^(-4k/d); the interleaved and "
                                "RoPE-Mixed cases are unsupported."}


def pixtral(x, coords, spec):
    if spec.freqs is not None:
        raise Unsupported("Pixtral's vision frequencies are fixed: no RoPE-Mixed")
    if spec.layout != "half":
        raise Unsupported("transformers' Pixtral rotates pairs (i, i + d/2): half layout only")
    b, s, heads, d = x.shape
    config = PixtralVisionConfig(hidden_size=d * heads, num_attention_heads=heads, head_dim=d,
                                 rope_parameters={"rope_type": "axial", "rope_theta": spec.base})
    rotary = PixtralVisionRotaryEmbedding(config).to(x.device)
    ids = coords.flip(-1) if tuple(spec.order) == ("y", "x") else coords  # the first d/4 pairs' coordinate first
    ids = ids.clone()
    ids[:, :spec.cls_tokens] = 0  # a rotation by 0 leaves the CLS tokens as they are
    cos, sin = rotary(x, ids.reshape(b * s, 2))  # [tokens, d]
    flat = x.reshape(b * s, heads, d)
    out, _ = apply_rotary_pos_emb(flat, flat, cos, sin, unsqueeze_dim=1)
    return out.reshape(x.shape)
