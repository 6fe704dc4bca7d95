"""Conformance for Gaussian-kernel RoPE (seed document 002): f(x, m) = K(m) R_m x.

Protocol ``gaussian_rope.apply`` (apply.py): ``fn(x, positions, spec) -> tensor like x``, ``spec``
a :class:`GaussianRopeSpec` (spec.py: RoPE's fields plus ``kernel`` {a1, a2, s1, s2}). It is
rope.apply's grading (conformance.core.rotation_apply.RotationApply) with an amplitude K(m) per
token (``amplitude``; kernel.py): the same probe, per-pair grading and rotation budgets, scaled by
K(m) with an underflow floor (conformance.core.rotation_budgets.amplitude_budgets). Diagnosis (diagnosis.py): the kernel is checked
first (``kernel-mismatch``), then the rotation with K(m) divided out goes through RoPE's
diagnosis (layout, pair angles, positions, frequencies).

Protocol ``gaussian_rope.score`` (score.py): ``fn(q, k, q_positions, k_positions, spec)`` returns
the score form K(n - m) q_m^T R_(n-m) k_n [batch, heads, sq, sk].

Both are differentiable: ``--grad`` grades the gradient of x (apply) and of q and k (score)
against reference.gaussian_rope.backward, with the budgets derived in backward.py.
"""

from conformance.core.family import Family
from conformance.gaussian_rope.spec import GaussianRopeSpec

FAMILY = Family(
    name="gaussian_rope",
    protocols=("apply", "score"),
    codes={
        "kernel-mismatch": "the Gaussian kernel K(m) is wrong: missing, other amplitudes or widths, or "
                           "evaluated at the token index instead of the position",
        # Shared with RoPE (same meaning): seed document 002's own code pairs elements one way in
        # its cos/sin tables and another in its rotation.
        "pair-angle-mismatch": "the two elements of a pair turn by different angles (cos/sin expanded "
                               "for the other layout)",
    },
    exports={"GaussianRopeSpec": "conformance.gaussian_rope.spec:GaussianRopeSpec"},
)

__all__ = ["FAMILY", "GaussianRopeSpec"]
