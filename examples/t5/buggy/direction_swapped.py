"""Bug: the relative position taken as query minus key.

Adapter: bucket (t5.bucket). Expected diagnosis: ``bucket-direction``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "bucket-direction"
PROTOCOL = "t5.bucket"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'hf_t5.py'}:bucket")


def bucket(relative_positions, spec):
    return correct(relative_positions, spec, sign=-1)  # BUG
