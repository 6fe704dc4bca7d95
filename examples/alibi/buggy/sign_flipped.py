"""Bug: +m |i - j| (bidirectional) or -m j (causal): the bias grows with the distance.

Adapter: bias (alibi.bias). Expected diagnosis: ``bias-sign``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "bias-sign"
PROTOCOL = "alibi.bias"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'fairseq_style.py'}:bias")


def bias(q_positions, k_positions, spec):
    return -correct(q_positions, k_positions, spec)  # BUG
