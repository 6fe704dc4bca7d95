"""The family contract (docs/design.md, "One family, one place"), checked for every family the
registries discover, so that a new family is held to it without editing this file.

A family is one folder on each side, ``reference/<family>/`` and ``conformance/<family>/``, plus
``examples/<family>/`` (correct implementations; ``buggy/`` holds one per diagnosis code) and
``tests/<family>/``. For each family:

- the required names are present (vectors, identities, FAMILY, one PROTOCOL per protocol);
- every protocol has golden vectors, and every vector protocol can be graded;
- every diagnosis code is emitted by some buggy example, graded end to end by the runner;
- every identity is in the ``posref identities`` matrix, and none is failing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conformance.core import registry
from conformance.core.codes import CORE_CODES
from conformance.core.protocol import Protocol
from reference import families as reference_families
from reference import identities
from reference.golden import catalog, store
from support import load_example

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = sorted(registry.families())


def _buggy_modules(family: str) -> list[Path]:
    folder = ROOT / "examples" / family / "buggy"
    return sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")


def _constant(path: Path, name: str):
    """A buggy example's module-level constant (CODE), read without importing it: an example written
    for another array library (--framework) imports that library."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path.name}: no {name}")


BUGGY = [(family, path) for family in FAMILIES for path in _buggy_modules(family)]


def test_both_sides_discover_the_same_families():
    assert FAMILIES, "no family discovered"
    assert FAMILIES == reference_families.names()


@pytest.mark.parametrize("family", FAMILIES)
def test_required_names_are_present(family):
    fam = registry.families()[family]
    assert fam.name == family and fam.protocols and fam.codes
    for code, meaning in fam.codes.items():
        assert isinstance(meaning, str) and meaning, code
        assert code not in CORE_CODES, f"{code} is a core code; a family adds only its own"
    for short in fam.protocols:
        proto = registry.get(f"{family}.{short}")
        assert isinstance(proto, Protocol)
        assert (proto.name, proto.family) == (f"{family}.{short}", family)
        assert proto.signature.startswith("fn(")
    vectors = reference_families.part(family, "vectors")
    assert vectors is not None, f"reference/{family}/vectors.py is missing"
    assert isinstance(vectors.NOTES, dict) and vectors.PROTOCOLS
    for name, proto in vectors.PROTOCOLS.items():
        assert proto.name == name and name.startswith(family + ".")
    assert {g.protocol for g in vectors.groups()} <= set(vectors.PROTOCOLS)
    assert reference_families.part(family, "identities") is not None
    for folder in (ROOT / "examples" / family, ROOT / "examples" / family / "buggy", ROOT / "tests" / family):
        assert folder.is_dir(), f"{folder.relative_to(ROOT)} is missing"
    assert any(p.suffix == ".py" and p.name != "__init__.py" for p in (ROOT / "examples" / family).iterdir()), \
        f"examples/{family} has no correct implementation"


@pytest.mark.parametrize("family", FAMILIES)
def test_every_protocol_has_vectors_and_every_vector_protocol_is_graded(family):
    graded = {f"{family}.{p}" for p in registry.families()[family].protocols}
    stored = {name for name in catalog.protocols() if name.startswith(family + ".")}
    assert graded == stored
    for name in sorted(graded):
        assert next(store.iter_cases(name), None) is not None, f"no golden case for {name}"


@pytest.mark.parametrize("family, path", BUGGY, ids=[f"{f}/{p.stem}" for f, p in BUGGY])
def test_each_buggy_example_gets_its_code(family, path):
    """Graded by the runner on the protocol's catalog in float32 (unless its OPTIONS say
    otherwise), as a user would run it; CODE must be among the diagnoses. The stored cases are
    graded first, alone: a case's diagnoses do not depend on the others, so a code found there is
    in the full run's; only when it is not are the fresh cases and the black-box checks added."""
    from conformance import run_conformance

    module = load_example(path)
    assert module.CODE in registry.codes(), f"{path.name}: unknown code {module.CODE}"
    assert module.PROTOCOL.startswith(family + ".")
    options = {"dtypes": ("float32",), "timeout": 60.0, **getattr(module, "OPTIONS", {})}
    adapter = module.PROTOCOL.split(".", 1)[1]
    found = set()
    # (an example whose OPTIONS select cases is run as it says: its cases may be fresh ones)
    for extra in ({"fresh": False, "identities": False}, {}) if "cases" not in options else ({},):
        report = run_conformance(f"{path}:{adapter}", module.PROTOCOL, **{**options, **extra})
        found = {d.code for c in report.cases for d in c.diagnoses}
        found |= {d.code for i in report.identities for d in i.diagnoses}
        if module.CODE in found:
            break
    assert module.CODE in found, f"{path.name}: expected {module.CODE}, got {sorted(found)}"


def test_every_diagnosis_code_is_emitted_by_some_buggy_example():
    claimed = {_constant(path, "CODE") for _, path in BUGGY}
    for family in FAMILIES:
        own = {_constant(path, "CODE") for f, path in BUGGY if f == family}
        missing = set(registry.families()[family].codes) - own
        assert not missing, f"{family}: no buggy example for {sorted(missing)}"
    assert not set(CORE_CODES) - claimed, f"core codes without a buggy example: {sorted(set(CORE_CODES) - claimed)}"


@pytest.mark.parametrize("family", FAMILIES)
def test_every_identity_is_in_the_matrix(family):
    identities.load_all()
    registered = [i.id for i in identities.REGISTRY.values() if i.family == family]
    assert registered, f"{family} registers no identity"
    rows = identities.run_identities(family)
    assert [r["id"] for r in rows] == registered
    failing = [(r["id"], r["residual"], r["error"]) for r in rows if r["verdict"] == "failing"]
    assert not failing
