"""A project's adapters in one table: ``[tool.posref]`` in pyproject.toml, or a posref.toml.

``posref conform`` with no TARGET grades every adapter the table lists
(conformance.commands.project); the pytest plugin parametrizes its ``posref_adapter`` fixture
with the same list (conformance.pytest_plugin). A posref.toml::

    dtype = ["float32", "bfloat16"]         # defaults for every adapter
    isolate = true

    [[adapters]]
    name = "llama"                          # optional; default: the target's function name
    target = "src/model/rope.py:apply_rotary"
    protocol = "rope.apply"
    layout = "half"
    expected-failures = "posref/llama.baseline"
    junit = "reports/llama.xml"

In pyproject.toml the same keys sit under ``[tool.posref]`` and ``[[tool.posref.adapters]]``.
Every other key is a ``posref conform`` option without its dashes (``max-time``, ``no-fresh``,
``keep-going``; ``_`` for ``-`` works too, and so do the option's destinations ``dtypes`` and
``fresh = false``): a flag takes true or false, ``dtype`` a string or a list, the others one
value. Relative paths (a file TARGET, baselines, reports) are relative to the table's folder.
Options given on the command line override the table's for every adapter.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from conformance.errors import UsageError

CONFIG_NAMES = ("posref.toml", "pyproject.toml")
# Options that belong to one adapter: in a run over the whole table they come from the table only.
PER_ADAPTER = ("protocol", "layout", "json", "junit", "markdown", "plot", "write_expected_failures")
# Options that name a file or folder: relative to the table's folder there, to the current one on
# the command line.
PATHS = ("vectors_dir", "model_config", "expected_failures", "json", "junit", "markdown", "plot", "write_expected_failures")
# Not in a table: interactive, or about choosing the table.
NOT_IN_TABLE = ("debug", "config", "adapters", "help", "target")


@dataclass
class Adapter:
    """One entry of the table: its name, TARGET, protocol and option values (by destination)."""

    name: str
    target: str
    values: dict  # argparse destination -> value, the table's defaults merged in
    where: str  # "posref.toml: adapters[2] (llama)", for messages

    @property
    def protocol(self) -> str:
        return self.values["protocol"]

    def argv(self, overrides: Optional[dict] = None) -> list:
        """``posref conform`` arguments for this adapter, the overrides (destination -> value)
        winning over the table."""
        values = dict(self.values, **(overrides or {}))
        return [self.target, *to_argv(conform_parser(), values)]

    def args(self, overrides: Optional[dict] = None) -> argparse.Namespace:
        """The parsed ``posref conform`` arguments; UsageError (one line, naming the entry) for a
        bad value."""
        try:
            return conform_parser().parse_args(self.argv(overrides))
        except UsageError as exc:
            raise UsageError(f"{self.where}: {exc}") from None


@dataclass
class Project:
    path: Path  # the file the table was read from
    root: Path  # its folder: relative paths and module targets start here
    adapters: list = field(default_factory=list)

    def select(self, names) -> list:
        """The adapters named (all when names is empty), in the table's order; UsageError for a
        name the table does not have."""
        if not names:
            return list(self.adapters)
        known = {a.name: a for a in self.adapters}
        for name in names:
            if name not in known:
                from conformance.errors import did_you_mean

                raise UsageError(f"--adapter: {self.path} has no adapter {name!r}{did_you_mean(name, list(known))} "
                                 f"(it has: {', '.join(known) or 'none'})")
        return [a for a in self.adapters if a.name in names]


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message):  # noqa: D401 - argparse API
        raise UsageError(message)


_PARSER: Optional[argparse.ArgumentParser] = None


def conform_parser() -> argparse.ArgumentParser:
    """The ``posref conform`` parser, raising UsageError instead of exiting."""
    global _PARSER
    if _PARSER is None:
        from conformance.commands import conform

        sub = _RaisingParser(prog="posref").add_subparsers(parser_class=_RaisingParser)
        conform.add_parser(sub)
        _PARSER = sub.choices["conform"]
    return _PARSER


def _options(parser):
    return [a for a in parser._actions if a.option_strings and a.dest != "help"]


def given_options(argv) -> dict:
    """Destination -> value of the options written in ``argv`` (a ``posref conform`` command
    line), leaving out those left at their defaults."""
    unset = object()
    parser = conform_parser()
    # append actions add to their default, so theirs stays (None: nothing written).
    saved = [(a, a.default) for a in _options(parser) if not isinstance(a, argparse._AppendAction)]
    try:
        for action, _ in saved:
            action.default = unset
        namespace = parser.parse_args(list(argv))
    finally:
        for action, default in saved:
            action.default = default
    dests = {a.dest for a in _options(parser)}
    return {k: v for k, v in vars(namespace).items() if v is not unset and v is not None and k in dests}


def to_argv(parser, values: dict) -> list:
    """Command-line arguments that set each destination to its value (None and defaults: none)."""
    argv = []
    for dest, value in values.items():
        actions = [a for a in _options(parser) if a.dest == dest]
        if not actions:
            raise UsageError(f"no option sets {dest!r}")
        first = actions[0]
        if value is None or (first.nargs != 0 and value == first.default):
            continue
        if first.nargs == 0:  # flags: the one whose constant is the value
            flag = next((a for a in actions if a.const == value), None)
            if flag is not None:
                argv.append(flag.option_strings[-1])
            elif value != first.default:
                raise UsageError(f"{first.option_strings[-1]}: cannot be set to {value!r}")
        elif isinstance(first, argparse._AppendAction):
            for item in value:
                argv += [first.option_strings[-1], str(item)]
        else:
            argv += [first.option_strings[-1], str(value)]
    return argv


def _table_values(parser, table: dict, where: str) -> dict:
    """Destination -> value for a table's option keys (name, target and adapters left out)."""
    by_option = {s[2:]: a for a in _options(parser) for s in a.option_strings if s.startswith("--")}
    by_dest = {}
    for a in _options(parser):
        by_dest.setdefault(a.dest, a)
    values = {}
    for key, value in table.items():
        if key in ("name", "target", "adapters"):
            continue
        norm = key.replace("_", "-")
        action = by_option.get(norm) or by_dest.get(key.replace("-", "_"))
        if action is None or action.dest in NOT_IN_TABLE:
            names = sorted(set(by_option) - {"pdb", "raise", "config", "adapter", "help"})
            from conformance.errors import did_you_mean

            raise UsageError(f"{where}: unknown key {key!r}{did_you_mean(norm, names)}")
        if isinstance(value, dict):
            raise UsageError(f"{where}: {key}: a value, not a table")
        if action.nargs == 0:
            if not isinstance(value, bool):
                raise UsageError(f"{where}: {key}: true or false, got {value!r}")
            if norm in by_option:  # `isolate = true`, `no-fresh = true`: the flag's constant; false: unset
                values[action.dest] = action.const if value else action.default
                continue
            values[action.dest] = value  # `fresh = false`: the destination's value
        elif isinstance(action, argparse._AppendAction):
            items = value if isinstance(value, list) else [value]
            if not items or not all(isinstance(v, str) for v in items):
                raise UsageError(f"{where}: {key}: a string or a list of strings, got {value!r}")
            values[action.dest] = items
        else:
            if isinstance(value, (list, bool)):
                raise UsageError(f"{where}: {key}: one value, got {value!r}")
            if action.dest == "json" and value == "-":
                raise UsageError(f"{where}: json: a file (stdout carries the project's summary)")
            values[action.dest] = value
    return values


def find(start) -> Optional[Path]:
    """The nearest posref.toml, or pyproject.toml with a [tool.posref] table, in ``start`` or a
    folder above it; None when there is none."""
    folder = Path(start).resolve()
    for place in (folder, *folder.parents):
        if (place / "posref.toml").is_file():
            return place / "posref.toml"
        pyproject = place / "pyproject.toml"
        if pyproject.is_file():
            try:
                if "posref" in _read(pyproject).get("tool", {}):
                    return pyproject
            except UsageError:
                continue
    return None


def _read(path: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None


def load(path=None, *, start=".") -> Project:
    """The project table of ``path`` (a posref.toml or a pyproject.toml with [tool.posref]), or
    of the nearest one found from ``start`` upward; UsageError (one line) when there is none or
    it is malformed."""
    if path is None:
        path = find(start)
        if path is None:
            raise UsageError(f"no posref.toml or pyproject.toml with a [tool.posref] table in {Path(start).resolve()} "
                             "or above it: list the project's adapters in one (docs/project.md)")
    path = Path(path).resolve()
    if not path.is_file():
        raise UsageError(f"--config: {path}: no such file")
    data = _read(path)
    if "posref" in data.get("tool", {}):
        table, prefix = data["tool"]["posref"], "tool.posref."
    elif path.name == "pyproject.toml":
        raise UsageError(f"{path}: no [tool.posref] table")
    else:
        table, prefix = data, ""
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [{prefix.rstrip('.') or 'posref'}] must be a table")
    entries = table.get("adapters")
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"{path}: list the adapters as [[{prefix}adapters]] tables, each with target and protocol")
    parser = conform_parser()
    defaults = _table_values(parser, table, f"{path.name}: [{prefix.rstrip('.') or 'top level'}]")
    project = Project(path=path, root=path.parent)
    seen = set()
    for i, entry in enumerate(entries, 1):
        label = f"{path.name}: {prefix}adapters[{i}]"
        target = entry.get("target")
        if not isinstance(target, str) or not target:
            raise UsageError(f"{label}: needs target = \"path/to/file.py:function\" (or \"package.module:function\")")
        name = entry.get("name", target.rpartition(":")[2])
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            raise UsageError(f"{label}: name must be a word, got {name!r}")
        if name in seen:
            raise UsageError(f"{label}: a second adapter named {name!r}: give each a distinct name")
        seen.add(name)
        where = f"{label} ({name})"
        values = dict(defaults, **_table_values(parser, entry, where))
        if "protocol" not in values:
            raise UsageError(f"{where}: needs protocol = \"NAME\" (posref conform --help lists them)")
        adapter = Adapter(name=name, target=target, values=values, where=where)
        adapter.args()  # every value checked before anything is graded
        project.adapters.append(adapter)
    return project


def absolute_paths(values: dict, base=None) -> dict:
    """The path-valued options made absolute against ``base`` (default: the current folder)."""
    base = Path(base or os.getcwd())
    return {k: (str(base / v) if k in PATHS and isinstance(v, str) and v != "-" else v) for k, v in values.items()}


def absolute_target(target: str, base) -> str:
    """A file TARGET made absolute against ``base``; for a module TARGET, ``base`` goes on
    sys.path (where the command line's run, started in ``base``, finds it)."""
    import sys

    from conformance.loader import is_path, split_target

    where, name = split_target(target)
    if is_path(where):
        return f"{Path(base) / where}:{name}"
    if str(base) not in sys.path:
        sys.path.insert(0, str(base))
    return target
