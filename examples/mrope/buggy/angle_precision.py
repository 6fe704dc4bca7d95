"""Bug: M-RoPE's angles p_s(i) theta_i are computed in bfloat16 (positions and inv_freq cast to the
model's dtype before the product, as rotary buffers that followed ``model.to(torch.bfloat16)`` give):
bfloat16 keeps 8 significant bits, so the angle error grows with the position (position 4090 itself
rounds to 4096).

Otherwise Qwen2-VL's / Qwen3-VL's computation (examples/mrope/qwen_vl.py). Adapter: apply
(mrope.apply). Expected diagnosis: ``angle-precision`` ("angles computed in bfloat16").
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "angle-precision"
PROTOCOL = "mrope.apply"

_qwen = Path(__file__).resolve().parents[1] / "qwen_vl.py"
select = load_target(f"{_qwen}:select")
rotate = load_target(f"{_qwen}:rotate")


def apply(x, positions, spec):
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.int64).float() / r))
    angles = positions[..., None].to(torch.bfloat16) * inv_freq.to(torch.bfloat16)  # BUG: bfloat16 product
    return rotate(x, select(angles.float(), spec), spec)
