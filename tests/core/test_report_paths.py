"""Report paths (issue 9): a report replaces only a regular file or creates a new one, and an
adapter that changes the working directory cannot move it."""

from __future__ import annotations

import json
import os
import stat

import pytest

from conformance.cli import main
from conformance.reports._common import write_text_atomic

CASE = "rope.apply/llama2-d128/prefill-8"


def conform(target, *argv):
    return main(["conform", target, "--protocol", "rope.apply", "--cases", CASE, *argv])


@pytest.fixture
def adapter(tmp_path):
    path = tmp_path / "wanders.py"
    path.write_text(
        "import os\n"
        "from reference import rope\n"
        "import torch\n"
        "def apply(x, positions, spec):\n"
        "    os.chdir(os.environ['WANDER_TO'])\n"
        "    y = rope.apply(x.double().numpy(), positions.numpy(), rotary_dim=spec.rotary_dim,\n"
        "                   base=spec.base, layout=spec.layout)\n"
        "    return torch.from_numpy(y).to(x.dtype)\n"
    )
    return f"{path}:apply"


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_a_device_is_refused_before_grading_and_left_alone(adapter, capsys):
    assert conform(adapter, "--junit", "/dev/null") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--junit: /dev/null is a character device" in err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_symlink_and_a_fifo_are_refused(adapter, tmp_path, capsys):
    real = tmp_path / "real.json"
    real.write_text("keep me")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert conform(adapter, "--json", str(link)) == 2
    assert "is a symbolic link" in capsys.readouterr().err
    assert link.is_symlink() and real.read_text() == "keep me"
    fifo = tmp_path / "pipe.xml"
    os.mkfifo(fifo)
    assert conform(adapter, "--junit", str(fifo)) == 2
    assert "is a FIFO" in capsys.readouterr().err


def test_an_adapter_that_changes_directory_does_not_move_the_reports(adapter, tmp_path, monkeypatch):
    home, away = tmp_path / "home", tmp_path / "away"
    home.mkdir()
    away.mkdir()
    monkeypatch.chdir(home)
    monkeypatch.setenv("WANDER_TO", str(away))
    assert conform(adapter, "--dtype", "float64", "--json", "out.json", "--markdown", "out.md") == 0
    assert json.loads((home / "out.json").read_text())["summary"]["pass"] >= 1
    assert (home / "out.md").is_file()
    assert not (away / "out.json").exists() and not (away / "out.md").exists()


def test_a_symlink_planted_after_the_check_is_not_replaced(tmp_path):
    target = tmp_path / "victim"
    target.write_text("system file")
    planted = tmp_path / "report.json"
    planted.symlink_to(target)
    with pytest.raises(ValueError, match="symbolic link"):
        write_text_atomic(planted, "{}")
    assert planted.is_symlink() and target.read_text() == "system file"
    fresh = tmp_path / "new" / "report.json"
    write_text_atomic(fresh, "{}")  # a new path (and its folder) is fine
    assert fresh.read_text() == "{}"


# ---- issue 24: every command that writes a file uses the same checked writer ---------------------

import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _posref(*argv, timeout=120):
    """`posref ARGV` in a new process, bounded in time: a command that blocks on a FIFO fails
    the test instead of hanging it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run([sys.executable, "-m", "conformance.cli", *argv], capture_output=True,
                              text=True, timeout=timeout, cwd=REPO, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"posref {' '.join(argv)} did not end within {timeout} s")
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("command", [["identities", "--family", "nope"],
                                     ["bench", "--families", "only", "--repeat", "1", "--skip-slow"]])
@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_identities_and_bench_refuse_a_symlink_or_a_fifo_before_any_work(tmp_path, command, kind):
    """Issue 24: both wrote through a symlink and blocked forever on a FIFO."""
    real = tmp_path / "real.json"
    real.write_text("keep me")
    path = tmp_path / "report.json"
    if kind == "symlink":
        path.symlink_to(real)
    else:
        os.mkfifo(path)
    code, out, err = _posref(*command, "--json", str(path), timeout=60)
    assert code == 2 and err.count("\n") == 1, err
    assert ("is a symbolic link" if kind == "symlink" else "is a FIFO") in err and "Traceback" not in err
    assert real.read_text() == "keep me"
    assert path.is_symlink() if kind == "symlink" else stat.S_ISFIFO(os.lstat(path).st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", [["bench", "--families", "only", "--repeat", "1", "--skip-slow"],
                                     ["identities", "--family", "nope"]])
def test_a_full_device_as_report_path_is_one_line_exit_2(command, capsys):
    """Issue 24: `bench --json /dev/full` ended in a traceback (after the timings)."""
    assert main([*command, "--json", "/dev/full"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--json: /dev/full is a character device" in err


@pytest.mark.parametrize("command", [["bench", "--families", "only", "--repeat", "1", "--skip-slow"],
                                     ["identities", "--family", "nope"]])
def test_an_empty_report_path_is_one_line_exit_2(command, capsys):
    assert main([*command, "--json", ""]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--json: '' is not a file name" in err


def test_identities_json_is_written_whole_through_the_checked_writer(tmp_path, capsys):
    path = tmp_path / "ids.json"
    assert main(["identities", "--family", "nope", "--json", str(path)]) == 0
    assert all(item["family"] == "nope" for item in json.loads(path.read_text()))
    assert not list(path.parent.glob(".*.tmp"))


def test_empty_json_path_is_refused_before_grading(adapter, capsys, monkeypatch):
    """Issue 24: `--json ''` graded everything, then refused."""
    import conformance.runner as runner

    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("graded before refusing"))
    assert conform(adapter, "--json", "") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--json: '' is not a file name" in err


@pytest.fixture
def vectors_in_use(tmp_path, monkeypatch):
    """A copy of the shipped vectors that `posref conform` uses (POSREF_VECTORS_DIR)."""
    from reference.golden import store

    copy = tmp_path / "vectors"
    shutil.copytree(store.vectors_dir(), copy)
    monkeypatch.setenv(store.ENV_VAR, str(copy))
    return copy


@pytest.mark.parametrize("flag", ["--json", "--junit", "--markdown", "--write-expected-failures"])
def test_a_report_path_inside_the_vectors_in_use_is_refused_before_grading(adapter, vectors_in_use, flag,
                                                                          capsys, tmp_path):
    """Issue 24: `conform --json vectors/MANIFEST.json` overwrote the vectors (exit 0)."""
    manifest = vectors_in_use / "MANIFEST.json"
    before = manifest.read_bytes()
    assert conform(adapter, "--dtype", "float64", flag, str(manifest)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "inside the vectors directory" in err
    new_file = vectors_in_use / "rope.apply" / "report.out"
    assert conform(adapter, "--dtype", "float64", flag, str(new_file)) == 2
    assert "inside the vectors directory" in capsys.readouterr().err
    assert manifest.read_bytes() == before and not new_file.exists()
    other = tmp_path / "named"
    shutil.copytree(vectors_in_use, other)
    assert conform(adapter, "--dtype", "float64", "--vectors-dir", str(other), flag,
                   str(other / "MANIFEST.json")) == 2
    assert "inside the vectors directory" in capsys.readouterr().err
    assert (other / "MANIFEST.json").read_bytes() == before


def test_the_targets_own_source_is_refused_as_a_report_path(adapter, tmp_path, capsys, monkeypatch):
    """Issue 24: `conform adapter.py:fn --junit adapter.py` overwrote the adapter (exit 0)."""
    source = Path(adapter.rsplit(":", 1)[0])
    before = source.read_bytes()
    assert conform(adapter, "--junit", str(source)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the target's own source file" in err
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(source, pkg / "ad.py")
    monkeypatch.chdir(tmp_path)
    assert conform("mypkg.ad:apply", "--isolate", "--markdown", "mypkg/ad.py") == 2
    assert "the target's own source file" in capsys.readouterr().err
    assert source.read_bytes() == before == (pkg / "ad.py").read_bytes()


def test_a_missing_vectors_dir_is_a_usage_error_before_grading(adapter, tmp_path, capsys):
    """Issue 24: `--vectors-dir /nonexistent` exited 3 (an integrity failure of nothing)."""
    assert conform(adapter, "--vectors-dir", str(tmp_path / "nonexistent")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--vectors-dir" in err and "is not a directory" in err


@pytest.mark.parametrize("device", ["cpu:99999999999999999999999", "cpu:1", "cpu:", "cuda:99999999999"])
def test_a_device_index_torch_cannot_use_is_one_line_exit_2(adapter, device, capsys):
    """Issue 24: `--device cpu:99999999999999999999999` ended in a torch traceback."""
    assert conform(adapter, "--device", device) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "device" in err


WRITING_CODE = ["conformance/commands", "conformance/reports", "conformance/cli.py",
                "reference/golden/generate.py", "reference/golden/manifest.py", "reference/golden/npzio.py"]


def test_every_command_writes_through_the_one_checked_writer():
    """No module of the commands, the reports or the vectors writer opens a file for writing or
    writes one itself: each goes through reference.safe_files.write_atomic (issue 24: identities
    and bench had their own open(path, "w"), regenerate its own write_text)."""
    import re

    pattern = re.compile(r"""\.write_(text|bytes)\(|open\([^)]*["'][wax]b?["']|\.savefig\((?!buf)""")
    offenders = []
    for entry in WRITING_CODE:
        base = REPO / entry
        for source in ([base] if base.is_file() else sorted(base.glob("*.py"))):
            for number, line in enumerate(source.read_text().splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{source.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []


def test_a_usage_error_quoting_control_characters_is_one_printable_line(adapter, capsys):
    assert conform(adapter, "--vectors-dir", "gone\x1b[2J\nsecond line") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "--vectors-dir" in err


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    """A full disk (ENOSPC) halfway: the old report stays whole, no temporary file is left."""
    import errno

    from reference.safe_files import write_atomic

    path = tmp_path / "report.json"
    path.write_text("old")

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError, match="No space"):
        write_atomic(path, "new" * 1000)
    monkeypatch.undo()
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
