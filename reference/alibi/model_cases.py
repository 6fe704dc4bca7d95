"""The ALiBi cases of one model (a reference.alibi.model_config Setting), drawn from a seed.

alibi.slopes: the model's own head count (``heads-<n>``: BLOOM's 112 and Baichuan2-13B's 40 are
not powers of two, where the plain 2^(-8k/n) rule is wrong).

alibi.bias, at that head count, causal as the models attend, over the model's context L
(max_seq_len, model_max_length ...; 2^20 when the config states none, as BLOOM's does not):

- ``prefill-8``: queries and keys at 0..7 (position 0 included: zero bias on the diagonal);
- ``drawn``: one query drawn from [8, L - 1] against key 0, six keys drawn below it and itself
  (new with every seed);
- ``decode-<L-1>``: the last position of the context against keys 0..3 and L-4 .. L-1 (the
  largest distance the model sees);
- ``decode-<2L-1>``: past the context (ALiBi extrapolates: its reason to exist), when the config
  states one.
"""

from __future__ import annotations

from reference.alibi.vectors import AlibiTest
from reference.golden.catalog import TestGroupSpec
from reference.zoo.vectors import seedless

NO_CONTEXT = 2**20  # positions graded when the config states no context


def groups(setting, draw, protocol: str = "alibi.bias") -> list:
    """[TestGroupSpec] of ``protocol`` for ``setting``, positions drawn from ``draw``."""
    n = setting.heads
    params = {"num_heads": n, "causal": setting.causal}
    kind = "PowerOfTwo" if n & (n - 1) == 0 else "NonPowerOfTwo"
    if protocol == "alibi.slopes":
        return [TestGroupSpec(params, (AlibiTest(f"heads-{n}", f"The model's {n} slopes.", (kind, "ModelConfig")),))]
    L = setting.max_positions or NO_CONTEXT
    said = f"the model's {L}-token context" if setting.max_positions else f"{L} positions (no context in the config)"
    q = draw.integer(8, L - 1)
    keys = tuple(sorted({0, q, *draw.integers(1, q - 1, 6)}))
    tests = [
        AlibiTest("prefill-8", "Queries and keys at positions 0..7.", ("Causal",), tuple(range(8)), tuple(range(8))),
        AlibiTest("drawn", f"One query at {q} (drawn from [8, {L - 1}], new with the seed) against keys {list(keys)}.",
                  ("Causal",), (q,), keys),
        _decode(L - 1, f"The last position of {said}."),
    ]
    if setting.max_positions:
        tests.append(_decode(2 * L - 1, f"Past {said}: ALiBi extrapolates."))
    tests = [AlibiTest(t.name, t.comment, t.flags + (kind, "ModelConfig"), t.q_positions, t.k_positions)
             for t in tests]
    return [TestGroupSpec(params, tuple(tests))]


def _decode(p: int, comment: str) -> AlibiTest:
    keys = (0, 1, 2, 3, p - 3, p - 2, p - 1, p)
    return AlibiTest(f"decode-{p}", f"One query at {p} against keys 0..3 and {p - 3}..{p}. {comment}", ("Causal",),
                     (p,), keys)


# The committed, certified cases of the zoo's models (reference.zoo.vectors): all but the drawn one.
committed = seedless(groups)
