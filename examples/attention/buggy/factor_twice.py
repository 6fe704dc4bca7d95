"""Bug: the YaRN attention factor is applied twice: cos and sin already carry it (HF's
attention_scaling), and the logits are multiplied by its square again as a softmax temperature
(YaRN paper eq. 21), so they carry f^4 instead of f^2.

Adapter: forward (attention.forward). Expected diagnosis: ``attention-factor-twice``.
"""

import math
from pathlib import Path

from conformance.loader import load_target

CODE = "attention-factor-twice"
PROTOCOL = "attention.forward"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'sdpa_rope.py'}:forward")


def forward(hidden, weights, positions, spec):
    scaling = dict(spec.scaling or {})
    f = 0.1 * math.log(scaling["factor"]) + 1.0 if scaling.get("rope_type") == "yarn" else 1.0
    return correct(hidden, weights, positions, spec, scale=f * f * spec.scale)  # BUG: f again
