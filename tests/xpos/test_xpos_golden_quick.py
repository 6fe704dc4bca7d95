"""xPos golden mode on the cpu (issue 31: phase.scaled_rotate's certified quick phase, the scale
zeta_i^e from xpos/cpu_kernels.golden_scale_kernel as a scaled double-double) is bit for bit the
value-by-value mpmath path (the numpy backend's golden mode), scales near over- and underflow and
past the kernel's range included; and the kernel's scales are within GOLDEN_REL_ERR."""

import mpmath
import numpy as np

from reference import xpos
from reference.xpos import core, cpu_kernels
from tests.rope.test_stream_kernels_golden import stress_x


def test_golden_cpu_is_the_mpmath_path_bit_for_bit():
    rng = np.random.default_rng(315)
    # 512 * 560 ln(1.4/0.4): the outer pairs' scales near 2^+-1010; 2^40: past the kernel's range
    m = np.array([[0, 1, -3, 1023, 512 * 560, -512 * 560, 512 * 900, 2**40]])
    q, k = stress_x(rng, (1, m.shape[1], 2, 12)), stress_x(rng, (1, m.shape[1], 2, 12))
    for layout in ("half", "interleaved"):
        got = xpos.apply(q, k, m, rotary_dim=8, layout=layout, mode="golden")
        want = xpos.apply(q, k, m, rotary_dim=8, layout=layout, mode="golden", backend="numpy")
        for g, w in zip(got, want):
            assert g.tobytes() == w.tobytes()


def test_golden_scales_are_within_the_stated_bound():
    rng = np.random.default_rng(316)
    r = 32
    flat = np.r_[rng.integers(-300000, 300000, size=40), [0, 1, -1, 511, 512]].astype(np.int64)
    for sign, centre, base in ((1, 0.0, 512.0), (-1, 3.5, 100.0)):
        factor = core._factor(r, base, 0.4, centre, sign)
        rows, frel = core.golden_scales(flat, r, base, 0.4, centre, sign, factor)
        assert frel == cpu_kernels.GOLDEN_REL_ERR
        worst = 0
        for t, m in enumerate(flat.tolist()):
            for i in range(r // 2):
                fh, fl, fe, fd = rows[t, i]
                with mpmath.workprec(300):
                    exact = factor(576, m, i)
                    worst = max(worst, abs(mpmath.ldexp(mpmath.mpf(fh) + mpmath.mpf(fl), int(fe)) / exact - 1))
                assert 1.0 <= fh <= 2.0
        assert worst <= frel  # measured up to 2^-88.8 (docs/tolerance.md section 12)
