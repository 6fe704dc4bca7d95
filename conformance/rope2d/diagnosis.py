"""Why a rope2d.apply output fails: axis mistakes computed in float64, kept when one explains the
output far better than the case's own rotation."""

from __future__ import annotations

import numpy as np

from conformance.results import Diagnosis
from conformance.rope2d.rotation import reference
from reference.numerics.frequencies import inv_freq
from reference.numerics.layouts import pair_indices


def _one_ladder(x, coords, spec):
    """1-D RoPE over all d/2 pairs (ladder base^(-2i/d)), the first d/4 pairs at the first axis'
    coordinate and the rest at the second's, CLS tokens left alone."""
    c = np.asarray(coords)[..., ::-1] if tuple(spec.order) == ("y", "x") else np.asarray(coords)
    d = spec.head_dim
    first, second = pair_indices(d, spec.layout)
    theta = inv_freq(d, spec.base)
    axis = np.repeat([0, 1], d // 4)
    ang = c[..., axis].astype(np.float64) * theta
    out = np.array(x, dtype=np.float64, copy=True)
    a, b = x[..., first], x[..., second]
    cos, sin = np.cos(ang)[:, :, None, :], np.sin(ang)[:, :, None, :]
    rotated_a, rotated_b = a * cos - b * sin, a * sin + b * cos
    keep = np.arange(x.shape[1]) >= spec.cls_tokens
    out[..., first] = np.where(keep[None, :, None, None], rotated_a, a)
    out[..., second] = np.where(keep[None, :, None, None], rotated_b, b)
    return out


def split_ladder(x, coords, spec, first_odd=False):
    """Pixtral's 2-D RoPE (transformers' PixtralRotaryEmbedding, mistral-inference
    ``precompute_freqs_cis_2d``): the fine ladder f_j = base^(-2j/d) split by parity, the first
    axis on f[0::2] = base^(-4k/d) and the second on f[1::2] = base^(-(4k+2)/d), where the case
    turns both axes by base^(-4k/d) (first_odd: the reverse). Built as RoPE-Mixed frequencies."""
    d, heads = spec.head_dim, x.shape[2]
    fine = spec.base ** (-2.0 * np.arange(d // 2) / d)
    even, odd = fine[0::2], fine[1::2]
    lead, tail = (odd, even) if first_odd else (even, odd)
    zero = np.zeros(d // 4)
    first_axis, second_axis = np.concatenate([lead, zero]), np.concatenate([zero, tail])
    by_coord = (first_axis, second_axis) if tuple(spec.order) == ("x", "y") else (second_axis, first_axis)
    freqs = np.stack([np.broadcast_to(f, (heads, d // 2)) for f in by_coord])
    return reference(x, coords, spec, freqs=freqs)


def diagnose(spec, prepared, graded) -> list:
    x, coords, out = prepared.inputs_f64["x"], prepared.inputs_f64["coords"], graded.output_f64
    if out is None or not np.all(np.isfinite(out)):
        return []
    truth = np.linalg.norm(out - reference(x, coords, spec))
    other = ("y", "x") if tuple(spec.order) == ("x", "y") else ("x", "y")
    if spec.freqs is None:
        candidates = [
            ("axes-swapped", f"the first d/4 pairs read {other[0]} and the last {other[1]}, instead of "
             f"{spec.order[0]} then {spec.order[1]}", lambda: reference(x, coords, spec, order=other)),
            ("axis-ladder", "one ladder base^(-2i/d) over all pairs instead of base^(-4k/d) for each axis",
             lambda: _one_ladder(x, coords, spec)),
            ("ladder-split", f"the second axis ({spec.order[1]}) turned by the odd steps base^(-(4k+2)/d) of the "
             "fine ladder and the first by its even steps (Pixtral's freqs[::2] / freqs[1::2]), instead of the "
             "same base^(-4k/d) for both", lambda: split_ladder(x, coords, spec)),
            ("ladder-split", f"the first axis ({spec.order[0]}) turned by the odd steps base^(-(4k+2)/d) of the "
             "fine ladder, the second by its even steps, instead of the same base^(-4k/d) for both",
             lambda: split_ladder(x, coords, spec, first_odd=True)),
        ]
    else:
        candidates = [("axes-swapped", "x f_y + y f_x: the coordinates meet the other axis' frequencies",
                       lambda: reference(x, np.ascontiguousarray(coords[..., ::-1]), spec))]
    for k in (1, -1):
        candidates.append(("coordinate-offset", f"patch coordinates shifted by {k:+d} on both axes"
                           + (" (counted from 1, as torchtune's and Llama 4 vision's patch positions are)"
                              if k == 1 else ""), lambda k=k: reference(x, coords + k, spec)))
    if spec.cls_tokens:
        candidates.append(("cls-rotated", f"the {spec.cls_tokens} CLS token(s) are rotated (at coordinates "
                           f"{coords[0, 0].tolist()}) instead of passed through",
                           lambda: reference(x, coords, spec, cls_tokens=0)))
    for code, message, model in candidates:
        m = model()
        miss = np.linalg.norm(out - m)
        if miss <= 1e-2 * max(np.linalg.norm(m), 1e-300) and miss <= 0.1 * truth:
            return [Diagnosis(code, message)]
    return []
