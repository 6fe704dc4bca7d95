"""lucidrains' x-transformers T5 buckets, ``RelativePositionBias._relative_position_bucket``
(x_transformers.x_transformers), graded as it ships. Graded at x-transformers 2.31.10.

The module's forward passes relative_position = key - query, like T5; ``causal=True`` is T5's
decoder (bidirectional False), ``causal=False`` its encoder; the log is taken in float32 and the
large buckets capped at num_buckets - 1.

Adapter: ``bucket`` (t5.bucket). Needs ``x-transformers`` (the ``test`` extra); the tests skip
without it.
"""

from x_transformers.x_transformers import RelativePositionBias

LIBRARY = "x-transformers"
SURVEY = [("t5.bucket", "bucket")]


def bucket(relative_positions, spec):
    return RelativePositionBias._relative_position_bucket(relative_positions, causal=not spec.bidirectional,
                                                          num_buckets=spec.num_buckets,
                                                          max_distance=spec.max_distance)
