"""ALiBi's mpmath oracle: reference.numerics.bias.alibi_oracle, shared with the
attention composite; this module re-exports its public names under the family's path."""

from reference.numerics.bias.alibi_oracle import bias_exact, slopes_exact

__all__ = ["bias_exact", "slopes_exact"]
