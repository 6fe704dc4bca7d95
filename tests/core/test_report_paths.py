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
