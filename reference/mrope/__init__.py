"""reference.mrope: multimodal RoPE (M-RoPE) of Qwen2-VL, Qwen3-VL, Qwen3.5 and GLM-4V in float64.

Each token has three positions (t, h, w) [3, batch, seq]; pair i of the head turns by
p_s(i) * theta_i, with theta_i = base^(-2i/r) one global ladder and s(i) the stream of pair i:

- ``qwen2`` (Qwen2-VL ``apply_multimodal_rotary_pos_emb``): ``mrope_section`` [a, b, c] slices the
  ladder into consecutive sections, pairs 0..a-1 read t, the next b read h, the last c read w
  (a + b + c = r/2; [16, 24, 24] for head 128);
- ``qwen3`` (Qwen3-VL ``apply_interleaved_mrope``): interleaved, pair i reads h when i % 3 == 1 and
  i < 3 b, w when i % 3 == 2 and i < 3 c, t otherwise ([24, 20, 20] for head 128; Qwen3.5's
  [11, 11, 10] over 32 pairs, h reaching the last pair); valid when the rule gives each stream its
  count.

Text tokens have t = h = w, where M-RoPE is 1-D RoPE. Layout: rotate_half pairs (j, j + r/2), as
the Qwen models use, or ``layout="interleaved"`` pairs (2i, 2i + 1), as GLM-4V's rotate_half_llm;
``rotary_dim`` < head_dim rotates the first rotary_dim dims over their own ladder and passes the rest
through (GLM-4V: 64 of 128, Qwen3.5: 64 of 256). Golden mode: correctly rounded outputs (Ziv's loop
on RoPE's phase code, pair by pair). Never imports torch.
"""

from .core import VARIANTS, apply, streams

__all__ = ["VARIANTS", "apply", "streams"]
