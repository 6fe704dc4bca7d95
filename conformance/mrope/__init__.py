"""Conformance for multimodal RoPE (M-RoPE: Qwen2-VL, Qwen3-VL, Qwen3.5, GLM-4V).

Protocol ``mrope.apply`` (apply.py): ``fn(x, positions, spec) -> tensor like x`` with positions
[3, batch, seq] (t, h, w) and ``spec`` an :class:`MropeSpec` (spec.py: mrope_section, variant).
Graded per pair with RoPE's rotation budget at the pair's own stream position; diagnosis.py names
the section, layout, rotary-dim and angle-precision mistakes. Protocol ``mrope.positions``
(positions.py): the position ids themselves (Qwen2-VL's get_rope_index for images), graded
exactly; its diagnoses name text resuming at the token index, h and w exchanged, and 1-D ids.
Protocol ``mrope.decode`` (decode.py): a session driven over two generations (prefill, then
decode at cache_position + the prompt's delta), graded exactly; its diagnoses name stale, ignored
and row-0 deltas.
"""

from conformance.core.family import Family
from conformance.mrope.spec import MropeSpec

FAMILY = Family(
    name="mrope",
    protocols=("apply", "positions", "decode"),
    codes={
        "section-rebased": "each section has its own frequency ladder (re-based per section, as a "
                           "torchtune-style port does) instead of slicing one global ladder",
        "stream-swapped": "the sections read the wrong position streams (t, h, w permuted)",
        "variant-swapped": "Qwen2-VL's consecutive sections and Qwen3-VL's interleaved ones are swapped",
        "image-axes-swapped": "image tokens' h and w positions exchanged (row and column)",
        "positions-resume": "text after an image resumes at its token index, not at the image block's max + 1",
        "positions-1d": "image tokens given 1-D positions: t = h = w for every token (get_rope_index never "
                        "called, as Liger's M-RoPE path: every stream is the token index)",
        "interleave-shifted": "Qwen3-VL's interleaved t, h, w slots one pair off (pair i reads the stream of "
                              "pair i + 1, or the rotation starts one slot later)",
        "mrope-stale-deltas": "decode after a new prompt uses the previous prompt's rope_deltas (HF reused them "
                              "across generations)",
        "mrope-deltas-ignored": "decode positions t = h = w = cache_position, without the prompt's rope_deltas "
                                "(a text-only port)",
        "mrope-deltas-row0": "decode uses row 0's rope_delta for every row of the batch",
        # Shared with RoPE, same meaning (here of M-RoPE's one ladder and its pairs).
        "angle-precision": "angles, positions or frequencies kept in bfloat16 or float16",
        "layout-swapped": "pairs follow the other layout (half (j, j + r/2) vs interleaved (2i, 2i+1))",
        "rotary-dim-mismatch": "head_dim and rotary_dim confused (partial rotary)",
    },
    exports={"MropeSpec": "conformance.mrope.spec:MropeSpec"},
)

__all__ = ["FAMILY", "MropeSpec"]
