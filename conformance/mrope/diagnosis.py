"""Why an mrope.apply output fails: candidate mistakes, each computed in float64; among those that
explain the output far better than the case's own M-RoPE, the closest names the fault.

Every candidate is M-RoPE with one thing changed, written as angles phi [b, s, r/2] (pair i of a
token turned by phi_i) rotated by ``rotate``:

    section-rebased     each section with its own ladder base^(-2j/(2 n_k)) (torchtune-style port)
    stream-swapped      the sections read a permutation of (t, h, w)
    variant-swapped     Qwen2-VL's consecutive sections where the case is Qwen3-VL's interleaved
                        ones, or the reverse
    interleave-shifted  (qwen3) the interleaved t, h, w slots one pair off: h at pairs 3j and w at
                        3j + 1 (pair i reads the stream of pair i + 1), or h at 3j + 2 and w at
                        3j + 3 (the rotation starting one slot later)
    layout-swapped      pairs (j, j + r/2) where the case pairs (2i, 2i + 1), or the reverse (a
                        kernel hard-coded to one layout: vLLM's Triton M-RoPE kernel on GLM-4V)
    rotary-dim-mismatch the whole head rotated, its ladder over head_dim, where the case rotates
                        rotary_dim < head_dim (partial_rotary_factor ignored: MaxText; qwen3's
                        rule only, Qwen2's split needs the sections to cover the head), or the
                        first rotary_dim features turned with the head_dim ladder
    angle-precision     the angles p_s(i) theta_i computed in bfloat16 or float16, RoPE's four
                        ways (positions and inv_freq cast, the product rounded, the positions
                        only, inv_freq only): the error grows with the position
"""

from __future__ import annotations

import itertools

import numpy as np

from conformance.core.mutants import round_to
from conformance.mrope.rotation import reference
from conformance.results import Diagnosis
from reference import mrope
from reference.numerics.frequencies import inv_freq
from reference.numerics.layouts import pair_indices

LOW = ("bfloat16", "float16")


def rotate(x, phi, layout, rotary_dim):
    """x [b, s, h, d] with pair i of its first rotary_dim dims (``layout``) turned by phi [b, s, r/2]
    (float64, exact cos and sin); the tail copied."""
    first, second = pair_indices(rotary_dim, layout)
    out = np.array(x, dtype=np.float64, copy=True)
    with np.errstate(invalid="ignore"):  # float16 angles of positions past 65504 are inf: NaN, no match
        c, s = np.cos(phi)[:, :, None, :], np.sin(phi)[:, :, None, :]
    a, b = x[..., first], x[..., second]
    out[..., first] = a * c - b * s
    out[..., second] = a * s + b * c
    return out


def stream_positions(positions, which) -> np.ndarray:
    """float64 [b, s, n]: each pair's position, from its stream which [n] (0 t, 1 h, 2 w)."""
    return np.asarray(positions)[np.asarray(which), :, :].transpose(1, 2, 0).astype(np.float64)


def rebased(x, positions, spec):
    """Each section rotated with its own ladder base^(-2j/(2 n_k)), j = 0..n_k-1 (torchtune-style)."""
    which = mrope.streams(spec.rotary_dim, spec.mrope_section, spec.variant)
    theta = np.empty(which.size)
    for stream in range(3):
        pairs = np.flatnonzero(which == stream)
        if pairs.size:
            theta[pairs] = inv_freq(2 * pairs.size, spec.base)
    return rotate(x, stream_positions(positions, which) * theta, spec.layout, spec.rotary_dim)


def shifted_streams(half, section, shift) -> np.ndarray:
    """Qwen3-VL's interleaved rule with its h and w slots moved by ``shift`` pairs: h at
    1 + shift, 4 + shift, ... below 3 h + shift, w at 2 + shift, ... below 3 w + shift (clipped to
    the half pairs, as a slice of a buggy kernel is), t elsewhere."""
    out = np.zeros(half, dtype=np.int64)
    for stream, offset in ((1, 1), (2, 2)):
        out[offset + shift:3 * section[stream] + shift:3] = stream
    return out


def low_precision_angles(positions, which, theta, low) -> list:
    """[(message, phi)]: the angles p theta_i computed in ``low`` as code gets them (RoPE's
    emulations, conformance.rope.diagnosis): all in low, the positions only, the product rounded,
    inv_freq only. Products of two bfloat16 (or float16) numbers are exact in float32, so each
    round_to is torch's own rounding."""
    p = stream_positions(positions, which)
    th32, th_low, p_low = round_to(theta, "float32"), round_to(theta, low), round_to(p, low)
    return [
        (f"angles computed in {low} (positions and inv_freq cast to {low})", round_to(p_low * th_low, low)),
        (f"positions cast to {low} before the angle product", round_to(p_low * th32, "float32")),
        (f"angles rounded to {low}", round_to(round_to(p * th32, "float32"), low)),
        (f"inv_freq rounded to {low}", round_to(p * th_low, "float32")),
    ]


def _candidates(x, positions, spec):
    r, d, layout = spec.rotary_dim, x.shape[-1], spec.layout
    theta = inv_freq(r, spec.base)
    which = mrope.streams(r, spec.mrope_section, spec.variant)
    yield "section-rebased", "each section uses its own ladder base^(-2j/n) instead of its slice of one ladder", \
        lambda: rebased(x, positions, spec)
    for perm in itertools.permutations(range(3)):
        if perm != (0, 1, 2):
            yield "stream-swapped", f"the sections read the streams ({', '.join('thw'[p] for p in perm)}) " \
                f"instead of (t, h, w)", lambda perm=perm: reference(x, positions[list(perm)], spec)
    other = "qwen3" if spec.variant == "qwen2" else "qwen2"
    try:
        mrope.streams(r, spec.mrope_section, other)
        yield "variant-swapped", f"{other}'s section rule applied where the case is {spec.variant}", \
            lambda: reference(x, positions, spec, variant=other)
    except ValueError:
        pass
    if spec.variant == "qwen3":
        for shift, how in ((-1, "pair i reads the stream of pair i + 1 (h at pairs 3j, w at 3j + 1)"),
                           (1, "the t, h, w rotation starts one pair later (h at pairs 3j + 2, w at 3j + 3)")):
            moved = shifted_streams(r // 2, spec.mrope_section, shift)
            yield "interleave-shifted", f"the interleaved sections are one pair off: {how}", \
                lambda moved=moved: rotate(x, stream_positions(positions, moved) * theta, layout, r)
    if r >= 4:
        swapped = "interleaved" if layout == "half" else "half"
        yield "layout-swapped", f"pairs follow the {swapped} layout, not the declared {layout} layout", \
            lambda: reference(x, positions, spec, layout=swapped)
    if r < d and spec.variant == "qwen3":
        # Qwen3's rule writes h and w into the first 3 h and 3 w pairs and leaves t elsewhere, so
        # it runs on the whole head's d/2 pairs unchanged (Qwen2's split would not).
        whole = np.zeros(d // 2, dtype=np.int64)
        whole[:r // 2] = which
        yield "rotary-dim-mismatch", f"the whole head ({d} features) is rotated with its own ladder over {d} " \
            f"instead of the first {r} (partial rotary ignored)", \
            lambda: rotate(x, stream_positions(positions, whole) * inv_freq(d, spec.base), layout, d)
    if r < d:
        yield "rotary-dim-mismatch", f"the first {r} features rotated with the whole head's ladder " \
            f"base^(-2i/{d}) (head_dim where rotary_dim belongs in the exponent)", \
            lambda: rotate(x, stream_positions(positions, which) * inv_freq(d, spec.base)[:r // 2], layout, r)
    for low in LOW:
        for message, phi in low_precision_angles(positions, which, theta, low):
            yield "angle-precision", f"{message}: the error grows with the position", \
                lambda phi=phi: rotate(x, phi, layout, r)


def diagnose(spec, prepared, graded, dtype) -> list:
    x, pos, out = prepared.inputs_f64["x"], prepared.inputs_f64["positions"], graded.output_f64
    if out is None or not np.all(np.isfinite(out)):
        return []
    truth = np.linalg.norm(out - reference(x, pos, spec))
    found = []
    for code, message, model in _candidates(x, pos, spec):
        m = model()
        miss = np.linalg.norm(out - m)
        if miss <= 1e-2 * max(np.linalg.norm(m), 1e-300) and miss <= 0.1 * truth:
            found.append((miss, code, message))
    if not found:
        return []
    # The closest of those that explain it (a one-pair interleave shift and a stream permutation
    # differ only past the interleaved slots, low frequencies where both come close), and any
    # other code the input cannot tell from it (the same miss: with h = t on every token, the
    # shift and the swap of h and w are the same rotation).
    best = min(miss for miss, _, _ in found)
    out_codes, diagnoses = set(), []
    for miss, code, message in sorted(found, key=lambda f: f[0]):
        if miss <= 1.001 * best and code not in out_codes:
            out_codes.add(code)
            diagnoses.append(Diagnosis(code, message))
    return diagnoses
