"""T5's bucket oracle: reference.numerics.bias.t5_oracle, shared with the
attention composite; this module re-exports its public names under the family's path."""

from reference.numerics.bias.t5_oracle import bucket_exact

__all__ = ["bucket_exact"]
