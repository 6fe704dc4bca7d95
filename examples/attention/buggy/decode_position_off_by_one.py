"""Bug (tt-metal's Falcon decode): each decode token rotated at one position past the right one
(the cache length + 1), and its key cached so: every distance from a decode query to the prompt's
keys is one too long.

Adapter: decode (attention.decode). Expected diagnosis: ``decode-position-off-by-one``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "decode-position-off-by-one"
PROTOCOL = "attention.decode"
OPTIONS = {"cases": "attention.decode/*/default-left-padding"}

_LAYER = load_target(f"{Path(__file__).resolve().parents[1] / 'decode_sdpa.py'}:DecodeLayer")


class PositionPastCache(_LAYER):
    def forward(self, hidden, positions, attention_mask):
        if self.keys is not None:
            positions = positions + 1  # BUG: the decode position one past the cache
        return super().forward(hidden, positions, attention_mask)


def decode(weights, spec):
    return PositionPastCache(weights, spec)
