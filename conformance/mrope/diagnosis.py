"""Why an mrope.apply output fails: candidate section mistakes, each computed in float64 and kept
when it explains the output far better than the case's own M-RoPE."""

from __future__ import annotations

import itertools

import numpy as np

from conformance.mrope.apply import reference
from conformance.results import Diagnosis
from reference import mrope, rope


def rebased(x, positions, spec):
    """Each section rotated with its own ladder base^(-2j/(2 n_k)), j = 0..n_k-1 (torchtune-style)."""
    r = spec.rotary_dim
    first, second = rope.pair_indices(r, spec.layout)
    which = mrope.streams(r, spec.mrope_section, spec.variant)
    out = np.array(x, dtype=np.float64, copy=True)
    for stream in range(3):
        pairs = np.flatnonzero(which == stream)
        if not pairs.size:
            continue
        theta = rope.inv_freq(2 * pairs.size, spec.base)
        ang = positions[stream].astype(np.float64)[..., None] * theta  # [b, s, n_k]
        c, s = np.cos(ang)[:, :, None, :], np.sin(ang)[:, :, None, :]
        a, b = x[..., first[pairs]], x[..., second[pairs]]
        out[..., first[pairs]] = a * c - b * s
        out[..., second[pairs]] = a * s + b * c
    return out


def _candidates(x, positions, spec):
    yield "section-rebased", "each section uses its own ladder base^(-2j/n) instead of its slice of one ladder", \
        lambda: rebased(x, positions, spec)
    for perm in itertools.permutations(range(3)):
        if perm != (0, 1, 2):
            names = "".join("thw"[p] for p in perm)
            yield "stream-swapped", f"the sections read the streams ({', '.join('thw'[p] for p in perm)}) " \
                f"instead of (t, h, w)", lambda perm=perm, names=names: reference(x, positions[list(perm)], spec)
    other = "qwen3" if spec.variant == "qwen2" else "qwen2"
    section = spec.mrope_section
    try:
        mrope.streams(spec.rotary_dim, section, other)
        yield "variant-swapped", f"{other}'s section rule applied where the case is {spec.variant}", \
            lambda: reference(x, positions, spec, variant=other)
    except ValueError:
        pass


def diagnose(spec, prepared, graded, dtype) -> list:
    x, pos, out = prepared.inputs_f64["x"], prepared.inputs_f64["positions"], graded.output_f64
    if out is None or not np.all(np.isfinite(out)):
        return []
    truth = np.linalg.norm(out - reference(x, pos, spec))
    for code, message, model in _candidates(x, pos, spec):
        m = model()
        miss = np.linalg.norm(out - m)
        if miss <= 1e-2 * max(np.linalg.norm(m), 1e-300) and miss <= 0.1 * truth:
            return [Diagnosis(code, message)]
    return []
