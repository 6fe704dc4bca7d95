"""Bug: frequencies with base 1000 instead of the spec's 10000.

Expected diagnosis: ``wrong-base`` ("frequencies with base 1000 instead of 10000").
"""

import dataclasses
from pathlib import Path

from conformance.loader import load_target

# The correct float32 implementation next door, with one thing changed below.
correct = load_target(f"{Path(__file__).resolve().parents[1] / 'vaswani_torch.py'}:table")

CODE = "wrong-base"
PROTOCOL = "sinusoidal.table"


def table(positions, spec):
    return correct(positions, dataclasses.replace(spec, base=spec.base / 10))  # BUG
