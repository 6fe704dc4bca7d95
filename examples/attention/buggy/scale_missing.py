"""Bug: the logits are not divided by sqrt(head_dim) (SDPA called with scale=1, as code that
pre-scaled q once and then dropped that line does).

Adapter: forward (attention.forward). Expected diagnosis: ``attention-scale-missing``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "attention-scale-missing"
PROTOCOL = "attention.forward"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'sdpa_rope.py'}:forward")


def forward(hidden, weights, positions, spec):
    return correct(hidden, weights, positions, spec, scale=1.0)  # BUG: no 1/sqrt(d)
