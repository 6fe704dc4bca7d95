"""Bug: fairseq's causal m j used for bidirectional attention too. For causal attention it differs
from -m (i - j) by a per-row constant; without the mask it keeps growing toward later keys.

Adapter: bias (alibi.bias). Expected diagnosis: ``bias-varies-in-row``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "bias-varies-in-row"
PROTOCOL = "alibi.bias"

slopes = load_target(f"{Path(__file__).resolve().parents[1] / 'fairseq_style.py'}:slopes")


def bias(q_positions, k_positions, spec):
    m = slopes(spec)[:, None, None]
    return (m * k_positions[None, None, :].float()).expand(-1, q_positions.numel(), -1)  # BUG: also bidirectional
