"""Fresh cases: golden cases drawn at run time from a seed, in no file, computed on the spot.

An implementation could pass the committed vectors by looking its inputs up in them and returning
the stored answer. Fresh cases close that hole: the conformance runner draws a few new cases from a
seed it prints (new positions, shapes, configurations and seeded inputs), computes their expected
values with the family's reference in golden mode (the same code that produced the certified
vectors), and grades them like the others. The same seed gives the same cases on any machine.

A family offers fresh cases through its VectorProtocol's ``fresh`` hook: ``fresh(draw)`` returns
TestGroupSpec records whose parameters and positions come from ``draw`` (a :class:`Draw`).

Ids say what was drawn, never which seed drew it: ``<protocol>/fresh/<test>``
(``rope.apply/fresh/shape-dim-d80-r20-half``), and the cases carry the flag ``Fresh``. The inputs
still change with every seed (they are derived from ``<protocol>/fresh-<seed>/<test>``, the ids of
suite 0.5.0, so a seed draws the same values as it did then), so an implementation cannot look
them up; ``--seed N`` with the id in ``--cases`` repeats one. A case's *kind* (``kind_of``) is the
glob over every name its place in the draw gives (``rope.apply/fresh/shape-dim-*``): what an
expected-failures baseline lists, so that it still matches when another seed draws another head
size.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import inspect
import secrets

import numpy as np

from reference.golden import catalog
from reference.golden.store import CaseArrays, GoldenCase

MAX_SEED = 2**63 - 1
FLAG = "Fresh"
GROUP = "fresh"  # the group part of every fresh case id
KIND_SEEDS = 64  # seeds 0..63: the draws whose names define each place's kind (kinds())


def new_seed() -> int:
    """A seed for a run that was not given one (printed in the report, so --seed reproduces it)."""
    return secrets.randbelow(2**32)


class Draw:
    """Deterministic draws for one protocol and seed, identical on every platform: only PCG64's
    raw words are used (numpy's samplers may change between releases)."""

    def __init__(self, seed: int, protocol: str):
        digest = hashlib.sha256(f"fresh#{seed}#{protocol}".encode("utf-8")).digest()
        self._bits = np.random.PCG64(int.from_bytes(digest[:16], "little"))

    def integer(self, low: int, high: int) -> int:
        """An integer in [low, high] (both included)."""
        if high < low:
            raise ValueError(f"integer: empty range [{low}, {high}]")
        span = high - low + 1
        return low + int(self._bits.random_raw()) % span  # bias below 2^-40 for spans < 2^24

    def integers(self, low: int, high: int, count: int) -> list[int]:
        return [self.integer(low, high) for _ in range(count)]

    def choice(self, options):
        options = list(options)
        return options[self.integer(0, len(options) - 1)]


SHAPES = ("sample", "full")


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)  # as the stored vectors: read-only
    return array


class _Outputs:
    """Computes a fresh case's outputs with the family's reference in golden mode, on each call."""

    def __init__(self, proto, params: dict, inputs: dict, backend: str):
        self.proto, self.params, self.inputs, self.backend = proto, params, inputs, backend

    def __call__(self) -> dict:
        outputs = self.proto.compute(self.params, self.inputs, self.backend)
        return {role: _read_only(np.array(outputs[role], dtype=dtype))
                for role, dtype in self.proto.arrays.items() if role not in self.inputs}


def fresh_cases(protocol: str, seed: int, backend: str = "cpu", shapes: str = "sample") -> list[GoldenCase]:
    """The fresh cases of ``protocol`` for ``seed`` ([] when its family offers none). ``shapes``
    "full" asks a hook that takes a ``shapes`` keyword (a shape matrix) for all of it instead of
    its sample; other hooks draw the same cases either way."""
    if not 0 <= int(seed) <= MAX_SEED:
        raise ValueError(f"seed must be an integer in [0, 2**63 - 1], got {seed}")
    if shapes not in SHAPES:
        raise ValueError(f"shapes must be one of {', '.join(SHAPES)}, got {shapes!r}")
    proto = catalog.protocol(protocol)
    if proto.fresh is None:
        return []
    # The inputs come from the seed's own name for the case: they change with every seed.
    return computed_cases(protocol, _groups(proto, int(seed), shapes), group=GROUP,
                          inputs_group=f"fresh-{int(seed)}", flag=FLAG, backend=backend)


def computed_cases(protocol: str, groups, *, group: str, inputs_group: str, flag: str,
                   backend: str = "cpu") -> list[GoldenCase]:
    """GoldenCases ``<protocol>/<group>/<test>`` of the TestGroupSpecs ``groups``, each flagged
    ``flag``, their inputs seeded by ``<protocol>/<inputs_group>/<test>`` and their expected
    values computed by the family's reference in golden mode when grading asks for them (fresh
    cases; a model's cases, reference.zoo.cases)."""
    proto = catalog.protocol(protocol)
    cases = []
    for tg in groups:
        for test in tg.tests:
            test_params, inputs = proto.build(f"{protocol}/{inputs_group}/{test.name}", dict(tg.params), test)
            params = {**tg.params, **test_params}
            held = {role: _read_only(np.array(inputs[role], dtype=dtype))
                    for role, dtype in proto.arrays.items() if role in inputs}
            outputs = tuple(role for role in proto.arrays if role not in held)
            # The expected values are computed when grading asks for them, after the adapter's
            # call, and never kept (store.CaseArrays): an in-process adapter cannot find them.
            arrays = CaseArrays(held, outputs, _Outputs(proto, params, inputs, backend), order=tuple(proto.arrays))
            cases.append(GoldenCase(id=f"{protocol}/{group}/{test.name}", protocol=protocol, group=group,
                                    params=params, comment=test.comment, flags=[*test.flags, flag], arrays=arrays))
    return cases


def _groups(proto, seed: int, shapes: str) -> list:
    """The TestGroupSpecs the family's hook draws for ``seed`` (names and parameters only)."""
    draw = Draw(seed, proto.name)
    takes_shapes = "shapes" in inspect.signature(proto.fresh).parameters
    return list(proto.fresh(draw, shapes=shapes) if takes_shapes else proto.fresh(draw))


def fresh_id(protocol: str, name: str) -> str:
    return f"{protocol}/{GROUP}/{name}"


def is_fresh(case_id: str) -> bool:
    """Whether ``case_id`` names a fresh case (``<protocol>/fresh/<test>``)."""
    parts = str(case_id).split("/")
    return len(parts) == 3 and parts[1] == GROUP


@functools.lru_cache(maxsize=64)
def names(protocol: str, seed: int, shapes: str = "sample") -> tuple:
    """The test names of the fresh cases ``seed`` draws (the hook only: nothing is computed)."""
    proto = catalog.protocol(protocol)
    if proto.fresh is None:
        return ()
    return tuple(test.name for tg in _groups(proto, seed, shapes) for test in tg.tests)


def _glob(drawn) -> str:
    """The narrowest glob of whole "-" tokens over the names ``drawn``: their common leading and
    trailing tokens around one "*" that stands for at least one token of each name (the name
    itself when they are all the same)."""
    drawn = list(dict.fromkeys(drawn))
    if len(drawn) == 1:
        return drawn[0]
    split = [n.split("-") for n in drawn]
    shortest = min(len(t) for t in split)
    head = 0
    while head < shortest - 1 and len({t[head] for t in split}) == 1:
        head += 1
    tail = 0
    while tail < shortest - 1 - head and len({t[-1 - tail] for t in split}) == 1:
        tail += 1
    return "-".join(split[0][:head] + ["*"] + (split[0][len(split[0]) - tail:] if tail else []))


@functools.lru_cache(maxsize=None)
def kinds(protocol: str, shapes: str = "sample") -> tuple:
    """The kind of each place in the protocol's draw, as a glob over the test names: the names that
    place gets from seeds 0..KIND_SEEDS-1 (``shape-dim-*``, ``*-0``; a place every seed fills with
    the same name is that name). () when the number of places changes with the seed."""
    drawn = [names(protocol, seed, shapes) for seed in range(KIND_SEEDS)]
    if len({len(column) for column in drawn}) != 1:
        return ()
    return tuple(_glob(column) for column in zip(*drawn))


def kind_of(case_id: str, seed: int) -> str:
    """The kind of the fresh case ``case_id`` drawn from ``seed``: ``<protocol>/fresh/<glob>``
    (the glob matches the id); the id itself when the draw of ``seed`` has no such name."""
    protocol, _, name = str(case_id).split("/", 2)
    for shapes in SHAPES:
        drawn = names(protocol, int(seed), shapes)
        places = kinds(protocol, shapes)
        if name in drawn and places:
            glob = places[drawn.index(name)]
            return fresh_id(protocol, glob) if fnmatch.fnmatchcase(name, glob) else case_id
    return case_id


__all__ = ["Draw", "FLAG", "GROUP", "MAX_SEED", "SHAPES", "computed_cases", "fresh_cases", "fresh_id", "is_fresh", "kind_of", "kinds",
           "names", "new_seed"]
