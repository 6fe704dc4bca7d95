"""Conformance for multimodal RoPE (M-RoPE: Qwen2-VL, Qwen3-VL).

Protocol ``mrope.apply`` (apply.py): ``fn(x, positions, spec) -> tensor like x`` with positions
[3, batch, seq] (t, h, w) and ``spec`` an :class:`MropeSpec` (spec.py: mrope_section, variant).
Graded per pair with RoPE's rotation budget at the pair's own stream position; diagnosis.py names
the section mistakes.
"""

from conformance.core.family import Family
from conformance.mrope.spec import MropeSpec

FAMILY = Family(
    name="mrope",
    protocols=("apply",),
    codes={
        "section-rebased": "each section has its own frequency ladder (re-based per section, as a "
                           "torchtune-style port does) instead of slicing one global ladder",
        "stream-swapped": "the sections read the wrong position streams (t, h, w permuted)",
        "variant-swapped": "Qwen2-VL's consecutive sections and Qwen3-VL's interleaved ones are swapped",
    },
    exports={"MropeSpec": "conformance.mrope.spec:MropeSpec"},
)

__all__ = ["FAMILY", "MropeSpec"]
