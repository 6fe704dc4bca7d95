"""diffusers' ``get_timestep_embedding`` (the DDPM / Stable Diffusion timestep table), graded
through a thin adapter as a user porting a model would set it up.

The library builds [sin | cos] halves of h = floor(d / 2) frequencies, exp(-ln(max_period) * i /
(h - downscale_freq_shift)) in float32 (the exponent rounded twice, after ln(base) itself is
rounded to float32), angles ``timesteps.float() * w`` and, for an odd d, one zero column at the
end. So the spec's exponent "2i/d" is ``downscale_freq_shift=0`` (e_i = i / h; for an odd d_model
this is posref's odd-d rule), "2i/(d-2)" is ``downscale_freq_shift=1`` (e_i = i / (h - 1), the
library's default), and the [sin | cos] order is ``flip_sin_to_cos=False`` (True gives [cos |
sin], the order of Stable Diffusion's UNet). A 2-D table is the two 1-D tables of width d / 2
side by side, as MAE's ``get_2d_sincos_pos_embed_from_grid`` builds it. The interleaved layout is
not what the library makes: Unsupported.

Adapter: ``table`` (sinusoidal.table). Needs ``diffusers`` (the ``test`` extra); the tests skip
without it.
"""

import torch
from diffusers.models.embeddings import get_timestep_embedding

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "diffusers"
SURVEY = [
    ("sinusoidal.table", "table"),
]

SHIFT = {"2i/d": 0, "2i/(d-2)": 1}


def _one_dim(timesteps, d, spec):
    return get_timestep_embedding(timesteps, d, flip_sin_to_cos=False, downscale_freq_shift=SHIFT[spec.exponent],
                                  max_period=spec.base)


def table(positions, spec):
    if spec.layout != "concatenated":
        raise Unsupported("get_timestep_embedding makes [sin | cos] halves only")
    if spec.dims == 2:
        half = spec.d_model // 2
        return torch.cat([_one_dim(positions[:, 0], half, spec), _one_dim(positions[:, 1], half, spec)], dim=-1)
    return _one_dim(positions, spec.d_model, spec)
