"""Bug: Qwen2-VL's consecutive sections applied to every model, also to Qwen3-VL's interleaved
M-RoPE.

Adapter: apply (mrope.apply). Expected diagnosis: ``variant-swapped``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "variant-swapped"
PROTOCOL = "mrope.apply"

_base = Path(__file__).resolve().parents[1] / "qwen_vl.py"
stream_angles = load_target(f"{_base}:stream_angles")
select = load_target(f"{_base}:select")
rotate = load_target(f"{_base}:rotate")


def apply(x, positions, spec):
    return rotate(x, select(stream_angles(positions, spec), spec, variant="qwen2"), spec)  # BUG: always qwen2
