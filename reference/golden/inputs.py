"""Seeded inputs for golden cases, identical on every platform and numpy version.

The random stream of a case is PCG64 seeded with the first 128 bits of sha256("<case id>#<role>"),
so a case's inputs depend only on its id, never on catalog order. Only ``random_raw`` is used (the
PCG64 output words are fixed by the algorithm; numpy's distribution samplers may change between
releases), and every later step is exact (integer shifts, frexp/ldexp, round-to-nearest of exact
products), so the same x comes out bit for bit anywhere.

Values are uniform-ish in [-2, 2) and rounded to 8 significant bits with |x| >= 2^-6, so each one
is exactly representable in bfloat16, float16 and float32. Casting a golden input to the dtype
under test therefore loses nothing: the expected output is the exact rotation of what the
implementation receives, and its whole error is the implementation's own.
"""

from __future__ import annotations

import hashlib

import numpy as np

SIGNIFICANT_BITS = 8  # bfloat16 keeps 8 significant bits (7 stored + the implicit one)
SMALLEST = 2.0**-6  # stays a normal number in float16 (its normal range starts at 2^-14)


def seed_for(case_id: str, role: str = "x") -> int:
    """128-bit seed from sha256 of ``"<case id>#<role>"``."""
    digest = hashlib.sha256(f"{case_id}#{role}".encode("utf-8")).digest()
    return int.from_bytes(digest[:16], "little")


def uniform01(case_id: str, role: str, count: int) -> np.ndarray:
    """``count`` float64 values in [0, 1): the top 53 bits of PCG64 raw words times 2^-53."""
    raw = np.random.PCG64(seed_for(case_id, role)).random_raw(count)
    raw = np.asarray(raw, dtype=np.uint64) >> np.uint64(11)
    return raw.astype(np.float64) * 2.0**-53


def representable_inputs(case_id: str, shape, role: str = "x") -> np.ndarray:
    """float64 array of ``shape`` with values exactly representable in bfloat16 and float16."""
    count = int(np.prod(shape, dtype=np.int64))
    u = 4.0 * uniform01(case_id, role, count) - 2.0  # exact: scaling by 4 and subtracting 2
    mantissa, exponent = np.frexp(u)  # u = mantissa * 2**exponent, 0.5 <= |mantissa| < 1
    scale = float(2**SIGNIFICANT_BITS)
    rounded = np.ldexp(np.rint(mantissa * scale) / scale, exponent)
    small = np.abs(rounded) < SMALLEST
    rounded[small] = np.copysign(SMALLEST, np.where(u[small] == 0.0, 1.0, u[small]))
    return rounded.reshape(shape)
