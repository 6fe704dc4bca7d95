"""Conformance for T5's relative position buckets: protocol ``t5.bucket`` (bucket.py),
``fn(relative_positions, spec) -> buckets``, graded exactly except at bucket edges, where the bucket
below is acceptable (a float log one ulp low). ``spec`` is a :class:`T5Spec`."""

from conformance.core.family import Family
from conformance.t5.spec import T5Spec

FAMILY = Family(
    name="t5",
    protocols=("bucket",),
    codes={
        "bucket-direction": "the relative position taken as query minus key (the directions swapped)",
        "bucket-causal-flag": "bidirectional and causal bucketing swapped",
        "bucket-not-halved": "num_buckets not halved for bidirectional bucketing",
        "bucket-clamp-missing": "no clamp to the last bucket: distances past max_distance get buckets past the "
                                "direction's last one (candle)",
        "bucket-log-precision": "the log position computed in a low precision: buckets off by one away from the edges",
    },
    exports={"T5Spec": "conformance.t5.spec:T5Spec"},
)

__all__ = ["FAMILY", "T5Spec"]
