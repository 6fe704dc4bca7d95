"""CUDA backend of reference.xpos (RoPE's phase kernels): fast outputs agree with the CPU backend's,
golden ones are identical, under the simulator (CI) and on a real GPU where there is one."""

import textwrap

import pytest
from cuda_support import TARGETS, assert_cuda_matches_cpu

SETUP = textwrap.dedent(
    """
    from reference import xpos
    q = np.random.default_rng(0).standard_normal((1, 3, 1, 8))
    k = np.random.default_rng(1).standard_normal((1, 3, 1, 8))
    def call(**kw):
        return np.stack(xpos.apply(q, k, np.array([[0, 100, 4000]]), **kw))
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_matches_cpu(target):
    assert_cuda_matches_cpu(target, SETUP)
