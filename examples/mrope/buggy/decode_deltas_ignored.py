"""Bug: decode steps get t = h = w = cache_position, as a text-only RoPE port numbers tokens: the
prompt's rope_deltas are never added, so after an image (which spans fewer positions than tokens)
every generated token sits too far on.

Adapter: decode (mrope.decode). Expected diagnosis: ``mrope-deltas-ignored``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "mrope-deltas-ignored"
PROTOCOL = "mrope.decode"

Session = load_target(f"{Path(__file__).resolve().parents[1] / 'decode_session.py'}:Session")


class IndexSession(Session):
    def decode(self, cache_position):
        rows = self.deltas.shape[0]
        return torch.full((3, rows, 1), cache_position, dtype=torch.int64)  # BUG: no delta


def decode(spec):
    return IndexSession(spec)
