"""--junit: valid JUnit XML, one testcase per case and dtype plus one per black-box identity."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from conformance.reports import junit
from test_reports_common import DIGEST, passing_report, sample_report


def _parse(tmp_path, report):
    path = tmp_path / "junit.xml"
    junit.write(report, path)
    raw = path.read_bytes()
    assert raw.startswith(b'<?xml version="1.0" encoding="utf-8"?>')
    return ET.fromstring(raw)


def test_structure_counts_and_names(tmp_path):
    report = sample_report()
    root = _parse(tmp_path, report)
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    assert suite.get("name") == "posref.rope.apply"
    cases = suite.findall("testcase")
    assert len(cases) == len(report.cases) + len(report.identities) == 10
    for el in (root, suite):
        assert (el.get("tests"), el.get("failures"), el.get("errors"), el.get("skipped")) == (
            "10", "3", "1", "2")
    names = [c.get("name") for c in cases]
    assert names[:3] == ["rope.apply/llama2-d128/prefill-0-15[float32]",
                         "rope.apply/llama2-d128/prefill-0-15[bfloat16]",
                         "rope.apply/llama2-d128/decode-4095[bfloat16]"]
    assert {c.get("classname") for c in cases[:7]} == {"rope.apply"}
    assert {c.get("classname") for c in cases[7:]} == {"rope.apply.identities"}
    assert names[7:] == ["norm-per-pair[float32]", "shift-invariance[bfloat16]",
                         "determinism[float32]"]
    assert float(suite.get("time")) > 0


def test_verdicts_map_to_junit_elements(tmp_path):
    cases = {c.get("name"): c for c in _parse(tmp_path, sample_report()).iter("testcase")}
    fail = cases["rope.apply/llama2-d128/decode-4095[bfloat16]"].find("failure")
    assert fail.get("message") == "positions shifted by +1"
    assert fail.get("type") == "position-offset"
    assert "posref 0.1.0 rope.apply/llama2-d128/decode-4095 [bfloat16]: fail" in fail.text
    assert "reproduce:" in fail.text and "import torch" in fail.text

    err = cases["rope.apply/llama2-d128/left-pad[bfloat16]"].find("error")
    assert err.get("message") == "ZeroDivisionError: division by zero" and err.get("type") == "raised"

    skipped = cases["rope.apply/gptj-d256/partial-64[float32]"].find("skipped")
    assert skipped.get("message") == "Unsupported: partial rotary is not supported"

    ok = cases["rope.apply/llama2-d128/prefill-0-15[float32]"]
    assert list(ok) == []  # a pass has no child element
    acceptable = cases["rope.apply/long/near-2p24[float32]"]
    assert acceptable.find("failure") is None
    assert "budget too wide" in acceptable.find("system-out").text

    ident = cases["shift-invariance[bfloat16]"].find("failure")
    assert "<&>" in ident.get("message")  # escaped on the way out, intact after parsing
    assert cases["determinism[float32]"].find("skipped") is not None


def test_properties_cite_suite_digest_and_environment(tmp_path):
    props = {p.get("name"): p.get("value")
             for p in _parse(tmp_path, sample_report()).iter("property")}
    assert props["posref.suite_version"] == "0.1.0"
    assert props["posref.vectors_digest"] == DIGEST
    assert props["posref.target"] == "examples/rope_buggy.py:apply_offset"
    assert props["environment.torch"] == "2.13.0+cpu"
    assert props["environment.dtypes"] == "float32,bfloat16,float16"
    assert props["posref.summary"].startswith("posref 0.1.0 rope.apply: 2 passed")


def test_control_characters_do_not_break_the_xml(tmp_path):
    r = sample_report()
    r.cases[5].diagnoses[0].message = "bad \x00 byte \x1b[31m and \ud800 surrogate"
    root = _parse(tmp_path, r)  # parses: the characters were replaced
    err = [c for c in root.iter("testcase") if c.find("error") is not None][0].find("error")
    assert "bad" in err.get("message") and "\x00" not in err.get("message")


def test_all_passing_report(tmp_path):
    root = _parse(tmp_path, passing_report())
    assert root.get("failures") == "0" and root.get("errors") == "0"
    assert root.find("testsuite").find("testcase/failure") is None


def test_testcases_point_at_the_adapter_for_ci_annotations(tmp_path):
    """file and line on every testcase, from a real run (in-process and isolated)."""
    import xml.etree.ElementTree as ET

    from conformance import run_conformance

    adapter = tmp_path / "my_rope.py"
    adapter.write_text("import sys\n\n\ndef helper():\n    pass\n\n\ndef apply(x, positions, spec):\n"
                       "    sys.exit(3)\n")
    for isolate in (False, True):
        report = run_conformance(f"{adapter}:apply", "rope.apply", dtypes=("float32",), identities=False,
                                 cases="rope.apply/llama2-d128/prefill-8", isolate=isolate)
        assert report.source["line"] == 8 and report.source["file"].endswith("my_rope.py")
        root = ET.fromstring(junit.dumps(report))
        (tc,) = root.iter("testcase")
        assert tc.get("file").endswith("my_rope.py") and tc.get("line") == "8"


def test_source_location_of_a_module_target_and_of_a_callable():
    from conformance.loader import source_location

    file, line = source_location("conformance.loader:source_location")
    assert file.endswith("conformance/loader.py") and line > 1
    assert source_location(None, source_location) == (file, line)
    assert source_location("no_such_module_xyz:fn") is None
    assert source_location(None, len) is None  # a builtin has no source
