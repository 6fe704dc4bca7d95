"""The records RoPE's catalog is made of: one test (``RopeTest``, ``QkTest`` for rope.apply_qk) and a
configuration's parameters (``rope_params``), as reference.golden.catalog reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from reference.golden.catalog import TestSpec


LAYOUT_FLAG = {"half": "HalfSplit", "interleaved": "Interleaved"}


@dataclass(frozen=True)
class RopeTest(TestSpec):
    """One RoPE case. ``positions`` holds one tuple per batch row (int64 in the vectors)."""

    positions: tuple[tuple[int, ...], ...] = ()
    heads: int = 2
    x: tuple | None = None  # fixed input [b][s][h][d] instead of seeded random values
    seq_len: int | None = None  # default: max position + 1
    # How rope.apply hands the case to the adapter (conformance.rope.spec): "bshd", "bhsd" or
    # "thd" (token-flattened; the case's one row holds the packed sequences, cu_seqlens their
    # bounds). The stored arrays are always [b, s, h, d].
    tensor_layout: str = "bshd"
    cu_seqlens: tuple | None = None
    inplace: bool = False  # the adapter may write its result into x


def rope_params(head_dim, base=10000.0, layout="half", rotary_dim=None, scaling=None) -> dict:
    return {
        "head_dim": head_dim,
        "rotary_dim": head_dim if rotary_dim is None else rotary_dim,
        "base": float(base),
        "layout": layout,
        "scaling": scaling,
    }


@dataclass(frozen=True)
class QkTest(RopeTest):
    """A rope.apply_qk case: q has ``heads`` heads, k ``kv_heads`` (1 = multi-query)."""

    kv_heads: int = 1
