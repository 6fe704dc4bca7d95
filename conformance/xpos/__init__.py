"""Conformance for xPos (arXiv 2212.10554): RoPE whose pairs are scaled by zeta_i^(+-(m - c)/B).

Protocol ``xpos.apply`` (apply.py): ``fn(q, k, positions, spec) -> (q_out, k_out)``, ``spec`` an
:class:`XposSpec` (spec.py). The query and the key are graded together because they scale in
opposite directions, up to one common centring c: the protocol fits c from the outputs, reports
it, and grades both against the reference centred there (c cancels in q . k, so any common c is
correct: torchscale uses (L + offset) // 2, rotary-embedding-torch len // 2). Diagnosis in
diagnosis.py. ``--grad`` grades the gradients of q and k at the forward's centring (backward.py).
"""

from conformance.core.family import Family
from conformance.xpos.spec import XposSpec

FAMILY = Family(
    name="xpos",
    protocols=("apply",),
    codes={
        "scale-direction": "the key is scaled like the query (zeta^(+(n - c)/B)) instead of inversely",
        "scale-parameters": "gamma or the scale base differ from the case's",
        # Shared with RoPE, same meaning.
        "layout-swapped": "pairs follow the other layout (half (j, j + r/2) vs interleaved (2i, 2i+1))",
        "centring-missing": "the scale exponent is not centred, and zeta^(-m/B) overflows the dtype",
    },
    exports={"XposSpec": "conformance.xpos.spec:XposSpec"},
)

__all__ = ["FAMILY", "XposSpec"]
