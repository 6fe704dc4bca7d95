"""The float64 RoPE reference as the rotary protocols use it (rope's and gaussian_rope's, through
conformance.core.rotation_apply): tables for a case, cached per case.

Grading compares an output with the reference applied to the *dtype-rounded* input (the input
the adapter actually received), so the budget covers only the implementation's own rounding
(docs/tolerance.md, section 1). The cos/sin table depends only on positions and frequencies, so
it is computed once per case (NumPy backend of reference.rope: no Numba compilation) and reused
for every dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference.numerics import frequencies as reference_frequencies, layouts, rotation


@dataclass(frozen=True)
class Tables:
    """cos, sin [..., r/2] (attention factor included), phi = |m * theta_i| [..., r/2], inv_freq [r/2]."""

    cos: np.ndarray
    sin: np.ndarray
    phi: np.ndarray
    inv_freq: np.ndarray
    attention_factor: float


_CACHE: dict = {}
_CACHE_SIZE = 4


def _key(positions: np.ndarray, spec) -> tuple:
    scaling = None if spec.scaling is None else repr(sorted(dict(spec.scaling).items()))
    pos = np.ascontiguousarray(positions, dtype=np.int64)
    return (spec.rotary_dim, spec.base, scaling, spec.seq_len, pos.shape, pos.tobytes())


def _scaling(spec) -> dict:
    if spec.scaling is None:
        return {}
    return {"scaling": dict(spec.scaling), "seq_len": spec.seq_len or None}


def frequencies(spec) -> tuple[np.ndarray, float]:
    """(inv_freq float64 [r/2], attention_factor) of the spec, scaling included."""
    if spec.scaling is None:
        return reference_frequencies.inv_freq(spec.rotary_dim, spec.base), 1.0
    return reference_frequencies.frequencies(spec.rotary_dim, spec.base, **_scaling(spec))


def tables(positions, spec) -> Tables:
    """The reference cos/sin of positions [...] for the spec (cached for the last few calls)."""
    key = _key(positions, spec)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    pos = np.asarray(positions, dtype=np.int64)
    inv, factor = frequencies(spec)
    phi = np.abs(pos.astype(np.float64)[..., None] * inv)
    # The attention factor of a scaling is included (f cos, f sin), as HF returns them.
    cos, sin = rotation.cos_sin(pos, spec.rotary_dim, spec.base, backend="numpy", **_scaling(spec))
    for table in (cos, sin, phi, inv):
        table.setflags(write=False)  # shared by every later case that hits the cache
    result = Tables(cos, sin, phi, inv, float(factor))
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = result
    return result


def apply(x_f64: np.ndarray, positions, spec, layout: str) -> np.ndarray:
    """The reference output for input x [b, s, h, d] (float64) in the given pair layout."""
    t = tables(positions, spec)
    return layouts.rotate_pairs(x_f64, t.cos, t.sin, layout=layout, rotary_dim=spec.rotary_dim)


def pair_indices(rotary_dim: int, layout: str):
    return layouts.pair_indices(rotary_dim, layout)
