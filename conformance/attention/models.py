"""Fault models for diagnosing ``attention.forward``: the layer recomputed in float64 with one
usual mistake, from the reference's intermediates (reference.attention.stages).

Each model returns [b, s, D]; a failing output that one of them explains (within a few budgets on
the graded rows) gets that model's code.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from conformance.attention.stages import reference_config
from reference.attention.core import t5_bias
from reference.numerics import rotation
from reference.numerics.bias import kerple
from reference.numerics.frequencies import frequencies


def recompute(st, spec, *, qr=None, kr=None, vis=None, logit_mult=1.0, scale=None, bias=None, heads=None):
    """The layer from st with the rotated queries / new keys, visibility, logit factor, additive
    bias or the kv head each query head reads (``heads`` [hq]) replaced."""
    b, s, D = st["X"].shape
    hq, hkv, d = spec.num_heads, spec.num_kv_heads, spec.head_dim
    P = st["keys"].shape[1] - s
    qr = st["qr"] if qr is None else qr
    keys = st["keys"] if kr is None else np.concatenate([st["keys"][:, :P], kr], axis=1)
    vis = st["vis"] if vis is None else vis
    heads = np.arange(hq) // (hq // hkv) if heads is None else heads
    sc = spec.scale if scale is None else scale
    z = logit_mult * np.einsum("bihe,bjhe->bhij", qr, keys[:, :, heads]) * sc + (st["bias"] if bias is None else bias)
    z = np.where(vis[:, None], z, -np.inf)
    top = np.max(z, axis=-1, keepdims=True)
    e = np.exp(z - np.where(np.isfinite(top), top, 0.0))
    tot = e.sum(axis=-1, keepdims=True)
    p = np.where(tot > 0, e / np.where(tot > 0, tot, 1.0), 0.0)
    o = np.einsum("bhij,bjhe->bihe", p, st["values"][:, :, heads]).reshape(b, s, hq * d)
    return o @ st["W"]["wo"].T


def _rope(x, positions, spec, **changes):
    c = replace(spec, **changes) if changes else spec
    return rotation.apply(x, positions, rotary_dim=c.rotary_dim or c.head_dim, base=c.base, layout=c.layout,
                          scaling=c.scaling, seq_len=c.seq_len or None, backend="numpy")


def encoding_models(st, spec, positions):
    """(description, output) for the encoding faults."""
    out = []
    if spec.encoding in ("alibi", "kerple", "fire", "t5"):
        return bias_models(st, spec, positions)
    if spec.encoding != "rope":
        return out
    restart = np.broadcast_to(np.arange(positions.shape[1]), positions.shape).copy()
    shifts = {"RoPE at positions restarting from 0 (the KV-cache offset or the given positions ignored)": restart,
              "RoPE at positions one too high": positions + 1, "RoPE at positions one too low": positions - 1}
    for what, pos in shifts.items():
        out.append((what, recompute(st, spec, qr=_rope(st["q"], pos, spec), kr=_rope(st["k"], pos, spec))))
        out.append((what + " for the queries only", recompute(st, spec, qr=_rope(st["q"], pos, spec))))
    other = "interleaved" if spec.layout == "half" else "half"
    out.append((f"RoPE pairs in the {other} layout instead of {spec.layout}",
                recompute(st, spec, qr=_rope(st["q"], positions, spec, layout=other),
                          kr=_rope(st["k"], positions, spec, layout=other))))
    out.append(("no RoPE applied", recompute(st, spec, qr=st["q"], kr=st["k"])))
    return out


def causal_models(st, spec, mask):
    if not spec.causal:
        return []
    b, s, K = st["vis"].shape
    P = K - s
    out = []
    for shift, what in ((1, "each query also sees the next token (mask diagonal off by one)"),
                        (-1, "each query does not see itself (mask diagonal off by one)")):
        vis = mask[:, None, :] & (np.arange(K)[None, :] <= P + np.arange(s)[:, None] + shift)[None]
        out.append((what, recompute(st, spec, vis=vis)))
    return out


def padding_models(st, spec, mask):
    if mask.all():
        return []
    b, s, K = st["vis"].shape
    P = K - s
    vis = np.ones((b, s, K), dtype=bool)
    if spec.causal:
        vis &= (np.arange(K)[None, :] <= P + np.arange(s)[:, None])[None]
    return [("the padding mask is ignored: padded keys get weight", recompute(st, spec, vis=vis))]


def scale_models(st, spec):
    """The scale fault of this spec: (code, [(description, output)]): 1/sqrt(d) left out, or, where
    the layer has its own logit scale (T5: 1), 1/sqrt(d) applied instead (SDPA's default kept)."""
    if spec.logit_scale is None:
        return "attention-scale-missing", [("the logits are not divided by sqrt(head_dim)", recompute(st, spec, scale=1.0))]
    return "attention-scale-wrong", [(f"the logits are scaled by 1/sqrt(head_dim) = {spec.head_dim ** -0.5:.6g}, not by "
                                      f"the layer's {spec.scale:g} (SDPA's default scale kept)",
                                      recompute(st, spec, scale=spec.head_dim ** -0.5))]


def factor_models(st, spec):
    if spec.encoding != "rope":
        return []
    f = frequencies(spec.rotary_dim or spec.head_dim, spec.base, spec.scaling, spec.seq_len or None)[1]
    if f == 1.0:
        return []
    s = st["X"].shape[1]
    P = st["keys"].shape[1] - s
    return [(f"the attention factor {f:.6g} applied twice to cos and sin (logits times f^4, not f^2)",
             recompute(st, spec, qr=st["qr"] * f, kr=st["keys"][:, P:] * f)),
            (f"the attention factor {f:.6g} applied again as a softmax temperature (logits times f^4)",
             recompute(st, spec, logit_mult=f * f))]


def bias_models(st, spec, positions):
    """(description, output) for an additive bias gone wrong: its sign flipped, no bias at all,
    KERPLE's other variant, T5's buckets with the other directionality."""
    bias = st["bias"]
    out = [("the position bias is added with the opposite sign", recompute(st, spec, bias=-bias)),
           ("no position bias is added", recompute(st, spec, bias=np.zeros_like(bias)))]
    kpos = st["kpos"]
    if spec.encoding == "kerple":
        other = "power" if spec.kerple_variant == "log" else "log"
        swapped = np.stack([kerple.bias(positions[i], kpos[i], other, spec.kerple_r1, spec.kerple_r2,
                                        backend="numpy") for i in range(positions.shape[0])])
        out.append((f"KERPLE's {other} variant computed for the {spec.kerple_variant} variant",
                    recompute(st, spec, bias=swapped)))
    if spec.encoding == "t5":
        c = replace(reference_config(spec), causal=not spec.causal)
        flipped = np.stack([t5_bias(c, positions[i], kpos[i], st["W"]["rel_bias"]) for i in range(positions.shape[0])])
        kind = "bidirectional" if spec.causal else "causal (unidirectional)"
        out.append((f"T5 buckets computed as {kind}", recompute(st, spec, bias=flipped)))
    return out


def converter_rows(rows, n_heads):
    """int64 [rows]: the row order of a checkpoint converter's per-head permutation with ``n_heads``
    heads, W[idx] = W.reshape(n_heads, 2, rows // n_heads // 2, -1).swapaxes(1, 2).reshape(rows, -1)
    (llama.cpp's convert_hf_to_gguf ``permute``: each head's rotate_half rows (j, j + r/2) to
    interleaved rows (2j, 2j + 1)); None when rows is not a multiple of 2 n_heads."""
    if n_heads < 1 or rows % (2 * n_heads):
        return None
    return np.arange(rows).reshape(n_heads, 2, rows // n_heads // 2).swapaxes(1, 2).reshape(-1)


def row_permutations(heads, hq, hkv, d):
    """(description, idx [heads d]) of the projection-row orders a converter or a loader produces
    for a q (heads = hq) or k (heads = hkv) projection, in the basis of the spec's own layout:
    each head's rows in the other pair layout's order (either direction), and the permutation
    into the other layout done with a wrong head count and undone with the right one (or the
    reverse): llama.cpp's convert.py before PR 3364 permuted k with hq // hkv heads, HF's GGUF
    loader (before PR 31788) un-permuted k with hq."""
    rows = heads * d
    right = converter_rows(rows, heads)
    out = [("in the other pair layout's order within each head", right),
           ("in the other pair layout's order within each head (the inverse permutation)", np.argsort(right))]
    for wrong in sorted({hq, hq // hkv} - {heads}):
        idx = converter_rows(rows, wrong)
        if idx is None:
            continue
        out.append((f"permuted per head with {wrong} heads instead of {heads} (a converter's wrong head count)",
                    idx[np.argsort(right)]))
        out.append((f"un-permuted per head with {wrong} heads instead of {heads} (a loader's wrong head count)",
                    right[np.argsort(idx)]))
    return out


def head_models(st, spec, positions):
    """(description, output) for q or k projection rows permuted within heads (the other pair
    layout's order, or a converter's per-head permutation with a wrong head count: the GQA bug
    of llama.cpp's convert.py and HF's GGUF loader), and for query heads grouped onto the wrong kv
    heads (h % hkv in place of h // (hq / hkv), torch's repeat in place of repeat_interleave)."""
    hq, hkv, d = spec.num_heads, spec.num_kv_heads, spec.head_dim
    out = []
    if 1 < hkv < hq:
        out.append((f"query head h reads kv head h % {hkv} instead of h // {hq // hkv} (kv heads repeated, not "
                    "interleaved)", recompute(st, spec, heads=np.arange(hq) % hkv)))
    if d % 2:
        return out

    def encode(x):
        return _rope(x, positions, spec) if spec.encoding == "rope" else x

    for name, heads in (("k", hkv), ("q", hq)):
        x = st[name]
        flat = x.reshape(*x.shape[:2], heads * d)
        for what, idx in row_permutations(heads, hq, hkv, d):
            moved = encode(flat[..., idx].reshape(x.shape))
            model = recompute(st, spec, kr=moved) if name == "k" else recompute(st, spec, qr=moved)
            out.append((f"the {name} projection's rows {what}", model))
    return out
