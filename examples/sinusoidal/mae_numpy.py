"""MAE's 2-D sin-cos table, computed the way MAE does: NumPy float64.

MAE (``util/pos_embed.py``) builds ``omega = 1 / 10000**(arange(D/2) / (D/2))`` in float64, takes
the outer product with the float32 grid coordinates and concatenates [sin | cos] per coordinate:
the first d_model/2 columns for coordinate 0 (the column w of its meshgrid), the rest for
coordinate 1. Only that variant: any other spec raises Unsupported, so posref skips those cases.
"""

import numpy as np
import torch

from conformance import Unsupported


def _one_dim(d, pos):
    omega = np.arange(d // 2, dtype=np.float64) / (d / 2.0)
    omega = 1.0 / 10000**omega
    out = np.einsum("m,d->md", pos.astype(np.float32).astype(np.float64), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def table(positions, spec):
    if (spec.dims, spec.layout, spec.exponent, spec.base) != (2, "concatenated", "2i/d", 10000.0):
        raise Unsupported("MAE's 2-D [sin | cos] table with base 10000 only")
    pos = positions.numpy()
    half = spec.d_model // 2
    return torch.from_numpy(np.concatenate([_one_dim(half, pos[:, 0]), _one_dim(half, pos[:, 1])], axis=1))
