"""Where each frequency's sin and cos go in a row of a sinusoidal table (one function per layout).

For a 1-D table of width d with frequencies w_0 .. w_(n-1):

- ``interleaved`` (Vaswani et al. 2017, sec. 3.5): column 2i = sin(p w_i), column 2i + 1 =
  cos(p w_i); n = ceil(d / 2). With an odd d the last column is a sine (the common
  ``pe[:, 0::2] = sin(...)``, ``pe[:, 1::2] = cos(...[: d // 2])`` code).
- ``concatenated`` (tensor2tensor ``get_timing_signal_1d``, fairseq
  ``SinusoidalPositionalEmbedding``, Transformer-XL ``PositionalEmbedding``, MAE): columns
  0 .. h-1 = sin, h .. 2h-1 = cos, h = floor(d / 2); with an odd d the last column is 0
  (fairseq and tensor2tensor pad one zero column).

``columns(d, layout)`` returns, per column, the frequency index and what is there: 0 sin,
1 cos, 2 the zero pad. ``frequency_count(d, layout)`` is n.
"""

from __future__ import annotations

import numpy as np

SIN, COS, ZERO = 0, 1, 2


def frequency_count(d: int, layout: str) -> int:
    return (d + 1) // 2 if layout == "interleaved" else d // 2


def interleaved_columns(d: int):
    col = np.arange(d)
    return col // 2, np.where(col % 2 == 0, SIN, COS)


def concatenated_columns(d: int):
    h = d // 2
    col = np.arange(d)
    freq = np.where(col < h, col, col - h)
    kind = np.where(col < h, SIN, np.where(col < 2 * h, COS, ZERO))
    return np.where(kind == ZERO, 0, freq), kind


LAYOUTS = {"interleaved": interleaved_columns, "concatenated": concatenated_columns}


def columns(d: int, layout: str):
    """(frequency index int64 [d], kind int64 [d]: SIN, COS or ZERO)."""
    freq, kind = LAYOUTS[layout](d)
    return freq.astype(np.int64), kind.astype(np.int64)


def arrange(cos, sin, d: int, layout: str) -> np.ndarray:
    """The table rows [..., d] from cos, sin [..., n] (pure data movement: no rounding).

    Strided slice copies, one per kind of column, place exactly the values ``columns`` names
    (a gather through the column map would make several passes over the whole table).
    """
    out = np.empty(cos.shape[:-1] + (d,))
    if layout == "interleaved":  # column 2i sin, 2i + 1 cos; an odd d ends on a sine
        out[..., 0::2] = sin[..., : (d + 1) // 2]
        out[..., 1::2] = cos[..., : d // 2]
    else:  # sin, cos, and a zero column for an odd d
        h = d // 2
        out[..., :h] = sin[..., :h]
        out[..., h:2 * h] = cos[..., :h]
        out[..., 2 * h:] = 0.0
    return out


def column_plan(d: int, layout: str):
    """((s0, ds, ns, c0, dc, nc), zero_from): sin i goes to column s0 + i ds (i < ns), cos i to
    c0 + i dc (i < nc), columns from zero_from on are the zero pad: ``arrange``'s placement, for
    kernels that store cos/sin into the table directly (cpu_kernels.cos_sin_columns)."""
    if layout == "interleaved":
        return (0, 2, (d + 1) // 2, 1, 2, d // 2), d
    h = d // 2
    return (0, 1, h, h, 1, h), 2 * h
