"""Bug: K evaluated at the token index (arange(seq_len)) instead of each token's position, as seed
document 002's code does; the rotation itself is right. Decode steps and rows at offsets get K(0),
K(1), ... instead of K(m).

Adapter: apply (gaussian_rope.apply). Expected diagnosis: ``kernel-mismatch`` ("K is evaluated at
the token index (arange(seq)) instead of the position").
"""

from dataclasses import replace
from pathlib import Path

import torch

from conformance.loader import load_target

# What posref must report for this file, graded as <file>:apply on the gaussian_rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "kernel-mismatch"
PROTOCOL = "gaussian_rope.apply"

_correct = load_target(f"{Path(__file__).resolve().parents[1] / 'gaussian_rope_torch.py'}:apply")
_kernel = load_target(f"{Path(__file__).resolve().parents[1] / 'gaussian_rope_torch.py'}:kernel")


NO_KERNEL = {"a1": 1.0, "a2": 0.0, "s1": float("inf"), "s2": 1.0}  # K = 1: the rotation alone


def apply(x, positions, spec):
    rotated = _correct(x.float(), positions, replace(spec, kernel=NO_KERNEL))
    index = torch.arange(positions.shape[1]).expand_as(positions)
    k = _kernel(index, spec.kernel)  # BUG: the token index, not the position
    return (rotated * k[:, :, None, None]).to(x.dtype)
