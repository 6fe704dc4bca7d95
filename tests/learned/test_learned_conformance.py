"""learned.lookup conformance: the correct examples pass in float32, float16 and bfloat16 (wall
cases by raising), each buggy example gets its code, and the protocol's parts (expected_error,
budgets, the shifted-row diagnosis, the wall descriptions, the black-box checks) do what they say.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conformance import LearnedSpec, run_conformance  # noqa: E402
from conformance.cli import main  # noqa: E402
from conformance.core import registry  # noqa: E402
from conformance.core.tolerance import SMALLEST_SUBNORMAL, UNIT_ROUNDOFF  # noqa: E402
from conformance.isolation import make_invoker  # noqa: E402
from conformance.learned import budgets, diagnosis  # noqa: E402
from reference.golden import store  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "learned"
CORRECT = ["gpt2_wpe.py", "roberta_position_ids.py"]
BUGGY = sorted(p.name for p in (EXAMPLES / "buggy").glob("*.py") if p.name != "__init__.py")
DTYPES = ("float32", "float16", "bfloat16")
PROTOCOL = registry.get("learned.lookup")


def load(relpath):
    path = EXAMPLES / relpath
    spec = importlib.util.spec_from_file_location("posref_learned_example_" + path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def case(case_id):
    return store.get_case(case_id)


# --------------------------------------------------------------------------------------------
# The examples, graded end to end


@pytest.mark.parametrize("path", CORRECT)
def test_correct_examples_pass_every_case_in_every_dtype(path):
    report = run_conformance(f"{EXAMPLES / path}:lookup", "learned.lookup", dtypes=DTYPES, fresh=False)
    assert report.summary()["overall"] == "pass"
    # the catalog's 15 cases and the zoo models' committed ones (BERT, RoBERTa, GPT-2: 6 each)
    assert len(report.cases) == (15 + 18) * len(DTYPES) == len(list(store.iter_cases("learned.lookup"))) * len(DTYPES)
    for c in report.cases:
        assert c.verdict == "pass", (c.id, c.dtype, c.verdict, c.diagnoses)
        if case(c.id).params["must_raise"]:
            assert any("raised as required" in n for n in c.notes)
        else:
            assert c.budget_ratio is not None and c.budget_ratio <= 1.0
    assert {i.verdict for i in report.identities} == {"pass"}
    assert len(report.identities) == 7 * len(DTYPES)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BUGGY)
def test_each_buggy_example_gets_its_code(name, dtype):
    module = load(f"buggy/{name}")
    report = run_conformance(f"{EXAMPLES / 'buggy' / name}:lookup", module.PROTOCOL, dtypes=(dtype,),
                             **getattr(module, "OPTIONS", {}))
    assert report.summary()["overall"] == "fail"
    found = {d.code for c in report.cases for d in c.diagnoses}
    assert module.CODE in found, (name, found)
    assert found <= {"length-wall-missing", "position-offset", "backward-overwrite"}, found


def test_the_command_line_exit_codes():
    assert main(["conform", f"{EXAMPLES / 'gpt2_wpe.py'}:lookup", "--protocol", "learned.lookup",
                 "--dtype", "bfloat16"]) == 0
    assert main(["conform", f"{EXAMPLES / 'buggy' / 'length_wall_missing.py'}:lookup", "--protocol",
                 "learned.lookup", "--dtype", "float32"]) == 1


def test_wall_cases_pass_by_raising_and_fail_with_the_wall_code_when_a_value_comes_back():
    def returns_x(x, positions, table, spec):
        return x.clone()

    report = run_conformance(returns_x, "learned.lookup", dtypes=("float32",), identities=False, fresh=False)
    for c in report.cases:
        if case(c.id).params["must_raise"]:
            assert c.verdict == "fail" and [d.code for d in c.diagnoses] == ["length-wall-missing"]
            assert "must raise" in c.diagnoses[0].message
        else:
            assert c.verdict == "fail"  # the rows were never added


def test_expected_error_only_for_must_raise_cases():
    wall = case("learned.lookup/roberta-base/wall-one-token")
    value = case("learned.lookup/roberta-base/left-padded")
    assert PROTOCOL.expected_error(value, PROTOCOL.spec(value)) is None
    diag = PROTOCOL.expected_error(wall, PROTOCOL.spec(wall))
    assert diag.code == "length-wall-missing"
    assert "position(s) 512 outside the 514-row table (accepted positions -1..511)" in diag.message


def test_spec_and_export():
    c = case("learned.lookup/roberta-base/prefill-8")
    assert PROTOCOL.spec(c) == LearnedSpec(num_positions=514, d_model=8, variant="roberta", padding_idx=1)
    assert PROTOCOL.spec(case("learned.lookup/gpt2/decode-1023")).padding_idx is None
    assert {"length-wall-missing", "position-offset"} <= set(registry.codes())


# --------------------------------------------------------------------------------------------
# Budgets


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_strict_budget_is_one_rounding_and_standard_adds_the_float32_intermediate(dtype):
    x = np.array([1.0, -3.0, 0.5, 0.0])
    t = np.array([2.0, 3.0, 0.25, 0.0])
    s = np.abs(x + t)
    u, tiny, u32 = UNIT_ROUNDOFF[dtype], SMALLEST_SUBNORMAL[dtype], UNIT_ROUNDOFF["float32"]
    np.testing.assert_array_equal(budgets.sum_budget(x, t, dtype, "strict"), u * s + tiny)
    extra = budgets.sum_budget(x, t, dtype, "standard") - budgets.sum_budget(x, t, dtype, "strict")
    if dtype == "float32":
        assert np.all(extra == 0)
    elif dtype == "float64":
        assert np.all(extra >= u32 * (np.abs(x) + np.abs(t) + s))
    else:
        np.testing.assert_allclose(extra, u32 * s * (1 + u))


def test_a_correctly_rounded_sum_never_exceeds_the_strict_budget():
    rng = np.random.default_rng(5)
    for dtype in ("float16", "bfloat16", "float32"):
        x = torch.from_numpy(rng.standard_normal(20000) * np.exp2(rng.integers(-10, 10, 20000))).to(getattr(torch, dtype))
        t = torch.from_numpy(rng.standard_normal(20000)).to(getattr(torch, dtype))
        x64, t64 = x.double().numpy(), t.double().numpy()
        exact = x64 + t64  # exact: both are float32 (or narrower) numbers less than 2^40 apart
        rounded = torch.from_numpy(exact).to(getattr(torch, dtype)).double().numpy()
        ratio = np.abs(rounded - exact) / budgets.sum_budget(x64, t64, dtype, "strict")
        assert 0.5 < ratio.max() <= 1.0, dtype


# --------------------------------------------------------------------------------------------
# Diagnosis


def _value_case(case_id):
    c = case(case_id)
    return c, PROTOCOL.spec(c)


def _shifted(c, spec, shift, keep_pads=False):
    rows = diagnosis.reference_rows(c.arrays["positions"], spec)
    keep = (c.arrays["positions"] == -1) if keep_pads else None
    return diagnosis.shifted_lookup(c.arrays["x"], c.arrays["table"], rows, shift, keep)


@pytest.mark.parametrize("case_id, shift, words", [
    ("learned.lookup/bert-base/prefill-8", 1, "counted from 1"),
    ("learned.lookup/bert-base/row-offsets", -1, "row 1 before"),
    ("learned.lookup/gpt2/prefill-8", 2, "RoBERTa's padding_idx + 1 = 2 added to an absolute"),
    ("learned.lookup/roberta-base/prefill-8", -2, "RoBERTa's padding_idx + 1 = 2 is missing"),
    ("learned.lookup/roberta-base/last-row-511", -1, "the + 1 of RoBERTa's position ids is missing"),
    ("learned.lookup/roberta-base/left-padded", -2, "is missing"),
])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_shifted_rows_are_diagnosed_as_position_offset(case_id, shift, words, dtype):
    c, spec = _value_case(case_id)
    out = _shifted(c, spec, shift)
    out = torch.from_numpy(out.copy()).to(getattr(torch, dtype)).double().numpy()  # as the dtype would return it
    found = diagnosis.diagnose_lookup(c.arrays["x"], c.arrays["positions"], c.arrays["table"], out, spec, dtype)
    assert [d.code for d in found] == ["position-offset"]
    assert f"rows shifted by {shift:+d}" in found[0].message and words in found[0].message


def test_roberta_offset_missing_with_padding_kept_is_named_as_such():
    c, spec = _value_case("learned.lookup/roberta-base/left-padded")
    found = diagnosis.diagnose_lookup(c.arrays["x"], c.arrays["positions"], c.arrays["table"],
                                      _shifted(c, spec, -2, keep_pads=True), spec, "float32")
    assert [d.code for d in found] == ["position-offset"] and "padding kept" in found[0].message


def test_no_diagnosis_for_correct_noisy_or_unrelated_outputs():
    c, spec = _value_case("learned.lookup/gpt2/decode-1023")
    x, pos, table = c.arrays["x"], c.arrays["positions"], c.arrays["table"]
    correct = c.arrays["expected"]
    assert diagnosis.diagnose_lookup(x, pos, table, correct, spec, "float32") == []
    bf16 = torch.from_numpy(correct.copy()).to(torch.bfloat16).double().numpy()
    assert diagnosis.diagnose_lookup(x, pos, table, bf16, spec, "bfloat16") == []
    arange = x + table[np.zeros_like(pos)]  # positions ignored: row 0, an offset of -1023
    assert diagnosis.diagnose_lookup(x, pos, table, arange, spec, "float32") == []
    noise = correct + np.random.default_rng(0).standard_normal(correct.shape)
    assert diagnosis.diagnose_lookup(x, pos, table, noise, spec, "float32") == []


def test_describe_wall_says_what_came_back():
    spec = LearnedSpec(8, 2)
    x = np.ones((1, 2, 2))
    table = np.arange(16.0).reshape(8, 2) + 1.0
    pos = np.array([[3, 9]])
    good = x[0, 0] + table[3]

    def out(last):
        return np.stack([good, last])[None]

    assert "clamped" in diagnosis.describe_wall(x, pos, table, out(x[0, 1] + table[7]), spec)
    assert "wrapped" in diagnosis.describe_wall(x, pos, table, out(x[0, 1] + table[1]), spec)
    assert "zero row" in diagnosis.describe_wall(x, pos, table, out(x[0, 1]), spec)
    assert "zeros" in diagnosis.describe_wall(x, pos, table, out(np.zeros(2)), spec)
    assert "row(s) 4" in diagnosis.describe_wall(x, pos, table, out(x[0, 1] + table[4]), spec)
    assert diagnosis.describe_wall(x, pos, table, out(np.array([1e9, -1e9])), spec) == "returned a value"


# --------------------------------------------------------------------------------------------
# Black-box checks


def _blackbox(fn, dtype=torch.float32):
    invoker = make_invoker(fn, None, isolate=False, timeout=None)
    return {r.id.split("/", 1)[1]: r for r in PROTOCOL.blackbox(invoker, dtype, "cpu", None)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_correct_examples_pass_every_blackbox_check(dtype):
    for path in CORRECT:
        results = _blackbox(load(path).lookup, dtype)
        assert set(results) == {"inputs-not-mutated", "dtype-preserved", "shape-preserved", "zero-input-row",
                                "batch-independence", "length-wall", "determinism"}
        assert all(r.verdict == "pass" for r in results.values()), results
        assert "all 3 calls" in results["length-wall"].message  # the roberta wall was tried too


def _gather(x, positions, table, spec, ids):
    return x + table[ids]


def test_blackbox_names_each_defect():
    def wraps(x, positions, table, spec):
        return _gather(x, positions, table, spec, positions % spec.num_positions)

    def clamps(x, positions, table, spec):
        return _gather(x, positions, table, spec, positions.clamp(0, spec.num_positions - 1))

    def shifted(x, positions, table, spec):  # one row early; row -1 wraps (tensor indexing)
        if bool((positions >= spec.num_positions).any() | (positions < 0).any()):
            raise IndexError("index out of range")
        return _gather(x, positions, table, spec, positions - 1)

    def mutates(x, positions, table, spec):
        out = x + table[positions]
        table.mul_(2)
        return out

    r = _blackbox(wraps)["length-wall"]
    assert r.verdict == "fail" and "wrapped around" in r.message
    assert [d.code for d in r.diagnoses] == ["length-wall-missing"]
    assert "clamped" in _blackbox(clamps)["length-wall"].message
    zero = _blackbox(shifted)["zero-input-row"]
    assert zero.verdict == "fail" and [d.code for d in zero.diagnoses] == ["position-offset"]
    assert "row 1 before" in zero.diagnoses[0].message
    assert _blackbox(mutates)["inputs-not-mutated"].diagnoses[0].code == "input-mutated"


def test_blackbox_skips_or_errors_when_nothing_comes_back():
    from conformance import Unsupported

    def unsupported(x, positions, table, spec):
        raise Unsupported("not this one")

    def raises(x, positions, table, spec):
        raise RuntimeError("kernel not built")

    skipped = _blackbox(unsupported)
    assert skipped["length-wall"].verdict == "skip"  # raising for everything is no wall
    assert {r.verdict for k, r in skipped.items() if k != "inputs-not-mutated"} == {"skip"}
    errors = _blackbox(raises)
    assert errors["length-wall"].verdict == "error"
    assert errors["zero-input-row"].diagnoses[0].code == "raised"


def test_isolated_grading_of_wall_and_value_cases():
    report = run_conformance(f"{EXAMPLES / 'roberta_position_ids.py'}:lookup", "learned.lookup",
                             dtypes=("bfloat16",), isolate=True, identities=False,
                             cases="learned.lookup/roberta-base/*")
    assert [c.verdict for c in report.cases] == ["pass"] * 5
