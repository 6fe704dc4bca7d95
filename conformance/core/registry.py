"""Family discovery on the conformance side: protocols and diagnosis codes by name.

Every subpackage of ``conformance`` whose ``__init__`` defines ``FAMILY``
(conformance.core.family.Family) is a family. Nothing is registered by hand, so adding a family
edits no shared module. Protocol modules are imported on first use (they import numpy and the
reference; torch only inside functions).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from conformance.core.codes import CORE_CODES
from conformance.errors import UsageError, did_you_mean


@lru_cache(maxsize=None)
def families() -> dict:
    """{name: Family} of every discovered family."""
    import conformance

    found = {}
    for info in sorted(pkgutil.iter_modules(conformance.__path__), key=lambda i: i.name):
        if not info.ispkg or info.name in ("core", "commands", "reports"):
            continue
        module = importlib.import_module(f"conformance.{info.name}")
        family = getattr(module, "FAMILY", None)
        if family is not None:
            found[family.name] = family
    return found


def _modules() -> dict:
    """{protocol name: module path}: protocol "<family>.<p>" lives in conformance/<family>/<p>.py."""
    return {f"{family.name}.{p}": f"conformance.{family.name}.{p}"
            for family in families().values() for p in family.protocols}


def protocol_names() -> list[str]:
    return sorted(_modules())


def get(name: str):
    """The protocol object for ``name``; UsageError (one line) for an unknown name."""
    modules = _modules()
    if not isinstance(name, str) or name not in modules:
        raise UsageError(f"unknown protocol {name!r}{did_you_mean(name, modules)}; known protocols: "
                         f"{', '.join(sorted(modules))}")
    return importlib.import_module(modules[name]).PROTOCOL


def codes() -> dict:
    """{code: meaning} of every diagnosis code: the core ones, then each family's."""
    out = dict(CORE_CODES)
    for family in families().values():
        for code, meaning in family.codes.items():
            out.setdefault(code, meaning)
    return out


def export(name: str):
    """The object a family re-exports as ``conformance.<name>``; AttributeError when none does."""
    for family in families().values():
        where = family.exports.get(name)
        if where is not None:
            module, _, attr = where.partition(":")
            return getattr(importlib.import_module(module), attr)
    raise AttributeError(name)
