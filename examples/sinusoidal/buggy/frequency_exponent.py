"""Bug: tensor2tensor's frequency rule base**(-i/(d/2 - 1)) where the spec has base**(-2i/d), and
the reverse: every frequency but the first slightly off, the exponent's denominator off by 2.

Expected diagnosis: ``frequency-exponent``.
"""

import dataclasses
from pathlib import Path

from conformance.loader import load_target

# The correct float32 implementation next door, with one thing changed below.
correct = load_target(f"{Path(__file__).resolve().parents[1] / 'vaswani_torch.py'}:table")

CODE = "frequency-exponent"
PROTOCOL = "sinusoidal.table"


def table(positions, spec):
    other = "2i/(d-2)" if spec.exponent == "2i/d" else "2i/d"
    if spec.d_model // (2 * spec.dims) < 2:
        return correct(positions, spec)
    return correct(positions, dataclasses.replace(spec, exponent=other))  # BUG
