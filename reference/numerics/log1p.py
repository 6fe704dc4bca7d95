"""log1p of a product without overflow: the distance transforms of KERPLE (log variant) and FIRE.

    log1p_product(a, y) = log(1 + a y)          for a, y >= 0 (float64, elementwise, broadcast),

computed as np.log1p(a y); where the product a y overflows to inf (then a, y >= 1), as ln a + ln y
instead: log1p(z) - ln z < 1/z < 2**-1024 there, so the value is the same to far below an ulp and
both terms are non-negative (no cancellation). The Numba kernels of both families write the same
two branches out (bias/kerple_cpu_kernels.py ``_value``, bias/fire_cpu_kernels.py ``psi``).
"""

import numpy as np

__all__ = ["log1p_product"]


def log1p_product(a, y) -> np.ndarray:
    """log1p(a y) for a, y >= 0, as ln a + ln y where a y overflows (module docstring)."""
    with np.errstate(over="ignore", divide="ignore"):
        z = a * y
        out = np.log1p(z)
        big = np.isinf(z)
        if np.any(big):
            out = np.where(big, np.log(a) + np.log(y), out)
    return out
