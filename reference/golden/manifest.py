"""MANIFEST.json: the sha256 of every vectors file and one digest of the whole set.

The digest is what a report or a review cites. It is the sha256 of the UTF-8 text made of one
line ``"<path> <sha256>\\n"`` per file, sorted by path (paths relative to the vectors directory,
with forward slashes; MANIFEST.json itself is not included). It depends on the file contents
only, not on timestamps, the machine or the order files were written in.
"""

from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path

import reference
from reference.golden import store
from reference.safe_files import write_atomic

MANIFEST_SCHEMA = "manifest.schema.json"
DIGEST_RULE = "sha256 of the sorted lines '<path> <sha256>\\n' over every listed file"


def set_digest(files: dict[str, str]) -> str:
    """Digest of a {path: sha256} mapping (see the module docstring)."""
    text = "".join(f"{path} {files[path]}\n" for path in sorted(files))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def generator_versions(backend: str) -> dict:
    import mpmath
    import numba
    import numpy


    return {
        "posref": reference.__version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "numba": numba.__version__,
        "mpmath": mpmath.__version__,
        "backend": backend,
    }


def build(directory: Path, paths: list[str], backend: str, case_counts: dict[str, int],
          certification: dict) -> dict:
    """Manifest for the files ``paths`` (relative, forward slashes) under ``directory``.

    certification: group key -> {"rounding", "certified" (number of values), "max_ulp"}
    (reference.golden.certify).
    """
    files = {}
    for rel in sorted(paths):
        data = (Path(directory) / rel).read_bytes()
        files[rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    return {
        "schema": MANIFEST_SCHEMA,
        "suite_version": store.SUITE_VERSION,
        "digest": set_digest({p: f["sha256"] for p, f in files.items()}),
        "digest_rule": DIGEST_RULE,
        "generator": generator_versions(backend),
        "number_of_cases": dict(sorted(case_counts.items())),
        "certification": dict(sorted(certification.items())),
        "files": files,
    }


def write(directory: Path, manifest: dict) -> Path:
    """Write MANIFEST.json into ``directory`` whole, never through a link (reference.safe_files)."""
    path = Path(directory) / store.MANIFEST_NAME
    write_atomic(path, json.dumps(manifest, indent=2) + "\n", inside=directory)
    return path
