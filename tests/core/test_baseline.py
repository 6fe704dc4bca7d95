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


# ------------------------------------------------------------------------------------------
# Issue 25: a baseline written by one run keeps the next run (another seed) green


OFFSET = str(ROOT / "examples/rope/buggy/position_offset.py:apply")
# One golden case and every fresh case; seed 1 skips (interleaved) places that seed 10 grades (half).
RUN = ["--protocol", "rope.apply", "--cases", "rope.apply/llama3-d128/prefill-8,rope.apply/fresh/*",
       "--dtype", "float32"]


def _listed(path):
    return [l.split("#")[0].strip() for l in path.read_text().splitlines() if l.split("#")[0].strip()]


def test_a_written_baseline_keeps_the_next_seed_green_and_a_new_fault_still_fails(tmp_path, capsys):
    known, doc = tmp_path / "known.txt", tmp_path / "r.json"
    assert main(["conform", OFFSET, *RUN, "--seed", "1", "--write-expected-failures", str(known)]) == 1
    listed = _listed(known)
    # fresh cases by kind (no seed in them), the failing identity by name
    assert "rope.apply/fresh/shape-decode-* [float32]" in listed and "rope.apply/fresh/*-0 [float32]" in listed
    assert "identity:rope.apply/position-zero [float32]" in listed
    assert not any("fresh-" in l for l in listed)
    capsys.readouterr()

    assert main(["conform", OFFSET, *RUN, "--seed", "10", "--expected-failures", str(known), "--json", str(doc)]) == 0
    report = json.loads(doc.read_text())
    fresh = [c for c in report["cases"] if c["id"].startswith("rope.apply/fresh/")]
    assert fresh and any(c["expected_failure"] for c in fresh)
    assert report["summary"]["fail"] == report["summary"]["error"] == report["summary"]["identity_failures"] == 0
    assert {i["id"]: i["verdict"] for i in report["identities"]}["rope.apply/position-zero"] == "xfail"
    capsys.readouterr()

    # A new fault (the output comes back in float64) still fails, through an identity nobody listed.
    worse = tmp_path / "worse.py"
    worse.write_text("import importlib.util, torch\n"
                     f"spec_ = importlib.util.spec_from_file_location('po', {OFFSET.rsplit(':', 1)[0]!r})\n"
                     "po = importlib.util.module_from_spec(spec_); spec_.loader.exec_module(po)\n"
                     "def apply(x, positions, spec):\n"
                     "    return po.apply(x, positions, spec).to(torch.float64)\n")
    assert main(["conform", f"{worse}:apply", *RUN, "--seed", "10", "--expected-failures", str(known)]) == 1
    assert "1 identity failed" in capsys.readouterr().out.splitlines()[0]


def test_identities_are_listed_and_fixed_ones_reported(tmp_path):
    known = tmp_path / "known.txt"
    known.write_text("identity:rope.apply/position-zero [float32]\nidentity:rope.apply/linearity\n"
                     "rope.apply/llama3-d128/*\n")
    report = run_conformance(OFFSET, "rope.apply", cases="rope.apply/llama3-d128/prefill-8", dtypes=("float32",),
                             fresh=False, expected_failures=known)
    verdicts = {i.id: i.verdict for i in report.identities}
    assert verdicts["rope.apply/position-zero"] == "xfail" and verdicts["rope.apply/linearity"] == "pass"
    assert report.summary()["overall"] == "pass" and report.baseline["expected_identities"] == 1
    assert "identity:rope.apply/linearity [float32]" in report.baseline["fixed"]
    known.write_text("rope.apply/llama3-d128/*\n")  # the identity is not listed: it fails the run
    report = run_conformance(OFFSET, "rope.apply", cases="rope.apply/llama3-d128/prefill-8", dtypes=("float32",),
                             fresh=False, expected_failures=known)
    assert report.summary()["identity_failures"] == 1 and report.summary()["overall"] == "fail"


def test_quiet_prints_the_summary_and_the_seed_on_one_line(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")  # a narrow CI log: still one line, for grep
    assert main(["conform", OFFSET, *RUN, "--seed", "10", "-q"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("posref ") and lines[0].endswith("; --seed 10")


# ------------------------------------------------------------------------------------------
# Issue 24: a 1 MiB baseline is matched in bounded time, within the run's deadline

GLOBS = 35303


def _big_baseline(path, pattern="rope.apply/nomodel{:05d}/*"):
    """Issue 24's file: 35,303 globs in 1 MiB that match no case."""
    text = "\n".join(pattern.format(i) for i in range(GLOBS)) + "\n"
    assert len(text) <= baseline.MAX_BYTES
    path.write_text(text)
    return path


def _results(n):
    from conformance.results import CaseResult

    return [CaseResult(id=f"rope.apply/llama3-d128/case-{k}", dtype="float32", verdict="fail") for k in range(n)]


def _report(cases):
    from conformance.results import Report

    return Report(suite_version="0", vectors_digest="sha256:0", protocol="rope.apply", target="t",
                  environment={}, profile="standard", cases=cases)


@pytest.mark.parametrize("pattern", ["rope.apply/nomodel{:05d}/*", "*/nomodel{:05d}/*"])
def test_a_1_mib_baseline_of_globs_matches_a_whole_run_in_seconds(tmp_path, pattern):
    # Through fnmatch (whose cache of compiled patterns holds 32,768 of them) this took 1.8 s per
    # case on an idle development machine (6.4 s at a load of 6): 3 to 10 minutes for these 100.
    # Bucketed by protocol and group, the first file's globs are never compiled (well under a
    # second in all); the second's all can match (compiled once, 2.5 s, then 15 ms per case).
    import time

    known = baseline.load(_big_baseline(tmp_path / "big.txt", pattern))
    cases = _results(99)
    cases.append(type(cases[0])(id="rope.apply/nomodel00042/x", dtype="float32", verdict="fail"))
    report = _report(cases)
    start = time.perf_counter()
    baseline.apply(report, known)
    assert time.perf_counter() - start < 60
    assert report.summary()["xfail"] == 1 and report.summary()["fail"] == 99
    assert len(report.baseline["stale"]) == GLOBS - 1


def test_matching_stops_at_the_run_deadline_with_a_one_line_note(tmp_path):
    import time

    known = baseline.load(_big_baseline(tmp_path / "big.txt", "*/nodeadline{:05d}/*"))  # compiled by no other test
    report = _report(_results(500))
    start = time.perf_counter()
    baseline.apply(report, known, deadline=time.monotonic() + 0.3, limit="--max-time 9 s")
    assert time.perf_counter() - start < 1.5  # one chunk past the deadline at most
    note = [n for n in report.notes if n.startswith("--expected-failures:")]
    assert len(note) == 1 and "\n" not in note[0] and "stopped at the run's time limit (--max-time 9 s)" in note[0]
    assert report.summary()["fail"] == 500  # what was not matched counts as not listed


def test_the_runner_counts_the_matching_toward_max_time(tmp_path):
    # (globs no other test compiles: the re module caches compiled patterns)
    known = _big_baseline(tmp_path / "big.txt", "*/nomaxtime{:05d}/*")
    report = run_conformance(CORRECT, "rope.apply", cases="rope.apply/llama2-d128/*", dtypes=("float32",),
                             fresh=False, identities=False, expected_failures=known, max_time=1.0)
    # Grading these cases takes well under a second; compiling every glob takes seconds: the
    # deadline ends the matching, and the report says so.
    assert any("stopped at the run's time limit (--max-time 1 s)" in n for n in report.notes)


def test_an_entry_longer_than_any_case_id_or_of_many_wildcards_is_a_usage_error():
    # Each is one regex that compiles (and matches) in time growing with it; no case id needs them.
    with pytest.raises(UsageError, match=r"<baseline>:1: an entry of 600 characters \(at most 512\)"):
        baseline.parse("rope.apply/" + "a" * 589)
    with pytest.raises(UsageError, match=r"<baseline>:2: 9 wildcards in one entry \(at most 8\)"):
        baseline.parse("rope.apply/*/x\n*/" + "*a" * 8)


def test_a_chunk_of_long_globs_stays_small():
    # 256 globs of 8 wildcards in one regex took seconds to compile: chunks hold 8,192 characters.
    known = baseline.parse("\n".join("*/" + "*a" * 7 + f"{i}" * 40 for i in range(1000)))
    index = baseline._Index(known.entries)
    sizes = [sum(len(e.pattern) for e in c.entries) for chunks in index.chunks.values() for c in chunks]
    assert max(sizes) <= baseline.CHUNK_CHARS and sum(len(c) for c in index.chunks.values()) > 4


def test_an_expected_identity_failure_is_an_xfail_in_junit_and_the_summary():
    """An identity the baseline lists is written as pytest writes an xfail, and counted apart."""
    import xml.etree.ElementTree as ET

    from conformance.reports import junit
    from conformance.reports._common import summary_line
    from conformance.results import IdentityResult, Report

    report = Report(suite_version="x", vectors_digest="sha256:0", protocol="rope.apply", target="t.py:f",
                    environment={}, profile="standard")
    report.identities = [IdentityResult(id="linearity", dtype="float32", verdict="xfail", message="off by one")]
    report.baseline = {"file": "known.txt", "entries": 1, "expected": 0, "fixed": [], "stale": []}
    counts = report.summary()
    assert counts["identity_failures"] == 0 and counts["identity_xfail"] == 1
    assert "1 identity xfailed" in summary_line(report)
    skipped = ET.fromstring(junit.dumps(report).split("\n", 1)[1]).find(".//testcase/skipped")
    assert skipped is not None and skipped.get("type") == "pytest.xfail"
    assert "known.txt" in skipped.get("message")
