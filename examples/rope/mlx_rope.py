"""RoPE in MLX, graded with ``--framework mlx``: the adapters take and return ``mlx.core.array``.

``apply`` (rope.apply) is written with MLX array ops the way Hugging Face's torch RoPE computes it: theta_i = base ** (-2i / r) and the angles m * theta_i in
float32, cos and sin cast to x's dtype, ``x * cos + rotate_half(x) * sin`` on the "half" pairs
(j, j + r/2), or on the pairs (2j, 2j + 1) for "interleaved"; partial rotary leaves the tail;
scaling "default" and "linear" (positions / factor), others raise Unsupported.

``apply_fast`` is MLX's fused kernel ``mx.fast.rope(x, dims, traditional=..., base=..., scale=...,
offset=...)`` (what ``mlx.nn.RoPE`` calls): one start offset per sequence, so it grades the cases
whose rows hold consecutive positions and raises Unsupported for the others. MLX builds theta_i as
exp(-i * fl(fl(ln base) / h)), an exponent rounded three times, which RoPE's angle budget counts
since this kernel failed the one-rounding budget by up to 1.18 (docs/tolerance.md section 3).
Measured here (mlx 0.32.4, CPU, seed 2809685545): 90 passed, 92 acceptable, 160 skipped; worst
0.63 of the budget in float32, 0.72 in bfloat16:

    posref conform examples/rope/mlx_rope.py:apply --protocol rope.apply --framework mlx
    posref conform examples/rope/mlx_rope.py:apply_fast --protocol rope.apply --framework mlx
"""

import mlx.core as mx
import numpy as np

from conformance import Unsupported

FRAMEWORK = "mlx"  # the array library its adapters take and return (posref conform --framework mlx)


def _factor(spec):
    scaling = dict(spec.scaling or {})
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return 1.0
    if kind == "linear":
        return float(scaling["factor"])
    raise Unsupported(f"rope_type {kind!r} is not implemented by this example")


def _rotate(x, positions, spec):
    """x [b, s, h, d], positions [b, s]."""
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (mx.arange(0, r, 2, dtype=mx.float32) / r))
    freqs = (positions.astype(mx.float32) / _factor(spec))[..., None] * inv_freq  # [b, s, r/2]
    cos, sin = mx.cos(freqs)[:, :, None, :].astype(x.dtype), mx.sin(freqs)[:, :, None, :].astype(x.dtype)
    rot, rest = x[..., :r], x[..., r:]
    if spec.layout == "half":
        a, b = rot[..., : r // 2], rot[..., r // 2:]
        out = mx.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = mx.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(rot.shape)
    return mx.concatenate([out, rest], axis=-1)


def apply(x, positions, spec):
    if getattr(spec, "inplace", False):
        raise Unsupported("MLX arrays are not written in place")
    layout = getattr(spec, "tensor_layout", "bshd")
    if layout == "bhsd":
        return _rotate(x.transpose(0, 2, 1, 3), positions, spec).transpose(0, 2, 1, 3)
    if layout == "thd":
        return _rotate(x[None], positions[None], spec)[0]
    return _rotate(x, positions, spec)


def _offsets(positions):
    """One start per row, or Unsupported when a row's positions are not consecutive."""
    pos = np.array(positions)  # [b, s]
    start = pos[:, :1]
    if pos.shape[1] and not np.array_equal(pos, start + np.arange(pos.shape[1])[None, :]):
        raise Unsupported("mx.fast.rope takes one start offset per sequence: consecutive positions only")
    return mx.array(start[:, 0].astype(np.int32))


def _fast(x_bhsd, offsets, spec):
    return mx.fast.rope(x_bhsd, spec.rotary_dim, traditional=spec.layout == "interleaved", base=spec.base,
                        scale=1.0 / _factor(spec), offset=offsets)


def apply_fast(x, positions, spec):
    if getattr(spec, "inplace", False):
        raise Unsupported("MLX arrays are not written in place")
    layout = getattr(spec, "tensor_layout", "bshd")
    if layout == "bhsd":
        return _fast(x, _offsets(positions), spec)
    if layout == "thd":
        return _fast(x[None].transpose(0, 2, 1, 3), _offsets(positions[None]), spec).transpose(0, 2, 1, 3)[0]
    return _fast(x.transpose(0, 2, 1, 3), _offsets(positions), spec).transpose(0, 2, 1, 3)
