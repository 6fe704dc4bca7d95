"""The catalog of golden cases: the records every family's catalog is made of, and the registry
that collects them.

Each family declares its vectors in ``reference/<family>/vectors.py`` (docs/design.md):

- ``NOTES``: {flag: {"bugType", "description", "links"}} explaining every flag its tests carry
  (Wycheproof style);
- ``PROTOCOLS``: {protocol name: :class:`VectorProtocol`}: the arrays of a case, its parameter
  schema, how inputs are built, how expected values are computed (golden mode), their shapes,
  and how mpmath computes them exactly (certification);
- ``groups()``: the list of :class:`GroupSpec` (one JSON file and one .npz each);
- optionally ``HEADER``: lines added to the generic header of each of its group files.

A case id is ``<protocol>/<group>/<test>``; ids are part of the public contract (reviews cite
them): never rename or reuse one; changing what an id holds means bumping the suite version.
Pure data: nothing here computes arrays (``reference.golden.generate`` does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from types import ModuleType
from typing import Callable, Mapping

from reference import families

ROUNDINGS = ("correct", "faithful")


@dataclass(frozen=True)
class TestSpec:
    """One case: its name (the last part of the id), why it exists, and its flags. A family
    subclasses it with the fields that describe its inputs (positions, heads, ...)."""

    name: str
    comment: str
    flags: tuple[str, ...]


@dataclass(frozen=True)
class TestGroupSpec:
    """Tests sharing parameters (the ``params`` of one test group in the metadata)."""

    params: dict
    tests: tuple
    source: str = ""


@dataclass(frozen=True)
class GroupSpec:
    """One metadata file + one npz: ``vectors/<protocol>/<name>.json`` and ``.npz``."""

    protocol: str
    name: str
    description: str
    test_groups: tuple[TestGroupSpec, ...] = field(default_factory=tuple)

    @property
    def key(self) -> str:
        return f"{self.protocol}/{self.name}"

    @property
    def family(self) -> str:
        return self.protocol.split(".", 1)[0]


@dataclass(frozen=True)
class VectorProtocol:
    """What the generic golden machinery needs to know about one protocol's vectors.

    arrays         role -> dtype ("float64", "int64", ...) of every array a case stores, inputs
                   first, in storage order
    inputs         the roles that are inputs (seeded or fixed; re-derived and compared bit for bit)
    params_schema  JSON Schema of a case's merged parameters (group params updated by test params)
    build          (case_id, group params, test) -> (test params, {input role: array})
    compute        (params, inputs, backend) -> {output role: float64 array}, golden mode
    shapes         (params, {role: array}) -> {role: expected shape}
    exact          (params, inputs) -> {output role: object array of mpmath.mpf}, the exact values
                   the stored ones are certified against
    rounding       "correct" (every stored value is the nearest double to the exact one) or
                   "faithful" (within one ulp: reductions)
    fresh          optional (draw) -> [TestGroupSpec]: new cases drawn at run time from a seed
                   (reference.golden.fresh), so that no answer can be looked up in a file
    named          optional (params, {role: array}) -> {input role: array}: the inputs a case names
                   by their seed instead of storing them (reference.golden.seeded), for readers of
                   the stored arrays (``posref vectors export``)
    """

    name: str
    arrays: Mapping[str, str]
    inputs: tuple[str, ...]
    params_schema: Mapping
    build: Callable
    compute: Callable
    shapes: Callable
    exact: Callable
    rounding: str = "correct"
    fresh: Callable | None = None
    named: Callable | None = None

    def __post_init__(self):
        if self.rounding not in ROUNDINGS:
            raise ValueError(f"rounding: {self.name} has {self.rounding!r}; use one of {ROUNDINGS}")
        if not set(self.inputs) <= set(self.arrays):
            raise ValueError(f"inputs: {self.name} lists inputs that are not arrays")

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(role for role in self.arrays if role not in self.inputs)


# --------------------------------------------------------------------------------------------
# Registry (discovered: every family with a vectors module)


@lru_cache(maxsize=None)
def _modules() -> tuple[ModuleType, ...]:
    found = (families.part(name, "vectors") for name in families.names())
    return tuple(m for m in found if m is not None)


def protocols() -> dict[str, VectorProtocol]:
    """Every protocol that has vectors, by name."""
    return {name: proto for module in _modules() for name, proto in module.PROTOCOLS.items()}


def protocol(name: str) -> VectorProtocol:
    """The VectorProtocol of ``name``; KeyError for a protocol without vectors."""
    return protocols()[name]


def family_module(protocol_name: str) -> ModuleType:
    """The vectors module of the family that owns ``protocol_name``."""
    for module in _modules():
        if protocol_name in module.PROTOCOLS:
            return module
    raise KeyError(protocol_name)


def notes(protocol_name: str) -> dict:
    """The flag notes of the family that owns ``protocol_name``."""
    return family_module(protocol_name).NOTES


def all_groups() -> list[GroupSpec]:
    """Every group of every family, in a fixed order (families by name, then their own order, then
    the committed groups of the zoo's models: reference.zoo.vectors)."""
    from reference.zoo import vectors as zoo_vectors  # the zoo reads the families, which read this

    return [group for module in _modules() for group in zoo_vectors.merge(
        module.groups(), zoo_vectors.groups(module.__name__.split(".")[1]))]


def select(family: str | None = None) -> list[GroupSpec]:
    """Groups matching ``family``: a family ("rope"), a protocol ("rope.apply"), a group
    ("rope.apply/llama2-d128"), or a group name in every protocol ("llama2-d128")."""
    groups = all_groups()
    if family is None:
        return groups
    chosen = [g for g in groups if family in (g.family, g.protocol, g.key, g.name)]
    if not chosen:
        raise ValueError(f"family: no case group matches {family!r}")
    return chosen
