"""FIRE's mpmath oracle: reference.numerics.bias.fire_oracle, shared with the
attention composite; this module re-exports its public names under the family's path."""

from reference.numerics.bias.fire_oracle import bias_exact

__all__ = ["bias_exact"]
