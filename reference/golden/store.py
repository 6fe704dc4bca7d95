"""Read the golden vectors: where they are, the manifest, and one record per case.

Layout of a vectors directory (``vectors/`` at the top of the repository; a wheel ships the same
folder as ``reference/golden/vectors/``, see ``vectors_dir``)::

    MANIFEST.json                  suite version, generator versions, sha256 of every file, digest
    <protocol>/<group>.json        metadata of one case group (schema: schemas/vectors.schema.json)
    <protocol>/<group>.npz         its arrays, float64 (positions int64), loaded without pickle

A case id is ``<protocol>/<group>/<test>``, e.g. ``rope.apply/llama2-d128/decode-4095``. Each case's
parameters are its test group's ``params`` updated by the test's own ``params`` (``seq_len`` for
example). The arrays of each protocol, and its parameters, are declared by the family that owns
it (``reference/<family>/vectors.py``, see ``reference.golden.catalog``).

This module only reads; ``reference.golden.verify`` checks integrity (hashes, schema, pickles).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from reference.golden.npzio import read_npz

SUITE_VERSION = "0.5.0"
MANIFEST_NAME = "MANIFEST.json"
ENV_VAR = "POSREF_VECTORS_DIR"  # overrides where vectors_dir() looks



def protocol_arrays(protocol: str) -> dict[str, str] | None:
    """{role: dtype} of the arrays each case of ``protocol`` carries; None for an unknown one."""
    from reference.golden import catalog

    proto = catalog.protocols().get(protocol)
    return None if proto is None else dict(proto.arrays)


def protocol_names() -> list[str]:
    """Every protocol some family declares vectors for."""
    from reference.golden import catalog

    return sorted(catalog.protocols())


@dataclass(frozen=True)
class GoldenCase:
    """One golden case: parameters, why it exists, and its arrays (read-only numpy arrays)."""

    id: str
    protocol: str
    group: str
    params: dict
    comment: str
    flags: list[str]
    arrays: dict[str, np.ndarray] = field(repr=False)

    @property
    def test(self) -> str:
        """The last part of the id (``decode-4095`` in ``rope.apply/llama2-d128/decode-4095``)."""
        return self.id.rsplit("/", 1)[-1]


def vectors_dir() -> Path:
    """The directory holding MANIFEST.json.

    Order: the ``POSREF_VECTORS_DIR`` environment variable; then ``vectors/`` inside this
    package, where an installed wheel has it (setup.py copies it there); then the top-level
    ``vectors/`` of a source checkout or editable install, next to the ``reference`` package.
    """
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override)
    packaged = Path(__file__).resolve().parent / "vectors"
    if (packaged / MANIFEST_NAME).is_file():
        return packaged
    import reference

    return Path(reference.__file__).resolve().parent.parent / "vectors"


SHIPPED_DIGEST_FILE = Path(__file__).resolve().parent / "SHIPPED_DIGEST"


def shipped_digest() -> str:
    """The set digest of the vectors this posref ships (written by ``posref vectors regenerate``
    into the default directory): vectors with another digest are graded only when named
    explicitly (issue 9: an edited and consistently re-hashed directory must not pass silently)."""
    try:
        return SHIPPED_DIGEST_FILE.read_text(encoding="ascii").strip()
    except OSError:
        return ""


def _resolve(directory) -> Path:
    return vectors_dir() if directory is None else Path(directory)


def load_manifest(directory=None) -> dict:
    """Parse MANIFEST.json (keys include ``suite_version``, ``digest``, ``files``)."""
    path = _resolve(directory) / MANIFEST_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"no golden vectors manifest at {path}") from None
    return json.loads(text)


def group_files(directory=None, protocol: str | None = None) -> list[Path]:
    """Metadata files ``<protocol>/<group>.json`` in a stable order (protocol, then group)."""
    root = _resolve(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"no golden vectors directory at {root}")
    out = []
    for proto_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if protocol is not None and proto_dir.name != protocol:
            continue
        out.extend(sorted(proto_dir.glob("*.json")))
    return out


def load_metadata(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def cases_from_metadata(meta: dict, arrays: dict[str, np.ndarray]) -> Iterator[GoldenCase]:
    """Assemble the GoldenCase records of one group file from its metadata and npz arrays."""
    protocol = meta["protocol"]
    group = meta["group"]
    for test_group in meta["testGroups"]:
        for test in test_group["tests"]:
            params = dict(test_group["params"])
            params.update(test.get("params", {}))
            yield GoldenCase(
                id=test["id"],
                protocol=protocol,
                group=group,
                params=params,
                comment=test["comment"],
                flags=list(test["flags"]),
                arrays={role: arrays[key] for role, key in test["arrays"].items()},
            )


def load_group(path: Path) -> Iterator[GoldenCase]:
    meta = load_metadata(path)
    name = meta["arraysFile"]
    if Path(name).name != name or name in ("", ".", ".."):
        raise ValueError(f"{path.name}: arraysFile must be a file name in the same folder, got {name!r}")
    arrays = read_npz(path.parent / name)
    return cases_from_metadata(meta, arrays)


def iter_cases(protocol: str | None = None, directory=None) -> Iterator[GoldenCase]:
    """Every case (sorted by protocol and group, tests in file order), optionally of one protocol."""
    for path in group_files(directory, protocol):
        yield from load_group(path)


def get_case(case_id: str, directory=None) -> GoldenCase:
    """The case with this id; KeyError if there is none.

    A case id is three names of the catalog, ``<protocol>/<group>/<test>``, never a path: the
    group's metadata file must be one MANIFEST.json lists (``vectors show ../evil3/span`` read
    ``../evil3.json`` outside the vectors directory). ValueError (json.JSONDecodeError, NpzError)
    when a listed file cannot be read as vectors."""
    parts = case_id.split("/") if isinstance(case_id, str) else []
    if len(parts) != 3 or any(p in ("", ".", "..") or "\\" in p or "\x00" in p for p in parts):
        raise KeyError(case_id)
    rel = f"{parts[0]}/{parts[1]}.json"
    try:
        listed = load_manifest(directory).get("files", {})
    except (OSError, ValueError, AttributeError):
        listed = {}
    if not isinstance(listed, dict) or rel not in listed:
        raise KeyError(case_id)
    path = _resolve(directory) / rel
    if path.is_symlink() or not path.is_file():
        raise KeyError(case_id)
    for case in load_group(path):
        if case.id == case_id:
            return case
    raise KeyError(case_id)
