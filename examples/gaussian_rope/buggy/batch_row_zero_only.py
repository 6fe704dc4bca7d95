"""Bug: Gaussian-kernel RoPE built on a fused RoPE kernel that rotates only batch row 0 when every
row holds one token.

K(m) is applied in torch from each token's own position; the rotation comes from a fused kernel
with the documented fault of a public array library (issue 14): at a continuous-batching decode
step (B > 1 rows of one token each) only row 0 is rotated, rows 1.. come back unrotated (still
scaled by their K(m)). Prefill and batch-1 decode are right, so every catalog case passes; the
shape matrix's batched-decode cases catch it. With K(m) divided out, RoPE's diagnosis names it.

Adapter: apply (gaussian_rope.apply). Expected diagnosis: ``batch-row-zero-only``.
"""

from dataclasses import replace
from pathlib import Path

from conformance.loader import load_target

# What posref must report for this file, graded as <file>:apply (tests/test_family_contract.py):
# the batched-decode cases of the default shape-matrix sample (every one has B > 1).
CODE = "batch-row-zero-only"
PROTOCOL = "gaussian_rope.apply"
OPTIONS = {"cases": "gaussian_rope.apply/fresh/shape-decode-*"}

_example = Path(__file__).resolve().parents[1] / "gaussian_rope_torch.py"
_correct = load_target(f"{_example}:apply")
_kernel = load_target(f"{_example}:kernel")

NO_KERNEL = {"a1": 1.0, "a2": 0.0, "s1": float("inf"), "s2": 1.0}  # K = 1: the rotation alone


def fused_rope(x, positions, spec):
    """The fused kernel's fault: with one token per row, it launches over row 0 only."""
    if x.shape[1] == 1 and x.shape[0] > 1:
        out = x.clone()
        out[:1] = _correct(x[:1], positions[:1], spec)
        return out
    return _correct(x, positions, spec)


def apply(x, positions, spec):
    rotated = fused_rope(x.float(), positions, replace(spec, kernel=NO_KERNEL))
    return (_kernel(positions, spec.kernel)[:, :, None, None] * rotated).to(x.dtype)
