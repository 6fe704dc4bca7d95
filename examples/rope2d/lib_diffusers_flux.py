"""diffusers' Flux RoPE, ``FluxPosEmbed`` (diffusers.models.transformers.transformer_flux) and
``apply_rotary_emb`` (diffusers.models.embeddings), graded as axial 2-D RoPE. Graded at diffusers
0.42.1.

``FluxPosEmbed(theta, axes_dim)`` takes ids [S, n_axes] and, per axis a, builds
``get_1d_rotary_pos_embed(axes_dim[a], ids[:, a], theta, use_real=True,
repeat_interleave_real=True, freqs_dtype=float64)``: the ladder theta^(-2k / axes_dim[a]) in
float64 at float32 positions, cos / sin each entry repeated twice, axes concatenated. With two
axes of d/2 features each this is axial 2-D RoPE in the interleaved layout: the ladder
theta^(-4k/d) shared by both axes, the first d/4 pairs at the first id column. ``apply_rotary_emb
(x, (cos, sin), use_real_unbind_dim=-1, sequence_dim=1)`` rotates pairs (2i, 2i+1) in float32.

Flux gives its text tokens ids 0 on every axis (a rotation by 0: unchanged), which is how the
adapter passes the spec's leading CLS tokens through. Flux cannot express the half layout (pairs
(i, i + d/2)) nor RoPE-Mixed's learned frequencies: Unsupported. The ids have no batch axis:
each batch row is built on its own.

Adapter: ``apply`` (rope2d.apply). Needs ``diffusers`` (the ``test`` extra); the tests skip
without it.
"""

import torch
from diffusers.models.embeddings import apply_rotary_emb
from diffusers.models.transformers.transformer_flux import FluxPosEmbed

from conformance import Unsupported

LIBRARY = "diffusers"
SURVEY = [("rope2d.apply", "apply")]
SURVEY_NOTES = {"rope2d.apply": "Flux rotates pairs (2i, 2i+1) per axis: the half-layout and RoPE-Mixed cases "
                                "are unsupported."}


def apply(x, coords, spec):
    if spec.freqs is not None:
        raise Unsupported("Flux's frequencies are fixed per axis: no RoPE-Mixed")
    if spec.layout != "interleaved":
        raise Unsupported("Flux rotates pairs (2i, 2i+1): interleaved layout only")
    d = spec.head_dim
    embed = FluxPosEmbed(theta=spec.base, axes_dim=[d // 2, d // 2])
    ids = coords.flip(-1) if tuple(spec.order) == ("y", "x") else coords  # the first axis first
    ids = ids.clone()
    ids[:, :spec.cls_tokens] = 0  # Flux's text-token ids: no rotation
    out = []
    for b in range(x.shape[0]):
        cos, sin = embed(ids[b])  # [S, d]
        out.append(apply_rotary_emb(x[b:b + 1], (cos, sin), use_real=True, use_real_unbind_dim=-1, sequence_dim=1))
    return torch.cat(out)
