"""Case parameters handed to a user's adapter (the ``spec`` argument of ``sinusoidal.table``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SinusoidalSpec:
    """Parameters of one sinusoidal table case.

    d_model   width of a table row
    layout    "interleaved" (column 2i = sin(p w_i), 2i + 1 = cos(p w_i); Vaswani et al.) or
              "concatenated" ([sin | cos] halves; tensor2tensor, fairseq, Transformer-XL, MAE)
    exponent  "2i/d" (w_i = base**(-2i/d): Vaswani, Transformer-XL, MAE) or "2i/(d-2)"
              (w_i = base**(-i/(d/2 - 1)): tensor2tensor, fairseq)
    base      10000 in every released model
    dims      1, or 2 for a 2-D table (MAE): positions [n, 2]; the first d_model/2 columns are the
              1-D table of width d_model/2 of coordinate 0, the rest that of coordinate 1
    Odd d_model (1-D): interleaved ends with a sine column (ceil(d/2) frequencies, e_i = 2i/d);
    concatenated has h = floor(d/2) frequencies and appends a zero column, its 2i/d rule being
    i/h as zero-padded code computes it (diffusers get_timestep_embedding).
    """

    d_model: int
    layout: str = "interleaved"
    exponent: str = "2i/d"
    base: float = 10000.0
    dims: int = 1


def spec_of(params) -> SinusoidalSpec:
    return SinusoidalSpec(d_model=int(params["d_model"]), layout=str(params["layout"]),
                          exponent=str(params["exponent"]), base=float(params["base"]),
                          dims=int(params["dims"]))
