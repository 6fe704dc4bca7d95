"""2-D RoPE golden mode on the cpu (issue 31: phase.rotate_streams' certified quick phase) is bit for
bit the value-by-value mpmath path (the numpy backend's golden mode), on inputs that stress it: zeros,
the ends of the double-double range, subnormals, coordinate 0, huge and negative coordinates, CLS
tokens, both layouts."""

import numpy as np
import pytest

from reference import rope2d
from tests.rope.test_stream_kernels_golden import stress_x


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_golden_cpu_is_the_mpmath_path_bit_for_bit(layout):
    rng = np.random.default_rng(312)
    x = stress_x(rng, (1, 8, 2, 16))
    coords = rng.integers(-64, 64, size=(1, 8, 2))
    coords[0, 1] = 0
    coords[0, 2] = (2**40, -(2**33))
    got = rope2d.apply(x, coords, layout=layout, mode="golden", cls_tokens=1)
    want = rope2d.apply(x, coords, layout=layout, mode="golden", backend="numpy", cls_tokens=1)
    assert got.tobytes() == want.tobytes()
