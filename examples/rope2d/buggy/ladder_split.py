"""Bug: the frequencies built as Pixtral's 2-D RoPE builds them (transformers'
``PixtralRotaryEmbedding``, mistral-inference ``precompute_freqs_cis_2d``): one fine ladder
f_j = 1 / base^(2j/d) over d/2 entries, the first axis on f[::2] = base^(-4k/d) and the second on
f[1::2] = base^(-(4k+2)/d). The case (RoPE-ViT, Qwen2-VL's vision encoder) turns both axes by the
same ladder base^(-4k/d): the second axis here reads the other half of the fine ladder.

Adapter: apply (rope2d.apply). Expected diagnosis: ``ladder-split``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "ladder-split"
PROTOCOL = "rope2d.apply"

vit = Path(__file__).resolve().parents[1] / "rope_vit.py"
rotate = load_target(f"{vit}:rotate")


def apply(x, coords, spec):
    if spec.freqs is not None:
        return load_target(f"{vit}:apply")(x, coords, spec)
    d = spec.head_dim
    fine = 1.0 / (spec.base ** (torch.arange(0, d, 2).float() / d))
    c = coords.flip(-1) if tuple(spec.order) == ("y", "x") else coords
    ang = torch.cat((c[..., :1].float() * fine[::2], c[..., 1:].float() * fine[1::2]), dim=-1)  # BUG: odd half
    return rotate(x, ang, spec)
