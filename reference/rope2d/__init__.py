"""reference.rope2d: axial 2-D RoPE for vision in float64 (RoPE-ViT, Qwen2-VL's vision encoder).

A patch at grid coordinates (x, y) (column, row) turns pair i by c_a(i) * theta_k: the first
r/4 pairs read the first axis, the last r/4 the second, each with the same ladder
theta_k = base^(-4k/r), k = 0..r/4-1 (RoPE-ViT: base 100, axes (x, y), interleaved pairs;
Qwen2-VL's vision encoder: base 10000, axes (h, w) = (row, column), rotate_half pairs). Leading CLS
tokens (``cls_tokens``) are not rotated. The mixed form (RoPE-Mixed, ``freqs``): learned per-head
frequencies, pair i of head h turned by x f_x[h, i] + y f_y[h, i]. Golden mode: correctly rounded
outputs (Ziv's loop on RoPE's phase code; the mixed form in mpmath).
Never imports torch.
"""

from .core import apply, axes_of_pairs

__all__ = ["apply", "axes_of_pairs"]
