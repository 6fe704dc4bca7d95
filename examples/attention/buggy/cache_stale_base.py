"""Bug (HF #25104): keys rotated once, when they enter the cache, with the table of that call's
length (``dynamic_rope_update`` recomputes the dynamic-NTK base from the call's largest position),
and kept so: after original_max_position_embeddings the queries turn with the current base while
the cached keys keep the bases of their own steps.

Adapter: decode (attention.decode). Expected diagnosis: ``cache-stale-base``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "cache-stale-base"
PROTOCOL = "attention.decode"
OPTIONS = {"cases": "attention.decode/*/dynamic-ntk-recompute"}

_LAYER = load_target(f"{Path(__file__).resolve().parents[1] / 'decode_sdpa.py'}:DecodeLayer")


class RotateOnWrite(_LAYER):
    """Caches keys after RoPE, each step's rotated with its own call's table."""

    def table_length(self) -> int:
        return int(self.call_positions.max()) + 1  # BUG: the call's length, for its keys kept in the cache

    def store(self, k, v, positions):
        self.call_positions = positions
        super().store(k, v, positions)
        rotated = self.rotate(k, positions, self.table_length())
        self.rotated = rotated if getattr(self, "rotated", None) is None else torch.cat((self.rotated, rotated), dim=2)

    def cached_keys(self, seq_len):
        return self.rotated


def decode(weights, spec):
    return RotateOnWrite(weights, spec)
