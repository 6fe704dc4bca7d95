"""reference.nope: no positional encoding (NoPE), the baseline of the identities matrix.

A NoPE layer passes its queries and keys through unchanged: ``apply(x, positions) = x``. Models
interleave such layers with RoPE layers (Llama 4 skips RoPE on every fourth layer, SmolLM3 on
every fourth too), so "leave x alone at these layers" is a spec an implementation can get wrong.
Without any encoding, causal attention still carries position (Haviv et al., arXiv 2203.16634;
Kazemnejad et al., arXiv 2305.19466): the mask alone lets token i see exactly i + 1 tokens
(reference/nope/identities.py shows it).

API: ``apply(x, positions, *, backend, mode) -> float64 copy of x`` (x [batch, seq, heads, dim],
positions [batch, seq]). Backends cpu and numpy (the validated float64 copy), cuda (a copy kernel); both modes give
x exactly. Never imports torch.
"""

from .core import apply

__all__ = ["apply"]
