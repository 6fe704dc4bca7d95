"""Liger Kernel's Triton M-RoPE for Qwen2-VL (``liger_kernel.ops.qwen2vl_mrope.LigerQwen2VLMRopeFunction``),
graded through a thin adapter as a user would write it. On a machine without a GPU::

    posref conform examples/mrope/lib_liger.py:apply --protocol mrope.apply --triton-interpret --grad

Liger takes Qwen2-VL's tables as the model's rotary embedding builds them: cos and sin [3, b, s, d],
one row per stream (t, h, w), each ``cat(freqs, freqs)`` of the stream's float32 angles positions[k] *
inv_freq (inv_freq = 1 / base ** (arange(0, d, 2) / d), over the whole head), cast to the input
dtype; its kernel (``_triton_qwen2vl_mrope``, one program per token) takes pairs 0 .. t-1 from the
t row, the next h from the h row, the rest from the w row (``mrope_section`` [t, h, w] in pairs,
consecutive sections: posref's ``qwen2`` variant) and rotates as rotate_half. So the adapter raises
Unsupported for Qwen3-VL's interleaved sections, the interleaved layout (GLM-4V) and partial rotary
(Qwen2-VL rotates the whole head).

Liger rotates q and k in one call, each [b, heads, s, d]; x goes in as q (a contiguous transposed
copy, or x itself where the transpose is already contiguous: one head or one token, where Liger
then writes into the caller's x, reported as input-mutated; see examples/rope/lib_liger.py) with a
zero one-head k that is dropped. Needs ``liger-kernel`` and ``triton`` (on a CPU:
``--triton-interpret``); the tests skip without them.
"""

import os

import torch

if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
    # Triton compiles kernels for a GPU; without one they run only in Triton's interpreter, which
    # must be on before liger_kernel is imported (triton.jit decides when the module loads).
    raise ImportError("Liger's Triton kernels need a CUDA GPU, or Triton's interpreter on a CPU: "
                      "posref conform ... --triton-interpret (TRITON_INTERPRET=1)")

from liger_kernel.ops.qwen2vl_mrope import LigerQwen2VLMRopeFunction  # noqa: E402

from conformance import Unsupported  # noqa: E402

# posref survey (docs/compatibility.md): the distributions this module wraps and its rows,
# (protocol, function[, conform options]): Triton's interpreter, as on any machine without a GPU.
LIBRARY = ("liger-kernel", "triton")
SURVEY = [
    ("mrope.apply", "apply", {"triton-interpret": True}),
]
SURVEY_NOTES = {
    "apply": "Liger writes its result into the caller's x where its transpose to [b, h, s, d] is "
             "already contiguous (one head, or one token): input-mutated; every other case Qwen2-VL's "
             "layout expresses is within budget (float32 only, through Triton's interpreter).",
}


def tables(positions, spec, dtype):
    """Qwen2-VL's cos, sin [3, b, s, d]: per stream cat(freqs, freqs) of float32 angles."""
    if spec.layout != "half" or spec.variant != "qwen2":
        raise Unsupported("Liger's Qwen2-VL M-RoPE: rotate_half with consecutive (qwen2) sections only")
    if spec.rotary_dim != spec.head_dim:
        raise Unsupported("Qwen2-VL rotates the whole head: no partial rotary")
    d = spec.head_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    freqs = positions[..., None].float() * inv_freq.to(positions.device)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply(x, positions, spec):
    """x [b, s, h, d], positions [3, b, s] -> x rotated, through one Liger call."""
    cos, sin = tables(positions, spec, x.dtype)
    q = x.transpose(1, 2).contiguous()  # Liger's [b, h, s, d]
    k = q.new_zeros((q.shape[0], 1) + tuple(q.shape[2:]))
    q_rot, _ = LigerQwen2VLMRopeFunction.apply(q, k, cos, sin, list(spec.mrope_section))
    return q_rot.transpose(1, 2)
