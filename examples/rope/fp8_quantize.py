"""RoPE on q and k, then per-tensor float8 e4m3 quantisation, as a serving kernel fuses them
(FlashInfer's RoPE + fp8 quantize, vLLM's fp8 KV cache), in plain torch.

The rotation is computed in float32 (float32 angles, x upcast; half or interleaved pairs over the
first ``spec.rotary_dim`` features), divided by the tensor's scale, clamped to e4m3fn's finite range
[-448, 448] (serving kernels saturate: an e4m3fn value past 448 would be NaN) and cast to
torch.float8_e4m3fn, which rounds to nearest even. Adapter: ``apply_qk_fp8`` (rope.apply_qk_fp8).
"""

import torch

from conformance import Unsupported

E4M3_MAX = 448.0


def rotate(x, positions, spec):
    """x [b, s, h, d] rotated at positions [b, s] in float32."""
    if spec.scaling is not None:
        raise Unsupported("no RoPE scaling in this example")
    if getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("x [batch, seq, heads, head_dim] only")
    r = spec.rotary_dim
    x = x.float()
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    cos, sin = freqs.cos()[:, :, None, :], freqs.sin()[:, :, None, :]
    if spec.layout == "half":
        x1, x2 = x[..., : r // 2], x[..., r // 2 : r]
        rotated = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    else:
        x1, x2 = x[..., 0:r:2], x[..., 1:r:2]
        rotated = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    return torch.cat((rotated, x[..., r:]), dim=-1)


def quantize(x, scale):
    """x / scale saturated to [-448, 448], rounded to float8 e4m3fn."""
    return (x / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def apply_qk_fp8(q, k, positions, spec):
    return quantize(rotate(q, positions, spec), spec.q_scale), quantize(rotate(k, positions, spec), spec.k_scale)
