"""The t5.bucket cases of one T5 stack (a reference.t5.model_config Setting), drawn from a seed.

Relative positions (key minus query) chosen from the model's own num_buckets and max_distance:
with ``half`` buckets per direction (num_buckets / 2 bidirectional) and ``max_exact`` = half / 2,

- ``span``: -20..20, every small distance (the exact buckets, and the sign: later keys in the
  upper half bidirectionally, in bucket 0 for the decoder);
- ``edges``: e - 1, e, e + 1 on both sides for e = max_exact, 2 max_exact, 4 max_exact ... up to
  max_distance (where the exact log position is an integer, a float log one ulp low gives the
  bucket below: the protocol accepts that there, and says why);
- ``saturation``: max_distance - 1, max_distance, max_distance + 1 and far (10^5, 2^31 - 1) on
  both sides: every distance from max_distance on is the last bucket;
- ``drawn``: sixteen distances drawn from [-4 max_distance, 4 max_distance] (new with the seed).
"""

from __future__ import annotations

from reference.golden.catalog import TestGroupSpec
from reference.numerics.bias.t5 import check_config
from reference.t5.vectors import BucketTest
from reference.zoo.vectors import seedless


def groups(setting, draw, protocol: str = "t5.bucket") -> list:
    """[TestGroupSpec] of t5.bucket for ``setting``, distances drawn from ``draw``."""
    p = setting.params
    _, max_exact, max_distance = check_config(p["num_buckets"], p["max_distance"], p["bidirectional"])
    direction = "Bidirectional" if p["bidirectional"] else "Causal"
    edges, e = set(), max_exact
    while e <= max_distance:
        edges |= {e - 1, e, e + 1}
        e *= 2
    far = (max_distance - 1, max_distance, max_distance + 1, 100000, 2**31 - 1)
    drawn = tuple(draw.integers(-4 * max_distance, 4 * max_distance, 16))

    def both(values):
        return tuple(sorted({s * v for v in values for s in (-1, 1)}))

    tests = (
        BucketTest("span", "Relative positions -20..20.", (direction,), tuple(range(-20, 21))),
        BucketTest("edges", f"Distances around max_exact {max_exact} and its doublings up to max_distance "
                   f"{max_distance}, both signs.", (direction, "BucketEdge"), both(edges)),
        BucketTest("saturation", f"Distances at max_distance {max_distance} and far past it, both signs: the last "
                   "bucket.", (direction,), both(far)),
        BucketTest("drawn", f"Sixteen distances drawn from [{-4 * max_distance}, {4 * max_distance}] (new with the "
                   "seed).", (direction,), drawn),
    )
    tests = tuple(BucketTest(t.name, t.comment, t.flags + ("ModelConfig",), t.relative_positions) for t in tests)
    return [TestGroupSpec(p, tests)]


# The committed, certified cases of the zoo's models (reference.zoo.vectors): all but the drawn one.
committed = seedless(groups)
