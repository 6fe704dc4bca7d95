"""Fresh cases: golden cases drawn at run time from a seed, in no file, computed on the spot.

An implementation could pass the committed vectors by looking its inputs up in them and returning
the stored answer. Fresh cases close that hole: the conformance runner draws a few new cases from a
seed it prints (new positions, shapes, configurations and seeded inputs), computes their expected
values with the family's reference in golden mode (the same code that produced the certified
vectors), and grades them like the others. The same seed gives the same cases on any machine.

A family offers fresh cases through its VectorProtocol's ``fresh`` hook: ``fresh(draw)`` returns
TestGroupSpec records whose parameters and positions come from ``draw`` (a :class:`Draw`). Case
ids are ``<protocol>/fresh-<seed>/<test>`` and carry the flag ``Fresh``.
"""

from __future__ import annotations

import hashlib
import inspect
import secrets

import numpy as np

from reference.golden import catalog
from reference.golden.store import CaseArrays, GoldenCase

MAX_SEED = 2**63 - 1
FLAG = "Fresh"


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
    group = f"fresh-{int(seed)}"
    cases = []
    draw = Draw(int(seed), protocol)
    takes_shapes = "shapes" in inspect.signature(proto.fresh).parameters
    for tg in proto.fresh(draw, shapes=shapes) if takes_shapes else proto.fresh(draw):
        for test in tg.tests:
            case_id = f"{protocol}/{group}/{test.name}"
            test_params, inputs = proto.build(case_id, dict(tg.params), test)
            params = {**tg.params, **test_params}
            held = {role: _read_only(np.array(inputs[role], dtype=dtype))
                    for role, dtype in proto.arrays.items() if role in inputs}
            outputs = tuple(role for role in proto.arrays if role not in held)
            # The expected values are computed when grading asks for them, after the adapter's
            # call, and never kept (store.CaseArrays): an in-process adapter cannot find them.
            arrays = CaseArrays(held, outputs, _Outputs(proto, params, inputs, backend), order=tuple(proto.arrays))
            cases.append(GoldenCase(id=case_id, protocol=protocol, group=group, params=params,
                                    comment=test.comment, flags=[*test.flags, FLAG], arrays=arrays))
    return cases


__all__ = ["Draw", "FLAG", "MAX_SEED", "SHAPES", "fresh_cases", "new_seed"]
