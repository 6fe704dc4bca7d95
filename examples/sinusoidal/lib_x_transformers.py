"""lucidrains' x-transformers ``ScaledSinusoidalEmbedding`` (x_transformers.x_transformers), graded
through a thin adapter. Graded at x-transformers 2.31.10.

The module builds [sin | cos] halves of D/2 frequencies theta ** -(i / (D/2)) in float32 (posref's
concatenated layout, exponent "2i/d", any base), at the given positions, times a learned gain
``scale`` (an ``nn.Parameter`` initialised to D^-0.5). The table is graded with the gain at 1:
the adapter sets the parameter as a trained checkpoint sets it. A 2-D table is two 1-D tables of
width D/2 side by side (MAE's rule), each from its own module. The library has no interleaved
layout, no 2i/(d-2) exponent and no odd width (it asserts D even): Unsupported.

Adapter: ``table`` (sinusoidal.table). Needs ``x-transformers`` (the ``test`` extra); the tests
skip without it.
"""

import torch
from x_transformers.x_transformers import ScaledSinusoidalEmbedding

from conformance import Unsupported

LIBRARY = "x-transformers"
SURVEY = [("sinusoidal.table", "table")]
SURVEY_NOTES = {"sinusoidal.table": "ScaledSinusoidalEmbedding makes [sin | cos] halves with exponent 2i/d and an "
                                    "even width only: the other cases are unsupported."}


def _one_dim(positions, d, spec):
    module = ScaledSinusoidalEmbedding(d, theta=spec.base).to(positions.device)
    with torch.no_grad():
        module.scale.fill_(1.0)  # the learned gain, graded at 1
        return module(positions[None, :, None], pos=positions)


def table(positions, spec):
    if spec.layout != "concatenated":
        raise Unsupported("ScaledSinusoidalEmbedding makes [sin | cos] halves only")
    if spec.exponent != "2i/d":
        raise Unsupported("ScaledSinusoidalEmbedding uses theta ** -(i / (D/2)) (exponent 2i/d) only")
    if spec.d_model % (2 * spec.dims):
        raise Unsupported("ScaledSinusoidalEmbedding needs an even width per coordinate")
    if spec.dims == 2:
        half = spec.d_model // 2
        return torch.cat([_one_dim(positions[:, 0], half, spec), _one_dim(positions[:, 1], half, spec)], dim=-1)
    return _one_dim(positions, spec.d_model, spec)
