"""The seed sweep (issue 23, section 2): correct code fails for no seed.

Every correct example (``examples/<family>/*.py``, not ``buggy/``) and every real-library adapter
(``examples/<family>/lib_*.py``, skipped when its library is not installed: the ``test`` extra)
is graded on each protocol whose adapter name it defines (``apply``, ``table``, ``bucket``, ...;
found by reading the file's top-level functions, so that a new example is swept without editing
this file), in float32 and bfloat16:

- on the committed cases once, with the black-box identities;
- on the fresh cases of every seed in ``SEEDS``: for each protocol the fresh cases of all seeds are
  drawn once (``reference.golden.fresh.fresh_cases``, the cases ``run_conformance(..., seed=s)``
  grades, renamed ``<protocol>/fresh-<s>/...`` here) and graded in one run per adapter
  (``golden_cases=``), so that the probe and the identities do not run fifty times.

Zero failures and zero errors are required, except the faults of real code that posref exists to
find (``KNOWN_FAULTS``): those cases must fail (a pass there is a false pass), everything else
must pass. The slow sweep (``-m slow``) takes 50 seeds; the fast one, in the default selection,
the fresh cases of two seeds on a few protocols. Failures are listed as (adapter, protocol, seed, case, dtype,
verdict, budget ratio, codes).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance.core import registry  # noqa: E402
from reference.golden import store  # noqa: E402
from reference.golden.fresh import fresh_cases  # noqa: E402
from tests.support import ROOT, load_file  # noqa: E402

SEEDS = tuple(range(50))
FAST_SEEDS = (0, 1)
FAST_PROTOCOLS = ("rope.apply", "alibi.slopes", "sinusoidal.table", "t5.bucket")
DTYPES = ("float32", "bfloat16")


def _rope_type(params) -> str:
    scaling = params.get("scaling") or {}
    return scaling.get("rope_type") or scaling.get("type") or "default"


# (example path relative to examples/, protocol) -> (does this case fail by the library's own
# fault?, the fault). Each is asserted to fail: posref must keep finding it.
KNOWN_FAULTS = {
    ("rope/lib_litgpt.py", "rope.apply"): (
        lambda params, dtype, case_id: _rope_type(params) == "yarn",
        "litgpt's YaRN: ramp reversed, attention factor left at 1 (issue 23)"),
    ("rope/lib_litgpt.py", "rope.cache"): (
        lambda params, dtype, case_id: _rope_type(params) == "yarn",
        "litgpt's YaRN tables: ramp reversed, attention factor left at 1 (issue 23)"),
    ("rope/module_transformers.py", "rope.module"): (
        lambda params, dtype, case_id: params.get("cast", False) and dtype != "float32",
        "transformers casts inv_freq with module.to(dtype) (docs/design.md, rope.module)"),
    ("rope/lib_rotary_embedding_torch.py", "rope.module"): (
        lambda params, dtype, case_id: params.get("cast", False) and dtype != "float32",
        "rotary-embedding-torch's freqs is a Parameter: module.to(dtype) rounds it, and the "
        "positions are cast to its dtype"),
    ("attention/hf_decode_cache.py", "attention.decode"): (
        lambda params, dtype, case_id: _rope_type(params) in ("dynamic", "longrope") and params.get("semantics") == "recompute",
        "transformers' DynamicCache keeps keys rotated at their own step (HF #25104; LongRoPE at the switch)"),
}


def _functions(path: Path) -> set:
    return {node.name for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)}


def targets() -> list:
    """(protocol, path) for every correct example and library adapter, by its function names."""
    out = []
    for family, fam in sorted(registry.families().items()):
        for path in sorted((ROOT / "examples" / family).glob("*.py")):
            if path.name == "__init__.py":
                continue
            names = _functions(path)
            out += [(f"{family}.{short}", path) for short in fam.protocols if short in names]
    return out


TARGETS = targets()


def _key(path: Path) -> str:
    return str(path.relative_to(ROOT / "examples"))


def _ids(rows) -> list:
    return [f"{protocol}:{_key(path)}" for protocol, path in rows]


def _framework(path: Path) -> str:
    """The array library an example's adapters take (its module-level ``FRAMEWORK = "jax"``; torch
    when it names none): the sweep grades it with that --framework, and skips it where the library
    is not installed (the framework extras, docs/frameworks.md)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "FRAMEWORK" for t in node.targets):
            return str(ast.literal_eval(node.value))
    return "torch"


def _loadable(path: Path):
    """Skip a library adapter whose library is not installed (its import fails)."""
    try:
        load_file(path, prefix="posref_sweep")
    except ImportError as exc:
        pytest.skip(f"{_key(path)}: {exc} (pip install -e '.[test]')")


@functools.lru_cache(maxsize=None)
def _fresh(protocol: str, seeds: tuple) -> tuple:
    # Fresh ids name no seed (<protocol>/fresh/<test>); graded together, each seed's cases get it back.
    return tuple(dataclasses.replace(case, id=case.id.replace("/fresh/", f"/fresh-{seed}/", 1))
                 for seed in seeds for case in fresh_cases(protocol, seed))


def _params(protocol: str, seeds: tuple) -> dict:
    return {c.id: c.params for c in list(store.iter_cases(protocol)) + list(_fresh(protocol, seeds))}


def _seed_of(case_id: str):
    found = re.search(r"/fresh-([0-9]+)/", case_id)
    return int(found.group(1)) if found else None


def sweep(protocol: str, path: Path, seeds: tuple, committed: bool = True):
    """(unexpected outcomes, known faults that did not fail, number of graded cases)."""
    target = f"{path}:{protocol.split('.', 1)[1]}"
    framework = _framework(path)
    reports = [run_conformance(target, protocol, dtypes=DTYPES, golden_cases=list(_fresh(protocol, seeds)),
                               fresh=False, identities=False, max_time=None, framework=framework)]
    if committed:
        reports.append(run_conformance(target, protocol, dtypes=DTYPES, fresh=False, max_time=None,
                                       framework=framework))
    known, why = KNOWN_FAULTS.get((_key(path), protocol), (lambda *a: False, ""))
    params = _params(protocol, seeds)
    bad, missed, graded = [], [], 0
    for report in reports:
        for c in report.cases:
            graded += c.verdict != "skip"
            row = (_key(path), protocol, _seed_of(c.id), c.id, c.dtype, c.verdict, c.budget_ratio,
                   sorted({d.code for d in c.diagnoses}))
            if known(params.get(c.id, {}), c.dtype, c.id):
                if c.verdict in ("pass", "acceptable"):
                    missed.append(row + (why,))
            elif c.verdict in ("fail", "error"):
                bad.append(row)
        bad += [(_key(path), protocol, None, i.id, "identity", i.verdict, i.residual,
                 sorted({d.code for d in i.diagnoses})) for i in report.identities if i.verdict in ("fail", "error")]
    return bad, missed, graded


def _check(protocol, path, seeds, committed=True):
    if path.name.startswith("lib_"):
        _loadable(path)
    if _framework(path) != "torch":
        from conformance import frameworks

        pytest.importorskip(frameworks.backend(_framework(path)).MODULE)
    bad, missed, graded = sweep(protocol, path, seeds, committed)
    # Two seeds' fresh cases may all be outside what an example supports; the catalog is not.
    assert graded or not committed, f"{_key(path)} has nothing graded on {protocol}"
    assert not bad, "\n".join(map(str, bad))
    assert not missed, "known faults not found (false passes):\n" + "\n".join(map(str, missed))


@pytest.mark.slow
@pytest.mark.parametrize("protocol, path", TARGETS, ids=_ids(TARGETS))
def test_sweep_fifty_seeds(protocol, path):
    _check(protocol, path, SEEDS)


FAST = [(p, path) for p, path in TARGETS if p in FAST_PROTOCOLS]


@pytest.mark.parametrize("protocol, path", FAST, ids=_ids(FAST))
def test_sweep_two_seeds(protocol, path):
    """The committed cases are graded by each family's own tests: here the fresh ones only."""
    _check(protocol, path, FAST_SEEDS, committed=False)


def test_every_family_has_a_swept_example_and_the_libraries_are_swept():
    """The discovery is not vacuous: every family's correct examples and the library adapters
    are found, on every protocol they define."""
    families = {protocol.split(".")[0] for protocol, _ in TARGETS}
    assert families == set(registry.families())
    keys = {(_key(path), protocol) for protocol, path in TARGETS}
    for expected in [("rope/lib_transformers.py", "rope.frequencies"), ("rope/lib_torchtune.py", "rope.apply"),
                     ("rope/lib_litgpt.py", "rope.cache"), ("rope/lib_rotary_embedding_torch.py", "rope.module"),
                     ("xpos/lib_rotary_embedding_torch.py", "xpos.apply"), ("t5/hf_t5.py", "t5.bucket")]:
        assert expected in keys
    assert not any("/buggy/" in str(path) for _, path in TARGETS)
    assert set(FAST_PROTOCOLS) <= {p for p, _ in FAST}
    for path_key, protocol in KNOWN_FAULTS:
        assert (path_key, protocol) in keys
