"""--cases values that named nothing or a seed past int()'s limit gave tracebacks (issue 24): each
is one line on stderr and exit 2, before anything is graded."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conformance import run_conformance
from conformance.runner import Options, OptionError, fresh_seed
from support import ROOT

TARGET = "examples/rope/hf_rotate_half.py:apply"


def _conform(*args):
    # Through the supervised `posref` entry point, as a shell runs it.
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from conformance.supervise import entry; sys.exit(entry())",
         "conform", TARGET, "--protocol", "rope.apply", *args],
        cwd=ROOT, env=dict(os.environ, COLUMNS="100"), capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("cases, message", [
    (",", "posref: error: cases: ',' names no case (give case ids or globs, separated by commas)"),
    (" , ,", "posref: error: cases: ' , ,' names no case (give case ids or globs, separated by commas)"),
    ("rope.apply/fresh-" + "7" * 5000 + "/*", "posref: error: cases: the seed in fresh-77777777777777777777.../ "
                                              "is not one posref draws (0 to 9223372036854775807)"),
    ("rope.apply/fresh-9223372036854775808/*", "posref: error: cases: the seed in fresh-9223372036854775808/ "
                                               "is not one posref draws (0 to 9223372036854775807)"),
])
def test_a_cases_value_that_names_nothing_is_one_line_and_exit_2(cases, message):
    code, out, err = _conform("--cases", cases)
    assert (code, out, err.strip().splitlines()) == (2, "", [message])


def test_the_largest_seed_an_old_fresh_id_names_is_used():
    opts = Options("rope.apply", cases="rope.apply/fresh-009223372036854775807/*")
    assert fresh_seed(opts) == 2**63 - 1
    with pytest.raises(OptionError, match="names no case"):
        run_conformance(str(ROOT / TARGET), "rope.apply", cases=",")


def test_globs_of_the_old_fresh_ids_select_the_cases_by_their_ids_now():
    from conformance.runner import _case_patterns

    assert _case_patterns("rope.apply/fresh-*,rope.apply/fresh-12/shape-*,*/fresh-*/x") == [
        "rope.apply/fresh/*", "rope.apply/fresh/shape-*", "*/fresh/x"]
