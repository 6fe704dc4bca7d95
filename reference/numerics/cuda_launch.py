"""The launch boilerplate every numba.cuda kernel of the reference shares: one block size, the grid
size for a grid-stride loop, the device check, and host-to-device copies.

Every kernel is written as a grid-stride loop over its outputs, so any grid covers them; the grid
is ceil(total / THREADS_PER_BLOCK) blocks, at least 1 and at most MAX_BLOCKS (the largest grid x
dimension every compute capability accepts). Imports numba.cuda: import this module only from a
family's cuda_kernels.py (which the family's core imports on first use of backend "cuda").
"""

import numpy as np
from numba import cuda

THREADS_PER_BLOCK = 128
MAX_BLOCKS = 65535

__all__ = ["MAX_BLOCKS", "THREADS_PER_BLOCK", "blocks", "check_device", "to_device"]


def check_device():
    """ValueError (one line) unless a CUDA GPU, or the simulator, is available."""
    if not cuda.is_available():
        raise ValueError(
            "backend: 'cuda' needs a CUDA GPU, or NUMBA_ENABLE_CUDASIM=1 set before numba.cuda "
            "is imported"
        )


def blocks(total):
    """Blocks of THREADS_PER_BLOCK threads for a grid-stride loop over ``total`` elements."""
    return max(1, min(MAX_BLOCKS, (total + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK))


def to_device(a, dtype=None):
    """A C-contiguous device copy of the array a (converted to dtype when one is given)."""
    return cuda.to_device(np.ascontiguousarray(a, dtype=dtype))
