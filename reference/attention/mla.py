"""DeepSeek's multi-head latent attention (MLA), its positional part, in float64 (NumPy; never torch).

Formula (DeepSeek-V2, arXiv 2405.04434, section 2.1.3 "decoupled rotary position embedding"; the
softmax scale as DeepSeek's released modeling_deepseek.py and transformers' DeepseekV3Attention
compute it, ``yarn_apply_mscale``):

    q_pe', k_pe' = R(p) q_pe, R(p) k_pe           reference.rope.apply over the d_rope features,
                                                  any scaling; YaRN's attention factor
                                                  mscale(s, mscale) / mscale(s, mscale_all_dim)
                                                  multiplies cos and sin (1 when the two are equal,
                                                  as in every released DeepSeek config)
    z_hij = (q_nope_hi . k_nope_hj + q_pe'_hi . k_pe'_j) * c      k_pe' is ONE key per token,
                                                  shared by every head (MLA's decoupled key)
    c = (d_nope + d_rope)^(-1/2) * m^2,  m = mscale(s, mscale_all_dim) = 0.1 mscale_all_dim ln s + 1
                                                  when the scaling is YaRN with factor s > 1 and a
                                                  non-zero mscale_all_dim, else m = 1
    p_hij = softmax_j(z_hi.) over j <= i (causal) or every j;   out_hi = sum_j p_hij v_hj

Shapes: q_nope [b, s, h, d_nope], q_pe [b, s, h, d_rope], k_nope [b, s, h, d_nope], k_pe
[b, s, 1, d_rope], v [b, s, h, d_v], positions int64 [b, s]; out [b, s, h, d_v].

Fast mode (``stages``, ``forward``): NumPy float64, RoPE from reference.rope (numpy backend);
its error is a few units of 2^-53 relative to the logits' magnitudes, negligible beside any
budget of a float32 or narrower implementation. Golden mode: the chain in mpmath at 192 bits
from the float64 inputs, each output rounded once to the nearest double (faithful, as every
reduction: certified against mla_oracle.py, an independent reading).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import mpmath
import numpy as np

from reference.golden.certify import nearest_double
from reference.numerics import rotation
from reference.numerics import scaling as scaling_types
from reference.numerics.validate import check_base, check_layout, check_mode

from .core import GOLDEN_PREC, MAX_ABS, MAX_POSITION, Config, _golden_frequencies, _golden_rotate

INPUTS = ("q_nope", "q_pe", "k_nope", "k_pe", "v")


@dataclass(frozen=True)
class MlaConfig:
    """num_heads h; d_nope (qk_nope_head_dim), d_rope (qk_rope_head_dim, even), d_v (v_head_dim);
    base, layout ("interleaved" as DeepSeek's checkpoints pair the rope features, or "half") and
    scaling (HF rope_parameters form, YaRN with factor, original_max_position_embeddings,
    beta_fast, beta_slow, mscale, mscale_all_dim) of the rope part; causal."""

    num_heads: int
    d_nope: int
    d_rope: int
    d_v: int
    base: float = 10000.0
    layout: str = "interleaved"
    scaling: Optional[Mapping[str, Any]] = field(default=None, hash=False, compare=False)
    causal: bool = True

    @property
    def qk_head_dim(self) -> int:
        return self.d_nope + self.d_rope

    def rope_config(self) -> Config:
        """The d_rope features as reference.attention's rope Config (frequencies, rotation)."""
        return Config(1, 1, self.d_rope, True, "rope", self.base, self.d_rope, self.layout, self.scaling)


def _int(value, name, low, high):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or not low <= value <= high:
        raise ValueError(f"{name}: must be an integer from {low} to {high}, got {value!r}")
    return int(value)


def check_config(c: MlaConfig) -> MlaConfig:
    if not isinstance(c, MlaConfig):
        raise ValueError(f"config: must be a reference.attention.mla.MlaConfig, got {type(c).__name__}")
    _int(c.num_heads, "num_heads", 1, 4096)
    _int(c.d_nope, "d_nope", 0, 4096)
    r = _int(c.d_rope, "d_rope", 2, 4096)
    if r % 2:
        raise ValueError(f"d_rope: must be even, got {r}")
    _int(c.d_v, "d_v", 1, 4096)
    check_base(c.base)
    check_layout(c.layout)
    scaling_types.resolve(c.scaling)
    return c


def mscale(factor, m=1.0) -> float:
    """DeepSeek's yarn_get_mscale: 0.1 m ln(factor) + 1 for factor > 1, else 1."""
    return 0.1 * m * math.log(factor) + 1.0 if factor > 1 else 1.0


def softmax_scale(c: MlaConfig) -> float:
    """c = (d_nope + d_rope)^(-1/2) m^2, m = mscale(factor, mscale_all_dim) when the scaling is
    not the default one and mscale_all_dim is non-zero (transformers' yarn_apply_mscale; DeepSeek's
    modeling_deepseek.py reads the same field), else m = 1. In float64: within a few ulps."""
    base = c.qk_head_dim ** -0.5
    rope_type, params = scaling_types.resolve(c.scaling)
    if rope_type != "default" and params.get("mscale_all_dim"):
        m = mscale(float(params["factor"]), float(params["mscale_all_dim"]))
        return base * m * m
    return base


def softmax_scale_exact(c: MlaConfig):
    """The same scale as an mpf at the caller's precision."""
    base = 1 / mpmath.sqrt(c.qk_head_dim)
    rope_type, params = scaling_types.resolve(c.scaling)
    if rope_type != "default" and params.get("mscale_all_dim"):
        s = mpmath.mpf(float(params["factor"]))
        m = 1 + mpmath.mpf(float(params["mscale_all_dim"])) * mpmath.log(s) / 10 if s > 1 else mpmath.mpf(1)
        return base * m * m
    return base


def _array(a, name, shape):
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiu" or arr.shape != tuple(shape):
        raise ValueError(f"{name}: must be a real array of shape {list(shape)}, got {arr.dtype} {list(arr.shape)}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or (arr.size and np.max(np.abs(arr)) > MAX_ABS):
        raise ValueError(f"{name}: must be finite with |x| <= 2**400")
    return arr


def check_inputs(q_nope, q_pe, k_nope, k_pe, v, positions, c: MlaConfig):
    """Validated float64 arrays (q_nope, q_pe, k_nope, k_pe, v) and int64 positions."""
    qn = np.asarray(q_nope)
    if qn.ndim != 4:
        raise ValueError(f"q_nope: must be 4-D [batch, seq, heads, d_nope], got shape {list(qn.shape)}")
    b, s, h = qn.shape[:3]
    if h != c.num_heads:
        raise ValueError(f"q_nope: has {h} heads, the config {c.num_heads}")
    arrays = (_array(q_nope, "q_nope", (b, s, h, c.d_nope)), _array(q_pe, "q_pe", (b, s, h, c.d_rope)),
              _array(k_nope, "k_nope", (b, s, h, c.d_nope)), _array(k_pe, "k_pe", (b, s, 1, c.d_rope)),
              _array(v, "v", (b, s, h, c.d_v)))
    p = np.asarray(positions)
    if p.shape != (b, s) or p.dtype.kind not in "iu" or (p.size and np.max(np.abs(p)) > MAX_POSITION):
        raise ValueError(f"positions: must be integers of shape [{b}, {s}] with |p| <= 2**40")
    return (*arrays, p.astype(np.int64))


def visible(c: MlaConfig, s: int) -> np.ndarray:
    """bool [s, s]: key j is visible to query i (j <= i when causal)."""
    return np.tril(np.ones((s, s), dtype=bool)) if c.causal else np.ones((s, s), dtype=bool)


def rotate(x, positions, c: MlaConfig) -> np.ndarray:
    """RoPE of the rope features x [b, s, heads, d_rope] (reference.rope, numpy backend)."""
    return rotation.apply(x, positions, rotary_dim=c.d_rope, base=c.base, layout=c.layout, scaling=c.scaling,
                          backend="numpy")


def stages(q_nope, q_pe, k_nope, k_pe, v, positions, config, *, scale=None) -> dict:
    """The float64 intermediates (for budgets and diagnosis): the validated inputs, qr [b,s,h,r]
    and kr [b,s,1,r] (rotated), q = [q_nope | qr] and k = [k_nope | kr broadcast] [b,s,h,d_qk],
    scale, z [b,h,s,s] (-inf where not visible), p [b,h,s,s], out [b,s,h,d_v], vis [s,s].
    ``scale``: a logit scale other than softmax_scale(config) (the fault models)."""
    c = check_config(config)
    qn, qp, kn, kp, vv, pos = check_inputs(q_nope, q_pe, k_nope, k_pe, v, positions, c)
    b, s, h = qn.shape[:3]
    qr, kr = rotate(qp, pos, c), rotate(kp, pos, c)
    q = np.concatenate([qn, qr], axis=-1)
    k = np.concatenate([kn, np.broadcast_to(kr, (b, s, h, c.d_rope))], axis=-1)
    sc = softmax_scale(c) if scale is None else float(scale)
    vis = visible(c, s)
    z = np.einsum("bihe,bjhe->bhij", q, k) * sc
    z = np.where(vis, z, -np.inf)
    zmax = np.max(z, axis=-1, keepdims=True)
    e = np.exp(z - zmax)
    p = e / e.sum(axis=-1, keepdims=True)
    out = np.einsum("bhij,bjhe->bihe", p, vv)
    return dict(q_nope=qn, q_pe=qp, k_nope=kn, k_pe=kp, v=vv, positions=pos, qr=qr, kr=kr, q=q, k=k, scale=sc,
                z=z, p=p, out=out, vis=vis)


def forward(q_nope, q_pe, k_nope, k_pe, v, positions, config, *, mode="fast") -> np.ndarray:
    """float64 [b, s, h, d_v]: MLA's attention output (module docstring)."""
    if check_mode(mode) == "golden":
        return _golden(q_nope, q_pe, k_nope, k_pe, v, positions, config)
    return stages(q_nope, q_pe, k_nope, k_pe, v, positions, config)["out"]


def _golden(q_nope, q_pe, k_nope, k_pe, v, positions, config) -> np.ndarray:
    c = check_config(config)
    qn, qp, kn, kp, vv, pos = check_inputs(q_nope, q_pe, k_nope, k_pe, v, positions, c)
    b, s, h = qn.shape[:3]
    vis = visible(c, s)
    out = np.zeros((b, s, h, c.d_v))
    rc = c.rope_config()
    with mpmath.workprec(GOLDEN_PREC):
        mpf = mpmath.mpf
        theta, factor = _golden_frequencies(rc)
        scale = softmax_scale_exact(c)

        def vec(a):
            return [mpf(float(x)) for x in a]

        for bi in range(b):
            kr = [_golden_rotate(vec(kp[bi, j, 0]), int(pos[bi, j]), theta, factor, rc) for j in range(s)]
            for hh in range(h):
                keys = [vec(kn[bi, j, hh]) + kr[j] for j in range(s)]
                vals = [vec(vv[bi, j, hh]) for j in range(s)]
                for i in range(s):
                    q = vec(qn[bi, i, hh]) + _golden_rotate(vec(qp[bi, i, hh]), int(pos[bi, i]), theta, factor, rc)
                    js = [j for j in range(s) if vis[i, j]]
                    z = [mpmath.fdot(q, keys[j]) * scale for j in js]
                    top = max(z)
                    e = [mpmath.exp(zj - top) for zj in z]
                    total = mpmath.fsum(e)
                    for x in range(c.d_v):
                        out[bi, i, hh, x] = nearest_double(mpmath.fsum(e[t] * vals[j][x] for t, j in enumerate(js))
                                                           / total)
    return out
