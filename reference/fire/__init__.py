"""reference.fire: FIRE (Li et al., arXiv 2310.04418) bias in float64.

Formula as implemented in the public copies of the FIRE module (e.g. mcleish7/arithmetic
cramming/architectures/embeddings.py): per head h, query position i, key position j (0-based),

    b_h(i, j) = MLP_h( psi(i - j) / (psi(max(i, L)) + eps) ),   psi(x) = log(|c x| + 1),

with L = |L_multiplier * init_L| (init_L = 512, eps = 1e-6) and MLP = Linear(1, hidden) -> ReLU ->
Linear(hidden, H): MLP_h(x) = sum_k W2[h, k] relu(W1[k, 0] x + b1[k]) + b2[h]. For i < L the
normalizer is psi(L) (the "progressive interpolation" threshold), from i = L on it is psi(i).

API: ``bias(q_positions, k_positions, weights, *, init_L, eps, backend, mode)`` -> [H, sq, sk],
weights a dict of float arrays c, L_multiplier (scalars), W1 [hidden, 1], b1 [hidden],
W2 [H, hidden], b2 [H]. Golden mode: each value the nearest double to the exact one (mpmath at
200 bits, the ReLU decided on the exact pre-activation), certified as faithfully rounded.
Fast mode (cpu Numba, cuda, numpy; log1p): within ``fast_bound``. Never imports torch.

The computation (checks, fast and golden modes, kernels, oracle, backward) lives in
reference/numerics/bias/fire*.py, shared with the attention composite; this package re-exports it
and keeps the family's catalog (vectors.py), identities and benchmark row.
"""

from reference.numerics.bias.fire import EPS, INIT_L, ROLES, bias, fast_bound, normalized_distance

__all__ = ["EPS", "INIT_L", "ROLES", "bias", "fast_bound", "normalized_distance"]
