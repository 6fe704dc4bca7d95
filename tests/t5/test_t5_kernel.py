"""The one-pass bucket kernel (reference/numerics/bias/t5_cpu_kernels.py) gives exactly the buckets of the
per-distance rule (core._bucket_general: one exact logarithm per distinct distance), including
the int64 extremes, distances at and past max_distance, and a table filled over several calls."""

from __future__ import annotations

import numpy as np
import pytest

from reference.numerics.bias import t5 as core

I64 = np.iinfo(np.int64)


def _general(r, num_buckets, max_distance, bidirectional):
    half = num_buckets // 2 if bidirectional else num_buckets
    return core._bucket_general(np.asarray(r, dtype=np.int64), half, half // 2, max_distance, bidirectional)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (8, 9), (64, 1000), (33, 5000), (32, 2**20 + 8), (320, 161)])
def test_kernel_matches_the_per_distance_rule(bidirectional, num_buckets, max_distance):
    rng = np.random.default_rng(num_buckets * max_distance)
    edge = [0, 1, -1, I64.min, I64.max, I64.min + 1, max_distance, -max_distance, max_distance - 1,
            -max_distance + 1, max_distance + 1, -max_distance - 1]
    kw = dict(num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional)
    core._tables.clear()
    for r in (rng.integers(-300, 300, size=(5, 40)),  # fills part of the table
              rng.integers(-3 * max_distance, 3 * max_distance, size=2000),  # meets known and new entries
              np.array(edge, dtype=np.int64), rng.integers(-2**45, 2**45, size=64)):
        ours = core.bucket(r, **kw)
        assert ours.dtype == np.int64 and ours.shape == r.shape
        assert np.array_equal(ours, _general(r, num_buckets, max_distance, bidirectional))
    half = num_buckets // 2 if bidirectional else num_buckets
    if half // 2 < max_distance:  # the kernel path ran and kept what it computed
        assert ((core._table(half // 2, half, max_distance) >= 0).any()) and len(core._tables) == 1


def test_kernel_on_views_and_other_integer_types():
    rel = np.arange(200)[None, :] - np.arange(200)[:, None]
    for r in (rel.T, rel[::3, ::2], np.broadcast_to(np.arange(-50, 50), (4, 100)), rel.astype(np.int32),
              np.array(-7), np.array([2**62 + 5, 3], dtype=np.uint64)):
        assert np.array_equal(core.bucket(r), _general(np.asarray(r).astype(np.int64), 32, 128, True))
    assert core.bucket(np.zeros((0, 3), dtype=np.int64)).shape == (0, 3)


def test_past_max_distance_is_the_last_bucket_without_a_logarithm(monkeypatch):
    core._tables.clear()
    calls = []
    real = core._one
    monkeypatch.setattr(core, "_one", lambda n, *a: calls.append(n) or real(n, *a))
    out = core.bucket(np.array([128, 129, 10**6, -(10**12), 127, 127]))
    assert out.tolist() == [31, 31, 31, 15, 31, 31] and calls == [127]
