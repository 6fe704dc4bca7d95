"""vectors/ ships inside the wheel: build it, install it into a fresh virtual environment outside
the source tree, and run `posref vectors verify` there from an unrelated directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from reference.golden import store

REPO = Path(__file__).resolve().parents[2]


def _source_copy(dest: Path) -> Path:
    """Tracked and untracked-but-not-ignored files only, so build debris never enters the wheel."""
    try:
        listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                                capture_output=True, check=True).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):  # not a git checkout
        ignore = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".venv*")
        shutil.copytree(REPO, dest, ignore=ignore, symlinks=True)
        return dest
    for raw in filter(None, listed):
        rel = raw.decode()
        if not (REPO / rel).is_file():
            continue  # deleted in the working tree
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    return dest


def test_wheel_ships_the_vectors_and_verify_passes_when_installed(tmp_path):
    src = _source_copy(tmp_path / "src")
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(dist), str(src)], check=True, timeout=600)
    (wheel,) = dist.glob("posref-*.whl")
    manifest = store.load_manifest()
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    shipped = "reference/golden/vectors/"
    assert shipped + "MANIFEST.json" in names
    assert {shipped + rel for rel in manifest["files"]} <= names
    assert not any(n.startswith("vectors/") for n in names)  # no generic top-level name
    assert "reference/golden/schemas/vectors.schema.json" in names
    from reference import zoo

    assert {"reference/zoo/schema.json", *(f"reference/zoo/models/{n}.json" for n in zoo.names())} <= names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True,
                   timeout=300)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--no-deps", "-q", str(wheel)],
                   check=True, timeout=600)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", store.ENV_VAR)}
    proc = subprocess.run([str(bin_dir / "posref"), "vectors", "verify"], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert manifest["digest"] in proc.stdout
    where = subprocess.run(
        [str(bin_dir / "python"), "-c",
         "import json; from reference.golden import store; "
         "print(json.dumps([str(store.vectors_dir()), store.get_case("
         "'rope.apply/llama2-d128/decode-4095').params['head_dim']]))"],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300, check=True)
    installed_dir, head_dim = json.loads(where.stdout)
    assert Path(installed_dir).is_relative_to(venv), installed_dir  # not the source checkout
    assert head_dim == 128
