"""2-D RoPE's rotation as rope2d.apply grades it, on arrays: the float64 reference
(reference.rope2d), each pair's angle and the per-profile grading of a rotated output against
RoPE's rotation budget (score); the protocol (apply.py), its backward (backward.py, the
cotangent as x) and its diagnosis use them.
"""

from __future__ import annotations

import numpy as np

from conformance.core import tolerance
from conformance.core.protocol import Graded
from conformance.core import rotation_budgets as budgets
from conformance.core.tensors import argmax_index, finite_max, over_budget, per_position_curve, ratio_max, token_max
from reference import rope2d
from reference.numerics.frequencies import inv_freq
from reference.numerics.layouts import pair_indices


def reference(x, coords, spec, **changes):
    kw = dict(base=spec.base, layout=spec.layout, order=spec.order, cls_tokens=spec.cls_tokens, backend="numpy",
              freqs=None if spec.freqs is None else np.array(spec.freqs))
    kw.update(changes)
    return rope2d.apply(x, coords, **kw)


def pair_angles(coords, spec) -> np.ndarray:
    """|c theta_k| per pair [b, s, d/2]."""
    c = np.asarray(coords, dtype=np.float64)
    if tuple(spec.order) == ("y", "x"):
        c = c[..., ::-1]
    theta = inv_freq(spec.head_dim // 2, spec.base)
    return np.abs(np.concatenate([c[..., :1] * theta, c[..., 1:] * theta], axis=-1))


def score(graded: Graded, profile: str, spec, dtype: str, x, coords, err) -> None:
    """Fill graded's ratio, worst index, mismatch and curve for one profile: err [b, s, h, d] against
    the rotation budget of the pairs of x at |c theta_k| (CLS tokens: the passthrough budget of x).
    (The backward grades its gradient with the cotangent as x: conformance.rope2d.backward.)"""
    d = spec.head_dim
    first, second = pair_indices(d, spec.layout)
    mag = np.abs(x[..., first]) + np.abs(x[..., second])
    if spec.freqs is None:
        phi = pair_angles(coords, spec)[:, :, None, :]
    else:  # RoPE-Mixed: |x f_x| + |y f_y| per head and pair
        f = np.abs(np.array(spec.freqs))
        c = np.abs(coords.astype(np.float64))
        phi = c[:, :, None, None, 0] * f[0][None, None] + c[:, :, None, None, 1] * f[1][None, None]
    pair_err = np.maximum(err[..., first], err[..., second])
    cls = np.arange(x.shape[1]) < spec.cls_tokens
    q = d // 4  # each axis: RoPE's budget for its own ladder of d/4 frequencies
    if spec.freqs is None:
        budget = np.concatenate([budgets.rotation_budget(mag[..., sl], phi[..., sl], d // 2, spec.base, dtype, profile)
                                 for sl in (slice(0, q), slice(q, 2 * q))], axis=-1)
    else:  # given frequencies: no power to round, base 1 leaves the angle's own roundings
        budget = budgets.rotation_budget(mag, phi, d, 1.0, dtype, profile)
    through = np.maximum(tolerance.passthrough_budget(x[..., first], dtype, profile),
                         tolerance.passthrough_budget(x[..., second], dtype, profile))
    budget = np.where(cls[None, :, None, None], through, budget)
    r = tolerance.ratio(pair_err, budget)
    graded.ratio[profile] = finite_max(r)
    idx = argmax_index(r)
    idx[-1] = int(first[idx[-1]])
    graded.worst_index[profile] = idx
    graded.mismatch[profile] = over_budget(r) + ("pairs",)
    row_major = coords[..., 1] * (int(coords[..., 0].max()) + 1) + coords[..., 0]
    graded.curve[profile] = per_position_curve(row_major, token_max(err), token_max(budget), ratio_max(r))
