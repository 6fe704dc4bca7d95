"""Bug: correct eagerly, positions shifted by one under torch.compile.

Re-enacts vLLM's interleaved M-RoPE fault (right in eager mode, shifted after compile): the
layer has two code paths, a hand-fused one that eager calls take and a "native" one that the
compiled graph takes (vLLM's CustomOp dispatches ``forward_native`` under torch.compile and its
own kernel otherwise). The native path builds its position index with an off-by-one, so only a
compiled model sees it. Here the dispatch is ``torch.compiler.is_compiling()``, which is True
while dynamo traces the function.

Adapter: apply (rope.apply), half layout, no scaling.
Expected diagnosis under --compile: ``compile-fault`` on the compiled results, with
``position-offset`` ("positions shifted by +1") as the underlying one; the eager results pass.
"""

import torch

from conformance import Unsupported

# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it). A few small cases: each distinct shape is an
# inductor compile of a few seconds on a CPU.
CODE = "compile-fault"
PROTOCOL = "rope.apply"
OPTIONS = {"compile": True, "cases": "rope.apply/llama2-d128/prefill-8,rope.apply/llama2-d128/decode-4095"}


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _fused(x, positions, inv_freq):
    """The eager path: x * cos + rotate_half(x) * sin at the given positions."""
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    return x * emb.cos().to(x.dtype) + rotate_half(x) * emb.sin().to(x.dtype)


def _native(x, positions, inv_freq):
    """The path the compiled graph takes: the same formula, but its position index is built as
    an exclusive running count, one too many."""
    freqs = (positions[..., None] + 1).float() * inv_freq  # BUG: only under torch.compile
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    return x * emb.cos().to(x.dtype) + rotate_half(x) * emb.sin().to(x.dtype)


def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("half layout only")
    if spec.scaling:
        raise Unsupported("no position scaling")
    if getattr(spec, "tensor_layout", "bshd") != "bshd" or getattr(spec, "inplace", False):
        raise Unsupported("[batch, seq, heads, dim] out of place only")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    rotate = _native if torch.compiler.is_compiling() else _fused
    return torch.cat((rotate(x[..., :r], positions, inv_freq), x[..., r:]), dim=-1)
