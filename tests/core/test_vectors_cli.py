"""`posref vectors list` and `posref vectors show`, and the no-torch rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conformance.cli import main
from reference.golden import store

REPO = Path(__file__).resolve().parents[2]


def test_list_json_has_every_case_with_its_fields(capsys):
    assert main(["vectors", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == [c.id for c in store.iter_cases()]
    for row in rows:
        assert set(row) == {"id", "protocol", "comment", "flags"}
        assert row["id"].startswith(row["protocol"] + "/")
        assert row["comment"] and isinstance(row["flags"], list)


def test_list_filters_by_protocol(capsys):
    assert main(["vectors", "list", "--protocol", "rope.cache", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {r["protocol"] for r in rows} == {"rope.cache"}
    assert main(["vectors", "list", "--protocol", "rope.frequencies"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith("rope.frequencies/") for line in lines)
    assert any("rope.frequencies/worked-example/d512-thetas" in line for line in lines)


def test_list_unknown_protocol_is_a_usage_error(capsys):
    assert main(["vectors", "list", "--protocol", "nosuch.apply"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nosuch.apply" in err


def test_show_prints_params_comment_flags_and_arrays(capsys):
    assert main(["vectors", "show", "rope.apply/llama2-d128/decode-4095"]) == 0
    out = capsys.readouterr().out
    case = store.get_case("rope.apply/llama2-d128/decode-4095")
    assert "head_dim=128" in out and "base=10000.0" in out and "layout='half'" in out
    assert "seq_len=4096" in out
    assert case.comment.split()[0] in out
    assert ", ".join(case.flags) in out
    assert "x                float64 [1, 1, 4, 128]" in out
    assert "positions        int64 [1, 1]  [4095]" in out
    assert repr(float(case.arrays["expected"].reshape(-1)[0]))[:12] in out


def test_show_worked_example_preview_has_true_values(capsys):
    assert main(["vectors", "show", "rope.apply/worked-example/pair-2-3-m1"]) == 0
    out = capsys.readouterr().out
    assert "-1.44380834" in out and "3.30384888" in out


def test_show_unknown_case_is_one_line_exit_2(capsys):
    assert main(["vectors", "show", "rope.apply/llama2-d128/nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown case id" in err


def test_vectors_without_action_is_a_usage_error(capsys):
    assert main(["vectors"]) == 2
    capsys.readouterr()


def test_vectors_commands_never_import_torch():
    code = (
        "import sys\n"
        "from conformance.cli import main\n"
        "assert main(['vectors', 'list']) == 0\n"
        "assert main(['vectors', 'show', 'rope.apply/llama2-d128/decode-4095']) == 0\n"
        "assert main(['vectors', 'verify']) == 0\n"
        "import reference.golden.generate, reference.golden.verify\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


# ---- issue 24: case ids are names in the catalog, never paths --------------------------------------


def _vectors_in_use(tmp_path, monkeypatch):
    import shutil

    copy = tmp_path / "v" / "vectors"
    shutil.copytree(store.vectors_dir(), copy)
    monkeypatch.setenv(store.ENV_VAR, str(copy))
    return copy


def test_show_never_reads_a_file_outside_the_vectors_directory(tmp_path, monkeypatch, capsys):
    """`vectors show ../evil3/span` read <vectors>/../evil3.json (a malformed one: a
    JSONDecodeError traceback)."""
    copy = _vectors_in_use(tmp_path, monkeypatch)
    (copy.parent / "evil3.json").write_text("{ not json")
    read = []
    real = store.load_group
    monkeypatch.setattr(store, "load_group", lambda path: read.append(path) or real(path))
    for case_id in ("../evil3/span", "./evil3/span", "rope.apply/../x", "/etc/passwd"):
        assert main(["vectors", "show", case_id]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "unknown case id" in err
    assert read and not [p for p in read if not p.resolve().is_relative_to(copy.resolve())]


def test_show_of_a_listed_file_that_became_malformed_is_exit_3_one_line(tmp_path, monkeypatch, capsys):
    """The integrity check passed, then the file changed (a race): exit 3, one line."""
    from conformance.commands import vectors as command

    copy = _vectors_in_use(tmp_path, monkeypatch)
    monkeypatch.setattr(command, "_integrity_failure", lambda: None)
    (copy / "rope.cache" / "worked-example.json").write_text("{ not json")
    assert main(["vectors", "show", "rope.cache/worked-example/m1-d2"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "integrity" in err and "JSONDecodeError" in err
