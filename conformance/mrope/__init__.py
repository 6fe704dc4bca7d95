"""Conformance for multimodal RoPE (M-RoPE: Qwen2-VL, Qwen3-VL).

Protocol ``mrope.apply`` (apply.py): ``fn(x, positions, spec) -> tensor like x`` with positions
[3, batch, seq] (t, h, w) and ``spec`` an :class:`MropeSpec` (spec.py: mrope_section, variant).
Graded per pair with RoPE's rotation budget at the pair's own stream position; diagnosis.py names
the section mistakes. Protocol ``mrope.positions`` (positions.py): the position ids themselves
(Qwen2-VL's get_rope_index for images), graded exactly.
"""

from conformance.core.family import Family
from conformance.mrope.spec import MropeSpec

FAMILY = Family(
    name="mrope",
    protocols=("apply", "positions"),
    codes={
        "section-rebased": "each section has its own frequency ladder (re-based per section, as a "
                           "torchtune-style port does) instead of slicing one global ladder",
        "stream-swapped": "the sections read the wrong position streams (t, h, w permuted)",
        "variant-swapped": "Qwen2-VL's consecutive sections and Qwen3-VL's interleaved ones are swapped",
        "image-axes-swapped": "image tokens' h and w positions exchanged (row and column)",
        "positions-resume": "text after an image resumes at its token index, not at the image block's max + 1",
    },
    exports={"MropeSpec": "conformance.mrope.spec:MropeSpec"},
)

__all__ = ["FAMILY", "MropeSpec"]
