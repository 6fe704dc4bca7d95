"""The attention.forward cases of one T5 stack (a reference.attention.model_config Setting), drawn
from a seed: the model's heads, head size, buckets and direction, its scores unscaled, one batch row
of eight tokens whose pairwise distances reach every kind of bucket T5 reads.

- ``prefill-8``: positions 0..7 (the exact buckets, distance 0 on the diagonal);
- ``far``: positions 0, 1, 2 and then past max_exact, at and past max_distance (the logarithmic
  buckets and the last one, saturated);
- ``drawn``: eight positions drawn from [0, 4 max_distance] (new with the seed).

No pairwise distance is a bucket edge (reference.numerics.bias.t5.edges: where the exact log
position is an integer and a float log one ulp low gives the bucket below; t5.bucket grades those
apart, and a bias read from the bucket below is another output, not an error within a budget):
the fixed positions are checked, the drawn ones drawn again until clear.
"""

from __future__ import annotations

import functools

from reference.attention.vectors import AttentionTest
from reference.golden.catalog import TestGroupSpec
from reference.numerics.bias.t5 import check_config, edges
from reference.zoo.vectors import seedless

TOKENS = 8


def groups(setting, draw, protocol: str = "attention.forward") -> list:
    """[TestGroupSpec] of attention.forward for ``setting``, positions drawn from ``draw``."""
    p = setting.params
    bidirectional = not p["causal"]
    _, max_exact, max_distance = check_config(p["num_buckets"], p["max_distance"], bidirectional)
    bad = _edges(p["num_buckets"], max_distance, bidirectional)
    far = _clear((0, 1, 2, max_exact + 1, 2 * max_exact + 3, max_distance - 1, max_distance + 2, 3 * max_distance),
                 bad)
    drawn = None
    while drawn is None:
        drawn = _clear(tuple(sorted(set(draw.integers(0, 4 * max_distance, TOKENS)))), bad, exact=False)
        drawn = drawn if drawn is not None and len(drawn) == TOKENS else None
    direction = "Bidirectional" if bidirectional else "Causal"
    tests = (
        AttentionTest("prefill-8", "Eight tokens at 0..7: the exact buckets.", ("T5", direction, "Unscaled"),
                      (tuple(range(TOKENS)),)),
        AttentionTest("far", f"Tokens at {list(far)}: distances in the exact, logarithmic and last buckets "
                      f"(max_exact {max_exact}, max_distance {max_distance}).", ("T5", direction, "Unscaled"),
                      (far,)),
        AttentionTest("drawn", f"Eight tokens at drawn positions {list(drawn)} (new with the seed).",
                      ("T5", direction, "Unscaled"), (drawn,)),
    )
    return [TestGroupSpec(dict(p), tests)]


@functools.lru_cache(maxsize=None)
def _edges(num_buckets: int, max_distance: int, bidirectional: bool) -> frozenset:
    """The bucket edges up to 8 max_distance (the largest distance drawn is 4 max_distance)."""
    return frozenset(edges(num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional,
                           limit=8 * max_distance))


def _clear(positions: tuple, bad: set, exact: bool = True):
    """``positions`` when no two are a bucket edge apart; else ValueError (fixed) or None (drawn)."""
    hit = sorted({abs(a - b) for a in positions for b in positions} & bad)
    if hit and exact:
        raise ValueError(f"positions {positions}: distances {hit} are bucket edges")
    return None if hit else positions


# The committed, certified cases of the zoo's models (reference.zoo.vectors): all but the drawn one.
committed = seedless(groups)
