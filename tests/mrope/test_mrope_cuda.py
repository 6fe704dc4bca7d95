"""CUDA backend of reference.mrope (RoPE's phase kernels): fast outputs agree with the CPU backend's,
golden ones are identical, under the simulator (CI) and on a real GPU where there is one."""

import textwrap

import pytest
from cuda_support import TARGETS, assert_cuda_matches_cpu

SETUP = textwrap.dedent(
    """
    from reference import mrope
    x = np.random.default_rng(0).standard_normal((1, 3, 1, 16))
    pos = np.array([[[0, 3, 6]], [[0, 3, 7]], [[0, 4, 6]]])
    def call(**kw):
        return mrope.apply(x, pos, mrope_section=[2, 3, 3], **kw)
    """
)


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_matches_cpu(target):
    assert_cuda_matches_cpu(target, SETUP)
