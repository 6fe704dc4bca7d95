"""Case parameters handed to a user's adapter (the ``spec`` argument of every protocol): a
:class:`RopeSpec` (conformance.core.rotation_spec, shared with the rotary families that extend it)."""

from __future__ import annotations

import copy

from conformance.core.rotation_spec import RopeSpec


def spec_of(params) -> RopeSpec:
    """The RopeSpec of a golden case's parameters (a fresh copy of ``scaling``: adapters get it)."""
    return RopeSpec(
        head_dim=int(params["head_dim"]),
        rotary_dim=int(params.get("rotary_dim") or params["head_dim"]),
        base=float(params.get("base", 10000.0)),
        layout=str(params.get("layout", "half")),
        scaling=copy.deepcopy(params.get("scaling")),
        seq_len=int(params.get("seq_len") or 0),
        tensor_layout=str(params.get("tensor_layout") or "bshd"),
        cu_seqlens=None if params.get("cu_seqlens") is None else tuple(int(c) for c in params["cu_seqlens"]),
        inplace=bool(params.get("inplace", False)),
    )

