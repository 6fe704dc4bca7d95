"""Bug: the variants swapped: the power kernel computed for a log model and the log kernel for a
power model (a config string read the wrong way round).

Adapter: bias (kerple.bias). Expected diagnosis: ``kerple-variant-swapped``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "kerple-variant-swapped"
PROTOCOL = "kerple.bias"

_STYLE = Path(__file__).resolve().parents[1] / "kerple_megatron_style.py"
correct = load_target(f"{_STYLE}:bias")


class _Swapped:
    def __init__(self, spec):
        self.variant = "power" if spec.variant == "log" else "log"  # BUG
        self.r1, self.r2, self.causal = spec.r1, spec.r2, spec.causal


def bias(q_positions, k_positions, spec):
    return correct(q_positions, k_positions, _Swapped(spec))
