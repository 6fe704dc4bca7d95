"""diffusers' MAE-style sin-cos tables, ``get_1d_sincos_pos_embed_from_grid`` and
``get_2d_sincos_pos_embed_from_grid`` (diffusers.models.embeddings: what ``get_2d_sincos_pos_embed``,
PatchEmbed of DiT / PixArt / SD3 and the video models call with their patch grid), graded through
a thin adapter. Graded at diffusers 0.42.1.

The 1-D table is [sin | cos] halves of D/2 frequencies omega_i = 1 / 10000 ** (i / (D/2)) computed
in float64 (the default ``dtype`` off MPS): posref's concatenated layout, exponent "2i/d", base
10000. The 2-D table is the 1-D table of width D/2 of grid[0] followed by that of grid[1];
``get_2d_sincos_pos_embed`` stacks (w, h) in that order, so the spec's coordinate 0 is grid[0].
The library has no other base, no other exponent, no interleaved layout and no odd width (it
raises ValueError): those cases are Unsupported.

Adapter: ``table`` (sinusoidal.table). Needs ``diffusers`` (the ``test`` extra); the tests skip
without it.
"""

from diffusers.models.embeddings import get_1d_sincos_pos_embed_from_grid, get_2d_sincos_pos_embed_from_grid

from conformance import Unsupported

LIBRARY = "diffusers"
SURVEY = [("sinusoidal.table", "table")]
SURVEY_NOTES = {"sinusoidal.table": "diffusers' MAE tables are [sin | cos] halves at base 10000 with exponent 2i/d "
                                    "and an even width only: the other cases are unsupported."}


def table(positions, spec):
    if spec.layout != "concatenated":
        raise Unsupported("diffusers' sin-cos tables are [sin | cos] halves only")
    if spec.exponent != "2i/d" or spec.base != 10000.0:
        raise Unsupported("diffusers' sin-cos tables use 1 / 10000 ** (i / (D/2)) only")
    if spec.d_model % (2 * spec.dims):
        raise Unsupported("diffusers' sin-cos tables need an even width per coordinate")
    if spec.dims == 2:
        return get_2d_sincos_pos_embed_from_grid(spec.d_model, positions.T)
    return get_1d_sincos_pos_embed_from_grid(spec.d_model, positions)
