"""reference.kerple: KERPLE (Chi et al., arXiv 2205.09921) bias in float64.

Formula as the authors' Megatron code computes it (chijames/KERPLE megatron/mpu/layers.py,
``ParallelKerpleLog`` and ``ParallelKerplePower``), per head h, query position i, key position j:

- log:   b_h(i, j) = -r1_h * log(1 + r2_h |i - j|), with r1 and r2 clamped to >= 1e-2;
- power: b_h(i, j) = -r1_h * |i - j|^(r2_h), with r1 clamped to >= 1e-2 and r2 to [1e-2, 2].

The clamps (the bound is the double nearest 1e-2) are part of the formula: the code applies them
on every forward pass, so parameters outside the range act as the bound. Causal attention grades
the keys j <= i only (the code's ``tril(i - j)``); the formula is the same.

API: ``bias(q_positions, k_positions, variant, r1, r2, *, backend, mode)`` -> [h, sq, sk] and
``clamp(variant, r1, r2)``. Golden mode: every value correctly rounded (mpmath at 200 bits per
element). Fast mode (cpu Numba, cuda, numpy; log1p, not log(1 + x)): every value within 4 ulp
(8 u_64 relative) of the exact one, see ``FAST_ULPS``. Never imports torch.

The computation (checks, fast and golden modes, kernels, oracle) lives in
reference/numerics/bias/kerple*.py, shared with the attention composite; this package re-exports it
and keeps the family's catalog (vectors.py), identities and benchmark row.
"""

from reference.numerics.bias.kerple import CLAMP_LOW, FAST_ULPS, POWER_HIGH, VARIANTS, bias, clamp

__all__ = ["CLAMP_LOW", "FAST_ULPS", "POWER_HIGH", "VARIANTS", "bias", "clamp"]
