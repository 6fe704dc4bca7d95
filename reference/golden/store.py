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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

import reference
from reference.golden import catalog
from reference.golden.npzio import read_npz

SUITE_VERSION = "0.6.0"
MANIFEST_NAME = "MANIFEST.json"
ENV_VAR = "POSREF_VECTORS_DIR"  # overrides where vectors_dir() looks



def protocol_arrays(protocol: str) -> dict[str, str] | None:
    """{role: dtype} of the arrays each case of ``protocol`` carries; None for an unknown one."""
    proto = catalog.protocols().get(protocol)
    return None if proto is None else dict(proto.arrays)


def protocol_names() -> list[str]:
    """Every protocol some family declares vectors for."""
    return sorted(catalog.protocols())


class CaseArrays(Mapping):
    """A case's arrays by role: the inputs held in memory, the outputs (the expected values) read
    or computed on each access and never kept.

    Why: an adapter graded in-process shares the interpreter with the runner, and could find the
    expected values of the case it is computing in the runner's live frames (sys._current_frames()
    and what their locals refer to). The runner reads a case's outputs only after the call, when
    it grades; until then they are on disk (golden cases) or not computed yet (fresh cases). This
    hides nothing from code that imports posref on purpose (docs/robustness.md: use --isolate).

    ``held``: {role: array} of the inputs; ``outputs``: the output roles, in order after the inputs
    (or interleaved as ``order`` gives); ``load()``: {role: array} of the outputs, called on each
    access of an output role."""

    def __init__(self, held: dict, outputs, load: Callable[[], dict], order=None):
        self._held = dict(held)
        self._outputs = tuple(r for r in outputs if r not in self._held)
        self._load = load
        self._order = tuple(order) if order is not None else (*self._held, *self._outputs)

    def __getitem__(self, role):
        if role in self._held:
            return self._held[role]
        if role in self._outputs:
            return self._load()[role]
        raise KeyError(role)

    def __iter__(self):
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __repr__(self) -> str:
        return f"CaseArrays(held={sorted(self._held)}, read when asked={list(self._outputs)})"


def _output_roles(protocol: str) -> tuple:
    proto = catalog.protocols().get(protocol)
    return () if proto is None else tuple(proto.outputs)


class _GroupOutputs:
    """Reads the output arrays of one case (those members only) from its group's .npz again, on
    each call."""

    def __init__(self, path: Path, keys: dict):
        self.path, self.keys = Path(path), dict(keys)

    def __call__(self) -> dict:
        arrays = read_npz(self.path, only=set(self.keys.values()))
        return {role: arrays[key] for role, key in self.keys.items()}


@dataclass(frozen=True)
class GoldenCase:
    """One golden case: parameters, why it exists, and its arrays (read-only numpy arrays; a
    :class:`CaseArrays` when read from a vectors directory: the outputs read when asked)."""

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


def cases_from_metadata(meta: dict, arrays: dict[str, np.ndarray], npz_path=None) -> Iterator[GoldenCase]:
    """Assemble the GoldenCase records of one group file from its metadata and npz arrays. With
    ``npz_path`` (the file the arrays came from), each case keeps its inputs and reads its outputs
    from that file when asked (:class:`CaseArrays`)."""
    protocol = meta["protocol"]
    group = meta["group"]
    outputs = _output_roles(protocol) if npz_path is not None else ()
    for test_group in meta["testGroups"]:
        for test in test_group["tests"]:
            params = dict(test_group["params"])
            params.update(test.get("params", {}))
            keys = dict(test["arrays"].items())
            lazy = {role: key for role, key in keys.items() if role in outputs}
            if lazy:
                for key in lazy.values():
                    arrays[key]  # noqa: B018 - a missing member is a KeyError now, as before
                case_arrays = CaseArrays({role: arrays[key] for role, key in keys.items() if role not in lazy},
                                         tuple(lazy), _GroupOutputs(npz_path, lazy), order=tuple(keys))
            else:
                case_arrays = {role: arrays[key] for role, key in keys.items()}
            yield GoldenCase(
                id=test["id"],
                protocol=protocol,
                group=group,
                params=params,
                comment=test["comment"],
                flags=list(test["flags"]),
                arrays=case_arrays,
            )


def load_group(path: Path) -> Iterator[GoldenCase]:
    meta = load_metadata(path)
    name = meta["arraysFile"]
    if Path(name).name != name or name in ("", ".", ".."):
        raise ValueError(f"{path.name}: arraysFile must be a file name in the same folder, got {name!r}")
    arrays = read_npz(path.parent / name)
    # A list, not a generator holding every array of the group: only the inputs stay in memory.
    return iter(list(cases_from_metadata(meta, arrays, path.parent / name)))


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
