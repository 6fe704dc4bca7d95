"""The spec of a rotary case and how its tensors are handed over: shared by the rotary families.

``RopeSpec`` is the ``spec`` argument of rope.apply, rope.apply_qk and of the families that extend
RoPE's case (gaussian_rope's spec adds the kernel); ``to_layout``, ``layout_shape`` and
``from_layout`` move x and positions between the canonical [batch, seq, heads, head_dim] frame and
the adapter's ``tensor_layout`` (bshd, bhsd, thd).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import numpy as np


@dataclass(frozen=True)
class RopeSpec:
    """Parameters of one RoPE case.

    head_dim    size of the last axis of x
    rotary_dim  number of rotated features (even, <= head_dim); the tail passes through
    base        theta_i = base ** (-2 i / rotary_dim)
    layout      "half" (pairs (j, j + rotary_dim/2), GPT-NeoX / Llama rotate_half) or
                "interleaved" (pairs (2i, 2i+1), GPT-J / Meta rotate_every_two)
    scaling     None, or a dict in HF ``rope_parameters`` form, e.g.
                {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
                (types and keys: reference/numerics/scaling/). Its attention factor is graded as HF
                applies it: a multiplier on cos and sin (docs/design.md, "RoPE scaling").
    seq_len     the sequence length the case models (dynamic scalings depend on it)
    tensor_layout  how x and positions are handed over (rope.apply, rope.apply_qk):
                "bshd"  x [batch, seq, heads, head_dim], positions [batch, seq] (default)
                "bhsd"  x [batch, heads, seq, head_dim] (HF attention's layout), positions
                        [batch, seq]
                "thd"   x [total_tokens, heads, head_dim], positions [total_tokens]: sequences
                        packed along the token axis, sequence k being tokens cu_seqlens[k] to
                        cu_seqlens[k+1] - 1 (packed varlen batches)
                An adapter that does not accept a layout raises conformance.Unsupported: those
                cases are skipped with the reason, never failed.
    cu_seqlens  the sequence bounds of a "thd" case (a tuple of ints starting at 0), else None
    inplace     True: the adapter may write its result into x (an in-place kernel) and return
                x or None; the runner grades the written x and passes a fresh x to every call.
                False: x must come back unchanged (input-mutated otherwise).
    """

    head_dim: int
    rotary_dim: int
    base: float = 10000.0
    layout: str = "half"
    scaling: Optional[Mapping[str, Any]] = field(default=None, hash=False)
    seq_len: int = 0
    tensor_layout: str = "bshd"
    cu_seqlens: Optional[tuple] = None
    inplace: bool = False


TENSOR_LAYOUTS = ("bshd", "bhsd", "thd")


def to_layout(x, positions, spec):
    """x [b, s, h, d] and positions [b, s] (numpy or torch) as the adapter gets them in
    spec.tensor_layout (see RopeSpec). A "thd" case's canonical arrays have one row."""
    layout = spec.tensor_layout
    if layout == "bshd":
        return x, positions
    if layout == "bhsd":
        return x.transpose(1, 2) if hasattr(x, "contiguous") else np.swapaxes(x, 1, 2), positions
    if layout == "thd":
        if x.shape[0] != 1:
            raise ValueError(f"tensor_layout: a thd case holds one packed row, got {x.shape[0]}")
        return x[0], positions[0]
    raise ValueError(f"tensor_layout must be one of {', '.join(TENSOR_LAYOUTS)}, got {layout!r}")


def layout_shape(shape, spec) -> tuple:
    """The adapter-side shape of a canonical [b, s, h, d] shape."""
    b, s, h, d = shape
    return {"bshd": (b, s, h, d), "bhsd": (b, h, s, d), "thd": (s, h, d)}[spec.tensor_layout]


def from_layout(out, spec):
    """An adapter-side output (numpy) back in the canonical [b, s, h, d] frame."""
    if spec.tensor_layout == "bhsd":
        return np.swapaxes(out, 1, 2)
    if spec.tensor_layout == "thd":
        return out[None]
    return out
