"""A conformance family's declaration: its protocols, its diagnosis codes and its public names.

Each ``conformance/<family>/__init__.py`` defines ``FAMILY = Family(...)``; the registry
(conformance.core.registry) discovers them, so adding a family edits no shared module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class Family:
    """name         the family ("rope"), also the first part of its protocol names
    protocols    the protocols' short names: protocol "<name>.<p>" is ``PROTOCOL`` in the module
                 conformance/<name>/<p>.py (conformance.core.protocol)
    codes        diagnosis code -> its meaning, for every code the family's diagnosis emits
                 (the report schema's code list is built from these and the core codes)
    exports      public names re-exported as ``conformance.<name>``: name -> "module:attribute"
    """

    name: str
    protocols: tuple[str, ...]
    codes: Mapping[str, str]
    exports: Mapping[str, str] = field(default_factory=dict)
