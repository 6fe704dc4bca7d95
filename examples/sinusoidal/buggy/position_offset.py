"""Bug: positions counted from 1 (the table evaluated at p + 1).

A port of fairseq that adds padding_idx + 1 to positions that already include it, or a loop
that starts at 1. Expected diagnosis: ``position-offset`` ("positions shifted by +1").
"""

from pathlib import Path

from conformance.loader import load_target

# The correct float32 implementation next door, with one thing changed below.
correct = load_target(f"{Path(__file__).resolve().parents[1] / 'vaswani_torch.py'}:table")

CODE = "position-offset"
PROTOCOL = "sinusoidal.table"


def table(positions, spec):
    return correct(positions + 1, spec)  # BUG
