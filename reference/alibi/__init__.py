"""reference.alibi: ALiBi (Press et al., arXiv 2108.12409) in float64.

Slopes by the authors' rule (fairseq ``get_slopes``): for a power of two n, m_k = 2^(-8k/n),
k = 1..n; otherwise the 2^floor(log2 n) slopes of that power, then every other slope of
2 * 2^floor(log2 n) (the first n - 2^floor(log2 n) of them). The bias added to the score of
query i and key j is -m_h (i - j) (causal: j <= i) or -m_h |i - j| (symmetric). Implementations
add m_h j instead for causal attention (a per-row constant, which softmax ignores).

API: ``slopes(n, mode)``, ``bias(num_heads, q_positions, k_positions, *, causal, backend, mode)``
-> [h, sq, sk]. Golden mode: every value correctly rounded from the exact slope (mpmath). Backends
cpu (Numba), cuda, numpy for the fast bias. Never imports torch.

The computation (checks, fast and golden modes, kernels, oracle) lives in
reference/numerics/bias/alibi*.py, shared with the attention composite; this package re-exports it
and keeps the family's catalog (vectors.py), identities and benchmark row.
"""

from reference.numerics.bias.alibi import bias, slopes, slopes_mp

__all__ = ["bias", "slopes", "slopes_mp"]
