"""Diagnosis by mutants: the closest mutant of the reference names the fault (family-free).

A family builds *mutants* of its float64 reference, each the output of one known bug with its
diagnosis code and a one-line message (``conformance/<family>/diagnosis.py``), and asks
:func:`closest_mutant` which one explains a failing output y. With

    e_R = rms(y - reference)        e_M = rms(y - mutant)

over the finite elements, and F the noise floor (the typical rms deviation of a *correct*
implementation, estimated by the family), widened by 1 + 4/sqrt(n) for n compared values so
that tiny cases are not over-read:

- e_R <= F: the output is what a correct implementation may give: nothing to explain;
- a mutant within F of the reference is indistinguishable from it and is dropped;
- a mutant *explains* y when e_M <= 0.7 e_R and (e_M <= EXPLAINS * e_R or e_M <= F).

Among the explaining mutants the closest wins; mutants within TIE of the closest count as equally
close and the one listed first (the family lists the more specific bug first) wins; when a
mutant of another code fits exactly as well, the message says so. Nothing explains a correct
output, noise, or two bugs at once: those give None rather than a guess.

Also here: ``round_to``, the exact emulation of rounding to float32, float16 and bfloat16 that
low-precision mutants are built with. numpy only; never imports torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

# A mutant explains the output when it is this much closer than the reference (rms distance).
EXPLAINS = 0.3
# Mutants whose distance is within this factor of the closest one tie; the first listed wins.
TIE = 1.5


@dataclass
class Mutant:
    """A known bug: its diagnosis code, a one-line message and a function building its output."""

    code: str
    message: str
    build: Callable[[], np.ndarray]
    kind: str = "angle"  # a family's own tag (RoPE: "angle" mutants get the frequency note)


def rms(a, mask) -> float:
    """Root mean square of a[mask] (inf when empty or overflowing)."""
    d = a[mask]
    if d.size == 0:
        return math.inf
    with np.errstate(over="ignore", invalid="ignore"):
        v = float(np.sqrt(np.mean(d * d)))
    return v if np.isfinite(v) else math.inf


def closest_mutant(output, reference, mutants, mask, floor=0.0):
    """(mutant, e_M, e_R) of the explaining mutant, or None (see the module docstring)."""
    e_ref = rms(output - reference, mask)
    n = int(np.count_nonzero(mask))
    # With few values a fitted or enumerated mutant can match rounding noise by chance: widen.
    floor = floor * (1.0 + 4.0 / math.sqrt(max(n, 1)))
    if not (e_ref > 0 and np.isfinite(e_ref)) or e_ref <= floor:
        return None
    scored = []
    for k, mut in enumerate(mutants):
        try:
            with np.errstate(all="ignore"):
                y = mut.build()
        except (ValueError, FloatingPointError, ZeroDivisionError, OverflowError):
            continue
        if y is None or y.shape != output.shape:
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            bad = mask & ~np.isfinite(y)
        if np.any(bad):
            continue
        if rms(y - reference, mask) <= max(0.05 * e_ref, floor):
            continue
        scored.append((rms(output - y, mask), k, mut))
    if not scored:
        return None
    best = min(s[0] for s in scored)
    if not (best <= 0.7 * e_ref and best <= max(EXPLAINS * e_ref, floor)):
        return None
    tied = [s for s in scored if s[0] <= TIE * best + 1e-300]
    e_m, _, mut = min(tied, key=lambda s: s[1])
    # A mutant of another code that fits exactly as well cannot be told apart on this case.
    same = [m for e, _, m in sorted(tied, key=lambda s: s[1]) if m.code != mut.code and e <= 1.01 * e_m]
    if same:
        mut = Mutant(mut.code, f"{mut.message} (this case fits {same[0].code} equally well)",
                     mut.build, mut.kind)
    return mut, e_m, e_ref


def round_to(values, dtype: str) -> np.ndarray:
    """values rounded to float32, float16 or bfloat16 (and returned as float64).

    bfloat16 keeps the top 16 bits of the float32 pattern, rounded to nearest even (as torch
    does). A product of two bfloat16 numbers is exact in float32, so round_to(a * b, "bfloat16")
    is exactly torch's bfloat16 multiply.
    """
    v = np.asarray(values, dtype=np.float64)
    if dtype == "float64":
        return v.copy()
    if dtype == "float16":
        with np.errstate(over="ignore", invalid="ignore"):
            return v.astype(np.float16).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = v.astype(np.float32)
    if dtype == "float32":
        return f.astype(np.float64)
    if dtype != "bfloat16":
        raise ValueError(f"dtype: cannot round to {dtype!r}")
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    finite = np.isfinite(f)
    out = np.where(finite, rounded, bits).astype(np.uint32).view(np.float32)
    return out.astype(np.float64)
