"""The survey's rows: the declarations of the bundled adapter modules.

An adapter module is any ``<examples>/<family>/*.py`` (not under ``buggy/``) that declares, at
module level, as literals:

- ``LIBRARY = "transformers"``: the pip distribution it wraps (a tuple where it wraps several; the
  first is the one the matrix shows, all must be installed);
- ``SURVEY = [(protocol, function), (protocol, function, {option: value}), ...]``: the rows, the
  options being ``posref conform`` options as a project table writes them (``layout``,
  ``triton-interpret``), for a convention the library fixes;
- optionally ``SURVEY_NOTES = {key: sentence}``: why a row does not pass, keyed by the function's
  name, by the protocol, or by ``"function protocol"`` (the most specific key wins).

The declarations are read from the source (ast.literal_eval), not by importing the module: the
survey must list a module whose library is absent, and importing every library into the survey's
own process would cost what the graded runs pay anyway. Whether each distribution is installed,
and its version, comes from importlib.metadata.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from conformance.errors import UsageError

NAMES = ("LIBRARY", "SURVEY", "SURVEY_NOTES")


@dataclass
class Row:
    """One (module, function, protocol) to grade, or the reason it cannot be."""

    module: str  # the file, relative to the examples folder ("rope/lib_litgpt.py")
    path: Path
    library: str  # the distribution shown
    distributions: tuple
    function: str
    protocol: str
    options: dict = field(default_factory=dict)  # conform destination -> value (conformance.project)
    declared: dict = field(default_factory=dict)  # the options as the module wrote them
    note: Optional[str] = None  # the module's SURVEY_NOTES sentence for this row
    version: Optional[str] = None
    missing: Optional[str] = None  # "liger-kernel is not installed": not graded
    problem: Optional[str] = None  # a declaration posref cannot use: an error row, not graded

    @property
    def target(self) -> str:
        return f"{self.path}:{self.function}"

    @property
    def key(self) -> tuple:
        """What identifies the row from one survey to the next."""
        return (self.module, self.function, self.protocol)


def default_examples() -> Path:
    """The examples folder of the checkout this posref runs from."""
    return Path(__file__).resolve().parents[2] / "examples"


def discover(examples=None, families=None) -> list:
    """Every declared row under ``examples`` (default: the checkout's), sorted by library, protocol,
    module and function; only the given families when ``families`` is given. UsageError (one
    line) when the folder is missing or declares nothing."""
    folder = Path(examples).expanduser() if examples is not None else default_examples()
    if not folder.is_dir():
        hint = "give --examples DIR" if examples is not None else \
            "posref survey runs from a clone of posref (its examples folder), or give --examples DIR"
        raise UsageError(f"no examples folder at {folder}: {hint}")
    rows = []
    for path in sorted(folder.glob("*/*.py")):
        family = path.parent.name
        if families and family not in families:
            continue
        rows += module_rows(path, f"{family}/{path.name}")
    if not rows:
        which = f" of famil{'y' if len(families) == 1 else 'ies'} {', '.join(families)}" if families else ""
        raise UsageError(f"no adapter module{which} in {folder} declares LIBRARY and SURVEY (docs/compatibility.md)")
    return sorted(rows, key=lambda r: (r.library.lower(), r.protocol, r.module, r.function))


def declarations(path: Path) -> dict:
    """{name: value} of the module's LIBRARY, SURVEY and SURVEY_NOTES assignments; a value that is
    not a literal is the exception ValueError naming it."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return {}  # not readable as Python: not a declared adapter (posref conform reports it if asked)
    found = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
        for target in targets:
            if isinstance(target, ast.Name) and target.id in NAMES:
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    found[target.id] = ValueError(f"{target.id} is not a literal")
    return found


def module_rows(path: Path, module: str) -> list:
    """The rows one module declares ([] when it declares neither LIBRARY nor SURVEY)."""
    found = declarations(path)
    if "LIBRARY" not in found and "SURVEY" not in found:
        return []
    literal = next((v for v in found.values() if isinstance(v, ValueError)), None)
    library = found.get("LIBRARY")
    dists = (library,) if isinstance(library, str) else library
    bad = None
    if not isinstance(dists, tuple) or not dists or not all(isinstance(d, str) and d for d in dists):
        bad = "LIBRARY must be a distribution name or a tuple of them"
        dists = ("?",)
    if literal is not None:
        bad = f"{literal} (the survey reads the declarations without importing the module)"
    survey = found.get("SURVEY")
    entries = survey if isinstance(survey, list) else []
    if bad is None and (not isinstance(survey, list) or not survey):
        bad = "SURVEY must be a non-empty list of (protocol, function[, options])"
    notes = found.get("SURVEY_NOTES", {})
    if bad is None and not (isinstance(notes, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                             for k, v in notes.items())):
        bad = "SURVEY_NOTES must be a dict of sentences"
    base = dict(module=module, path=path.resolve(), library=dists[0], distributions=tuple(dists))
    if bad is not None:
        return [Row(**base, function="?", protocol="?", problem=bad)]
    installed = _installed(dists)
    rows = []
    for entry in entries:
        row = _row(entry, base, path)
        if row.problem is None:
            row.note = note_for(notes, row.function, row.protocol)
        row.version, row.missing = installed
        rows.append(row)
    return rows


def _row(entry, base: dict, path: Path) -> Row:
    shape_ok = isinstance(entry, tuple) and len(entry) in (2, 3) and all(isinstance(e, str) for e in entry[:2]) \
        and (len(entry) == 2 or isinstance(entry[2], dict))
    if not shape_ok:
        return Row(**base, function="?", protocol="?", problem=f"SURVEY entry {entry!r} is not (protocol, function[, options])")
    protocol, function = entry[:2]
    declared = dict(entry[2]) if len(entry) == 3 else {}
    row = Row(**base, function=function, protocol=protocol, declared=declared)
    from conformance.core import registry

    try:
        registry.get(protocol)
        row.options = conform_values(declared, f"{base['module']}: SURVEY ({protocol}, {function})")
    except UsageError as exc:
        row.problem = str(exc)
        return row
    if function not in _top_level_names(path):
        row.problem = f"{base['module']} defines no {function!r}"
    return row


def conform_values(options: dict, where: str) -> dict:
    """``posref conform`` destination -> value for options written as a project table writes them;
    UsageError for an option conform has not, or one that picks the row (protocol, json...)."""
    from conformance import project

    for key in options:
        if key.replace("-", "_") in project.PER_ADAPTER + project.NOT_IN_TABLE + ("seed", "max_time"):
            raise UsageError(f"{where}: {key!r} is set by the survey, not by a row")
    return project._table_values(project.conform_parser(), options, where)


def note_for(notes: dict, function: str, protocol: str) -> Optional[str]:
    """The most specific note: "function protocol", then the function, then the protocol."""
    for key in (f"{function} {protocol}", function, protocol):
        if key in notes:
            return notes[key]
    return None


def _top_level_names(path: Path) -> set:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _installed(dists: tuple) -> tuple:
    """(the first distribution's version, None), or (None, "X is not installed")."""
    from importlib import metadata

    versions = []
    for dist in dists:
        try:
            versions.append(metadata.version(dist))
        except metadata.PackageNotFoundError:
            return None, f"{dist} is not installed"
    return versions[0], None
