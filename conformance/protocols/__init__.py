"""Protocol registry: one module per protocol, looked up by its name (DESIGN.md "Protocols").

A protocol module exposes ``PROTOCOL``, an object with the interface of
:class:`conformance.protocols.base.Protocol`: it knows the adapter's signature, builds the torch
arguments of a golden case for a dtype and device, validates what the adapter returned and turns
it into errors and budgets. The runner is generic over this interface, so a new family only adds
a module here and a line to ``REGISTRY``.

Modules are imported on first use (they import numpy and the reference; torch only inside
functions).
"""

from __future__ import annotations

import importlib

from conformance.errors import UsageError

REGISTRY = {
    "rope.apply": "conformance.protocols.rope_apply",
    "rope.cache": "conformance.protocols.rope_cache",
    "rope.frequencies": "conformance.protocols.rope_frequencies",
}


def names() -> list[str]:
    return sorted(REGISTRY)


def get(name: str):
    """The protocol object for ``name``; UsageError (one line) for an unknown name."""
    try:
        module = REGISTRY[name]
    except (KeyError, TypeError):
        raise UsageError(f"unknown protocol {name!r}; known protocols: {', '.join(names())}") from None
    return importlib.import_module(module).PROTOCOL
