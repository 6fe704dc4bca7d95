"""Bug: the log computed in bfloat16 (the positions cast with the model's dtype).

Adapter: bucket (t5.bucket). Expected diagnosis: ``bucket-log-precision``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "bucket-log-precision"
PROTOCOL = "t5.bucket"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'hf_t5.py'}:bucket")


def bucket(relative_positions, spec):
    return correct(relative_positions, spec, log_dtype=torch.bfloat16)  # BUG
