"""fairseq's ``SinusoidalPositionalEmbedding.get_embedding``, as a table of given positions.

``emb = exp(arange(half_dim) * -(log(10000) / (half_dim - 1)))`` in float32, [sin | cos], and one
zero column when d_model is odd. fairseq supports only that layout and frequency rule, in 1-D:
other specs raise Unsupported (skipped, not failed).
"""

import math

import torch

from conformance import Unsupported


def table(positions, spec):
    if (spec.dims, spec.layout, spec.exponent) != (1, "concatenated", "2i/(d-2)"):
        raise Unsupported("fairseq: 1-D [sin | cos] with log-spaced timescales only")
    half_dim = spec.d_model // 2
    emb = math.log(spec.base) / (half_dim - 1)
    emb = torch.exp(torch.arange(half_dim, dtype=torch.float) * -emb)
    emb = positions.float().unsqueeze(1) * emb.unsqueeze(0)
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1)
    if spec.d_model % 2 == 1:
        emb = torch.cat([emb, torch.zeros(positions.shape[0], 1)], dim=1)
    return emb
