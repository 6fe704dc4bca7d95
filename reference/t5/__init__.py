"""reference.t5: T5's relative position buckets (Raffel et al., arXiv 1910.10683; HF
``T5Attention._relative_position_bucket``).

For a relative position r = j - i (key minus query):
- bidirectional: half the buckets per direction, + num_buckets/2 when r > 0, n = |r|;
- causal: n = max(-r, 0) (later keys share bucket 0);
- n < max_exact = buckets/2 (of the halved count when bidirectional): bucket n (exact);
- otherwise max_exact + floor(ln(n / max_exact) / ln(max_distance / max_exact) * (buckets - max_exact)),
  capped at buckets - 1.
Defined (else a one-line ValueError naming the argument) when max_exact >= 1 (bidirectional:
num_buckets >= 4) and max_exact < max_distance <= 2**63 - 1; every int64 or uint64 input is then
bucketed exactly (-2**63 and uint64 values past 2**63 included: their distances are past max_distance).
``bucket`` computes it with the exact logarithm ratio (mpmath); ``edges`` lists the distances where
that ratio times (buckets - max_exact) is an integer, so a float log one ulp low lands in the
bucket below (16, 32, 64 and 128 for the default 32 / 128). Never imports torch.

The computation (the configuration check, the exact buckets, their cpu kernel, the oracle) lives in
reference/numerics/bias/t5*.py, shared with the attention composite; this package re-exports it
and keeps the family's catalog (vectors.py), identities and benchmark row.
"""

from reference.numerics.bias.t5 import bucket, edges

__all__ = ["bucket", "edges"]
