"""assert_conforms, run_conformance with a TARGET string, and the pytest plugin's fixture."""

import json
import subprocess
import sys

import pytest

from conformance import assert_conforms, run_conformance
from conformance.results import Report
from support import detected_layout, shifted_positions, style, style_target

CASES = "rope.apply/llama2-d128/prefill-8,rope.apply/llama2-d128/decode-4095"


def test_assert_conforms_returns_the_report_when_it_passes():
    report = assert_conforms(style("hf_rotate_half"), protocol="rope.apply", dtypes=("bfloat16",), cases=CASES)
    assert isinstance(report, Report)
    assert report.summary()["overall"] == "pass"
    assert report.identities  # the black-box checks ran


def report_version():
    from reference.golden.store import SUITE_VERSION

    return SUITE_VERSION


def test_assert_conforms_raises_with_the_summary():
    with pytest.raises(AssertionError) as info:
        assert_conforms(shifted_positions, protocol="rope.apply", dtypes=("float32",), cases=CASES,
                        identities=False)
    text = str(info.value)
    assert text.splitlines()[0].startswith("2 case(s) failed; 2 with position-offset: ")  # the cause first
    assert "rope.apply/llama2-d128/prefill-8 [float32]" in text
    assert "error/budget" in text and "first failing position" in text
    assert text.splitlines()[-1].startswith(f"posref {report_version()} rope.apply: ")


def test_run_conformance_accepts_a_target_string():
    report = run_conformance(style_target("gptj_every_two"), "rope.apply", dtypes=("float16",),
                             cases="rope.apply/gpt-j-6b/*", identities=False)
    assert report.target.endswith("rope_styles.py:gptj_every_two")
    assert detected_layout(report) == "interleaved"
    assert all(c.repro.startswith("posref conform ") for c in report.cases)


def test_posref_conform_fixture_is_registered(posref_conform):
    report = posref_conform(style("meta_complex"), protocol="rope.apply", dtypes=("float32",),
                            cases="rope.apply/llama2-d128-meta/prefill-8", identities=False)
    assert report.summary()["overall"] == "pass"
    with pytest.raises(AssertionError):
        posref_conform(style("bf16_angles"), protocol="rope.apply", dtypes=("float32",),
                       cases="rope.apply/llama2-d128/decode-4095", identities=False)


def test_plugin_and_cli_import_nothing_heavy():
    code = (
        "import sys, conformance.pytest_plugin, conformance.cli, conformance.commands.conform\n"
        "conformance.cli.build_parser()\n"
        "heavy = [m for m in ('torch', 'numba', 'matplotlib') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_callable_gets_a_command_line_repro_and_can_be_isolated():
    fn = style("meta_complex")  # loaded from a file: its TARGET is that file
    report = run_conformance(fn, "rope.apply", dtypes=("float32",), identities=False, isolate=True,
                             cases="rope.apply/llama2-d128-meta/prefill-8")
    assert report.target.endswith("rope_styles.py:meta_complex")
    assert report.cases[0].verdict == "pass"
    assert report.cases[0].repro.startswith("posref conform ") and "rope_styles.py:meta_complex" in report.cases[0].repro


def test_closure_gets_a_python_repro():
    inner = style("meta_complex")

    def closure(x, positions, spec):
        return inner(x, positions, spec)

    report = run_conformance(closure, "rope.apply", dtypes=("float32",), identities=False,
                             cases="rope.apply/llama2-d128-meta/prefill-8")
    assert report.cases[0].repro.startswith("from conformance import run_conformance")


def _unsupported_everywhere(x, positions, spec):
    from conformance import Unsupported

    raise Unsupported("nothing implemented")


def test_nothing_graded_is_not_a_pass():
    with pytest.raises(AssertionError, match="nothing was graded"):
        assert_conforms(_unsupported_everywhere, protocol="rope.apply", dtypes=("float32",),
                        cases=CASES, identities=False)


def test_nothing_graded_exits_1(tmp_path):
    adapter = tmp_path / "adapter.py"
    adapter.write_text(
        "from conformance import Unsupported\n"
        "def apply(x, positions, spec):\n"
        "    raise Unsupported('nothing implemented')\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "conform", f"{adapter}:apply",
         "--protocol", "rope.apply", "--cases", CASES, "--dtype", "float32"],
        capture_output=True, text=True,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "skipped" in run.stdout


def test_reports_of_a_non_finite_implementation_are_valid(tmp_path):
    """NaN outputs at some positions: the per-position curve must still be a valid JSON report."""
    from conformance.reports import json_report
    from support import ROOT

    report = run_conformance(str(ROOT / "examples" / "rope" / "buggy" / "non_finite.py") + ":apply", "rope.apply",
                             dtypes=("float32",), cases="rope.apply/llama2-d128/around-2p16",
                             identities=False)
    (case,) = report.cases
    assert case.verdict == "fail" and "non-finite" in [d.code for d in case.diagnoses]
    assert any(point[1] == float("inf") for point in case.curve)
    json_report.write(report, tmp_path / "r.json")  # validates against the schema or raises
    assert json.loads((tmp_path / "r.json").read_text())["cases"][0]["verdict"] == "fail"
