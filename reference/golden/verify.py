"""Integrity checks of a vectors directory, and re-derivation of every case.

``check(directory)`` returns one ``Problem`` (file name + one-line message) per finding:

- MANIFEST.json missing, not JSON, or not valid against schemas/manifest.schema.json;
- a manifest path that is absolute, contains ``..`` or a backslash, or resolves (through
  symlinks) outside the vectors directory;
- a listed file that is missing, truncated (shorter than listed), or changed (other sha256);
- the set digest not matching the listed hashes;
- a file present in the directory that the manifest does not list;
- a metadata file that breaks schemas/vectors.schema.json or the rules the schema cannot say
  (ids, tcIds, numberOfTests, flags with notes, array names, dtypes and shapes);
- an npz with an object array, a pickle or a non-.npy member (loaded with allow_pickle=False).

``rederive(directory, backend)`` recomputes every case's expected arrays with the reference and
compares them within the rederive bound; inputs of catalog cases are also re-seeded and must
match bit for bit.

``certify(directory)`` recomputes every expected value with the family's mpmath computation
(reference.golden.certify) and reports each one that is not rounded as its protocol promises,
and each group whose manifest record (count, maximum ulps) disagrees.

The rederive bound (REDERIVE_ULPS = 4): |recomputed - stored| <= 4 * 2^-52 * S per element, where
S is the largest |value| of the stored array (apply outputs, cos, sin: their error is relative to
the pair's magnitude, not to each element) and S is the element's own |value| for ``inv_freq``
(whose values span six decades). The reference's backends agree within about 1 ulp of cos/sin
(reference.rope), so 4 ulp leaves room for a different libm while catching any real change.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath, PureWindowsPath

import numpy as np

from reference.golden import catalog, store
from reference.golden import certify as certify_mod
from reference.golden import manifest as manifest_mod
from reference.golden.npzio import NpzError, read_npz

REDERIVE_ULPS = 4.0
EPS = 2.0**-52
ELEMENTWISE_SCALE = {"inv_freq", "attention_factor"}


@dataclass(frozen=True)
class Problem:
    path: str  # relative to the vectors directory
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


@lru_cache(maxsize=None)
def schema_validator(name: str):
    return _validator_for(json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8")))


def _validator_for(schema):
    import jsonschema

    return jsonschema.Draft202012Validator(schema)


def _errors(validator, document) -> list[str]:
    """One line per violation, as '<json path>: <message>'."""
    out = []
    for error in sorted(validator.iter_errors(document), key=lambda e: list(e.path)):
        where = "/".join(str(p) for p in error.absolute_path) or "(top)"
        out.append(f"{where}: {error.message}")
    return out


def schema_errors(document, name: str) -> list[str]:
    """One line per violation of schemas/<name>."""
    return _errors(schema_validator(name), document)


def unsafe_path_reason(rel: str, root: Path) -> str | None:
    """Why a manifest path may not be used, or None if it names a file inside root."""
    if not rel or "\\" in rel or "\x00" in rel:
        return "path escapes the vectors directory (empty, backslash or NUL)"
    if PurePosixPath(rel).is_absolute() or PureWindowsPath(rel).is_absolute() or PureWindowsPath(rel).drive:
        return "path escapes the vectors directory (absolute path)"
    parts = PurePosixPath(rel).parts
    if any(p in ("..", ".", "") for p in parts) or rel.endswith("/"):
        return "path escapes the vectors directory ('..' or '.' component)"
    if any((root / PurePosixPath(*parts[:k])).is_symlink() for k in range(1, len(parts) + 1)):
        return "a symbolic link: vectors files and folders must be regular ones"
    try:
        (root / rel).resolve().relative_to(root.resolve())
    except ValueError:
        return "path escapes the vectors directory (resolves outside it)"
    except (OSError, RuntimeError):  # a symlink loop above root, an unreadable folder
        return "path cannot be resolved"
    return None


MAX_JSON_BYTES = 16 * 2**20  # the largest metadata file posref writes is far below


def _load_json(path: Path):
    """(data, None), or (None, why it cannot be used): unreadable, too large, not JSON, nested
    too deeply for the parser (RecursionError), not UTF-8."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_JSON_BYTES + 1)
    except OSError as exc:
        return None, f"cannot read ({exc.strerror or exc})"
    if len(raw) > MAX_JSON_BYTES:
        return None, f"larger than {MAX_JSON_BYTES // 2**20} MiB"
    try:
        return json.loads(raw.decode("utf-8")), None
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"not valid JSON ({str(exc)[:200]})"
    except RecursionError:
        return None, "not valid JSON (nested too deeply)"


def _check_manifest(root: Path) -> tuple[dict | None, list[Problem]]:
    name = store.MANIFEST_NAME
    path = root / name
    if not path.is_file():
        return None, [Problem(name, "missing")]
    data, problem = _load_json(path)
    if problem:
        return None, [Problem(name, problem)]
    errors = schema_errors(data, manifest_mod.MANIFEST_SCHEMA)
    if errors:
        return None, [Problem(name, f"schema: {e}") for e in errors]
    problems = []
    groups = {rel[: -len(".json")] for rel in data["files"] if rel.endswith(".json")}
    for key in sorted(groups - set(data["certification"])):
        problems.append(Problem(name, f"no certification record for {key}"))
    for key in sorted(set(data["certification"]) - groups):
        problems.append(Problem(name, f"certification record for {key}, which has no metadata file"))
    if data["suite_version"] != store.SUITE_VERSION:
        problems.append(Problem(name, f"suite version {data['suite_version']} differs from this "
                                      f"posref's {store.SUITE_VERSION}"))
    return data, problems


MAX_FILE_BYTES = 256 * 2**20  # one listed file; posref's largest is about 1.2 MB
_CHUNK = 2**20


def _check_files(root: Path, files: dict) -> list[Problem]:
    """Size and hash of every listed file: the size (from the manifest and the file system) is
    checked before a byte is read, and the hash is computed in chunks, so a 4 GiB file (sparse,
    or listed as such by a re-hashed manifest) costs neither the memory nor the time to read it."""
    problems = []
    for rel, entry in files.items():
        reason = unsafe_path_reason(rel, root)
        if reason:
            problems.append(Problem(rel, reason))
            continue
        path = root / rel
        if not path.is_file():
            problems.append(Problem(rel, "missing (listed in MANIFEST.json)"))
            continue
        listed = entry["bytes"]
        if listed > MAX_FILE_BYTES:
            problems.append(Problem(rel, f"listed as {listed} bytes, over the {MAX_FILE_BYTES // 2**20} MiB "
                                         "a vectors file may have (not read)"))
            continue
        try:
            size = path.stat().st_size
        except OSError as exc:
            problems.append(Problem(rel, f"cannot read ({exc.strerror or exc})"))
            continue
        if size < listed:
            problems.append(Problem(rel, f"truncated: {size} of {listed} bytes"))
            continue
        if size > listed:
            problems.append(Problem(rel, f"changed: {size} bytes, listed {listed} (not read)"))
            continue
        try:
            digest, read = _sha256(path, listed)
        except OSError as exc:
            problems.append(Problem(rel, f"cannot read ({exc.strerror or exc})"))
            continue
        if read != listed:
            problems.append(Problem(rel, f"changed while read: {read} bytes, listed {listed}"))
        elif digest != entry["sha256"]:
            problems.append(Problem(rel, f"changed: sha256 differs from MANIFEST.json "
                                         f"({read} bytes, listed {listed})"))
    return problems


def _sha256(path: Path, limit: int) -> tuple[str, int]:
    """(hex sha256, bytes read) of at most limit + 1 bytes of path, read in 1 MiB chunks."""
    h = hashlib.sha256()
    read = 0
    with open(path, "rb") as f:
        while read <= limit:
            chunk = f.read(min(_CHUNK, limit + 1 - read))
            if not chunk:
                break
            h.update(chunk)
            read += len(chunk)
    return h.hexdigest(), read


def _unlisted(root: Path, files: dict) -> list[Problem]:
    """Files the manifest does not list, found by an iterative walk (a copy with 1,100 nested
    folders made rglob recurse past Python's limit). The layout is <protocol>/<file>: a folder
    inside a protocol folder is reported once and not entered."""
    out = []
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            rel = folder.relative_to(root).as_posix()
            out.append(Problem(rel or ".", f"cannot be listed ({exc.strerror or exc})"))
            continue
        for entry in entries:
            path = Path(entry.path)
            rel = path.relative_to(root).as_posix()
            if entry.is_dir(follow_symlinks=False):
                if depth >= 1:
                    out.append(Problem(rel, "a folder inside a protocol folder: the vectors layout has none"))
                else:
                    stack.append((path, depth + 1))
            elif rel != store.MANIFEST_NAME and rel not in files:
                out.append(Problem(rel, "not listed in MANIFEST.json"))
    return sorted(out, key=lambda p: p.path)


def _npz_members(root: Path, npz_rel: str, files: dict):
    """The member names the metadata file of ``npz_rel`` lists ("<test>.<role>.npy"), or None
    when that metadata is unreadable or malformed (its own problem is reported; the arrays are
    then not opened)."""
    json_rel = npz_rel[: -len(".npz")] + ".json"
    if json_rel not in files:
        return None
    meta, problem = _load_json(root / json_rel)
    if problem or schema_errors(meta, "vectors.schema.json"):
        return None
    return {f"{key}.npy" for tg in meta["testGroups"] for test in tg["tests"] for key in test["arrays"].values()}


def _check_group(root: Path, rel: str, npz_cache: dict) -> list[Problem]:
    """Schema and consistency of one metadata file and its arrays."""
    meta, problem = _load_json(root / rel)
    if problem:
        return [Problem(rel, problem)]
    errors = schema_errors(meta, "vectors.schema.json")
    if errors:
        return [Problem(rel, f"schema: {e}") for e in errors]
    problems = []
    say = lambda msg: problems.append(Problem(rel, msg))  # noqa: E731
    protocol, group = meta["protocol"], meta["group"]
    if rel != f"{protocol}/{group}.json":
        say(f"protocol/group {protocol}/{group} does not match the file's path")
    if meta["suiteVersion"] != store.SUITE_VERSION:
        say(f"suiteVersion {meta['suiteVersion']} differs from {store.SUITE_VERSION}")
    if meta["arraysFile"] != f"{group}.npz":
        say(f"arraysFile {meta['arraysFile']!r} should be {group}.npz")
    tests = [t for tg in meta["testGroups"] for t in tg["tests"]]
    if meta["numberOfTests"] != len(tests):
        say(f"numberOfTests is {meta['numberOfTests']} but {len(tests)} tests are listed")
    if [t["tcId"] for t in tests] != list(range(1, len(tests) + 1)):
        say("tcIds must run 1, 2, ... in order")
    ids = [t["id"] for t in tests]
    if len(set(ids)) != len(ids):
        say("duplicate test ids")
    for flag in sorted({f for t in tests for f in t["flags"]} - set(meta["notes"])):
        say(f"flag {flag} has no entry in notes")
    expected_roles = store.protocol_arrays(protocol)
    if expected_roles is None:
        say(f"unknown protocol {protocol!r}")
        return problems
    proto = catalog.protocol(protocol)
    params_validator = _validator_for(proto.params_schema)
    npz_rel = f"{protocol}/{meta['arraysFile']}"
    arrays = npz_cache.get(npz_rel)
    for tg in meta["testGroups"]:
        for test in tg["tests"]:
            if not test["id"].startswith(f"{protocol}/{group}/"):
                say(f"{test['id']}: id must start with {protocol}/{group}/")
            params = {**tg["params"], **test["params"]}
            bad_params = _errors(params_validator, params)
            for message in bad_params:
                say(f"{test['id']}: parameters: {message}")
            if set(test["arrays"]) != set(expected_roles):
                say(f"{test['id']}: arrays {sorted(test['arrays'])}, protocol needs "
                    f"{sorted(expected_roles)}")
                continue
            if arrays is None or bad_params:
                continue
            problems.extend(_check_case_arrays(npz_rel, test, params, arrays, proto))
    return problems


def _check_case_arrays(npz_rel, test, params, arrays, proto) -> list[Problem]:
    roles = proto.arrays
    out = []
    case = {}
    for role, key in test["arrays"].items():
        if key not in arrays:
            out.append(Problem(npz_rel, f"{test['id']}: array {key!r} is missing"))
            continue
        if arrays[key].dtype != np.dtype(roles[role]):
            out.append(Problem(npz_rel, f"{test['id']}: {key} has dtype {arrays[key].dtype}, "
                                        f"expected {roles[role]}"))
        case[role] = arrays[key]
    if out:
        return out
    for role, shape in proto.shapes(params, case).items():
        if case[role].shape != shape:
            out.append(Problem(npz_rel, f"{test['id']}: {role} has shape {case[role].shape}, "
                                        f"expected {shape}"))
    return out


def check(directory=None) -> list[Problem]:
    """Every integrity problem of a vectors directory (empty list: all good)."""
    root = Path(store.vectors_dir() if directory is None else directory)
    if not root.is_dir():
        return [Problem(str(root), "vectors directory missing")]
    data, problems = _check_manifest(root)
    if data is None:
        return problems  # without a manifest every file would be "unlisted": say it once
    files = data["files"]
    failed = _check_files(root, files)
    problems += failed
    broken = {p.path for p in failed}  # never opened further: hashes first, then contents
    digest = manifest_mod.set_digest({p: e["sha256"] for p, e in files.items()})
    if digest != data["digest"]:
        problems.append(Problem(store.MANIFEST_NAME, "digest does not match the listed hashes"))
    problems += _unlisted(root, files)
    npz_cache = {}
    readable = [p for p in files if p not in broken]
    for rel in sorted(p for p in readable if p.endswith(".npz")):
        members = _npz_members(root, rel, files)
        if members is None:
            continue
        try:
            # Unlisted members, and members claiming more bytes than the whole listed file,
            # are refused from the zip directory before anything is inflated.
            npz_cache[rel] = read_npz(root / rel, members=members, max_total=files[rel]["bytes"])
        except NpzError as exc:
            problems.append(Problem(rel, str(exc)))
    for rel in sorted(p for p in readable if p.endswith(".json")):
        problems += _check_group(root, rel, npz_cache)
        if rel[: -len(".json")] + ".npz" not in files:
            problems.append(Problem(rel, "its arrays file is not listed in MANIFEST.json"))
    counts: dict = {}
    for rel in sorted(p for p in readable if p.endswith(".json")):
        meta, _ = _load_json(root / rel)
        if isinstance(meta, dict) and isinstance(meta.get("numberOfTests"), int):
            protocol = rel.split("/", 1)[0]
            counts[protocol] = counts.get(protocol, 0) + meta["numberOfTests"]
    if not broken and counts != data["number_of_cases"]:
        problems.append(Problem(store.MANIFEST_NAME, f"number_of_cases {data['number_of_cases']} does not "
                                                     f"match the metadata files ({counts})"))
    referenced = {p[: -len(".json")] + ".npz" for p in files if p.endswith(".json")}
    for rel in sorted(p for p in files if p.endswith(".npz") and p not in referenced):
        problems.append(Problem(rel, "not referenced by a metadata file"))
    return problems


def compare(stored: np.ndarray, recomputed: np.ndarray, role: str) -> float:
    """Largest |difference| in units of 2^-52 * S (see the module docstring); pass when it is
    at most REDERIVE_ULPS."""
    stored = np.asarray(stored, dtype=np.float64)
    recomputed = np.asarray(recomputed, dtype=np.float64)
    if stored.shape != recomputed.shape:
        return float("inf")
    if stored.size == 0:
        return 0.0
    if role in ELEMENTWISE_SCALE:
        scale = np.abs(stored)
    else:
        scale = np.full(stored.shape, np.max(np.abs(stored)))
    scale = np.where(scale > 0, scale, np.finfo(np.float64).tiny)
    diff = np.abs(recomputed - stored)
    return float(np.max(diff / (scale * EPS)))


def rederive(directory=None, backend: str = "cpu", progress=None, protocols=None) -> list[Problem]:
    """Recompute every case (of ``protocols`` when given) and compare within REDERIVE_ULPS (run
    ``check`` first)."""
    catalog_tests = {}
    for group in catalog.all_groups():
        for tg in group.test_groups:
            for test in tg.tests:
                catalog_tests[f"{group.key}/{test.name}"] = (tg.params, test)
    problems = []
    for case in store.iter_cases(directory=directory):
        if protocols is not None and case.protocol not in protocols:
            continue
        npz_rel = f"{case.protocol}/{case.group}.npz"
        proto = catalog.protocol(case.protocol)
        inputs = {r: case.arrays[r] for r in proto.inputs}
        if case.id in catalog_tests:
            params, test = catalog_tests[case.id]
            _, fresh = proto.build(case.id, dict(params), test)
            for role, value in fresh.items():
                if not np.array_equal(value, inputs[role]):
                    problems.append(Problem(npz_rel, f"{case.id}: input {role} differs from the "
                                                     "catalog's seeded input"))
        outputs = proto.compute(case.params, inputs, backend)
        for role, value in outputs.items():
            ulps = compare(case.arrays[role], value, role)
            if not ulps <= REDERIVE_ULPS:
                problems.append(Problem(npz_rel, f"{case.id}: {role} differs from the reference "
                                                 f"by {ulps:.3g} ulp (bound {REDERIVE_ULPS:g})"))
        if progress:
            progress(case.id)
    return problems


def certify_group(directory, group_key: str):
    """The Certificate of one group as stored (reference.golden.certify)."""
    protocol, _, group = group_key.partition("/")
    proto = catalog.protocol(protocol)
    cert = certify_mod.Certificate(proto.rounding)
    path = Path(directory) / protocol / f"{group}.json"
    for case in store.load_group(path):
        inputs = {r: case.arrays[r] for r in proto.inputs}
        outputs = {r: case.arrays[r] for r in proto.outputs}
        cert.add(certify_mod.certify_case(proto, case.params, inputs, outputs, where=f"{case.id}: "))
    return cert


def certify(directory=None, progress=None, protocols=None) -> tuple[list[Problem], dict]:
    """(problems, {group key: Certificate}) for every group (of ``protocols`` when given; run
    ``check`` first)."""
    root = Path(store.vectors_dir() if directory is None else directory)
    recorded = store.load_manifest(root)["certification"]
    problems, certificates = [], {}
    for path in store.group_files(root):
        if protocols is not None and path.parent.name not in protocols:
            continue
        key = f"{path.parent.name}/{path.stem}"
        cert = certify_group(root, key)
        certificates[key] = cert
        for example in cert.examples:
            problems.append(Problem(f"{key}.npz", example))
        if cert.failures > len(cert.examples):
            problems.append(Problem(f"{key}.npz", f"... {cert.failures - len(cert.examples)} more values "
                                                  f"not {cert.rounding}ly rounded"))
        record = recorded.get(key)
        if record is not None and record != cert.record():
            problems.append(Problem(store.MANIFEST_NAME, f"{key}: certification record {record} differs from "
                                                         f"the recomputed {cert.record()}"))
        if progress:
            progress(key)
    return problems, certificates
