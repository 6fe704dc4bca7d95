"""Family discovery: every subpackage of ``reference`` except the shared ones is a family.

A family lives in one folder, ``reference/<family>/`` (docs/design.md, "One family, one
place"). The shared machinery finds what it needs there by convention, so adding a family edits
no shared module:

- ``reference/<family>/vectors.py``     its golden-vector catalog and protocols (reference.golden);
- ``reference/<family>/identities.py``  its identities, registered at import (reference.identities).

Nothing here imports a family until asked: ``names()`` only lists folders.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from types import ModuleType
from typing import Optional

import reference

# Subpackages of reference/ that serve every family and are not families themselves.
SHARED = ("golden", "identities", "numerics", "zoo")


def names() -> list[str]:
    """The family names, sorted (one per subpackage of reference/ that is not SHARED)."""
    return sorted(
        info.name
        for info in pkgutil.iter_modules(reference.__path__)
        if info.ispkg and info.name not in SHARED and not info.name.startswith("_")
    )


def part(family: str, module: str) -> Optional[ModuleType]:
    """``reference.<family>.<module>`` imported, or None when the family has no such module."""
    name = f"reference.{family}.{module}"
    if importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)
