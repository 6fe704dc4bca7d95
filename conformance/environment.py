"""The environment a report was produced in: versions, device, dtypes, platform.

Versions come from package metadata, so numba is never imported just to name its version.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def device_name(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        index = torch.device(device).index or 0
        return f"{device} ({torch.cuda.get_device_name(index)})"
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def collect(device: str, dtypes) -> dict:
    """{"python", "torch", "numpy", "numba", "posref", "device", "dtypes", "platform"}, and where
    TRITON_INTERPRET is set (--triton-interpret, conformance.triton_interpret) "triton" and
    "TRITON_INTERPRET" as well."""
    import numpy
    import torch

    from reference import __version__

    found = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "numba": _version("numba"),
        "posref": __version__,
        "device": device_name(device),
        "dtypes": list(dtypes),
        "platform": platform.platform(),
    }
    if os.environ.get("TRITON_INTERPRET"):  # the kernels ran in Triton's interpreter
        found["triton"] = _version("triton")
        found["TRITON_INTERPRET"] = os.environ["TRITON_INTERPRET"]
    return found
