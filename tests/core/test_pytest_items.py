"""One pytest item per case and dtype (issue 8): conformance.cases(), -k, --lf, the assertion's first
line, hidden posref frames and --posref-expected-failures, run as a user's pytest session would."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import conformance
from support import ROOT

CASES = "rope.apply/llama3-d128/prefill-8,rope.apply/llama3-d128/decode-8191,rope.apply/llama2-d128/prefill-8"

TEST_FILE = textwrap.dedent(f"""
    import pytest
    import conformance
    from conformance.loader import load_target

    correct = load_target({str(ROOT / 'examples/rope/hf_rotate_half.py:apply')!r})
    wrong_base = load_target({str(ROOT / 'examples/rope/buggy/wrong_base.py:apply')!r})

    @pytest.mark.parametrize("case", conformance.cases("rope.apply", cases={CASES!r}))
    def test_correct(case):
        case.check(correct)

    @pytest.mark.parametrize("case", conformance.cases("rope.apply", dtypes="float32", cases={CASES!r}))
    def test_wrong_base(case):
        case.check(wrong_base)
""")


def _pytest(tmp_path, *args):
    (tmp_path / "test_user.py").write_text(TEST_FILE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:xdist", "--rootdir", str(tmp_path),
                           str(tmp_path / "test_user.py"), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def test_cases_are_pytest_parameters_named_by_case_and_dtype():
    params = conformance.cases("rope.apply", cases=CASES)
    assert [p.id for p in params][:2] == ["rope.apply/llama2-d128/prefill-8:float32",
                                          "rope.apply/llama2-d128/prefill-8:bfloat16"]
    assert len(params) == 3 * 2
    table = conformance.cases("sinusoidal.table", cases="sinusoidal.table/fairseq/*")
    assert [p.id for p in table] == ["sinusoidal.table/fairseq/from-padding-idx"]  # dtype-free: one each


def test_items_select_and_fail_with_the_cause_first(tmp_path):
    code, out = _pytest(tmp_path)
    assert code == 1
    assert "PASSED test_user.py::test_correct[rope.apply/llama3-d128/decode-8191:bfloat16]" in out
    assert "FAILED test_user.py::test_wrong_base[rope.apply/llama3-d128/decode-8191:float32]" in out
    assert "PASSED test_user.py::test_wrong_base[rope.apply/llama2-d128/prefill-8:float32]" in out  # base 1e4 is right there
    # The assertion's first line is the cause; where it fails and the repro follow.
    lines = [l[1:].strip() for l in out.splitlines() if l.startswith("E ")]
    assert any(l.startswith("AssertionError: rope.apply/llama3-d128/decode-8191 [float32] fail: base 10000 "
                            "used instead of 500000") for l in lines)
    for label in ("mismatched: ", "worst: batch row 0, position 8191", "first failing position: 8191", "repro:",
                  "posref conform "):
        assert any(l.startswith(label) for l in lines), label
    assert "case = Case('rope.apply/llama3-d128/decode-8191:float32')" in out  # a short repr
    # posref's own frames are hidden: the traceback shows the user's test, not the runner.
    assert "conformance/pytest_cases.py" not in out and "conformance/runner.py" not in out

    code, out = _pytest(tmp_path, "-k", "decode-8191 and wrong_base")
    assert code == 1 and "1 failed, 8 deselected" in out


@pytest.mark.slow  # two pytest sessions in subprocesses; the slow selection runs it
def test_last_failed_reruns_only_the_failing_cases(tmp_path):
    _pytest(tmp_path)
    code, out = _pytest(tmp_path, "--lf")
    assert code == 1 and "2 failed" in out and "passed" not in out.splitlines()[-1]


def test_expected_failures_baseline_marks_items_xfail(tmp_path):
    known = tmp_path / "known.txt"
    known.write_text("rope.apply/llama3-d128/* [float32]\nrope.apply/llama2-d128/prefill-8 [float32]  # fixed\n")
    code, out = _pytest(tmp_path, "-k", "wrong_base", "--posref-expected-failures", str(known))
    assert code == 0, out
    assert "2 xfailed" in out and "1 xpassed" in out  # the fixed one is reported, so the file can shrink
    known.write_text("rope.apply/llama3-d128/prefill-8\n")
    code, out = _pytest(tmp_path, "-k", "wrong_base", "--posref-expected-failures", str(known))
    assert code == 1 and "1 failed" in out and "1 xfailed" in out  # the new failure fails the run


def test_a_bad_baseline_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("this is not a case id\n")
    code, out = _pytest(tmp_path, "--posref-expected-failures", str(bad))
    assert code == 4 and "bad.txt:1" in out


def test_the_fixture_message_starts_with_the_cause(posref_conform):
    from conformance.loader import load_target

    wrong = load_target(str(ROOT / "examples/rope/buggy/wrong_base.py:apply"))
    with pytest.raises(AssertionError) as info:
        posref_conform(wrong, protocol="rope.apply", dtypes=("float32",), cases=CASES, fresh=False)
    first = str(info.value).splitlines()[0]
    assert first.startswith("2 case(s) failed; 2 with wrong-base: base 10000 used instead of 500000")


FIXTURE_FILE = textwrap.dedent(f"""
    from conformance.loader import load_target

    offset = load_target({str(ROOT / 'examples/rope/buggy/position_offset.py:apply')!r})

    def test_offset(posref_conform):
        posref_conform(offset, protocol="rope.apply", dtypes=("float32",), seed=10,
                       cases="rope.apply/llama3-d128/prefill-8,rope.apply/fresh/*")
""")


@pytest.mark.slow  # two pytest sessions; tests/core/test_baseline.py checks the same through the runner
def test_a_baseline_written_by_the_cli_keeps_the_fixture_green_on_another_seed(tmp_path):
    """Issue 25: the baseline written from seed 1 lists fresh kinds and the failing identity, so
    the fixture's run from seed 10 (other draws) passes; without it, the same run fails."""
    from conformance.cli import main

    known = tmp_path / "known.txt"
    assert main(["conform", str(ROOT / "examples/rope/buggy/position_offset.py:apply"), "--protocol", "rope.apply",
                 "--cases", "rope.apply/llama3-d128/prefill-8,rope.apply/fresh/*", "--dtype", "float32",
                 "--seed", "1", "-q", "--write-expected-failures", str(known)]) == 1
    (tmp_path / "test_fixture.py").write_text(FIXTURE_FILE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("PYTEST_ADDOPTS", None)

    def session(*args):
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "--rootdir", str(tmp_path),
                               str(tmp_path / "test_fixture.py"), *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        return proc.returncode, proc.stdout + proc.stderr

    code, out = session("--posref-expected-failures", str(known))
    assert code == 0 and "1 passed" in out, out
    code, out = session()
    assert code == 1 and "1 failed" in out
