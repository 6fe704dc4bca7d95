"""One command for a whole project (issue 25): the ``[tool.posref]`` / posref.toml table.

``posref conform`` with no TARGET grades every adapter the table lists (each in a supervised run
of its own, in the table's folder), prints one summary line per adapter, then the details of those
that did not pass, and exits with the worst code; the pytest plugin's ``posref_adapter`` fixture
is parametrized by the same table. The adapters here are a correct RoPE example, a buggy one
(positions shifted by one) and a missing file, each graded on a few cases in float32 only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conformance import project
from conformance.cli import main
from conformance.errors import UsageError
from conformance.supervise import posref_command

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "examples/rope/hf_rotate_half.py"
BAD = ROOT / "examples/rope/buggy/position_offset.py"
FAST = 'dtype = "float32"\nno-fresh = true\ncases = "rope.apply/llama2-d128/prefill-8,rope.apply/llama2-d128/decode-4095"\n'


def _project(tmp_path: Path, table: str, name: str = "posref.toml") -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src/good.py").write_text(GOOD.read_text())
    (tmp_path / "src/bad.py").write_text(BAD.read_text())
    (tmp_path / name).write_text(textwrap.dedent(table))
    return tmp_path


THREE = FAST + """
[[adapters]]
name = "good"
target = "src/good.py:apply"
protocol = "rope.apply"

[[adapters]]
name = "shifted"
target = "src/bad.py:apply"
protocol = "rope.apply"
junit = "reports/shifted.xml"

[[adapters]]
name = "missing"
target = "src/nothere.py:apply"
protocol = "rope.apply"
"""


def _posref(cwd: Path, *args, timeout: float = 300):
    env = dict(os.environ, COLUMNS="100")
    proc = subprocess.run(posref_command(["conform", *args]), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """The three-adapter project, graded once: (folder, exit code, stdout, stderr)."""
    folder = _project(tmp_path_factory.mktemp("project"), THREE)
    return (folder, *_posref(folder))


def test_no_target_grades_every_adapter_and_exits_with_the_worst_code(three):
    folder, code, out, err = three
    assert code == 2  # the missing file (2) is worse than the shifted positions (1)
    first = out.splitlines()[:3]
    assert [line.split()[:2] for line in first] == [["ok", "good"], ["FAIL", "shifted"], ["ERROR", "missing"]]
    assert "failed" in first[1] and "seed" not in first[1]  # --no-fresh: no seed to repeat
    assert "cannot import src/nothere.py: no such file" in first[2]
    assert out.rstrip().splitlines()[-1] == "posref: 3 adapters from posref.toml: 1 passed, 1 failed, 1 error"
    # Details after the summary lines: the adapters that did not pass, not the one that did.
    assert "=== FAIL shifted (rope.apply, src/bad.py:apply) ===" in out
    assert "position-offset" in out.split("=== FAIL shifted")[1]
    assert "=== ERROR missing" in out and "=== ok good" not in out
    assert "[1/3] good (rope.apply, src/good.py:apply)" in err  # progress, on stderr
    # The table's report path is relative to the table's folder.
    assert "position-offset" in (folder / "reports/shifted.xml").read_text()


@pytest.mark.slow  # several posref runs; the slow selection (-m slow) runs it
def test_quiet_prints_one_line_per_adapter_and_the_total(three):
    folder, *_ = three
    code, out, err = _posref(folder, "-q", "--adapter", "good", "--adapter", "shifted")
    assert code == 1
    assert out.splitlines() == [out.splitlines()[0], out.splitlines()[1],
                                "posref: 2 adapters from posref.toml: 1 passed, 1 failed"]
    assert out.splitlines()[1].startswith("FAIL    shifted")
    assert err == ""


def test_pyproject_table_is_found_from_a_subfolder_and_the_command_line_overrides_it(tmp_path):
    table = "[tool.posref]\n" + FAST + """
[[tool.posref.adapters]]
target = "src/good.py:apply"
protocol = "rope.apply"
json = "out/good.json"
"""
    folder = _project(tmp_path, table, "pyproject.toml")
    (folder / "deep/er").mkdir(parents=True)
    code, out, _ = _posref(folder / "deep/er", "--dtype", "bfloat16", "-q")
    assert code == 0, out
    assert out.splitlines()[0].split()[:2] == ["ok", "apply"]  # named after the function
    report = json.loads((folder / "out/good.json").read_text())
    assert {c["dtype"] for c in report["cases"]} == {"bfloat16"}  # the command line's --dtype replaced the table's


@pytest.mark.slow  # several posref runs; the slow selection (-m slow) runs it
def test_a_new_fault_fails_while_a_listed_one_stays_green(tmp_path):
    """The table's expected-failures file applies to its adapter: the baseline the shifted adapter
    wrote keeps it green, and the good adapter's empty baseline does not hide anything."""
    folder = _project(tmp_path, FAST + """
[[adapters]]
name = "shifted"
target = "src/bad.py:apply"
protocol = "rope.apply"
write-expected-failures = "known.txt"
""")
    code, *_ = _posref(folder, "-q")
    assert code == 1 and (folder / "known.txt").read_text().strip()
    (folder / "posref.toml").write_text(FAST + """
[[adapters]]
name = "shifted"
target = "src/bad.py:apply"
protocol = "rope.apply"
expected-failures = "known.txt"
""")
    code, out, _ = _posref(folder, "-q")
    assert code == 0, out
    assert "xfailed" in out.splitlines()[0]


@pytest.mark.parametrize("table, message", [
    (FAST + '[[adapters]]\ntarget = "src/good.py:apply"\nprotocol = "rope.apply"\nlayuot = "half"\n',
     "posref.toml: adapters[1] (apply): unknown key 'layuot' (did you mean 'layout'?)"),
    (FAST + '[[adapters]]\ntarget = "src/good.py:apply"\nprotocol = "rope.apply"\ndtype = ["fp8"]\n',
     "posref.toml: adapters[1] (apply): argument --dtype: invalid choice: 'fp8'"),
    (FAST + '[[adapters]]\ntarget = "src/good.py:apply"\n', "needs protocol"),
    (FAST + '[[adapters]]\nprotocol = "rope.apply"\n', "needs target"),
    ('isolate = "yes"\n[[adapters]]\ntarget = "a.py:f"\nprotocol = "rope.apply"\n', "isolate: true or false"),
    ('[[adapters]]\ntarget = "a.py:f"\nprotocol = "rope.apply"\n[[adapters]]\ntarget = "b.py:f"\n'
     'protocol = "rope.apply"\n', "a second adapter named 'f'"),
    ('[[adapters]]\ntarget = "a.py:f"\nprotocol = "rope.apply"\npdb = true\n', "unknown key 'pdb'"),
    ("adapters = [\n", "not valid TOML"),
    ("dtype = 'float32'\n", "list the adapters as [[adapters]] tables"),
])
def test_table_mistakes_are_one_line_before_anything_is_graded(tmp_path, monkeypatch, capsys, table, message):
    folder = _project(tmp_path, table)
    monkeypatch.chdir(folder)
    assert main(["conform"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and err.startswith("posref: error: ")
    assert message in err


def test_the_command_exits_2_with_the_tables_mistake(tmp_path):
    folder = _project(tmp_path, FAST + '[[adapters]]\ntarget = "src/good.py:apply"\nprotocol = "rope.apply"\nlayuot = 1\n')
    code, out, err = _posref(folder)
    assert (code, out) == (2, "")
    assert err == "posref: error: posref.toml: adapters[1] (apply): unknown key 'layuot' (did you mean 'layout'?)\n"


@pytest.mark.parametrize("args, message", [
    (["--json", "r.json"], "--json applies to one adapter"),
    (["--protocol", "rope.apply"], "--protocol applies to one adapter"),
    (["--raise"], "--raise applies to one adapter"),
    (["--adapter", "nope"], "has no adapter 'nope'"),
    (["--config", "missing.toml"], "no such file"),
])
def test_command_line_mistakes_in_a_project_run(tmp_path, monkeypatch, capsys, args, message):
    folder = _project(tmp_path, FAST + '[[adapters]]\ntarget = "src/good.py:apply"\nprotocol = "rope.apply"\n')
    monkeypatch.chdir(folder)
    assert main(["conform", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_no_table_anywhere_says_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["conform"]) == 2
    assert "no TARGET given, and no posref.toml or pyproject.toml with a [tool.posref] table" in capsys.readouterr().err


def test_target_and_table_options_do_not_mix(capsys):
    assert main(["conform", f"{GOOD}:apply", "--protocol", "rope.apply", "--adapter", "x"]) == 2
    assert "--adapter chooses adapters from the project's table" in capsys.readouterr().err
    assert main(["conform", f"{GOOD}:apply"]) == 2
    assert "required with a TARGET: --protocol" in capsys.readouterr().err


def test_table_keys_become_the_conform_options(tmp_path):
    folder = _project(tmp_path, """
        isolate = true
        dtypes = ["float32", "bfloat16"]
        max_time = 50
        [[adapters]]
        target = "src/good.py:apply"
        protocol = "rope.apply"
        fresh = false
        quiet = true
        [[adapters]]
        name = "b"
        target = "pkg.mod:fn"
        protocol = "alibi.bias"
        no-fresh = true
        isolate = false
        """)
    first, second = project.load(start=folder / "src").adapters
    args = first.args()
    assert (args.isolate, args.dtypes, args.max_time, args.fresh, args.verbosity) == (
        True, ["float32", "bfloat16"], 50.0, False, -1)
    assert first.argv()[0] == "src/good.py:apply"
    args = second.args({"seed": 7, "dtypes": ["float16"]})
    assert (args.target, args.protocol, args.isolate, args.fresh, args.seed, args.dtypes) == (
        "pkg.mod:fn", "alibi.bias", False, False, 7, ["float16"])


def test_given_options_are_only_those_written():
    assert project.given_options(["--dtype", "float32", "-q", "--no-fresh", "--max-time=9"]) == {
        "dtypes": ["float32"], "verbosity": -1, "fresh": False, "max_time": 9.0}
    assert project.given_options([]) == {}
    # The parser's own defaults are untouched afterwards.
    assert project.conform_parser().parse_args(["t.py:f"]).verbosity == 0


@pytest.mark.slow  # several posref runs; the slow selection (-m slow) runs it
def test_a_project_folder_with_its_own_reference_package_does_not_shadow_posref(tmp_path):
    """`python -c` puts the current folder first on sys.path: a user's `reference` package there
    must not replace posref's."""
    folder = _project(tmp_path, FAST + '[[adapters]]\ntarget = "src/good.py:apply"\nprotocol = "rope.apply"\n')
    (folder / "reference").mkdir()
    (folder / "reference/__init__.py").write_text("raise SystemExit('the project folder shadowed posref')\n")
    code, out, err = _posref(folder, "-q")
    assert code == 0, out + err
    code, out, err = _posref(folder, "src/good.py:apply", "--protocol", "rope.apply", "-q", "--no-fresh",
                             "--dtype", "float32", "--cases", "rope.apply/llama2-d128/prefill-8")
    assert code == 0, out + err


PYTEST_FILE = """
def test_positional_encodings(posref_adapter):
    posref_adapter.check()
"""


def _pytest(folder: Path, *args):
    (folder / "tests").mkdir(exist_ok=True)
    (folder / "tests/test_pe.py").write_text(PYTEST_FILE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:xdist", "-p", "no:cacheprovider",
                           "--rootdir", str(folder), "tests", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def test_pytest_items_come_from_the_same_table(tmp_path):
    folder = _project(tmp_path, THREE)
    code, out = _pytest(folder)
    assert code == 1
    assert "PASSED tests/test_pe.py::test_positional_encodings[good]" in out
    assert "FAILED tests/test_pe.py::test_positional_encodings[shifted]" in out
    assert "position-offset" in out
    # A target that does not load: one line naming the entry, not posref's traceback.
    assert "posref.toml: adapters[3] (missing): cannot import" in out
    assert "loader.py" not in out
    assert "position-offset" in (folder / "reports/shifted.xml").read_text()  # the table's report


def test_pytest_without_a_table_says_so(tmp_path):
    code, out = _pytest(tmp_path)
    assert code != 0 and "posref_adapter: no posref.toml or pyproject.toml with a [tool.posref] table" in out


def test_load_errors_name_the_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert project.find(tmp_path) is None
    with pytest.raises(UsageError, match="no \\[tool.posref\\] table"):
        project.load(tmp_path / "pyproject.toml")


@pytest.mark.slow  # several posref runs; the slow selection (-m slow) runs it
def test_an_adapter_that_floods_the_output_leaves_the_report_readable(tmp_path):
    """An in-process adapter's prints reach the run's output; only its last MiB is kept, and the
    report at its end with it."""
    (tmp_path / "loud.py").write_text(GOOD.read_text() + "\n_apply = apply\n"
                                      "def apply(*a, **k):\n    print('x' * 200_000)\n    return _apply(*a, **k)\n")
    (tmp_path / "posref.toml").write_text(FAST + '[[adapters]]\ntarget = "loud.py:apply"\nprotocol = "rope.apply"\n')
    code, out, _ = _posref(tmp_path, "-v")
    assert code == 0, out[-2000:]
    assert "bytes of the run's output left out here]" in out
    assert out.rstrip().endswith("posref: 1 adapter from posref.toml: 1 passed")
    assert len(out) < 1.2 * (1 << 20)


@pytest.mark.parametrize("doc", ["README.md", "docs/project.md"])
def test_the_documented_tables_are_valid(tmp_path, doc):
    import re

    blocks = re.findall(r"```toml\n(.*?)```", (ROOT / doc).read_text(encoding="utf-8"), re.S)
    assert blocks
    for i, block in enumerate(blocks):
        (tmp_path / f"{i}").mkdir()
        (tmp_path / f"{i}/pyproject.toml").write_text(block)
        table = project.load(start=tmp_path / f"{i}")
        assert table.adapters and all(a.args().protocol for a in table.adapters)


def test_the_example_project_lists_existing_adapters():
    table = project.load(ROOT / "examples/project/posref.toml")
    assert [a.name for a in table.adapters] == ["text-rope", "vision-rope", "alibi", "shifted-rope"]
    for adapter in table.adapters:
        assert (table.root / adapter.target.rpartition(":")[0]).is_file()


def test_an_adapter_that_ends_its_run_does_not_end_the_project(tmp_path):
    """Each adapter runs under a supervisor of its own: one that exits the process is its own
    verdict, and the next adapter is graded."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src/exits.py").write_text("import os\ndef apply(x, positions, spec):\n    os._exit(0)\n")
    (tmp_path / "src/good.py").write_text(GOOD.read_text())
    (tmp_path / "posref.toml").write_text(FAST + '[[adapters]]\ntarget = "src/exits.py:apply"\nprotocol = "rope.apply"\n'
                                          'name = "exits"\n[[adapters]]\ntarget = "src/good.py:apply"\n'
                                          'protocol = "rope.apply"\nname = "good"\n')
    code, out, _ = _posref(tmp_path, "-q")
    lines = out.splitlines()
    assert code == 1
    assert lines[0].startswith("FAIL    exits") and "ended before it finished" in lines[0]
    assert lines[1].startswith("ok      good")
