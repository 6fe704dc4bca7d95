"""Bug: one ladder base^(-2i/d) over all d/2 pairs, as 1-D RoPE has it, instead of the same
base^(-4k/d) ladder of d/4 entries for each axis.

Adapter: apply (rope2d.apply). Expected diagnosis: ``axis-ladder``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "axis-ladder"
PROTOCOL = "rope2d.apply"

_base = Path(__file__).resolve().parents[1] / "rope_vit.py"
ladder = load_target(f"{_base}:ladder")
rotate = load_target(f"{_base}:rotate")


def apply(x, coords, spec):
    if spec.freqs is not None:
        from conformance import Unsupported

        raise Unsupported("axial form only")
    c = coords.flip(-1) if tuple(spec.order) == ("y", "x") else coords
    theta = ladder(spec, spec.head_dim)  # BUG: d/2 frequencies over all pairs
    q = spec.head_dim // 4
    ang = torch.cat((c[..., :1].float() * theta[:q], c[..., 1:].float() * theta[q:]), dim=-1)
    return rotate(x, ang, spec)
