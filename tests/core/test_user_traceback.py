"""The user's own code in a failure (issue 25): where the adapter raised (file, line, the user's
frames) in every report, in-process and under --isolate; an exception's own text never merged into
ranges; --raise / --pdb re-raise the first exception in the user's frame; a NumPy array returned
gets a message saying so."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conformance import run_conformance
from conformance.api import failure_summary
from conformance.errors import UsageError
from conformance.pytest_cases import failure_message
from conformance.reports import json_report, junit
from conformance.reports.causes import failure_causes
from conformance.reports.terminal import report_lines
from conformance.results import Report

CASES = "alibi.bias/*"

# The size check fails with numbers that differ from case to case (the number of query positions).
ADAPTER = textwrap.dedent('''\
    import numpy as np
    import torch


    def _scale(q_positions, spec):
        heads = torch.ones(spec.num_heads)
        return heads + torch.ones(q_positions.numel() + 1)  # RAISES


    def bias(q_positions, k_positions, spec):
        return _scale(q_positions, spec)


    def as_numpy(q_positions, k_positions, spec):
        slopes = np.array([2.0 ** (-8.0 * (h + 1) / spec.num_heads) for h in range(spec.num_heads)])
        distance = np.abs(q_positions.numpy()[:, None] - k_positions.numpy()[None, :])
        return -slopes[:, None, None] * distance
''')


@pytest.fixture
def adapter(tmp_path):
    path = tmp_path / "my_alibi.py"
    path.write_text(ADAPTER)
    line = ADAPTER.splitlines().index(next(l for l in ADAPTER.splitlines() if "# RAISES" in l)) + 1
    return str(path), line


def _graded(adapter, isolate=False, fn="bias"):
    path, _ = adapter
    return run_conformance(f"{path}:{fn}", "alibi.bias", cases=CASES, isolate=isolate, identities=False,
                           fresh=False, timeout=60 if isolate else None)


def _errors(report):
    bad = [c for c in report.cases if c.verdict == "error"]
    assert bad, "the adapter raises on every case"
    return bad


@pytest.mark.parametrize("isolate", [False, True])
def test_the_users_file_line_and_frames_are_in_the_case(adapter, isolate):
    path, line = adapter
    report = _graded(adapter, isolate)
    for c in _errors(report):
        tb = c.traceback
        assert tb["file"] == path and tb["line"] == line
        assert any("in _scale: return heads + torch.ones" in f for f in tb["frames"])
        assert any(", in bias: return _scale(" in f for f in tb["frames"])
        # posref's own frames (the call guard, the isolated worker) are left out, and it is short
        assert not any(os.sep + "conformance" + os.sep in f for f in tb["frames"])
        assert 2 <= len(tb["frames"]) <= 6 and all(len(f) <= 300 for f in tb["frames"])


def test_every_report_shows_where_the_adapter_raised(adapter):
    path, line = adapter
    report = _graded(adapter)
    where = f"raised at {path}:{line}"
    text = "\n".join(t for t, _ in report_lines(report, width=80))
    assert where in text and "in _scale: return heads + torch.ones" in text
    doc = json_report.document(report)
    json_report.validate(doc)
    assert doc["cases"][0]["traceback"]["line"] == line
    back = Report.from_json(json.loads(json.dumps(report.to_json())))
    assert back.cases[0].traceback == report.cases[0].traceback
    assert where in junit.dumps(report)
    assert where in failure_message(report, _errors(report)[0])
    assert where in failure_summary(report)  # assert_conforms's message


def test_an_exceptions_own_numbers_are_never_merged_into_ranges(adapter):
    report = _graded(adapter)
    bad = _errors(report)
    messages = {c.diagnoses[0].message for c in bad}
    assert len(messages) > 1  # the exception's text varies by case
    (cause,) = failure_causes(bad, {})
    assert {text for text, _ in cause.lines} == messages  # verbatim, each its own line
    assert sum(n for _, n in cause.lines) == len(bad)
    assert not any(" to " in text for text, _ in cause.lines)


def test_a_numpy_array_returned_is_named_with_the_fix(adapter):
    for isolate in (False, True):
        report = _graded(adapter, isolate, fn="as_numpy")
        assert report.cases
        for c in report.cases:
            assert c.verdict in ("fail", "error"), c
            (d,) = c.diagnoses
            assert "is a NumPy array of shape [" in d.message and "torch.from_numpy(x)" in d.message, d


def _posref(args, stdin=None):
    env = dict(os.environ, COLUMNS="80")
    return subprocess.run([sys.executable, "-m", "conformance.cli", "conform", *args], input=stdin,
                          capture_output=True, text=True, timeout=300, env=env)


def test_raise_reraises_in_the_users_frame(adapter):
    path, line = adapter
    proc = _posref([f"{path}:bias", "--protocol", "alibi.bias", "--cases", CASES, "--no-fresh", "--raise"])
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("RuntimeError: The size of tensor a")
    # the last frame printed is the user's line
    frames = [l for l in proc.stderr.splitlines() if l.strip().startswith("File ")]
    assert frames[-1].strip() == f'File "{path}", line {line}, in _scale'


def test_pdb_opens_a_post_mortem_in_the_users_frame_and_the_run_goes_on(adapter):
    path, line = adapter
    proc = _posref([f"{path}:bias", "--protocol", "alibi.bias", "--cases", CASES, "--no-fresh", "--pdb"],
                   stdin="p q_positions.numel() + 1\nc\n")
    assert proc.returncode == 1, proc.stderr  # the run went on, and failed
    assert f"> {path}({line})_scale()" in proc.stdout
    assert "(Pdb)" in proc.stdout
    assert "errored" in proc.stderr + proc.stdout or "error" in proc.stderr + proc.stdout


def test_raise_and_pdb_are_in_process_only(adapter):
    path, _ = adapter
    for flag in ("--raise", "--pdb"):
        proc = _posref([f"{path}:bias", "--protocol", "alibi.bias", "--isolate", flag])
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines()[-1] == f"posref: error: {flag} debugs the adapter in this " \
            "process: it cannot be used with --isolate"
    with pytest.raises(UsageError):
        run_conformance(f"{path}:bias", "alibi.bias", isolate=True, debug="raise")


def test_api_raise_propagates_the_adapters_exception(adapter):
    path, line = adapter
    with pytest.raises(RuntimeError) as info:
        run_conformance(f"{path}:bias", "alibi.bias", cases=CASES, fresh=False, identities=False, debug="raise")
    assert info.traceback[-1].path == __import__("pathlib").Path(path)
    assert info.traceback[-1].lineno + 1 == line


def test_a_deep_recursion_keeps_the_entry_and_the_innermost_frames(tmp_path):
    from conformance.isolation import MAX_USER_FRAMES, user_traceback

    path = tmp_path / "deep.py"
    path.write_text("def down(n):\n    if n == 0:\n        raise ValueError('bottom')\n    return down(n - 1)\n")
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    try:
        namespace["down"](500)
    except ValueError as exc:
        tb = user_traceback(exc)
    assert tb["file"] == str(path) and tb["line"] == 3
    assert len(tb["frames"]) == MAX_USER_FRAMES
    # this test's frame and 501 of down: the first and the last MAX_USER_FRAMES - 2 are shown
    assert tb["frames"][1] == f"... {502 - (MAX_USER_FRAMES - 1)} frames left out"
    assert tb["frames"][-1].endswith("in down: raise ValueError('bottom')")


def test_pdb_works_on_a_terminal_under_the_supervised_command(adapter):
    """The grading process runs in a session of its own (conformance.supervise) with the terminal
    inherited: pdb reads its commands from it, and no progress bar is drawn over the prompt."""
    import pty
    import select
    import time

    path, line = adapter
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "conformance.cli", "conform", f"{path}:bias", "--protocol",
                             "alibi.bias", "--cases", CASES, "--no-fresh", "--pdb"],
                            stdin=slave, stdout=slave, stderr=slave, env=dict(os.environ, COLUMNS="80"))
    os.close(slave)
    seen, sent, deadline = b"", False, time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the other side closed: the run ended
                    break
                if not chunk:
                    break
                seen += chunk
            if not sent and b"(Pdb) " in seen:
                os.write(master, b"p heads.shape\nc\n")
                sent = True
        assert proc.wait(timeout=60) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    text = seen.decode(errors="replace")
    assert sent, text
    assert f"> {path}({line})_scale()" in text
    assert "torch.Size([" in text  # pdb evaluated the command typed at the terminal
    assert "grading" not in text.split("(Pdb)")[0]  # no progress bar before the prompt
    assert re.search(r"alibi.bias: 0 passed, \d+ errors", text)  # and the run went on to its report
