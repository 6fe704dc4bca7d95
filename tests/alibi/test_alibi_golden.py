"""ALiBi's golden quick phase (issue 31): every value it certifies equals the mpmath definition
(alibi.golden_value) for many heads (irrational and power-of-two slopes) and distances up to
2**41, signed and symmetric; golden mode equals the definition on dense and sparse positions."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from reference import alibi
from reference.golden.certify import nearest_double
from reference.numerics.bias import alibi_golden
from reference.numerics.bias.alibi import golden_value, slopes_mp

DISTANCES = np.concatenate([np.arange(-70, 71), 2 ** np.arange(7, 42), -(2 ** np.arange(7, 42)) + 1,
                            [3**25, -(5**17)]]).astype(np.int64)


@pytest.mark.parametrize("heads", [1, 7, 12, 64, 257, 4096])
def test_quick_phase_equals_the_mpmath_definition(heads):
    with mpmath.workprec(200):
        exact = slopes_mp(heads)
        hi = np.array([nearest_double(s) for s in exact])
        lo = np.array([nearest_double(s - h) for s, h in zip(exact, hi)])
    pick = sorted(set(np.linspace(0, heads - 1, 24).astype(int).tolist()))  # spread over the heads
    values, flags = alibi_golden.quick(hi[pick], lo[pick], DISTANCES)
    for r, h in enumerate(pick):
        for t, d in enumerate(DISTANCES.tolist()):
            want = golden_value(exact[h], d)
            assert flags[r, t] == 0, (h, d)  # irrational slopes are never near a midpoint here
            assert values[r, t] == want and np.signbit(values[r, t]) == np.signbit(want), (h, d)


@pytest.mark.parametrize("causal", [True, False])
def test_golden_mode_equals_the_definition_dense_and_sparse(causal):
    with mpmath.workprec(200):
        exact = slopes_mp(5)
    for qp, kp in [(np.arange(30), np.arange(4, 37)), (np.array([0, 2**40, 9]), np.array([2**40, 1, 0]))]:
        got = alibi.bias(5, qp, kp, causal=causal, mode="golden")
        d = qp[:, None] - kp[None, :]
        d = d if causal else np.abs(d)
        want = np.array([[[golden_value(s, int(v)) for v in row] for row in d] for s in exact])
        assert got.tobytes() == want.tobytes()
