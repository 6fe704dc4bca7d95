"""Liger Kernel's Triton RoPE (``liger_kernel.ops.rope.LigerRopeFunction``), graded through thin
adapters as a user would write them. On a machine without a GPU, grade it through Triton's
interpreter::

    posref conform examples/rope/lib_liger.py:apply_qk --protocol rope.apply_qk --triton-interpret --grad

Liger applies Hugging Face's Llama rotation (rotate_half: the half layout) to q [b, n_q, s, d] and
k [b, n_kv, s, d] with the caller's cos and sin tables ([1 or b, s, r]: ``cat(freqs, freqs)``, r the
rotary width; a partial rotary leaves features r.. untouched), forward and backward in one Triton
kernel (``_triton_rope``, one program per token). The tables here are HF's LlamaRotaryEmbedding's:
float32 inv_freq = 1 / base ** (arange(0, r, 2) / r), float32 angles positions * inv_freq, cos and
sin cast to the input dtype. Liger takes the tables as given, so scaling would be the caller's
table; this adapter builds the unscaled one and raises Unsupported for a scaled spec, as it does for
the interleaved layout Liger does not implement.

Liger's kernel writes its result into the memory of ``q.transpose(1, 2).contiguous()``: a copy
when the transpose is not contiguous, **the caller's own tensor when it is** (one head, or one
token). The adapters hand Liger the layout its docstring names, [b, heads, s, d], contiguous, as a
caller holding such tensors would; for posref's [b, s, h, d] cases that is a contiguous transposed
copy made here (which is the caller's tensor itself when there is one head or one token: then the
transpose is already contiguous and no copy is made). So the caller's k is rotated in place at
kv_heads 1 (multi-query attention), and q and k both at a single token (decode): posref reports
``input-mutated`` there (docs/design.md, "Triton kernels on a CPU"). Passing a non-contiguous view
instead (``q.transpose(1, 2)`` of a [b, s, h, d] tensor, as HF's attention does with its
projections, which it never reads again) makes Liger write into the caller's memory at every head
count. With ``spec.inplace`` the caller allows exactly that: the adapters pass the views.

- ``apply_qk`` (rope.apply_qk): ``LigerRopeFunction.apply(q, k, cos, sin)``; under ``--grad`` the
  gradients come from Liger's own backward (the same kernel with the sine negated).
- ``apply`` (rope.apply): x as Liger's q, with a one-head zero k the adapter discards (Liger rotates
  q and k in one call).

Tensor layouts (spec.tensor_layout): bshd and thd (as one sequence of t tokens) are transposed to
Liger's [b, h, s, d]; bhsd is passed as it is. Needs ``liger-kernel`` and ``triton`` (on a CPU:
``--triton-interpret``); the tests skip without them.
"""

import os

import torch

if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
    # Triton compiles kernels for a GPU; without one they run only in Triton's interpreter, which
    # must be on before liger_kernel is imported (triton.jit decides when the module loads).
    raise ImportError("Liger's Triton kernels need a CUDA GPU, or Triton's interpreter on a CPU: "
                      "posref conform ... --triton-interpret (TRITON_INTERPRET=1)")

from liger_kernel.ops.rope import LigerRopeFunction  # noqa: E402

from conformance import Unsupported  # noqa: E402

# posref survey (docs/compatibility.md): the distributions this module wraps and its rows,
# (protocol, function[, conform options]): Triton's interpreter, as on any machine without a GPU.
LIBRARY = ("liger-kernel", "triton")
SURVEY = [
    ("rope.apply", "apply", {"triton-interpret": True}),
    ("rope.apply_qk", "apply_qk", {"triton-interpret": True}),
]
SURVEY_NOTES = {
    "apply": "Liger writes its result into q.transpose(1, 2).contiguous(), which is the caller's own "
             "tensor where that transpose is already contiguous (one token, or one head): there the "
             "caller's x is rotated in place (input-mutated), and the identity comparing a strided x "
             "with a contiguous one at a one-token decode shape disagrees for the same reason; every "
             "other case is within budget (float32 only: Triton's interpreter cannot compute bfloat16).",
    "apply_qk": "Liger rotates q and k in place where their transpose to [b, h, s, d] is already "
                "contiguous (one token, or one kv head as in multi-query attention): input-mutated; "
                "every other case is within budget (float32 only, through Triton's interpreter).",
}


def tables(positions, spec, dtype):
    """HF's cos, sin [b, s, r] = cat(freqs, freqs) for positions [b, s], cast to ``dtype``."""
    if spec.layout != "half":
        raise Unsupported("Liger rotates as HF's rotate_half: half layout only")
    if spec.scaling is not None:
        raise Unsupported("Liger applies the caller's cos/sin; this adapter builds the unscaled table only")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.int64).float() / r))
    freqs = positions[..., None].float() * inv_freq.to(positions.device)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _to_liger(t, spec):
    """A [b, h, s, d] tensor for Liger: a contiguous copy where the transpose is not contiguous
    already (under spec.inplace: the view, so that Liger writes into the caller's tensor)."""
    layout = getattr(spec, "tensor_layout", "bshd")
    if layout == "bhsd":
        return t
    view = (t[None] if layout == "thd" else t).transpose(1, 2)
    return view if getattr(spec, "inplace", False) else view.contiguous()


def _from_liger(t, spec):
    layout = getattr(spec, "tensor_layout", "bshd")
    if layout == "bhsd":
        return t
    t = t.transpose(1, 2)
    return t[0] if layout == "thd" else t


def _positions(positions, spec):
    return positions[None] if getattr(spec, "tensor_layout", "bshd") == "thd" else positions


def apply_qk(q, k, positions, spec):
    """q and k (any head counts) rotated by one LigerRopeFunction call."""
    cos, sin = tables(_positions(positions, spec), spec, q.dtype)
    q_rot, k_rot = LigerRopeFunction.apply(_to_liger(q, spec), _to_liger(k, spec), cos, sin)
    return _from_liger(q_rot, spec), _from_liger(k_rot, spec)


def apply(x, positions, spec):
    """x as Liger's q; a zero one-head k goes along and is dropped."""
    cos, sin = tables(_positions(positions, spec), spec, x.dtype)
    q = _to_liger(x, spec)
    k = q.new_zeros((q.shape[0], 1) + tuple(q.shape[2:]))
    x_rot, _ = LigerRopeFunction.apply(q, k, cos, sin)
    return _from_liger(x_rot, spec)
