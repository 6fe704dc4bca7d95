"""`posref vectors regenerate`: deterministic, reproduces the committed vectors (identical
metadata, arrays within the documented bound), and shows progress."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conformance.cli import main
from reference.golden import catalog, npzio, store, verify

COMMITTED = store.vectors_dir()
REPO = Path(__file__).resolve().parents[2]


def _compare_with_committed(out: Path, rels):
    """Metadata byte-identical; inputs bit-identical; outputs within verify.REDERIVE_ULPS."""
    for rel in rels:
        if rel.endswith(".json"):
            assert (out / rel).read_bytes() == (COMMITTED / rel).read_bytes(), rel
            continue
        fresh, old = npzio.read_npz(out / rel), npzio.read_npz(COMMITTED / rel)
        assert list(fresh) == list(old), rel
        for key in old:
            role = key.rsplit(".", 1)[1]
            if role in ("x", "positions"):
                assert np.array_equal(fresh[key], old[key]), key
            else:
                assert verify.compare(old[key], fresh[key], role) <= verify.REDERIVE_ULPS, key


def _rels(family):
    out = []
    for group in catalog.select(family):
        out.extend([f"{group.protocol}/{group.name}.json", f"{group.protocol}/{group.name}.npz"])
    return out


@pytest.mark.parametrize("family", ["rope.frequencies", "rope.apply/llama2-d128", "rope.cache"])
def test_regenerate_subset_reproduces_committed(tmp_path, capsys, family):
    backend = store.load_manifest()["generator"]["backend"]
    out = tmp_path / "v"
    assert main(["vectors", "regenerate", "--family", family, "--backend", backend, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "[1/" in err and "digest" in err  # progress on stderr
    _compare_with_committed(out, _rels(family))
    # the subset directory is itself a valid, verifiable vectors set
    assert verify.check(out) == []
    manifest = store.load_manifest(out)
    assert sorted(manifest["files"]) == sorted(_rels(family))


def test_regenerate_with_numpy_backend_agrees(tmp_path, capsys):
    out = tmp_path / "v"
    assert main(["vectors", "regenerate", "--family", "qwen2-d128", "--backend", "numpy",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    _compare_with_committed(out, _rels("qwen2-d128"))
    assert store.load_manifest(out)["generator"]["backend"] == "numpy"


def test_regenerate_twice_is_byte_identical(tmp_path, capsys):
    for name in ("a", "b"):
        assert main(["vectors", "regenerate", "--family", "gpt-j-6b", "--backend", "numpy",
                     "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert files_a == files_b
    for rel in files_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_regenerate_unknown_family_is_a_usage_error(tmp_path, capsys):
    assert main(["vectors", "regenerate", "--family", "nosuch", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nosuch" in err


def test_regenerate_into_an_unwritable_place_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "a-file" / "vectors"
    assert main(["vectors", "regenerate", "--family", "rope.cache/worked-example",
                 "--backend", "numpy", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("posref: error: --out: cannot write")


@pytest.mark.cudasim
def test_regenerate_with_cuda_backend_under_the_simulator(tmp_path):
    out = tmp_path / "v"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "vectors", "regenerate", "--family",
         "rope.cache/worked-example", "--backend", "cuda", "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    _compare_with_committed(out, _rels("rope.cache/worked-example"))
    assert store.load_manifest(out)["generator"]["backend"] == "cuda"


@pytest.mark.slow
def test_regenerate_everything_reproduces_and_is_fast(tmp_path):
    out = tmp_path / "v"
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "vectors", "regenerate", "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 60, elapsed
    committed = sorted(store.load_manifest()["files"])
    assert sorted(store.load_manifest(out)["files"]) == committed
    _compare_with_committed(out, committed)
    assert verify.check(out) == []
    assert verify.rederive(out, backend="numpy") == []


def test_full_regeneration_removes_only_listed_groups_the_catalog_dropped(tmp_path, monkeypatch, capsys):
    """A dropped group's files go, if the previous manifest listed them; nothing else is deleted
    (issue 9), and replacing a vectors directory other than the installed one needs --force."""
    out = tmp_path / "v"
    small = catalog.select("rope.cache/worked-example")
    monkeypatch.setattr(catalog, "all_groups", lambda: small)
    args = ["vectors", "regenerate", "--backend", "numpy", "--out", str(out)]
    assert main(args) == 0
    (out / "rope.cache" / "old-group.json").write_text("{}")
    (out / "rope.cache" / "notes.txt").write_text("kept: not a group file")
    (out / "rope.cache" / "mine.npz").write_bytes(b"kept: not listed by the manifest")
    manifest = json.loads((out / "MANIFEST.json").read_text())
    manifest["files"]["rope.cache/old-group.json"] = {"sha256": "0" * 64, "size": 2}
    (out / "MANIFEST.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(args) == 2
    assert "--force" in capsys.readouterr().err
    assert main(args + ["--force"]) == 0
    assert "removed rope.cache/old-group.json" in capsys.readouterr().err
    assert not (out / "rope.cache" / "old-group.json").exists()
    assert (out / "rope.cache" / "notes.txt").exists() and (out / "rope.cache" / "mine.npz").exists()


def test_regenerate_refuses_a_directory_that_is_not_posref_vectors(tmp_path, capsys):
    """Issue 9: --out on a user's folder used to delete files there (and --out / wrote into /)."""
    mine = tmp_path / "mine"
    (mine / "rope.cache").mkdir(parents=True)
    keep = mine / "rope.cache" / "notes.json"
    keep.write_text("{}")
    args = ["vectors", "regenerate", "--family", "rope.cache/worked-example", "--backend", "numpy"]
    assert main(args + ["--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a posref vectors directory" in err
    assert keep.read_text() == "{}" and sorted(p.name for p in mine.rglob("*")) == ["notes.json", "rope.cache"]


@pytest.mark.parametrize("argv", [["vectors", "list"], ["vectors", "show", "rope.cache/worked-example/m1-d2"]])
def test_list_and_show_check_integrity_first(tmp_path, monkeypatch, capsys, argv):
    """Issue 9: on a corrupted directory they printed a traceback (exit 1); now exit 3."""
    import shutil

    from reference.golden import store

    copy = tmp_path / "v"
    shutil.copytree(store.vectors_dir(), copy)
    npz = copy / "rope.cache" / "worked-example.npz"
    npz.write_bytes(npz.read_bytes()[:-40])  # truncated
    monkeypatch.setenv(store.ENV_VAR, str(copy))
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "integrity" in err and "worked-example" in err


# ---- issue 24: regenerate never writes through a link --------------------------------------------


@pytest.fixture
def small_out(tmp_path, monkeypatch):
    """A one-group vectors directory made by `posref vectors regenerate` (fast), with the
    catalog limited to that group, and the regenerate command line that replaces it."""
    small = catalog.select("rope.cache/worked-example")
    monkeypatch.setattr(catalog, "all_groups", lambda: small)
    out = tmp_path / "out"
    args = ["vectors", "regenerate", "--backend", "numpy", "--out", str(out)]
    assert main(args) == 0
    return out, args + ["--force"]


def test_regenerate_force_refuses_a_group_file_that_is_a_symlink(small_out, tmp_path, capsys):
    """Issue 24: a group file linked outside --out (worked-example.json -> ../../victim) was
    followed with --force and the file outside overwritten."""
    out, args = small_out
    victim = tmp_path / "victim"
    victim.write_text("a user's file")
    link = out / "rope.cache" / "worked-example.json"
    link.unlink()
    link.symlink_to(os.path.relpath(victim, link.parent))
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a symbolic link" in err and "worked-example.json" in err
    assert victim.read_text() == "a user's file" and link.is_symlink()


def test_regenerate_force_refuses_a_protocol_folder_that_is_a_symlink(small_out, tmp_path, capsys):
    out, args = small_out
    elsewhere = tmp_path / "elsewhere"
    (out / "rope.cache").rename(elsewhere)
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    (out / "rope.cache").symlink_to(elsewhere, target_is_directory=True)
    capsys.readouterr()
    assert main(args) == 2
    assert "not a real folder" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before


@pytest.mark.parametrize("kind", ["file", "folder", "manifest"])
def test_the_vectors_writer_never_follows_a_link_planted_after_the_check(tmp_path, kind):
    """The race the pre-flight check cannot close: the writer itself opens each folder below
    --out without following links and refuses a destination that is not a regular file."""
    from reference.golden import manifest
    from reference.safe_files import FileRefused

    out, victim = tmp_path / "out", tmp_path / "victim"
    (out / "rope.cache").mkdir(parents=True)
    victim.mkdir()
    (victim / "g.npz").write_bytes(b"keep")
    (victim / "MANIFEST.json").write_bytes(b"keep")
    if kind == "folder":
        (out / "rope.cache").rmdir()
        (out / "rope.cache").symlink_to(victim, target_is_directory=True)
        with pytest.raises(FileRefused, match="symbolic link"):
            npzio.write_npz(out / "rope.cache" / "g.npz", {"a": np.zeros(2)}, inside=out)
    elif kind == "file":
        (out / "rope.cache" / "g.npz").symlink_to(victim / "g.npz")
        with pytest.raises(FileRefused, match="symbolic link"):
            npzio.write_npz(out / "rope.cache" / "g.npz", {"a": np.zeros(2)}, inside=out)
    else:
        (out / "MANIFEST.json").symlink_to(victim / "MANIFEST.json")
        with pytest.raises(FileRefused, match="symbolic link"):
            manifest.write(out, {"files": {}})
    assert (victim / "g.npz").read_bytes() == b"keep" and (victim / "MANIFEST.json").read_bytes() == b"keep"
    assert not [p for p in out.rglob(".*.tmp")]  # no temporary file left behind


@pytest.mark.parametrize("argv", [["vectors", "regenerate", "--out", ""], ["vectors", "verify", "--dir", ""]])
def test_an_empty_folder_argument_is_one_line_exit_2(argv, tmp_path, monkeypatch, capsys):
    """Path('') is the current folder: `--out ''` in an empty folder wrote the vectors there."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv + ["--family", "rope.cache/worked-example"] if "regenerate" in argv else argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'' is not a path" in err
    assert list(tmp_path.iterdir()) == []
