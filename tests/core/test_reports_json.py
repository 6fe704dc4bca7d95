"""--json: the document has the design's fields, is strict JSON, and matches the shipped schema."""

from __future__ import annotations

import copy
import fnmatch
import json
import math
import tomllib
from importlib import resources
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from conformance.reports import json_report
from conformance.results import CaseResult, Diagnosis
from test_reports_common import DIGEST, sample_report

TOP_LEVEL = ["suite_version", "vectors_digest", "protocol", "target", "environment", "profile",
             "summary", "probe", "cases", "identities", "notes", "seed", "baseline"]
CASE_KEYS = {"id", "dtype", "verdict", "max_abs_error", "budget_ratio", "worst_index",
             "diagnoses", "repro"}
# The stable codes the shipped families emit (core and RoPE); the schema lists every registered one.
CODES = {"layout-swapped", "rotation-reversed", "position-offset", "positions-ignored",
         "wrong-base", "frequency-exponent", "angle-precision", "pair-angle-mismatch",
         "rotary-dim-mismatch", "attention-factor", "scaling-mismatch", "input-mutated",
         "dtype-changed", "shape-changed", "non-finite", "raised", "crashed", "timeout",
         "not-deterministic"}


def _strict_load(text):
    def no_constants(name):
        raise AssertionError(f"non-standard JSON literal {name}")

    return json.loads(text, parse_constant=no_constants)


def test_written_document_has_the_design_fields(tmp_path):
    path = tmp_path / "out" / "report.json"  # the parent folder is created
    json_report.write(sample_report(), path)
    doc = _strict_load(path.read_text())
    # the design's fields, plus "source" (where the adapter is defined), "training" (--grad,
    # --autocast) and "model" (--model, --model-config), optional in the schema
    assert list(doc) == TOP_LEVEL[:4] + ["source"] + TOP_LEVEL[4:] + ["training", "model"]
    assert doc["model"] is None
    assert doc["suite_version"] == "0.1.0" and doc["vectors_digest"] == DIGEST
    for key in ("python", "torch", "numpy", "numba", "device", "dtypes"):
        assert key in doc["environment"]
    assert doc["summary"] == {"pass": 2, "fail": 2, "error": 1, "skip": 1, "acceptable": 1, "xfail": 0,
                              "fixed": 0, "identity_failures": 1, "identity_xfail": 0, "identity_passed": 1,
                              "identity_skipped": 1, "overall": "fail"}
    assert len(doc["cases"]) == 7 and len(doc["identities"]) == 3
    for case in doc["cases"]:
        assert CASE_KEYS <= set(case)
    fail = doc["cases"][2]
    assert fail["diagnoses"] == [{"code": "position-offset", "message": "positions shifted by +1"}]
    assert fail["worst_index"] == [0, 0, 7, 1] and fail["budget_ratio"] == 812.5
    json_report.validate(doc)
    assert (path.stat().st_mode & 0o777) != 0o600  # not mkstemp's private mode


def test_non_finite_numbers_become_strings_that_float_reads():
    doc = json_report.document(sample_report())
    nonfinite = doc["cases"][6]
    assert nonfinite["max_abs_error"] == "NaN" and nonfinite["budget_ratio"] == "Infinity"
    assert math.isinf(float(nonfinite["budget_ratio"]))
    assert nonfinite["curve"][0] == [65535, "Infinity", 0.01, "Infinity"]
    _strict_load(json_report.dumps(sample_report()))


def test_numpy_values_are_converted():
    r = sample_report()
    r.cases[0].max_abs_error = np.float32(1.5e-7)
    r.cases[0].budget_ratio = np.float64(0.25)
    r.cases[0].worst_index = list(np.array([0, 1, 2, 3], dtype=np.int64))
    r.cases[0].curve = np.array([[0, 1e-8, 1e-7, 0.1], [5, 2e-8, 2e-7, 0.1]]).tolist()
    r.cases[1].worst_index = (np.int64(1), np.int32(2))
    doc = _strict_load(json_report.dumps(r))
    assert doc["cases"][0]["worst_index"] == [0, 1, 2, 3]
    assert doc["cases"][0]["max_abs_error"] == pytest.approx(1.5e-7)
    assert doc["cases"][1]["worst_index"] == [1, 2]


def test_curve_points_stay_on_one_line_each():
    text = json_report.dumps(sample_report())
    assert '[65535, "Infinity", 0.01, "Infinity"]' in text
    assert '"worst_index": [0, 3, 1, 70]' in text


@pytest.mark.parametrize(
    "mutate, where",
    [
        (lambda d: d.pop("vectors_digest"), "vectors_digest"),
        (lambda d: d["cases"][0].update(verdict="passed"), "cases.0.verdict"),
        (lambda d: d["cases"][0].update(dtype="float8"), "cases.0.dtype"),
        (lambda d: d["cases"][2]["diagnoses"][0].update(code="off-by-one"), "cases.2.diagnoses.0.code"),
        (lambda d: d["cases"][0].pop("repro"), "cases.0"),
        (lambda d: d["cases"][0].update(id="no-protocol-prefix"), "cases.0.id"),
        (lambda d: d["cases"][0].update(budget_ratio="big"), "cases.0.budget_ratio"),
        (lambda d: d["environment"].pop("torch"), "environment"),
        (lambda d: d["summary"].update(overall="mostly"), "summary.overall"),
        (lambda d: d.update(profile="lenient"), "profile"),
        (lambda d: d["identities"][0].update(verdict="acceptable"), "identities.0.verdict"),
    ],
)
def test_schema_rejects_broken_documents(mutate, where):
    doc = json_report.document(sample_report())
    bad = copy.deepcopy(doc)
    mutate(bad)
    problems = json_report.errors(bad)
    assert problems and any(p.startswith(where) or f"'{where}'" in p for p in problems), problems
    with pytest.raises(json_report.ReportValidationError, match="report.schema.json"):
        json_report.validate(bad)


def test_invalid_report_is_not_written(tmp_path):
    r = sample_report()
    r.cases[0].verdict = "flaky"
    path = tmp_path / "r.json"
    with pytest.raises(json_report.ReportValidationError, match="cases.0.verdict"):
        json_report.write(r, path)
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_empty_report_is_valid():
    r = sample_report(cases=[], identities=[], probe=None)
    doc = json_report.document(r)
    assert doc["summary"]["overall"] == "skip"


def test_dash_writes_to_stdout(capsys):
    json_report.write(sample_report(), "-")
    assert _strict_load(capsys.readouterr().out)["protocol"] == "rope.apply"


def test_schema_is_a_valid_schema_and_lists_every_registered_code():
    from conformance.core import registry

    schema = json_report.schema()
    jsonschema.validators.validator_for(schema).check_schema(schema)
    codes = set(schema["$defs"]["diagnosis"]["properties"]["code"]["enum"])
    assert codes == set(registry.codes()) and CODES <= codes
    assert schema["required"] == TOP_LEVEL
    assert set(schema["$defs"]["case"]["properties"]["verdict"]["enum"]) == {
        "pass", "fail", "error", "skip", "acceptable"}


def test_an_unregistered_code_is_refused():
    r = sample_report()
    r.cases = [CaseResult("rope.apply/g/t", "float32", "fail", 1.0, 2.0, [0], [Diagnosis("made-up", "m")])]
    with pytest.raises(json_report.ReportValidationError):
        json_report.validate(json_report.document(r))


def test_every_design_code_validates():
    r = sample_report()
    r.cases = [CaseResult("rope.apply/g/t", "float32", "fail", 1.0, 2.0, [0],
                          [Diagnosis(code, "m") for code in sorted(CODES)])]
    json_report.validate(json_report.document(r))


def test_schema_ships_as_package_data():
    # importable the way an installed copy finds it ...
    assert resources.files("conformance").joinpath("schemas", "report.schema.json").is_file()
    # ... and declared so that setuptools puts it into the wheel
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    data = tomllib.loads(pyproject.read_text())
    globs = data["tool"]["setuptools"].get("package-data", {}).get("conformance", [])
    assert any(fnmatch.fnmatch("schemas/report.schema.json", g) for g in globs), (
        'pyproject.toml needs [tool.setuptools.package-data] conformance = ["schemas/*.json"]')
