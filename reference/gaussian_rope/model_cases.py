"""The cases of a Gaussian-kernel RoPE configuration (a reference.gaussian_rope.model_config Setting).

At the configuration's head size, kernel and base, with L its sequence length:

- gaussian_rope.apply: ``prefill-8`` (positions 0..7, K(0) = a1 + a2), ``drawn`` (eight positions
  drawn from [8, L - 1], new with every seed), ``decode-<L-1>`` (the last position) and
  ``decode-<2L-1>`` (past the sequence, where K is far smaller);
- gaussian_rope.score: ``square-8`` (queries and keys at 0..7), ``drawn`` (a query drawn from
  [8, L - 1] against keys 0..3 and the four before it), ``last-<L-1>`` (the last query against
  keys 0..3 and L - 4 .. L - 1: the far keys' K(n - m) near its tail).

``committed``: all but the drawn ones (reference.zoo.vectors).
"""

from __future__ import annotations

from reference.golden.catalog import TestGroupSpec
from reference.gaussian_rope.vectors import GaussianTest
from reference.zoo.vectors import seedless

FLAGS = ("ModelConfig", "Interleaved")


def groups(setting, draw, protocol: str = "gaussian_rope.apply") -> list:
    """[TestGroupSpec] of ``protocol`` for ``setting``, positions drawn from ``draw``."""
    L = setting.seq_len
    if protocol == "gaussian_rope.score":
        q = draw.integer(8, L - 1)
        tests = (
            _t("square-8", "Queries and keys at positions 0..7.", [range(8)], [range(8)]),
            _t("drawn", f"One query at {q} (drawn from [8, {L - 1}], new with the seed) against keys 0..3 and "
               f"{q - 4}..{q - 1}.", [[q]], [[0, 1, 2, 3, q - 4, q - 3, q - 2, q - 1]]),
            _t(f"last-{L - 1}", f"The last query, {L - 1}, against keys 0..3 and {L - 4}..{L - 1}: the far keys' "
               "K(n - m) near its tail.", [[L - 1]], [[0, 1, 2, 3, L - 4, L - 3, L - 2, L - 1]]),
        )
    else:
        drawn = sorted(draw.integers(8, L - 1, 8))
        tests = (
            _t("prefill-8", "Positions 0..7: K from K(0) = a1 + a2 down.", [range(8)]),
            _t("drawn", f"Eight positions drawn from [8, {L - 1}] (new with the seed): {drawn}.", [drawn]),
            _t(f"decode-{L - 1}", f"The last position of the configuration's {L}-token sequence.", [[L - 1]]),
            _t(f"decode-{2 * L - 1}", f"Past the {L}-token sequence, where K is far smaller.", [[2 * L - 1]]),
        )
    return [TestGroupSpec(setting.params, tests)]


def _t(name, comment, rows, k_rows=()) -> GaussianTest:
    return GaussianTest(name, comment, FLAGS, tuple(map(tuple, rows)), 2, tuple(map(tuple, k_rows)))


committed = seedless(groups)
