"""Explain a failing sinusoidal table: the closest mutant of the float64 reference names the bug.

Mutants (each a whole table at the case's positions, built with reference.sinusoidal):

    variant-swapped      the other layout (interleaved <-> concatenated), same frequencies
    block-order          the same sin and cos columns in another block order: [cos | sin] (diffusers'
                         flip_sin_to_cos), (cos, sin) pairs, or for a 2-D table
                         [sin(c0) | sin(c1) | cos(c0) | cos(c1)] (timm's build_sincos2d_pos_embed
                         default) or [cos | sin] per coordinate
    frequency-exponent   the other rule (2i/d <-> 2i/(d-2)): the exponent's denominator off by 2
    wrong-base           base 1e3, 1e5, 5e5 or 1e6 instead of the case's
    position-offset      positions shifted by +-1 or +-2 (fairseq's padding_idx + 1 = 2)
    angle-precision      angles p w_i computed in float32, bfloat16 or float16 (p and w_i rounded
                         to that dtype, their product too), then sin / cos exactly

conformance.core.mutants's ``closest_mutant`` picks the one that explains the output; the noise
floor is the rms of the budget (of the strict profile when the table
fails only that one). numpy only; never imports torch.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from conformance.core.mutants import Mutant, closest_mutant, round_to
from conformance.results import Diagnosis
from conformance.core import sinusoid_budgets as budgets
from reference import sinusoidal as sinusoidal_reference

BASES = (1000.0, 10000.0, 100000.0, 500000.0, 1000000.0)
SHIFTS = (1, -1, 2, -2)
ANGLE_DTYPES = ("float32", "bfloat16", "float16")


def reference_table(positions, spec) -> np.ndarray:
    return sinusoidal_reference.table(np.asarray(positions, dtype=np.int64), spec.d_model, layout=spec.layout,
                                      exponent=spec.exponent, base=spec.base, dims=spec.dims, backend="numpy")


def low_precision_angles(positions, spec, dtype: str) -> np.ndarray:
    """The table with p, w_i and p * w_i rounded to ``dtype`` (sin / cos then exact)."""
    coord, e, kind = budgets.columns(spec)
    pos = np.asarray(positions, dtype=np.float64)
    p = pos[:, None] if spec.dims == 1 else pos[:, coord]
    w = round_to(spec.base ** (-e), dtype)
    phi = round_to(round_to(p, dtype) * w, dtype)
    out = np.where(kind == 0, np.sin(phi), np.cos(phi))
    return np.where(kind == 2, 0.0, out)


def cos_first(tab, d: int, layout: str) -> np.ndarray:
    """A 1-D table [..., d] with each sine column traded with its cosine: [cos | sin] halves, or
    (cos, sin) pairs (an odd interleaved d keeps its last sine; a pad column stays)."""
    out = tab.copy()
    if layout == "interleaved":
        m = 2 * (d // 2)
        out[..., 0:m:2], out[..., 1:m:2] = tab[..., 1:m:2], tab[..., 0:m:2]
    else:
        h = d // 2
        out[..., :h], out[..., h:2 * h] = tab[..., h:2 * h], tab[..., :h]
    return out


def sin_blocks_first(tab, d: int) -> np.ndarray:
    """A 2-D [sin(c0) | cos(c0) | sin(c1) | cos(c1)] table [..., d] rearranged as
    [sin(c0) | sin(c1) | cos(c0) | cos(c1)] (timm's stack([sin, cos], dim=1) over [coord, band])."""
    q = d // 4
    blocks = [tab[..., k * q:(k + 1) * q] for k in range(4)]
    return np.concatenate([blocks[0], blocks[2], blocks[1], blocks[3]], axis=-1)


def block_orders(positions, spec) -> list:
    """(message, builder) of each other order of the same sin and cos columns."""
    d = spec.d_model
    if spec.dims == 1:
        what = "(cos, sin) pairs" if spec.layout == "interleaved" else "[cos | sin] halves"
        return [(f"{what} where the case is {spec.layout} with the sine first",
                 lambda: cos_first(reference_table(positions, spec), d, spec.layout))]
    half = d // 2

    def per_coordinate():
        tab = reference_table(positions, spec)
        return np.concatenate([cos_first(tab[..., :half], half, spec.layout),
                               cos_first(tab[..., half:], half, spec.layout)], axis=-1)

    found = [("each coordinate's table with the cosine first where the case has the sine first",
              per_coordinate)]
    if spec.layout == "concatenated" and d % 4 == 0:
        found.insert(0, ("the blocks ordered [sin(c0) | sin(c1) | cos(c0) | cos(c1)] (timm's "
                         "build_sincos2d_pos_embed default) where the case is [sin(c0) | cos(c0) | "
                         "sin(c1) | cos(c1)] (MAE)", lambda: sin_blocks_first(reference_table(positions, spec), d)))
    return found


def mutants(positions, spec) -> list:
    other_layout = "concatenated" if spec.layout == "interleaved" else "interleaved"
    other_rule = "2i/(d-2)" if spec.exponent == "2i/d" else "2i/d"
    found = []

    def add(code, message, **change):
        new = dataclasses.replace(spec, **{k: v for k, v in change.items() if k != "shift"})
        shift = change.get("shift", 0)
        found.append(Mutant(code, message, lambda: reference_table(np.asarray(positions) + shift, new)))

    add("variant-swapped", f"the {other_layout} layout where the case is {spec.layout}", layout=other_layout)
    for message, build in block_orders(positions, spec):
        found.append(Mutant("block-order", message, build))
    if spec.d_model // (2 * spec.dims) >= 2:
        add("frequency-exponent", f"frequencies base**(-{other_rule}) where the case uses "
            f"base**(-{spec.exponent}): the exponent's denominator is off by 2", exponent=other_rule)
    for b in BASES:
        if b != spec.base:
            add("wrong-base", f"frequencies with base {b:g} instead of {spec.base:g}", base=b)
    for k in SHIFTS:
        add("position-offset", f"positions shifted by {k:+d}", shift=k)
    for dt in ANGLE_DTYPES:
        found.append(Mutant("angle-precision", f"angles p * w_i computed in {dt} (positions and "
                            f"frequencies rounded to {dt}): the error grows with the position",
                            lambda dt=dt: low_precision_angles(positions, spec, dt)))
    return found


def diagnose_table(positions, output, spec, dtype: str, profile: str = "standard") -> list:
    """Diagnoses for a failing table (float64 output [n, d_model]). ``profile``: the budget whose
    rms is the noise floor ("strict" for a table that fails only the strict profile, so that
    float32 angles can be named there)."""
    ref = reference_table(positions, spec)
    out = np.asarray(output, dtype=np.float64)
    if out.shape != ref.shape:
        return []
    mask = np.isfinite(out)
    if np.count_nonzero(mask) < 2:
        return []
    b = budgets.table_budget(positions, spec, dtype, profile)
    floor = float(np.sqrt(np.mean(b * b)))
    found = closest_mutant(out, ref, mutants(positions, spec), mask, floor)
    return [] if found is None else [Diagnosis(found[0].code, found[0].message)]
