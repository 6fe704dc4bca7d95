"""reference.gaussian_rope: Gaussian-kernel RoPE in float64 (seed document 002).

f(x, m) = K(m) R_m x, with the two-scale kernel

    K(m) = a1 exp(-m^2 / (2 s1^2)) + a2 exp(-m^2 / (2 s2^2)),

R_m the RoPE rotation of reference.rope (same layouts, partial rotary, exact reduction; reused,
not copied), applied to the whole vector (the pass-through tail is scaled by K(m) too). The score
form K(n - m) q^T R_(n-m) k (``score``) depends on n - m only.

API: ``kernel(positions, kernel, mode)``, ``apply(x, positions, *, kernel, rotary_dim, base,
layout, backend, mode)``, ``score(q, k, q_positions, k_positions, *, kernel, rotary_dim, base,
layout)``. ``kernel`` is a dict {"a1", "a2", "s1", "s2"} (amplitudes >= 0, widths > 0); the
document's example is {a1: 0.7, a2: 0.3, s1: 5, s2: 20} at dim 64.

Underflow: K(m) is a sum of two exponentials that underflow for large |m| (the wider term below
2^-1074 past |m| = s2 sqrt(2 * 745.1), about 772 for s2 = 20). Golden mode returns the correctly
rounded value there too: subnormals where the exact value is one, and exactly 0 once it is below
half the smallest subnormal; outputs then are K(m) R_m x rounded the same way. Never imports torch.
"""

from .core import DOCUMENT_KERNEL, apply, check_kernel, kernel, kernel_mp, score

__all__ = ["DOCUMENT_KERNEL", "apply", "check_kernel", "kernel", "kernel_mp", "score"]
