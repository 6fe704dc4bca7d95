"""``--framework cupy``: the adapter receives and returns ``cupy.ndarray`` on the GPU
(``--device cuda``), both ways through DLPack without a copy of the inputs. CuPy has no
bfloat16: such a case is reported unsupported with that reason. Not exercised by the test suite
on a machine without a GPU (docs/frameworks.md)."""

from __future__ import annotations

import importlib

NAME = "cupy"
MODULE = "cupy"
INSTALL = "cupy-cuda12x, the wheel of your CUDA"  # what the missing-library error tells to run
DIST = "cupy"
HANDOVER = "DLPack both ways"  # for the report's note
DEVICES = ("cuda",)
MISSING = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def library():
    return importlib.import_module(MODULE)


def to_native(t):
    from conformance.errors import Unsupported

    name = str(t.dtype).replace("torch.", "")
    if name in MISSING:
        raise Unsupported(f"--framework cupy: cupy has no {name}")
    return library().from_dlpack(t.detach())


def is_native(x) -> bool:
    return isinstance(x, library().ndarray)


def to_torch(x):
    import torch

    return torch.from_dlpack(x).clone()
