"""Parameter checks shared by the scaling types: required and optional keys, one-line errors."""

from __future__ import annotations

import math
from numbers import Real


def positive(name, value):
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"scaling: {name} must be a positive finite number, got {value!r}")
    return float(value)


def non_negative(name, value):
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"scaling: {name} must be a non-negative finite number, got {value!r}")
    return float(value)


def at_least_one(name, value):
    value = positive(name, value)
    if value < 1:
        raise ValueError(f"scaling: {name} must be >= 1, got {value!r}")
    return value


def length(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"scaling: {name} must be a positive integer, got {value!r}")
    return int(value)


def flag(name, value):
    if not isinstance(value, bool):
        raise ValueError(f"scaling: {name} must be true or false, got {value!r}")
    return value


def factors(name, value):
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ValueError(f"scaling: {name} must be a list of positive numbers, got {value!r}")
    return tuple(positive(f"{name}[{i}]", v) for i, v in enumerate(value))


def check(rope_type: str, params: dict, required: dict, optional: dict) -> dict:
    missing = [k for k in required if k not in params]
    if missing:
        raise ValueError(f"scaling: rope_type {rope_type!r} needs {', '.join(missing)}")
    unknown = sorted(k for k in params if k not in required and k not in optional)
    if unknown:
        known = ", ".join(list(required) + list(optional))
        raise ValueError(f"scaling: rope_type {rope_type!r} does not take {', '.join(unknown)} (it takes {known})")
    return {k: (required.get(k) or optional[k])(k, v) for k, v in params.items()}


def check_lengths(rope_type: str, params: dict, rotary_dim: int) -> None:
    """Per-pair lists (LongRoPE's short_factor / long_factor) need rotary_dim // 2 entries."""
    for name, value in params.items():
        if isinstance(value, tuple) and len(value) != rotary_dim // 2:
            raise ValueError(f"scaling: {name} has {len(value)} entries, rotary_dim {rotary_dim} needs "
                             f"{rotary_dim // 2}")
