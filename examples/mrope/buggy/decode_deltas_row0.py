"""Bug: one delta for the whole batch: every row decodes with row 0's rope_delta (a scalar kept
where HF keeps one per row), so a text-only row batched with an image row (or the reverse) is
shifted.

Adapter: decode (mrope.decode). Expected diagnosis: ``mrope-deltas-row0``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "mrope-deltas-row0"
PROTOCOL = "mrope.decode"

Session = load_target(f"{Path(__file__).resolve().parents[1] / 'decode_session.py'}:Session")


class Row0Session(Session):
    def decode(self, cache_position):
        out = super().decode(cache_position)
        return out[:, :1].expand_as(out).clone()  # BUG: row 0's position for every row


def decode(spec):
    return Row0Session(spec)
