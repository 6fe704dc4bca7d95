"""``--framework mlx``: the adapter receives and returns ``mlx.core.array`` (Apple's MLX; the
``mlx[cpu]`` wheel runs on Linux).

Inputs are built from NumPy views with the dtype given explicitly (``mx.array(a)`` alone turns
float64 into float32); bfloat16 goes through float32, which holds every bfloat16 value exactly.
Outputs come back by DLPack (which evaluates MLX's lazy graph), else through NumPy. MLX on CPU
has float64; its arrays are immutable from the runner's side (a copy is handed over).
"""

from __future__ import annotations

import importlib

NAME = "mlx"
MODULE = "mlx.core"
INSTALL = "\"mlx[cpu]\" on Linux, mlx on macOS"  # what the missing-library error tells to run
DIST = "mlx"
HANDOVER = "inputs copied through NumPy, outputs by DLPack"  # for the report's note
DEVICES = ("cpu",)


def library():
    return importlib.import_module(MODULE)


def to_native(t):
    from conformance.errors import Unsupported

    mx = library()
    t = t.detach()
    name = str(t.dtype).replace("torch.", "")
    dtype = getattr(mx, name, None)
    if dtype is None:
        raise Unsupported(f"--framework mlx: mlx has no {name}")
    if name == "bfloat16":
        return mx.array(t.float().numpy(), dtype=mx.float32).astype(mx.bfloat16)
    return mx.array(t.numpy(), dtype=dtype)


def is_native(x) -> bool:
    return isinstance(x, library().array)


def to_torch(x):
    import torch

    mx = library()
    mx.eval(x)
    try:
        return torch.from_dlpack(x).clone()
    except Exception:  # noqa: BLE001 - DLPack refused: through NumPy (bfloat16 via float32)
        import numpy

        if x.dtype == mx.bfloat16:
            return torch.from_numpy(numpy.array(x.astype(mx.float32))).to(torch.bfloat16)
        return torch.from_numpy(numpy.array(x, copy=True))
