"""The ``spec`` of a gaussian_rope case: RoPE's parameters and the kernel."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from conformance.core.rotation_spec import RopeSpec


@dataclass(frozen=True)
class GaussianRopeSpec(RopeSpec):
    """RopeSpec (head_dim, rotary_dim, base, layout, scaling None, seq_len) plus

    kernel  {"a1", "a2", "s1", "s2"}: K(m) = a1 exp(-m^2/(2 s1^2)) + a2 exp(-m^2/(2 s2^2))
    form    "absolute": f(x, m) = K(m) R_m x on the whole vector (seed document 002)
    """

    kernel: Optional[Mapping[str, Any]] = field(default=None, hash=False)
    form: str = "absolute"


def spec_of(params) -> GaussianRopeSpec:
    return GaussianRopeSpec(
        head_dim=int(params["head_dim"]),
        rotary_dim=int(params.get("rotary_dim") or params["head_dim"]),
        base=float(params.get("base", 10000.0)),
        layout=str(params.get("layout", "half")),
        seq_len=int(params.get("seq_len") or 0),
        kernel=copy.deepcopy(params["kernel"]),
        form=str(params.get("form", "absolute")),
    )
