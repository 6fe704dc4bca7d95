"""Bug: each section gets its own ladder, base ** (-arange(0, 2 n_k, 2) / (2 n_k)), as a port that
treats the three sections as three small RoPEs does, instead of slicing one global ladder.

Adapter: apply (mrope.apply). Expected diagnosis: ``section-rebased``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "section-rebased"
PROTOCOL = "mrope.apply"

rotate = load_target(f"{Path(__file__).resolve().parents[1] / 'qwen_vl.py'}:rotate")


def apply(x, positions, spec):
    if spec.variant != "qwen2":
        from conformance import Unsupported

        raise Unsupported("consecutive sections only")
    parts = []
    for k, n in enumerate(spec.mrope_section):
        inv = 1.0 / (spec.base ** (torch.arange(0, 2 * n, 2).float() / (2 * n)))  # BUG: its own ladder
        parts.append(positions[k][..., None].float() * inv)
    return rotate(x, torch.cat(parts, dim=-1), spec)
