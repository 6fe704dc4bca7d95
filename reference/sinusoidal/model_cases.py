"""The sinusoidal.table cases of one model's table (a reference.sinusoidal.model_config Setting).

At the model's width, layout, exponent and base. A sinusoidal table is a function of the position
and the configs read here state no context, so the positions are those the catalog grades long
contexts at:

- ``prefill-16``: positions 0..15 (0: sin 0 and cos 1 in every column pair);
- ``drawn``: eight positions drawn from [16, 2^16] (new with every seed);
- ``long``: 1000, 4095, 65535 and 2^20 (float32 angles drift by about position * 2^-24 rad).
"""

from __future__ import annotations

from reference.golden.catalog import TestGroupSpec
from reference.sinusoidal.vectors import LONG, SinusoidalTest, _flags


def groups(setting, draw, protocol: str = "sinusoidal.table") -> list:
    """[TestGroupSpec] of sinusoidal.table for ``setting``, positions drawn from ``draw``."""
    flags = _flags(setting.params) + ("ModelConfig",)
    drawn = tuple(sorted(draw.integers(16, 2**16, 8)))
    tests = (
        SinusoidalTest("prefill-16", "Positions 0..15.", flags + ("Prefill",), tuple(range(16))),
        SinusoidalTest("drawn", f"Eight positions drawn from [16, 65536] (new with the seed): {list(drawn)}.", flags,
                       drawn),
        SinusoidalTest("long", f"Positions {', '.join(map(str, LONG))}: long contexts.", flags + ("LongPositions",),
                       LONG),
    )
    return [TestGroupSpec(setting.params, tests)]
