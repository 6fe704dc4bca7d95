"""Sinusoidal table in plain NumPy, graded with ``--framework numpy``: it takes the positions as a
numpy int64 array and returns a numpy array (no torch in it).

Written the way NumPy code in the wild builds the table (the "get_sinusoid_encoding_table"
snippet of many Transformer ports, MAE's ``get_1d_sincos_pos_embed_from_grid``): exponents and
angles in float64, ``angle[p, i] = p * base**(-e_i)``, then sin and cos placed interleaved or as
[sin | cos] halves (a zero column for an odd width, as zero-padded code does), a 2-D table being
the two coordinates' 1-D tables side by side. The table is returned in float32, as models store
it. Every spec the protocol has is supported.

    posref conform examples/sinusoidal/numpy_table.py:table --protocol sinusoidal.table --framework numpy
"""

import numpy as np

FRAMEWORK = "numpy"  # the array library its adapter takes and returns (posref conform --framework numpy)


def _exponents(n, d, spec):
    """e_i for i < n: 2i/d (i/h for [sin | cos] halves of width 2h), or i/(d/2 - 1)."""
    i = np.arange(n, dtype=np.float64)
    if spec.exponent == "2i/(d-2)":
        return i / (d // 2 - 1)
    return i / n if spec.layout == "concatenated" else 2.0 * i / d


def _one_dim(pos, d, spec):
    n = (d + 1) // 2 if spec.layout == "interleaved" else d // 2
    angle = pos.astype(np.float64)[:, None] * np.power(spec.base, -_exponents(n, d, spec))[None, :]
    out = np.zeros((pos.shape[0], d), dtype=np.float64)
    if spec.layout == "interleaved":
        out[:, 0::2] = np.sin(angle)
        out[:, 1::2] = np.cos(angle[:, : d // 2])
    else:
        out[:, :n] = np.sin(angle)
        out[:, n:2 * n] = np.cos(angle)
    return out


def table(positions, spec):
    """positions: numpy int64 [n] or [n, 2]; returns numpy float32 [n, d_model]."""
    if spec.dims == 2:
        half = spec.d_model // 2
        out = np.concatenate([_one_dim(positions[:, 0], half, spec), _one_dim(positions[:, 1], half, spec)], axis=1)
    else:
        out = _one_dim(positions, spec.d_model, spec)
    return out.astype(np.float32)
