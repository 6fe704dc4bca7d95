"""Regression from the reference-API audit (issue 23, section 6): the log variant's fast mode
stays within FAST_ULPS where r2 |i - j| overflows float64 (log1p(inf) made it -inf), on every
backend (cuda under the simulator and on a GPU where there is one)."""

import json

import numpy as np
import pytest
from cuda_support import TARGETS, run_script, target_env

from reference import kerple

QP, KP = np.array([0, 3, 2**40]), np.array([0, 1, 2**40 - 7, 2**40])
R1, R2 = [0.5, 1e300, 2.0], [1e300, 0.3, 1.7e308]  # r2 d past 2**1024 for heads 0 and 2


def _within_bound(fast, golden):
    assert np.all(np.isfinite(golden)) and np.all(np.isfinite(fast))
    return np.all(np.abs(fast - golden) <= 2 * kerple.FAST_ULPS * 2.0**-53 * np.abs(golden))


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
def test_log_where_the_product_overflows(backend):
    golden = kerple.bias(QP, KP, "log", R1, R2, mode="golden")
    assert _within_bound(kerple.bias(QP, KP, "log", R1, R2, backend=backend), golden)
    # the per-distance table path (a prefill square) takes the same expression
    sq = np.arange(64)
    assert _within_bound(kerple.bias(sq, sq, "log", [1.0], [1e307], backend=backend),
                         kerple.bias(sq, sq, "log", [1.0], [1e307], mode="golden"))


@pytest.mark.parametrize("target", TARGETS)
def test_log_where_the_product_overflows_cuda(target):
    script = f"""
import json
import numpy as np
from reference import kerple
qp, kp = np.array({QP.tolist()}), np.array({KP.tolist()})
fast = kerple.bias(qp, kp, "log", {R1}, {R2}, backend="cuda")
golden = kerple.bias(qp, kp, "log", {R1}, {R2}, mode="golden")
ok = np.abs(fast - golden) <= 2 * kerple.FAST_ULPS * 2.0**-53 * np.abs(golden)
print(json.dumps({{"finite": bool(np.all(np.isfinite(fast))), "within": bool(np.all(ok))}}))
"""
    res = run_script(script, target_env(target))
    assert res["finite"] and res["within"], json.dumps(res)
