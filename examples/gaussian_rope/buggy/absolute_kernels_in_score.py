"""Bug: the score form computed from the absolute form: <f(q, m), f(k, n)> = K(m) K(n) q^T R_(n-m) k
where the score form needs K(n - m). The two agree only at m = n = 0; the absolute form is not
shift invariant, so scores far from the start vanish.

Adapter: score (gaussian_rope.score). Expected diagnosis: ``kernel-mismatch`` ("K(m) K(n): the
absolute form's kernels on the score instead of K(n - m)").
"""

from pathlib import Path

import torch

from conformance.loader import load_target

# What posref must report for this file, graded as <file>:score on the gaussian_rope.score catalog
# (tests/test_family_contract.py checks it).
CODE = "kernel-mismatch"
PROTOCOL = "gaussian_rope.score"

_apply = load_target(f"{Path(__file__).resolve().parents[1] / 'gaussian_rope_torch.py'}:apply")


def score(q, k, q_positions, k_positions, spec):
    qf, kf = _apply(q.float(), q_positions, spec), _apply(k.float(), k_positions, spec)  # BUG
    return torch.einsum("bihd,bjhd->bhij", qf, kf).to(q.dtype)
