"""``--framework jax``: the adapter receives and returns ``jax.Array``.

Conversions go through DLPack (``jax.dlpack.from_dlpack`` / ``torch.from_dlpack``) and fall back
to a copy through NumPy (with ml_dtypes for bfloat16) where DLPack refuses (an unaligned or
non-contiguous buffer, a dtype it lacks). ``jax_enable_x64`` is switched on when the framework is
loaded: without it JAX turns every float64 input into float32 and int64 positions into int32,
and the float64 cases and gradchecks could not be graded at all. A JAX adapter therefore has to
keep a float32 input float32 itself (as MaxText and Flax do, computing the table in float32 or
casting back to ``inputs.dtype``); one that promotes is graded dtype-changed.
JAX arrays are immutable: an adapter cannot write into its inputs.
"""

from __future__ import annotations

import importlib

NAME = "jax"
MODULE = "jax"
INSTALL = "jax"  # what the missing-library error tells to run
DIST = "jax"
HANDOVER = "DLPack, else a copy through NumPy; jax_enable_x64 on"  # for the report's note
DEVICES = ("cpu", "cuda")


def library():
    jax = importlib.import_module(MODULE)
    if not jax.config.jax_enable_x64:
        jax.config.update("jax_enable_x64", True)
    return jax


def to_native(t):
    jax = library()
    t = t.detach()
    try:
        return jax.dlpack.from_dlpack(t.contiguous())
    except Exception:  # noqa: BLE001 - DLPack refused: copy through NumPy
        from conformance.frameworks import _numpy

        return jax.numpy.asarray(_numpy.to_native(t.cpu()))


def is_native(x) -> bool:
    return isinstance(x, library().Array)


def to_torch(x):
    import torch

    try:
        return torch.from_dlpack(x).clone()  # clone: no buffer shared with JAX once graded
    except Exception:  # noqa: BLE001 - DLPack refused: copy through NumPy
        import numpy

        from conformance.frameworks import _numpy

        return _numpy.to_torch(numpy.asarray(x))
