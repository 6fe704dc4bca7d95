"""KERPLE's mpmath oracle: reference.numerics.bias.kerple_oracle, shared with the
attention composite; this module re-exports its public names under the family's path."""

from reference.numerics.bias.kerple_oracle import bias_exact

__all__ = ["bias_exact"]
