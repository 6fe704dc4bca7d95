"""posref study (issue 10): error against position, the unusable criterion, the command."""

from __future__ import annotations

import json

import pytest

from conformance.cli import main
from conformance.isolation import make_invoker
from conformance.loader import load_target
from conformance.rope import study
from support import ROOT, style

HF = str(ROOT / "examples/rope/hf_rotate_half.py:apply")


def test_positions_cover_every_power_of_two_and_its_neighbours():
    pos = study.study_positions(2**12).tolist()
    assert pos[0] == 0 and pos[-1] == 2**12 and pos == sorted(set(pos))
    assert all(p in pos for k in range(1, 13) for p in (2**k - 1, 2**k, 2**k + 1) if p <= 2**12)


def _run(fn, **kw):
    invoker = make_invoker(fn, None, isolate=False, timeout=60)
    try:
        return study.run_study(invoker, **kw)
    finally:
        invoker.close()


def test_float32_angles_stay_usable_and_bfloat16_angles_do_not():
    good = _run(load_target(HF), dtypes=("float32",), configs=("default", "llama3.1"), max_position=2**14)
    assert all(s.first_unusable is None and s.error and not s.message for s in good)
    # float32 angle rounding: the error grows with the position
    s = good[0]
    assert s.error[s.positions.index(2**14)] > 100 * s.error[s.positions.index(1)]
    bad = _run(style("bf16_angles"), dtypes=("float32",), configs=("default",), max_position=2**14)
    assert bad[0].first_unusable is not None and 64 <= bad[0].first_unusable <= 1024
    m = bad[0].first_unusable
    i = bad[0].positions.index(m)
    assert bad[0].error[i] >= bad[0].step[i] / 2  # the criterion, at the reported position


def test_unsupported_configurations_say_why_and_get_no_curve():
    out = _run(style("bf16_angles"), dtypes=("float32",), configs=("llama3.1",), max_position=64)
    assert not out[0].error and "Unsupported" in out[0].message


def test_command_writes_plots_table_and_json(tmp_path, capsys):
    code = main(["study", HF, "--out", str(tmp_path), "--dtype", "float32", "--max-position", "4096"])
    assert code == 0
    assert (tmp_path / "default.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "llama3.1.png").is_file()
    doc = json.loads((tmp_path / "study.json").read_text())
    assert {(s["config"], s["dtype"]) for s in doc} == {("default", "float32"), ("llama3.1", "float32")}
    assert "| default | float32 | none up to 4096 |" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--max-position", "0"], "--max-position"),
    (["--timeout", "nan"], "timeout"),
])
def test_bad_options_are_exit_2(tmp_path, capsys, args, message):
    assert main(["study", HF, "--out", str(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err
