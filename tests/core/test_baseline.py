"""--expected-failures (issue 8): known failures are xfail, a new failure fails the run, a listed
case that passes now is reported as fixed."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from conformance import baseline, run_conformance
from conformance.cli import main
from conformance.errors import UsageError
from support import ROOT

BUGGY = str(ROOT / "examples/rope/buggy/wrong_base.py:apply")
CORRECT = str(ROOT / "examples/rope/hf_rotate_half.py:apply")
CASES = "rope.apply/llama3-d128/*,rope.apply/llama2-d128/prefill-8"  # llama3 fails (base 5e5), llama2 passes


def test_parse_entries_comments_and_globs():
    b = baseline.parse("# known\nrope.apply/a/b [bfloat16]\n\nrope.apply/*/around-2p24  # all dtypes\n")
    assert [str(e) for e in b.entries] == ["rope.apply/a/b [bfloat16]", "rope.apply/*/around-2p24"]
    assert [e.line for e in b.entries] == [2, 4]


@pytest.mark.parametrize("text", ["not a case id", "rope.apply/a/b [bfloat16] extra", "rope.apply/a/b [Float32]"])
def test_a_bad_line_is_a_usage_error_naming_it(text):
    with pytest.raises(UsageError, match=r"<baseline>:2: expected '<case id> \[<dtype>\]'"):
        baseline.parse("# ok\n" + text)


def test_a_missing_file_is_exit_2_before_grading(tmp_path, capsys):
    code = main(["conform", BUGGY, "--protocol", "rope.apply", "--expected-failures", str(tmp_path / "none.txt")])
    assert code == 2
    assert "--expected-failures" in capsys.readouterr().err


def test_known_failures_xfail_new_ones_fail_fixed_ones_are_reported(tmp_path, capsys):
    known = tmp_path / "known.txt"
    args = ["conform", BUGGY, "--protocol", "rope.apply", "--cases", CASES, "--no-fresh", "--dtype", "float32"]
    assert main(args + ["--write-expected-failures", str(known)]) == 1
    listed = [l for l in known.read_text().splitlines() if not l.startswith("#")]
    assert listed and all(l.startswith("rope.apply/llama3-d128/") and l.endswith(" [float32]") for l in listed)
    capsys.readouterr()

    # Every failure is known: the run passes, and says how many failed as expected.
    report_path = tmp_path / "r.json"
    assert main(args + ["--expected-failures", str(known), "--json", str(report_path)]) == 0
    out = capsys.readouterr().out
    assert f"{len(listed)} xfailed" in out.splitlines()[0]
    doc = json.loads(report_path.read_text())
    assert doc["summary"]["xfail"] == len(listed) and doc["summary"]["fail"] == 0
    assert doc["baseline"]["expected"] == len(listed)
    assert all(c["expected_failure"] == (c["verdict"] == "fail") for c in doc["cases"])

    # A failure the file does not list fails the run, and only it is listed under Failures.
    known.write_text("\n".join(listed[1:]) + "\n")
    assert main(args + ["--expected-failures", str(known)]) == 1
    out = capsys.readouterr().out
    new = listed[0].split(" ")[0]
    failures = out[out.index("Failures:"):]
    assert f"FAIL {new} [float32]" in failures and listed[1].split(" ")[0] not in failures

    # A listed case that passes now is reported, so the file can shrink.
    known.write_text("\n".join(listed + ["rope.apply/llama2-d128/prefill-8", "rope.apply/nowhere/x"]) + "\n")
    assert main(args + ["--expected-failures", str(known)]) == 0
    out = capsys.readouterr().out
    assert "1 fixed" in out.splitlines()[0]
    assert "pass now, remove them from the file: rope.apply/llama2-d128/prefill-8 [float32]" in " ".join(
        l.strip() for l in out.splitlines())
    assert "matched no graded case: rope.apply/nowhere/x" in " ".join(l.strip() for l in out.splitlines())


def test_api_and_junit_report_expected_failures_as_xfail(tmp_path):
    known = tmp_path / "known.txt"
    known.write_text("rope.apply/llama3-d128/*\n")
    report = run_conformance(BUGGY, "rope.apply", cases=CASES, dtypes=("float32",), fresh=False,
                             identities=False, expected_failures=known)
    s = report.summary()
    assert s["overall"] == "pass" and s["xfail"] >= 1 and s["fail"] == 0
    from conformance.reports import junit

    root = ET.fromstring(junit.dumps(report))
    xfails = [tc for tc in root.iter("testcase") if tc.find("skipped") is not None
              and tc.find("skipped").get("type") == "pytest.xfail"]
    assert len(xfails) == s["xfail"] and root.get("failures") == "0"


def test_correct_implementation_with_an_empty_baseline_still_passes(tmp_path):
    known = tmp_path / "known.txt"
    known.write_text("# nothing known\n")
    report = run_conformance(CORRECT, "rope.apply", cases=CASES, dtypes=("float32",), fresh=False,
                             identities=False, expected_failures=known)
    assert report.summary()["overall"] == "pass" and report.baseline["entries"] == 0
