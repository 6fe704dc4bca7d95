"""QA regressions for the conformance runner and ``posref conform``: user code that misbehaves
in odd ways still ends as a verdict, and reports stay faithful."""

from __future__ import annotations

import json
import textwrap
import xml.dom.minidom

import pytest

from conformance import run_conformance
from conformance.cli import main
from conformance.isolation import error_line, printable

torch = pytest.importorskip("torch")

CASE = "rope.apply/head-dims/d64-half-prefill-8"
FREQ_CASE = "rope.frequencies/head-dims/d64"

ADAPTERS = textwrap.dedent(
    """
    def nasty_message(x, positions, spec):
        # a lone surrogate (what os.fsdecode makes of an undecodable byte), NUL, ANSI colour
        raise ValueError("cannot open \\udcff.bin \\x00 \\x1b[31mred\\x1b[0m <&> ]]>")

    def spaced_brackets(x, positions, spec):
        raise ValueError("bad index [ 0,  1 ]")
    """
)


@pytest.fixture
def adapters(tmp_path):
    path = tmp_path / "qa_adapters.py"
    path.write_text(ADAPTERS)
    return path


def _conform(target, tmp_path, *extra, case=CASE, protocol="rope.apply"):
    return main(["conform", target, "--protocol", protocol, "--cases", case, "--dtype", "float32", *extra])


# --- messages from user code ---------------------------------------------------------------


def test_error_line_escapes_what_cannot_be_printed_or_encoded():
    line = error_line(ValueError("a \udcff b \x00 \x1b[31m c"))
    assert line == "ValueError: a \\udcff b \\x00 \\x1b[31m c"
    line.encode("utf-8")  # a lone surrogate would raise here
    assert printable("snowman \u2603 stays") == "snowman \u2603 stays"


@pytest.mark.parametrize("isolate", [False, True])
def test_exception_message_with_surrogate_and_control_chars_is_a_verdict(adapters, tmp_path, capsys, isolate):
    # Bug: the terminal table crashed with UnicodeEncodeError (a traceback), and the JSON and
    # Markdown writers failed with "cannot write a report" (exit 2) on a lone surrogate; raw
    # escape sequences reached the terminal and NUL the reports.
    report = {k: tmp_path / f"r.{k}" for k in ("json", "xml", "md")}
    extra = ["--json", str(report["json"]), "--junit", str(report["xml"]), "--markdown", str(report["md"])]
    if isolate:
        extra += ["--isolate", "--timeout", "60"]
    code = _conform(f"{adapters}:nasty_message", tmp_path, *extra)
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "Traceback" not in err and "\x1b[31m" not in out
    doc = json.loads(report["json"].read_text(encoding="utf-8"))
    message = doc["cases"][0]["diagnoses"][0]["message"]
    assert message == "ValueError: cannot open \\udcff.bin \\x00 \\x1b[31mred\\x1b[0m <&> ]]>"
    xml.dom.minidom.parse(str(report["xml"]))  # well-formed: no NUL, & and ]]> escaped
    assert "\\udcff" in report["md"].read_text(encoding="utf-8")


def test_json_report_keeps_strings_verbatim(adapters, tmp_path, capsys):
    # Bug: the pass that puts number arrays on one line also rewrote brackets and spaces inside
    # strings ("[ 0,  1 ]" became "[0, 1]").
    path = tmp_path / "r.json"
    assert _conform(f"{adapters}:spaced_brackets", tmp_path, "--json", str(path)) == 1
    doc = json.loads(path.read_text())
    assert doc["cases"][0]["diagnoses"][0]["message"] == "ValueError: bad index [ 0,  1 ]"


# --- rope.frequencies: attention_factor must be a number -------------------------------------


def _inv_freq(spec, factor=1.0):
    r = spec.rotary_dim
    return 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.float64) / r)) / factor


def test_attention_factor_given_as_a_string_fails():
    # Bug: float("1.0") made the string "1.0" pass as the attention factor.
    report = run_conformance(lambda spec, n: (_inv_freq(spec), "1.0"), "rope.frequencies",
                             cases=FREQ_CASE, identities=False)
    case = report.cases[0]
    assert case.verdict == "fail"
    assert "attention_factor is a str" in case.diagnoses[0].message


def test_attention_factor_past_float_range_fails_instead_of_erroring():
    # Bug: 10**400 raised OverflowError while grading: verdict "error" ("could not be graded")
    # and the black-box checks did not run at all.
    report = run_conformance(lambda spec, n: (_inv_freq(spec), 10**400), "rope.frequencies",
                             cases=FREQ_CASE)
    assert report.cases[0].verdict == "fail"
    assert [d.code for d in report.cases[0].diagnoses] == ["non-finite"]
    assert all(i.id != "blackbox" for i in report.identities)


# --- an adapter that edits its spec ----------------------------------------------------------


def _scaled_case():
    from reference.golden import store

    base = store.get_case(FREQ_CASE)
    params = dict(base.params, scaling={"rope_type": "default"})
    return store.GoldenCase(base.id, base.protocol, base.group, params, base.comment, base.flags, base.arrays)


def test_adapter_that_rewrites_spec_scaling_is_graded_against_the_true_reference():
    # Bug: the adapter received the case's own scaling dict (and the very spec used for
    # grading), so an adapter that rewrote it in place, as HF config code does, moved the
    # reference and the golden case with it (here: the reference then raised, verdict "error").
    case = _scaled_case()

    def rewrites(spec, seq_len):
        spec.scaling.clear()
        spec.scaling["rope_type"] = "my-own-name"
        return _inv_freq(spec), 1.0

    report = run_conformance(rewrites, "rope.frequencies", identities=False, golden_cases=[case])
    assert report.cases[0].verdict == "pass", report.cases[0].diagnoses
    assert case.params["scaling"] == {"rope_type": "default"}


def test_adapter_that_forces_a_frozen_spec_field_is_graded_against_the_true_reference():
    def forces_base(spec, seq_len):
        object.__setattr__(spec, "base", 1.0)
        return torch.ones(spec.rotary_dim // 2, dtype=torch.float64), 1.0

    report = run_conformance(forces_base, "rope.frequencies", cases=FREQ_CASE, identities=False)
    assert report.cases[0].verdict == "fail"


# --- report paths are checked before grading -------------------------------------------------


@pytest.mark.parametrize("flag", ["--json", "--junit", "--markdown", "--plot"])
def test_report_path_that_is_a_directory_is_a_usage_error_before_grading(tmp_path, capsys, flag):
    # Bug: the whole run was graded first, then "cannot write a report: [Errno 21] Is a
    # directory: '/.tmp.j9iswuqz' -> '/tmp'" (a temporary file name in the parent folder).
    marker = tmp_path / "called"
    adapter = tmp_path / "qa_marks.py"
    adapter.write_text(f"def apply(x, positions, spec):\n    open({str(marker)!r}, 'w').close()\n    return x\n")
    code = _conform(f"{adapter}:apply", tmp_path, flag, str(tmp_path))
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == f"posref: error: {flag}: {tmp_path} is a directory, not a file"
    assert not marker.exists(), "the adapter was graded before the report path was checked"

    under_a_file = tmp_path / "qa_marks.py" / "report.out"
    assert _conform(f"{adapter}:apply", tmp_path, flag, str(under_a_file)) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert not marker.exists()


# --- a dtype the tolerance model has no budget for -------------------------------------------


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="no float8 in this torch")
def test_float8_cache_and_frequencies_fail_with_a_reason():
    # Bug: graded silently with the float64 budget: "fail" with no diagnosis at all.
    def cache(positions, spec):
        angle = positions[..., None].double() * _inv_freq(spec)
        return angle.cos().to(torch.float8_e4m3fn), angle.sin().to(torch.float8_e4m3fn)

    report = run_conformance(cache, "rope.cache", cases="rope.cache/gpt-j-6b/prefill-8", identities=False)
    case = report.cases[0]
    assert case.verdict == "fail"
    assert case.diagnoses and case.diagnoses[0].code == "dtype-changed"
    assert "float8_e4m3fn, which has no error budget" in case.diagnoses[0].message

    report = run_conformance(lambda spec, n: (_inv_freq(spec).to(torch.float8_e5m2), 1.0), "rope.frequencies",
                             cases=FREQ_CASE, identities=False)
    assert report.cases[0].verdict == "fail"
    assert "inv_freq has dtype float8_e5m2" in report.cases[0].diagnoses[0].message


# --- a terminal that cannot show every character ----------------------------------------------


def test_ascii_terminal_gets_escapes_not_a_traceback(adapters, tmp_path):
    # Bug: with an ASCII (or cp1252) stdout, a message such as "\u2603" from the adapter made
    # the table die with UnicodeEncodeError and a traceback.
    import os
    import subprocess
    import sys

    (tmp_path / "qa_snowman.py").write_text(
        "def apply(x, positions, spec):\n    raise ValueError('snow \\u2603 man')\n"
    )
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "conform", f"{tmp_path / 'qa_snowman.py'}:apply",
         "--protocol", "rope.apply", "--cases", CASE, "--dtype", "float32"],
        capture_output=True, env=env, timeout=120,
    )
    assert proc.returncode == 1, proc.stderr.decode("ascii", "replace")
    assert b"Traceback" not in proc.stderr
    assert b"snow \\u2603 man" in proc.stdout
