"""Bug: the session computes rope_deltas at its first prefill and keeps them: a second generation
with a different prompt decodes with the first prompt's deltas. transformers' Qwen2-VL did so
across ``forward`` calls until PR 36013 and across ``generate`` calls until PR 43952 (the cached
``self.rope_deltas`` reused when nothing said the cache was new).

Adapter: decode (mrope.decode). Expected diagnosis: ``mrope-stale-deltas``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "mrope-stale-deltas"
PROTOCOL = "mrope.decode"

Session = load_target(f"{Path(__file__).resolve().parents[1] / 'decode_session.py'}:Session")


class StaleSession(Session):
    def prefill(self, token_types, grids):
        kept = self.deltas
        positions = super().prefill(token_types, grids)
        if kept is not None:
            self.deltas = kept  # BUG: the first prompt's deltas survive a new prefill
        return positions


def decode(spec):
    return StaleSession(spec)
