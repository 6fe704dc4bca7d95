"""Bug (NumPy): [cos | sin] halves where the case has [sin | cos], as NumPy ports write
``np.concatenate([np.cos(angle), np.sin(angle)], axis=1)``; interleaved tables are right.

Graded with ``--framework numpy`` (OPTIONS): the adapter takes and returns numpy arrays.
Expected diagnosis: ``block-order``.
"""

from pathlib import Path

import numpy as np

from conformance.loader import load_target

# The correct NumPy table next door, with one thing changed below.
correct = load_target(f"{Path(__file__).resolve().parents[1] / 'numpy_table.py'}:table")

CODE = "block-order"
PROTOCOL = "sinusoidal.table"
OPTIONS = {"framework": "numpy"}


def _swap_halves(block, d):
    n = d // 2
    out = block.copy()
    out[:, :n], out[:, n:2 * n] = block[:, n:2 * n], block[:, :n]  # BUG: cos first
    return out


def table(positions, spec):
    out = correct(positions, spec)
    if spec.layout != "concatenated":
        return out
    if spec.dims == 2:
        half = spec.d_model // 2
        return np.concatenate([_swap_halves(out[:, :half], half), _swap_halves(out[:, half:], half)], axis=1)
    return _swap_halves(out, spec.d_model)
