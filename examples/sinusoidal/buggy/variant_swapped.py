"""Bug: [sin | cos] halves where the spec asks for the interleaved layout, and the reverse.

A port that copies tensor2tensor's ``concat([sin, cos])`` into a model trained with the paper's
interleaved table (or the reverse) moves every column. Expected diagnosis: ``variant-swapped``.
"""

import dataclasses
from pathlib import Path

from conformance.loader import load_target

# The correct float32 implementation next door, with one thing changed below.
correct = load_target(f"{Path(__file__).resolve().parents[1] / 'vaswani_torch.py'}:table")

CODE = "variant-swapped"
PROTOCOL = "sinusoidal.table"


def table(positions, spec):
    other = "concatenated" if spec.layout == "interleaved" else "interleaved"
    return correct(positions, dataclasses.replace(spec, layout=other))  # BUG
