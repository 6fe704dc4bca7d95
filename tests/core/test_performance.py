"""Loose speed regression checks of the RoPE reference (issue 13; docs/performance.md).

Each test compares two things timed in the same process on the same inputs, interleaved
(every repetition runs both) and keeps the best of N, so the ratio survives a loaded 2-core
machine; the bounds are several times the ratios measured (docs/performance.md), so only a real
slowdown (an extra pass over memory, a lost fast path, a pool stall per call) fails them.
"""

import time

import numpy as np
import pytest

from reference import rope

REPEAT = 9


def _best_interleaved(fns, repeat=REPEAT):
    """Best time of each callable; one warm-up round (compilation, tables) is discarded."""
    times = [[] for _ in fns]
    for rep in range(repeat + 1):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            if rep:
                times[k].append(time.perf_counter() - t0)
    return [min(t) for t in times]


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(13)


def test_apply_is_within_3x_a_memory_copy(rng):
    # 16 MB in, 16 MB out, on the calling thread: measured 2.5-3x a copy that stays in cache
    # (0.5 ms), 1.3-1.5 ms; the slack keeps a loaded machine from failing it, a 10x slowdown not
    x = rng.standard_normal((1, 1024, 16, 128))
    pos = np.arange(1024, dtype=np.int64)[None, :]
    copy, fast = _best_interleaved([lambda: x.copy(), lambda: rope.apply(x, pos)])
    assert fast <= 3 * copy + 2e-3, f"apply {fast * 1e3:.2f} ms vs copy {copy * 1e3:.2f} ms"


def test_decode_step_is_within_3x_a_copy_plus_slack(rng):
    # 64 sequences, one token each at scattered positions (< 2**20): measured ~3x copy (38 us),
    # on the calling thread (no pool wake-up)
    x = rng.standard_normal((64, 1, 32, 128))
    pos = rng.integers(0, 2**20, size=(64, 1))
    copy, fast = _best_interleaved([lambda: x.copy(), lambda: rope.apply(x, pos)])
    assert fast <= 3 * copy + 300e-6, f"apply {fast * 1e6:.0f} us vs copy {copy * 1e6:.0f} us"


def test_accurate_cos_sin_keeps_up_with_plain_numpy_cos(rng):
    # the accurate table against numpy's cos and sin of the naive float64 angles (not even
    # reduced exactly): measured faster than numpy; fails only if the fast path is lost
    pos = np.arange(2**14, dtype=np.int64)
    theta = rope.inv_freq(128, 10000.0)
    angles = pos[:, None].astype(np.float64) * theta

    def plain():
        return np.cos(angles), np.sin(angles)

    naive, fast = _best_interleaved([plain, lambda: rope.cos_sin(pos, 128, 10000.0)])
    assert fast <= 3 * naive, f"cos_sin {fast * 1e3:.2f} ms vs numpy cos+sin {naive * 1e3:.2f} ms"


def test_golden_mode_stays_within_a_bounded_factor_of_fast(rng):
    # measured ~3-7x for apply and ~13x for cos_sin (docs/performance.md: the 3x target is not
    # met for golden); these bounds catch a further 3x regression
    x = rng.standard_normal((8, 1, 32, 128))
    pos = rng.integers(0, 2**20, size=(8, 1))
    fast, golden = _best_interleaved([lambda: rope.apply(x, pos), lambda: rope.apply(x, pos, mode="golden")])
    assert golden <= 25 * fast + 1e-3, f"golden apply {golden * 1e6:.0f} us vs fast {fast * 1e6:.0f} us"
    cp = np.arange(2**12, dtype=np.int64)
    fast, golden = _best_interleaved([lambda: rope.cos_sin(cp, 128), lambda: rope.cos_sin(cp, 128, mode="golden")])
    assert golden <= 50 * fast + 1e-3, f"golden cos_sin {golden * 1e3:.2f} ms vs fast {fast * 1e3:.2f} ms"
