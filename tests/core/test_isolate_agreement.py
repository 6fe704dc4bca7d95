"""Issue 24: ``--isolate`` must not change the verdict. A value the isolated process cannot send
back (a generator, a lock, a custom object) is the adapter's answer, graded as what it is (an
inert conformance.wire.Opaque naming its type), never taken for a raise: before the fix a
learned.lookup that returned a generator past the table *passed* the length-wall case under
--isolate ("raised as required") and failed it in-process (length-wall-missing).

Each test grades the same adapter in-process and under --isolate and compares, per case id and
dtype, the verdict and the diagnosis codes, and the same for every identity. The default tests
take a few buggy examples and garbage outputs on three protocols; the exhaustive version (every
buggy example, garbage on every protocol) is marked slow."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from conformance import run_conformance
from conformance.core import registry
from reference.golden import store
from support import load_example

ROOT = Path(__file__).resolve().parents[2]
# Buggy examples graded only under --isolate (they crash the process) have no in-process verdict.
BUGGY = sorted(p for p in ROOT.glob("examples/*/buggy/*.py")
               if p.name != "__init__.py" and '"isolate": True' not in p.read_text(encoding="utf-8"))

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="--isolate is POSIX only")


def _subset(protocol: str, graded: int = 2) -> str:
    """--cases for a few cases of ``protocol``: its first ``graded`` cases with a value to grade,
    and its first case whose right answer is an exception (learned.lookup's length wall)."""
    proto = registry.get(protocol)
    values, raising = [], []
    for case in store.iter_cases(protocol):
        (raising if proto.expected_error(case, proto.spec(case)) is not None else values).append(case.id)
    return ",".join(values[:graded] + raising[:1])


def _verdicts(report) -> dict:
    cases = {(c.id, c.dtype): (c.verdict, sorted({d.code for d in c.diagnoses})) for c in report.cases}
    ids = {("identity", i.id, i.dtype): (i.verdict, sorted({d.code for d in i.diagnoses}))
           for i in report.identities}
    return {**cases, **ids}


def _agree(target: str, protocol: str, **options) -> dict:
    # Fresh cases from a fixed seed: the same ones in both runs (a buggy example's own --cases
    # may name them).
    options = {"dtypes": ("float32",), "timeout": 60.0, "fresh": True, "seed": 2024, **options}
    inside = run_conformance(target, protocol, **options)
    outside = run_conformance(target, protocol, isolate=True, **options)
    a, b = _verdicts(inside), _verdicts(outside)
    # The user's explicit option may leave cases out (rope.module's modules cannot cross the
    # process boundary: Protocol.excluded); those are not the adapter's verdicts.
    for c in outside.cases:
        if c.verdict == "skip" and any("--isolate" in n for n in c.notes):
            a.pop((c.id, c.dtype), None)
            b.pop((c.id, c.dtype), None)
    for i in outside.identities:
        if i.verdict == "skip" and "isolate" in i.message:
            a.pop(("identity", i.id, i.dtype), None)
            b.pop(("identity", i.id, i.dtype), None)
    assert a.keys() == b.keys()
    differ = {k: (a[k], b[k]) for k in a if a[k] != b[k]}
    assert not differ, f"{target}: in-process vs --isolate: {differ}"
    return a


# --- the generator past the table (the example) ----------------------------------------

GENERATOR_PAST_TABLE = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from examples.learned.gpt2_wpe import lookup as right

    def lookup(x, positions, table, spec):
        if int(positions.max()) >= table.shape[0]:
            return (i for i in range(3))  # instead of raising
        return right(x, positions, table, spec)
    """
)


def test_a_generator_past_the_table_fails_the_length_wall_in_both_modes(tmp_path):
    path = tmp_path / "generator_past_table.py"
    path.write_text(GENERATOR_PAST_TABLE.format(root=str(ROOT)))
    got = _agree(f"{path}:lookup", "learned.lookup", cases=_subset("learned.lookup"))
    walls = [v for k, v in got.items() if k[0] != "identity" and v[0] == "fail"]
    assert walls and all("length-wall-missing" in codes for _, codes in walls)
    assert any(k[0] == "identity" and "length-wall-missing" in v[1] for k, v in got.items())


# --- garbage outputs ------------------------------------------------------------------------

GARBAGE = textwrap.dedent(
    """
    import math, threading
    import torch

    KINDS = ("none", "generator", "string", "lock", "wrong-shape", "nan")
    calls = [0]

    def _like(args):
        t = next((a for a in args if isinstance(a, torch.Tensor)), None)
        shape = tuple(t.shape) if t is not None else (2,)
        dtype = t.dtype if t is not None and t.is_floating_point() else torch.float32
        return shape, dtype

    def adapter(*args):
        kind = KINDS[calls[0] % len(KINDS)]  # the same sequence of calls in both modes
        calls[0] += 1
        shape, dtype = _like(args)
        if kind == "none":
            return None
        if kind == "generator":
            return (i for i in range(3))
        if kind == "string":
            return "a string"
        if kind == "lock":
            return threading.Lock()
        if kind == "wrong-shape":
            return torch.zeros(*shape, 3, dtype=dtype)
        return torch.full(shape, math.nan, dtype=dtype)
    """
)


def _garbage(tmp_path, protocol):
    path = tmp_path / "garbage.py"
    path.write_text(GARBAGE)
    return _agree(f"{path}:adapter", protocol, cases=_subset(protocol, graded=6))


@pytest.mark.parametrize("protocol", ["learned.lookup", "t5.bucket", "rope.apply"])
def test_garbage_outputs_get_the_same_verdicts_in_and_out_of_isolate(tmp_path, protocol):
    got = _garbage(tmp_path, protocol)
    assert all(v[0] != "pass" for k, v in got.items() if k[0] != "identity")


@pytest.mark.slow
@pytest.mark.parametrize("protocol", registry.protocol_names())
def test_garbage_outputs_agree_in_every_protocol(tmp_path, protocol):
    _garbage(tmp_path, protocol)


# --- buggy examples -------------------------------------------------------------------------


def _buggy(path: Path):
    module = load_example(path)
    options = dict(getattr(module, "OPTIONS", {}))
    adapter = module.PROTOCOL.split(".", 1)[1]
    return _agree(f"{path}:{adapter}", module.PROTOCOL, **{"cases": _subset(module.PROTOCOL), **options})


FAST_BUGGY = ["learned/buggy/length_wall_missing.py", "t5/buggy/clamp_missing.py",
              "sinusoidal/buggy/" + sorted(p.name for p in (ROOT / "examples/sinusoidal/buggy").glob("[a-z]*.py"))[0]]


@pytest.mark.parametrize("name", FAST_BUGGY)
def test_buggy_examples_get_the_same_verdicts_in_and_out_of_isolate(name):
    _buggy(ROOT / "examples" / name)


@pytest.mark.slow
@pytest.mark.parametrize("path", BUGGY, ids=[f"{p.parent.parent.name}/{p.stem}" for p in BUGGY])
def test_every_buggy_example_agrees(path):
    _buggy(path)


HOSTILE = textwrap.dedent(
    """
    import torch

    class Hostile(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            raise SystemExit(0)

    def bucket(relative_positions, spec):
        return torch.zeros(2).as_subclass(Hostile)
    """
)


def test_a_value_that_raises_when_read_is_the_same_error_in_both_modes(tmp_path):
    # In-process it raises while the grader reads it; under --isolate while the child sends it
    # back: an Opaque that says so. Both are error, code raised.
    path = tmp_path / "hostile_value.py"
    path.write_text(HOSTILE)
    got = _agree(f"{path}:bucket", "t5.bucket", cases="t5.bucket/t5-encoder/*")
    assert all(v == ("error", ["raised"]) for k, v in got.items() if k[0] != "identity")
