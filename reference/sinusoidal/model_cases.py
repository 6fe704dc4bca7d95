"""The sinusoidal.table cases of one model's table (a reference.sinusoidal.model_config Setting).

At the model's width, layout, exponent and base:

- ``prefill-16``: positions 0..15 (0: sin 0 and cos 1 in every column pair);
- ``drawn``: eight positions drawn from [16, M] (new with every seed);
- with M the largest position the model feeds (Transformer-XL: its clamp_len, or the segment
  plus memory length when it clamps nothing), ``last-<M>``: M - 3 .. M;
- when the config bounds no position (a sinusoidal table is a function of the position; the
  Transformer base states no context), M = 2^16 and ``long``: 1000, 4095, 65535 and 2^20, where
  the catalog grades long contexts (float32 angles drift by about position * 2^-24 rad).
"""

from __future__ import annotations

from reference.golden.catalog import TestGroupSpec
from reference.sinusoidal.vectors import LONG, SinusoidalTest, _flags
from reference.zoo.vectors import seedless


def groups(setting, draw, protocol: str = "sinusoidal.table") -> list:
    """[TestGroupSpec] of sinusoidal.table for ``setting``, positions drawn from ``draw``."""
    flags = _flags(setting.params) + ("ModelConfig",)
    top = setting.max_position or 2**16
    drawn = tuple(sorted(draw.integers(16, top, 8)))
    tests = [
        SinusoidalTest("prefill-16", "Positions 0..15: the first rows, position 0 all sin 0 and cos 1.", flags + ("Prefill",), tuple(range(16))),
        SinusoidalTest("drawn", f"Eight positions drawn from [16, {top}] (new with the seed): {list(drawn)}.", flags,
                       drawn),
    ]
    if setting.max_position:
        tests.append(SinusoidalTest(f"last-{top}", f"Positions {top - 3}..{top}: the largest the model feeds.", flags,
                                    tuple(range(top - 3, top + 1))))
    else:
        tests.append(SinusoidalTest("long", f"Positions {', '.join(map(str, LONG))}: long contexts.",
                                    flags + ("LongPositions",), LONG))
    return [TestGroupSpec(setting.params, tuple(tests))]


# The committed, certified cases of the zoo's models (reference.zoo.vectors): all but the drawn one.
committed = seedless(groups)
