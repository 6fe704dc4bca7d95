"""Regression from the reference-API audit (issue 23, section 6): FIRE's fast mode stays within
fast_bound where |c| |i - j| or |c| max(i, L) overflows float64 (log1p(inf) / log1p(inf) made it
NaN), on every backend (cuda under the simulator and on a GPU where there is one); an L that
itself overflows is refused in one line."""

import inspect
import json

import numpy as np
import pytest
from cuda_support import TARGETS, run_script, target_env

from reference import fire

QP, KP = np.array([0, 7, 2**40]), np.array([0, 1, 2**40 - 3, 2**40])
CASES = [(1e300, 1.0), (-1.7e308, 1.0), (1e300, 1e300), (4.0, 1e305)]  # (c, L_multiplier): |c| n or |c| L past 2**1024


def weights(c, lm, heads=2, hidden=4, seed=3):
    rng = np.random.default_rng(seed)
    return {"c": c, "L_multiplier": lm, "W1": rng.uniform(-1, 1, (hidden, 1)), "b1": rng.uniform(-1, 1, hidden),
            "W2": rng.uniform(-0.2, 0.2, (heads, hidden)), "b2": rng.uniform(-0.2, 0.2, heads)}


@pytest.mark.parametrize("c, lm", CASES)
@pytest.mark.parametrize("backend", ["cpu", "numpy"])
def test_fast_where_the_products_overflow(backend, c, lm):
    w = weights(c, lm)
    golden = fire.bias(QP, KP, w, mode="golden")
    fast = fire.bias(QP, KP, w, backend=backend)
    assert np.all(np.isfinite(fast)) and np.all(np.abs(fast - golden) <= fire.fast_bound(QP, KP, w))
    sq = np.arange(40)  # a prefill square: the cpu kernel's per-distance table
    assert np.all(np.abs(fire.bias(sq, sq, w, backend=backend) - fire.bias(sq, sq, w, mode="golden"))
                  <= fire.fast_bound(sq, sq, w))


@pytest.mark.parametrize("target", TARGETS)
def test_fast_where_the_products_overflow_cuda(target):
    script = f"""
import json
import numpy as np
from reference import fire
QP, KP, CASES = np.array({QP.tolist()}), np.array({KP.tolist()}), {CASES!r}
{inspect.getsource(weights)}
ok = []
for c, lm in CASES:
    w = weights(c, lm)
    fast, golden = fire.bias(QP, KP, w, backend="cuda"), fire.bias(QP, KP, w, mode="golden")
    ok.append(bool(np.all(np.abs(fast - golden) <= fire.fast_bound(QP, KP, w))))
print(json.dumps(ok))
"""
    res = run_script(script, target_env(target))
    assert all(res), json.dumps(res)


def test_overflowing_length_refused_in_one_line():
    w = weights(0.1, 1e306)
    for kw in (dict(backend="cpu"), dict(mode="golden")):
        with pytest.raises(ValueError, match="^L_multiplier: ") as err:
            fire.bias(QP, KP, w, **kw)
        assert "\n" not in str(err.value)
