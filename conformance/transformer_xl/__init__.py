"""Conformance for Transformer-XL relative attention (Dai et al., arXiv 1901.02860, sec. 3.3):
protocol ``transformer_xl.score`` (score.py), ``fn(q, k, u, v, r_weight, spec)`` -> the four-term
scores [n_head, qlen, klen] before the mask, ``spec`` a :class:`TransformerXLSpec` (mlen,
d_model, clamp_len). Only the entries j <= i + mlen are graded. Diagnosis (diagnosis.py) by
mutants of the reference: the distances off by one, u and v swapped, R interleaved.
"""

from conformance.core.family import Family
from conformance.transformer_xl.spec import TransformerXLSpec

FAMILY = Family(
    name="transformer_xl",
    protocols=("score",),
    codes={
        "xl-shift-off-by-one": "the relative distances are off by one: the relative shift (or pos_seq = klen-1 .. 0) "
                               "misaligned by a column, so key j meets R at i + mlen - j +- 1",
        "xl-u-v-swapped": "the two global biases are swapped: v (r_r_bias) added to the query for the content term "
                          "and u (r_w_bias) for the position term",
        "xl-r-interleaved": "R built interleaved [sin w_0, cos w_0, sin w_1, ...] instead of Transformer-XL's "
                            "concatenated [sin | cos] halves, which r_net's weights expect",
    },
    exports={"TransformerXLSpec": "conformance.transformer_xl.spec:TransformerXLSpec"},
)

__all__ = ["FAMILY", "TransformerXLSpec"]
