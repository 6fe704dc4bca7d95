"""Bug: ``partial_rotary_factor`` ignored, as MaxText's M-RoPE did: the ladder is built over the
whole head (base^(-2i/head_dim)) and the whole head is rotated, where Qwen3.5 rotates only its first
64 of 256 dims. Qwen3's interleaved rule still applies (h and w in their first slots, t elsewhere).

Whole-head cases pass. Qwen2's consecutive sections cannot cover a wider head, so partial qwen2
specs raise Unsupported. Adapter: apply (mrope.apply). Expected diagnosis: ``rotary-dim-mismatch``.
"""

import dataclasses
from pathlib import Path

from conformance import Unsupported
from conformance.loader import load_target

CODE = "rotary-dim-mismatch"
PROTOCOL = "mrope.apply"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'qwen_vl.py'}:apply")


def apply(x, positions, spec):
    if spec.rotary_dim != spec.head_dim and spec.variant != "qwen3":
        raise Unsupported("qwen2 sections over the whole head only")
    return correct(x, positions, dataclasses.replace(spec, rotary_dim=spec.head_dim))  # BUG: the fraction ignored
