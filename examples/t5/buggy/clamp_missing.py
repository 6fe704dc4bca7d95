"""Bug: the clamp to the last bucket missing, as in candle's T5 ``relative_position_bucket``:
distances past max_distance get log buckets past the direction's last one (up to and beyond
num_buckets), which index past the end of the bias table or land in the other direction's
buckets.

Adapter: bucket (t5.bucket). Expected diagnosis: ``bucket-clamp-missing``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "bucket-clamp-missing"
PROTOCOL = "t5.bucket"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'hf_t5.py'}:bucket")


def bucket(relative_positions, spec):
    return correct(relative_positions, spec, clamp=False)  # BUG
