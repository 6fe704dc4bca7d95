"""Bug: a 2-D table built as timm's ``build_sincos2d_pos_embed`` does by default
(``interleave_sin_cos=False``): bands 1 / base**(k / (d/4)) in float32, angles [n, 2, d/4] for the
two coordinates, then ``stack([sin, cos], dim=1).flatten(1)``, i.e. columns
[sin(c0) | sin(c1) | cos(c0) | cos(c1)]. The MAE table the case asks for is
[sin(c0) | cos(c0) | sin(c1) | cos(c1)]: the same values in another block order (timm itself is
not installed here: it would replace torch).

timm's function builds 2-D tables only: 1-D cases are Unsupported.

Adapter: table (sinusoidal.table). Expected diagnosis: ``block-order``.
"""

import torch

from conformance import Unsupported

CODE = "block-order"
PROTOCOL = "sinusoidal.table"


def table(positions, spec):
    if spec.dims != 2 or spec.layout != "concatenated" or spec.exponent != "2i/d":
        raise Unsupported("timm's build_sincos2d_pos_embed: 2-D [sin | cos] tables with bands base**(-4k/d)")
    pos_dim = spec.d_model // 4
    bands = 1.0 / (spec.base ** (torch.arange(pos_dim, dtype=torch.float32) / pos_dim))
    grid = positions.to(torch.float32)  # [n, 2]: the two coordinates of each token
    pos2 = grid.unsqueeze(-1) * bands  # [n, 2, d/4]
    return torch.stack([torch.sin(pos2), torch.cos(pos2)], dim=1).flatten(1)  # BUG: sin, sin, cos, cos
