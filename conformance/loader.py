"""Load a TARGET: ``package.module:name`` or ``path/to/file.py:name`` -> the adapter callable.

``name`` may be dotted (``Class.method``, ``module_attr.fn``). Every failure is a UsageError
with one line (exit code 2 on the command line): malformed target, missing file, module that
cannot be imported (or raises while importing), missing attribute, object not callable.

Like ``python -m`` and most runners, the current directory is importable, and a file target's
own folder is put first on sys.path so that it can import its neighbours.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path

from conformance.errors import UsageError

FORM = "'package.module:name' or 'path/to/file.py:name'"
_FILE_MODULE_PREFIX = "posref_target_"  # sys.modules name of a file target


def split_target(target) -> tuple[str, str]:
    """("module or path", "attribute path"); UsageError when the form is wrong."""
    if not isinstance(target, str) or ":" not in target:
        raise UsageError(f"TARGET must be {FORM}, got {target!r}")
    where, _, name = target.rpartition(":")
    if not where or not name or not all(part.isidentifier() for part in name.split(".")):
        raise UsageError(f"TARGET must be {FORM}, got {target!r}")
    return where, name


def is_path(where: str) -> bool:
    """True when TARGET's part before the colon names a file, not a module."""
    return where.endswith(".py") or os.sep in where or "/" in where


def _one_line(exc: BaseException) -> str:
    from conformance.isolation import error_line

    return error_line(exc)


def _import_file(where: str):
    path = Path(where).expanduser()
    if not path.is_file():
        raise UsageError(f"cannot import {where}: no such file")
    path = path.resolve()
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    mod_name = f"{_FILE_MODULE_PREFIX}{path.stem}_{digest}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {where}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - user code: any failure is a target error
        sys.modules.pop(mod_name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise UsageError(f"cannot import {where}: {_one_line(exc)}") from None
    return module


def _import_module(where: str):
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(where)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - missing module, or user code raised while importing
        raise UsageError(f"cannot import module {where!r}: {_one_line(exc)}") from None


def load_target(target: str):
    """Import TARGET and return the named callable (UsageError with one line otherwise)."""
    where, name = split_target(target)
    module = _import_file(where) if is_path(where) else _import_module(where)
    obj = module
    for part in name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            from conformance.errors import did_you_mean

            names = [n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n, None))]
            raise UsageError(f"{where} has no attribute {name!r}{did_you_mean(part, names)}") from None
        except Exception as exc:  # noqa: BLE001 - a property raising
            raise UsageError(f"{where}: getting {name!r} raised {_one_line(exc)}") from None
    if not callable(obj):
        raise UsageError(f"{target} is a {type(obj).__name__}, not a callable adapter")
    return obj


def target_of(fn):
    """A TARGET string that loads ``fn`` again (for repro lines and --isolate), or None.

    Functions of an importable module give 'package.module:qualname'; of a file loaded by
    load_target, 'path/to/file.py:qualname'. Lambdas, closures, ``__main__`` and objects whose
    TARGET would not load the very same object give None.
    """
    module_name = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    module = sys.modules.get(module_name) if module_name else None
    if module is None or not qualname or "<" in qualname or module_name == "__main__":
        return None
    file = getattr(module, "__file__", None)
    if module_name.startswith(_FILE_MODULE_PREFIX):
        if not file:
            return None
        target = f"{file}:{qualname}"
    else:
        target = f"{module_name}:{qualname}"
    try:
        again = load_target(target)
    except UsageError:
        return None
    return target if again is fn else None


def describe(fn) -> str:
    """A TARGET-like string for a callable passed by the API ("module:qualname")."""
    module = getattr(fn, "__module__", None) or "?"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return f"{module}:{name}"


def target_files(target) -> list:
    """The files TARGET's code would be loaded from, found without importing anything (report
    paths must never replace them, issue 24): the file of a path target; for
    ``package.module:name``, each ``package/module.py`` or ``package/module/__init__.py`` found
    under the current directory or an entry of sys.path. [] for a malformed TARGET (the loader
    says why later)."""
    try:
        where, _ = split_target(target)
    except UsageError:
        return []
    if is_path(where):
        return [Path(where).expanduser()]
    parts = where.split(".")
    if not all(part.isidentifier() for part in parts):
        return []
    found = []
    for entry in dict.fromkeys([os.getcwd(), *(p for p in sys.path if isinstance(p, str))]):
        base = Path(entry or os.getcwd()).joinpath(*parts)
        for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
            try:
                if candidate.is_file():
                    found.append(candidate)
            except OSError:
                pass
    return found


def source_location(target, fn=None):
    """(file, line) where the adapter is defined, or None: for JUnit ``file``/``line``
    attributes, so that CI annotations point at the user's code.

    From the callable when there is one (inspect), else from TARGET without importing it (an
    isolated run): the file of a path target or of the module's spec, and the line of the
    top-level ``def``/``class`` of the first name part. The file is relative to the current
    directory when it lies inside it.
    """
    import ast
    import inspect

    path = line = None
    if fn is not None:
        try:
            obj = inspect.unwrap(fn)
            path = inspect.getsourcefile(obj)
            line = inspect.getsourcelines(obj)[1]
        except (TypeError, OSError):
            path = None
    if path is None and isinstance(target, str):
        try:
            where, name = split_target(target)
        except UsageError:
            return None
        if is_path(where):
            path = str(Path(where).expanduser())
        else:
            try:
                spec = importlib.util.find_spec(where)
            except (ImportError, ValueError):
                spec = None
            path = getattr(spec, "origin", None)
        if not path or not Path(path).is_file():
            return None
        try:
            tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
            tree = None
        first = name.split(".")[0]
        line = next((n.lineno for n in getattr(tree, "body", ())
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == first), 1)
    if path is None:
        return None
    resolved = Path(path).resolve()
    try:
        shown = str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        shown = str(resolved)
    return shown, int(line or 1)


def signature_problem(target, fn, nargs: int, signature: str):
    """Why the adapter cannot be called with ``nargs`` positional arguments, or None.

    From the callable's signature when there is one; for an isolated run (no callable in this
    process) from the ``def`` in its source, read without importing it. None when it cannot be
    told (builtins, decorated or dynamically made callables): grading then finds out.
    """
    import ast
    import inspect

    if fn is not None:
        try:
            inspect.signature(fn).bind(*range(nargs))
        except TypeError as exc:
            return f"{target or describe(fn)} cannot be called as {signature} ({exc})"
        except ValueError:
            return None
        return None
    where = source_location(target)
    if where is None:
        return None
    try:
        tree = ast.parse(Path(where[0]).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    node = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.lineno == where[1]), None)
    if node is None or node.decorator_list:
        return None
    a = node.args
    positional = len(a.posonlyargs) + len(a.args)
    required = positional - len(a.defaults)
    required += sum(1 for d in a.kw_defaults if d is None)  # keyword-only without default
    if required > nargs or (a.vararg is None and positional < nargs):
        return f"{target} defines {node.name}({ast.unparse(a)}), which cannot be called as {signature}"
    return None
