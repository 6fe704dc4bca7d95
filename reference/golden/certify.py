"""Certify stored float64 values against an independent mpmath computation.

Every expected value posref stores is certified when it is generated, and again by
``posref vectors verify --certify``. The family that owns a protocol computes the exact results
from the case's inputs with mpmath at >= 200 bits (``VectorProtocol.exact``), sharing no code
with its float64 reference; this module compares them with the stored doubles:

- ``correct`` rounding (closed forms: RoPE, sinusoidal tables, lookups): the stored double is the
  nearest double to the exact value (ties to even; -0.0 and 0.0 count as equal);
- ``faithful`` rounding (reductions: attention, Transformer-XL scores): the stored double is one
  of the two doubles that bracket the exact value (under 1 ulp).

The error of a value is reported in ulps of the exact value, ulp(y) = 2**(e - 53) for
2**(e-1) <= |y| < 2**e (at least 2**-1074, the subnormal spacing): a correctly rounded value is
within 0.5 ulp, a faithfully rounded one within 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import mpmath
import numpy as np

PREC_BITS = 200  # enough to round any double correctly unless it lies within 2**-200 of a tie
_MIN_EXP = -1074  # exponent of the smallest subnormal double
_MAX_REPORTED = 5  # bad values named in a certificate


def _grid(x) -> tuple:
    """(n, q): x / 2**q as an mpf and the exponent q of the float64 spacing at x."""
    _, e = mpmath.frexp(x)
    q = max(int(e) - 53, _MIN_EXP)
    return mpmath.ldexp(x, -q), q


def nearest_double(x) -> float:
    """The float64 nearest to the mpf (or int/float) x, ties to even, computed exactly from x's
    integer mantissa and exponent: subnormals are rounded once on the 2**-1074 grid, results
    from 2**1024 (1 - 2**-54) up become +-inf, and 0 stays 0.0."""
    x = mpmath.mpf(x)
    if not mpmath.isfinite(x):
        return float(x)
    neg, man, exp, _ = x._mpf_  # x == (-1)**neg * man * 2**exp exactly
    man = int(man)
    if man == 0:
        return 0.0
    sign = -1.0 if neg else 1.0
    top = exp + man.bit_length() - 1  # 2**top <= |x| < 2**(top + 1)
    lsb = max(top - 52, -1074)  # exponent of the last kept bit
    shift = lsb - exp
    if shift <= 0:
        q = man << -shift
    else:
        q, rem = divmod(man, 1 << shift)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and q & 1):
            q += 1
    if q.bit_length() + lsb > 1024:  # the rounded value reaches 2**1024
        return math.copysign(math.inf, sign)
    return sign * math.ldexp(q, lsb)


def ulp_error(stored: float, exact) -> float:
    """|stored - exact| in ulps of the exact value."""
    with mpmath.workprec(PREC_BITS + 64):
        x = mpmath.mpf(exact)
        if x == 0:
            return 0.0 if stored == 0 else float("inf")
        _, q = _grid(x)
        return float(abs(mpmath.mpf(float(stored)) - x) / mpmath.ldexp(1, q))


def is_certified(stored: float, exact, rounding: str) -> bool:
    """True when ``stored`` is the correctly (or faithfully) rounded value of ``exact``."""
    if rounding == "correct":
        return float(stored) == nearest_double(exact)
    if rounding != "faithful":
        raise ValueError(f"rounding: must be 'correct' or 'faithful', got {rounding!r}")
    with mpmath.workprec(PREC_BITS + 64):
        x = mpmath.mpf(exact)
        if float(stored) == x:
            return True
        scaled, q = _grid(x)
        lower = float(mpmath.floor(scaled)) * 2.0**q
        upper = float(mpmath.ceil(scaled)) * 2.0**q
    return float(stored) in (lower, upper)


@dataclass
class Certificate:
    """The certification of some stored arrays: how many values, the largest error in ulps,
    and the values that are not rounded as promised (the first few, as readable lines)."""

    rounding: str
    certified: int = 0
    max_ulp: float = 0.0
    failures: int = 0
    examples: list = field(default_factory=list)

    def add(self, other: "Certificate") -> None:
        self.certified += other.certified
        self.max_ulp = max(self.max_ulp, other.max_ulp)
        self.failures += other.failures
        self.examples.extend(other.examples[: max(0, _MAX_REPORTED - len(self.examples))])

    @property
    def ok(self) -> bool:
        return self.failures == 0

    def record(self) -> dict:
        """What the manifest keeps per group."""
        return {"rounding": self.rounding, "certified": self.certified, "max_ulp": round(self.max_ulp, 4)}


def certify_arrays(stored: dict, exact: dict, rounding: str, where: str = "") -> Certificate:
    """Compare each stored float64 array (role -> array) with its exact values (role -> object
    array of mpf of the same shape)."""
    cert = Certificate(rounding)
    for role, values in exact.items():
        got = np.asarray(stored[role], dtype=np.float64)
        want = np.asarray(values, dtype=object)
        if got.shape != want.shape:
            cert.failures += 1
            cert.examples.append(f"{where}{role}: shape {got.shape}, exact values {want.shape}")
            continue
        for index in np.ndindex(got.shape):
            value, x = float(got[index]), want[index]
            err = ulp_error(value, x)
            cert.certified += 1
            cert.max_ulp = max(cert.max_ulp, err)
            if not is_certified(value, x, rounding):
                cert.failures += 1
                if len(cert.examples) < _MAX_REPORTED:
                    cert.examples.append(f"{where}{role}{list(index)} = {value!r} is {err:.3g} ulp from "
                                         f"the exact {mpmath.nstr(x, 20)} (nearest {nearest_double(x)!r})")
    return cert


def certify_case(proto, params: dict, inputs: dict, outputs: dict, where: str = "") -> Certificate:
    """Certify one case's expected arrays against the protocol's exact values."""
    return certify_arrays(outputs, proto.exact(params, inputs), proto.rounding, where)
