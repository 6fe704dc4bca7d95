"""Conformance for axial 2-D RoPE (RoPE-ViT, Qwen2-VL's vision encoder).

Protocol ``rope2d.apply`` (apply.py): ``fn(x, coords, spec) -> tensor like x`` with coords int64
[batch, seq, 2] = (x, y) per patch and ``spec`` a :class:`Rope2dSpec` (spec.py). Graded per pair
with RoPE's rotation budget at |c theta_k|; diagnosis.py names the axis mistakes.
"""

from conformance.core.family import Family
from conformance.rope2d.spec import Rope2dSpec

FAMILY = Family(
    name="rope2d",
    protocols=("apply",),
    codes={
        "axes-swapped": "the two axes are exchanged: the first d/4 pairs read the other coordinate",
        "axis-ladder": "one ladder base^(-2i/d) over all pairs instead of the same base^(-4k/d) ladder for each axis",
        "ladder-split": "the fine ladder base^(-2i/d) split between the axes by parity (Pixtral: the second axis on "
                        "base^(-(4k+2)/d)) instead of the same base^(-4k/d) ladder for each axis",
        "coordinate-offset": "patch coordinates shifted by a constant on both axes (counted from 1: torchtune, "
                             "Llama 4 vision)",
        "cls-rotated": "the CLS token, which must pass through, is rotated",
    },
    exports={"Rope2dSpec": "conformance.rope2d.spec:Rope2dSpec"},
)

__all__ = ["FAMILY", "Rope2dSpec"]
