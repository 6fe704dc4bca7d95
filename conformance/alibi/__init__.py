"""Conformance for ALiBi: protocols ``alibi.slopes`` (slopes.py) and ``alibi.bias`` (bias.py).

``spec`` is an :class:`AlibiSpec` (num_heads, causal). The bias is graded up to a per-row
constant, which softmax ignores, so fairseq's and BLOOM's m j grades equal to -m (i - j).
"""

from conformance.alibi.spec import AlibiSpec
from conformance.core.family import Family

FAMILY = Family(
    name="alibi",
    protocols=("slopes", "bias"),
    codes={
        "slopes-power-of-two-rule": "2^(-8k/n) used for a head count that is not a power of two",
        "slopes-reversed": "the slopes in reverse order (the steepest on the last head)",
        "bias-sign": "the bias has the wrong sign: it grows with the distance",
        "bias-varies-in-row": "the bias differs from the reference by more than a per-row constant (a causal m j "
                              "used for bidirectional attention), which changes the softmax",
    },
    exports={"AlibiSpec": "conformance.alibi.spec:AlibiSpec"},
)

__all__ = ["AlibiSpec", "FAMILY"]
