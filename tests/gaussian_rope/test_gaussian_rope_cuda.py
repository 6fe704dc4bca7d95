"""CUDA backend of reference.gaussian_rope (RoPE's phase kernels): fast outputs agree with the CPU backend's,
golden ones are identical, under the simulator (CI) and on a real GPU where there is one."""

import textwrap

import pytest
from cuda_support import TARGETS, assert_cuda_matches_cpu

SETUP = textwrap.dedent(
    """
    from reference import gaussian_rope as G
    x = np.random.default_rng(0).standard_normal((1, 3, 1, 8))
    pos = np.array([[0, 20, 765]])
    def call(**kw):
        return G.apply(x, pos, kernel=G.DOCUMENT_KERNEL, **kw)
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_matches_cpu(target):
    assert_cuda_matches_cpu(target, SETUP)
