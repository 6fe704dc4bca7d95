"""Bug: num_buckets not halved for bidirectional bucketing.

Adapter: bucket (t5.bucket). Expected diagnosis: ``bucket-not-halved``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "bucket-not-halved"
PROTOCOL = "t5.bucket"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'hf_t5.py'}:bucket")


def bucket(relative_positions, spec):
    return correct(relative_positions, spec, num_buckets=2 * spec.num_buckets if spec.bidirectional else None)  # BUG
