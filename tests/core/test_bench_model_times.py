"""bench/model_times.py (issue 31: `posref conform --model` for every zoo model under 30 s): every
protocol a zoo model implies has a correct example to time, and that example exists."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from reference import zoo
from reference.zoo.plan import plan

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("model_times", ROOT / "bench" / "model_times.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_protocol_a_zoo_model_implies_has_an_example():
    bench = _bench()
    implied = {p for name in zoo.names() for p in plan(zoo.load(name)["config"])}
    assert implied <= set(bench.EXAMPLES), implied - set(bench.EXAMPLES)
    assert len(bench.runs()) == sum(len(plan(zoo.load(n)["config"])) for n in zoo.names())


def test_each_example_defines_its_function():
    bench = _bench()
    targets = list(bench.EXAMPLES.values()) + [t for ts in bench.FALLBACK.values() for t in ts]
    for target in targets:
        path, fn = target.rsplit(":", 1)
        tree = ast.parse((ROOT / path).read_text())
        assert fn in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, target


def test_a_run_that_grades_nothing_is_retried_and_one_that_grades_is_not():
    bench = _bench()
    assert bench.graded_nothing({"rc": 1, "last": "posref 0.6.0 rope.apply: 0 passed, 18 skipped (vectors ...)"})
    assert bench.graded_nothing({"rc": 1, "last": "posref 0.6.0 rope.apply: 0 passed, 14 errors (vectors ...)"})
    assert not bench.graded_nothing({"rc": 1, "last": "posref 0.6.0 rope.apply: 0 passed, 3 failed (vectors ...)"})
    assert not bench.graded_nothing({"rc": 0, "last": "posref 0.6.0 rope.apply: 8 passed (vectors ...)"})
