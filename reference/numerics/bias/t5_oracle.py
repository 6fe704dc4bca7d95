"""Oracle for T5 buckets, written out again from the formula with mpmath's log (a second reading):
the bucket of n is the largest b with max_exact * (max_distance / max_exact)^((b - max_exact) /
(buckets - max_exact)) <= n, capped at buckets - 1."""

from __future__ import annotations

import mpmath
import numpy as np


def bucket_exact(relative_positions, num_buckets, max_distance, bidirectional):
    r = np.asarray(relative_positions, dtype=np.int64)
    out = np.empty(r.shape, dtype=object)
    buckets = num_buckets // 2 if bidirectional else num_buckets
    max_exact = buckets // 2
    with mpmath.workprec(200):
        growth = mpmath.mpf(max_distance) / max_exact
        for idx, v in np.ndenumerate(r):
            v = int(v)
            offset = buckets if (bidirectional and v > 0) else 0
            n = abs(v) if bidirectional else max(-v, 0)
            if n < max_exact:
                b = n
            else:
                b = max_exact
                while b + 1 <= buckets - 1 and max_exact * growth ** (mpmath.mpf(b + 1 - max_exact) / (buckets - max_exact)) <= n:
                    b += 1
            out[idx] = mpmath.mpf(offset + b)
    return out
