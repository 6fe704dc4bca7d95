"""Bug: positions counted from 1 (arange(1, seq_len + 1)): distances are unchanged, but the
normalizer becomes psi(max(i + 1, L)), wrong for every query past the threshold.

Adapter: bias (fire.bias). Expected diagnosis: ``fire-one-based-positions``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "fire-one-based-positions"
PROTOCOL = "fire.bias"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'fire_style.py'}:bias")


def bias(q_positions, k_positions, params, spec):
    return correct(q_positions + 1, k_positions + 1, params, spec)  # BUG: 1-based
