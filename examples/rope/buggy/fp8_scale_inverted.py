"""Bug: the rotated values multiplied by the per-tensor scale instead of divided by it.

Scales come in two conventions: the dequantisation scale s (stored = x / s, FlashInfer's and vLLM's
``k_scale``) and its reciprocal (stored = x * inv_s). Code that takes one for the other multiplies
by s. Expected diagnosis: ``fp8-scale-inverted``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "fp8-scale-inverted"
PROTOCOL = "rope.apply_qk_fp8"

rotate = load_target(f"{Path(__file__).resolve().parents[1] / 'fp8_quantize.py'}:rotate")


def _quantize(x, scale):
    return (x * scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)  # BUG: x * scale, not x / scale


def apply_qk_fp8(q, k, positions, spec):
    return _quantize(rotate(q, positions, spec), spec.q_scale), _quantize(rotate(k, positions, spec), spec.k_scale)
