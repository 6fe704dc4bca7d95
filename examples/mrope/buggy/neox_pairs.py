"""Bug: an M-RoPE kernel hard-coded to NEOX pairs (j, j + r/2) whatever the model's layout, as
vLLM's Triton M-RoPE kernel was: GLM-4V pairs (2i, 2i + 1) (``rotate_half_llm``), so every
GLM-4V token at a nonzero position is rotated wrong, while every Qwen case passes.

Otherwise Qwen2-VL's / Qwen3-VL's computation (examples/mrope/qwen_vl.py), rotary_dim honoured.
Adapter: apply (mrope.apply). Expected diagnosis: ``layout-swapped``.
"""

import dataclasses
from pathlib import Path

from conformance.loader import load_target

CODE = "layout-swapped"
PROTOCOL = "mrope.apply"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'qwen_vl.py'}:apply")


def apply(x, positions, spec):
    return correct(x, positions, dataclasses.replace(spec, layout="half"))  # BUG: the layout ignored
