"""transformers' T5 relative position buckets, ``T5Attention._relative_position_bucket`` (the
static method every T5 / mT5 / Flan-T5 / UMT5 attention layer calls), graded as it ships.

The library maps the relative position r = key - query to a bucket: bidirectional (encoder)
halves the buckets by the sign of r, then distances below max_exact = num_buckets / 2 get their
own bucket and the rest max_exact + floor(log(n / max_exact) / log(max_distance / max_exact) *
(num_buckets - max_exact)), the log taken in float32, capped at the last bucket (Raffel et al.
2020, sec. 2.1; posref's reference/t5). Graded at transformers 5.24.0.

Adapter: ``bucket`` (t5.bucket). Needs ``transformers`` (the ``test`` extra); the tests skip
without it.
"""

from transformers.models.t5.modeling_t5 import T5Attention

LIBRARY = "transformers"
SURVEY = [("t5.bucket", "bucket")]


def bucket(relative_positions, spec):
    return T5Attention._relative_position_bucket(relative_positions, bidirectional=spec.bidirectional,
                                                 num_buckets=spec.num_buckets, max_distance=spec.max_distance)
