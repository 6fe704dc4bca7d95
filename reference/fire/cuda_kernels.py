"""FIRE's numba.cuda kernels: reference.numerics.bias.fire_cuda_kernels, shared with the attention composite.
This path is an alias of that very module, not a copy of its names: tests/cuda_support.py's
ptx_report reads the module's PTX_SIGNATURES and every kernel it hands to cuda.jit."""

import sys

from reference.numerics.bias import fire_cuda_kernels

sys.modules[__name__] = fire_cuda_kernels
