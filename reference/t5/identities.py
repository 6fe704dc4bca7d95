"""T5 bucket identities (default 32 buckets, max_distance 128)."""

from __future__ import annotations

import numpy as np

from reference.identities import register
from reference.t5 import bucket

R = np.arange(-5000, 5001)


@register(id="t5.exact-below-max-exact", bound=0.0,
          statement="distances below max_exact get their own bucket: bucket(n) = n (bidirectional: + 16 for r > 0)")
def exact_small() -> float:
    """Residual: the number of distances below max_exact whose bucket is not the distance."""
    b = bucket(np.arange(-7, 8))
    expected = np.where(np.arange(-7, 8) > 0, 16 + np.arange(-7, 8), np.abs(np.arange(-7, 8)))
    c = bucket(-np.arange(16), bidirectional=False)
    return float(np.sum(b != expected) + np.sum(c != np.arange(16)))


@register(id="t5.monotone-saturating", bound=0.0,
          statement="buckets never decrease with the distance in each direction and saturate at the last bucket "
          "(15 / 31 bidirectional, 31 causal) from max_distance on (|r| up to 5000)")
def monotone() -> float:
    """Residual: the number of decreases plus the distances past max_distance not in the last bucket."""
    bad = 0
    for bidirectional in (True, False):
        b = bucket(R, bidirectional=bidirectional)
        back, ahead = b[R <= 0][::-1], b[R >= 0]
        bad += int(np.sum(np.diff(back) < 0) + np.sum(np.diff(ahead[1:]) < 0))
        last = 15 if bidirectional else 31
        bad += int(np.sum(b[R <= -128] != last))
        if bidirectional:
            bad += int(np.sum(b[R >= 128] != 31))
    return float(bad)


@register(id="t5.bucket-16-unused", bound=0.0,
          statement="in the bidirectional default, bucket 16 (r > 0 with n = 0) is never used")
def unused() -> float:
    return float(np.sum(bucket(R) == 16))
