"""``--framework numpy``: the adapter receives and returns ``numpy.ndarray``.

CPU only. Inputs are zero-copy views of the runner's tensors (``Tensor.numpy()``), so an adapter
that writes into an input array writes into the tensor the runner watches: the
``inputs-not-mutated`` check sees it as it does for torch. Outputs are copied into torch tensors.
NumPy has no bfloat16 nor float8: with ``ml_dtypes`` installed (JAX's dtype package) they travel
as its dtypes (the same bits, viewed); without it such a case is reported unsupported with the
reason ("numpy has no bfloat16").
"""

from __future__ import annotations

import importlib

from conformance.errors import Unsupported

NAME = "numpy"
MODULE = "numpy"  # the import name (tests replace it to simulate a missing library)
INSTALL = "numpy"  # what the missing-library error tells to run
DIST = "numpy"
HANDOVER = "inputs as views of the tensors' memory, outputs copied"  # for the report's note
DEVICES = ("cpu",)
# torch dtypes NumPy lacks -> (ml_dtypes name, torch integer dtype of the same width for the view)
EXTENDED = {"bfloat16": ("bfloat16", "int16"), "float8_e4m3fn": ("float8_e4m3fn", "uint8"),
            "float8_e5m2": ("float8_e5m2", "uint8")}


def library():
    return importlib.import_module(MODULE)


def ml_dtypes():
    """The ml_dtypes module, or None where it is not installed."""
    try:
        return importlib.import_module("ml_dtypes")
    except ImportError:
        return None


def to_native(t):
    """A torch CPU tensor as a numpy array sharing its memory; Unsupported for a dtype NumPy cannot
    hold."""
    import torch

    t = t.detach()
    name = str(t.dtype).replace("torch.", "")
    if name in EXTENDED:
        ml = ml_dtypes()
        if ml is None:
            raise Unsupported(f"--framework numpy: numpy has no {name} (install ml_dtypes to grade it)")
        np_name, bits = EXTENDED[name]
        return t.view(getattr(torch, bits)).numpy().view(getattr(ml, np_name))
    try:
        return t.numpy()
    except (TypeError, RuntimeError):
        raise Unsupported(f"--framework numpy: numpy has no {name}") from None


def is_native(x) -> bool:
    import numpy

    return isinstance(x, numpy.ndarray)


def to_torch(x):
    """A copy of a numpy array as a torch tensor (ml_dtypes arrays keep their bits)."""
    import numpy
    import torch

    arr = numpy.array(x, copy=True)
    name = arr.dtype.name
    if name in EXTENDED:
        _, bits = EXTENDED[name]
        return torch.from_numpy(arr.view(getattr(numpy, bits))).view(getattr(torch, name))
    return torch.from_numpy(arr)
