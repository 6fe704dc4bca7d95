"""Regressions from the reference-API audit (issue 23, section 6): t5.bucket is exact for every
integer it accepts (int64's -2**63, uint64 past 2**63) and refuses, in one line naming the argument,
the configurations the rule divides by zero in or sends below bucket 0."""

import numpy as np
import pytest

from reference import t5
from reference.attention import Config, forward
from reference.numerics.bias import t5 as core
from reference.t5 import oracle

I64_MIN = -(2**63)
# max_distance - max_exact past core.TABLE_MAX: the general (numpy) path instead of the kernel
CONFIGS = [(32, 128), (32, core.TABLE_MAX + 100)]


@pytest.mark.parametrize("num_buckets, max_distance", CONFIGS)
@pytest.mark.parametrize("bidirectional", [True, False])
def test_int64_extremes_are_exact(num_buckets, max_distance, bidirectional):
    # abs(-2**63) wraps to -2**63 in int64: it came back as bucket -2**63 (exact: the last bucket)
    r = np.array([I64_MIN, I64_MIN + 1, 2**63 - 1, -1, 0, 1], dtype=np.int64)
    kw = dict(num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional)
    want = np.array(oracle.bucket_exact(r, num_buckets, max_distance, bidirectional), dtype=np.int64)
    assert np.array_equal(t5.bucket(r, **kw), want)
    assert t5.bucket(np.array([I64_MIN]), **kw)[0] == (15 if bidirectional else 31)


@pytest.mark.parametrize("num_buckets, max_distance", CONFIGS)
def test_uint64_past_int64_is_exact(num_buckets, max_distance):
    # a cast to int64 wrapped 2**64 - 1 to -1 (bucket 1); it is a positive distance past max_distance
    r = np.array([2**64 - 1, 2**63, 2**63 - 1, 5], dtype=np.uint64)
    both = t5.bucket(r, num_buckets=num_buckets, max_distance=max_distance)
    assert both.tolist() == [31, 31, 31, 16 + 5]
    assert t5.bucket(r, num_buckets=num_buckets, max_distance=max_distance, bidirectional=False).tolist() == [0] * 4


@pytest.mark.parametrize("kw, name", [
    (dict(num_buckets=2), "num_buckets"),                 # max_exact = 2 // 4 = 0: ln(n / 0)
    (dict(num_buckets=3), "num_buckets"),
    (dict(max_distance=8), "max_distance"),               # = max_exact (32 // 4): ln 1 = 0
    (dict(max_distance=5), "max_distance"),               # < max_exact: negative buckets
    (dict(num_buckets=32, max_distance=16, bidirectional=False), "max_distance"),  # max_exact 16
    (dict(max_distance=2**63), "max_distance"),
])
def test_undefined_configurations_refused_in_one_line(kw, name):
    with pytest.raises(ValueError, match=f"^{name}: ") as err:
        t5.bucket(np.arange(-40, 40), **kw)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=f"^{name}: "):
        t5.edges(**kw)


def test_smallest_defined_configurations_accepted():
    # causal 2 buckets (max_exact 1) and bidirectional 4 (max_exact 1 per direction), max_distance 2
    causal = t5.bucket(np.array([-3, -1, 0, 2]), num_buckets=2, max_distance=2, bidirectional=False)
    assert causal.tolist() == [1, 1, 0, 0]
    assert t5.bucket(np.array([-3, -1, 0, 2]), num_buckets=4, max_distance=2).tolist() == [1, 1, 0, 3]


def test_attention_refuses_the_config_instead_of_an_index_error():
    # max_distance < max_exact gave negative buckets and then an IndexError reading rel_bias
    c = Config(2, 1, 4, False, "t5", num_buckets=32, max_distance=4)
    rng = np.random.default_rng(0)
    w = {k: rng.standard_normal(s) for k, s in (("wq", (8, 8)), ("wk", (4, 8)), ("wv", (4, 8)), ("wo", (8, 8)),
                                                ("rel_bias", (32, 2)))}
    for backend in ("cpu", "numpy"):
        with pytest.raises(ValueError, match="^max_distance: must exceed max_exact = 8"):
            forward(rng.standard_normal((1, 12, 8)), w, np.arange(12)[None], c, backend=backend)
