"""pytest plugin: the ``posref_conform`` fixture, so users put conformance checks in their tests.

Registered as the ``pytest11`` entry point of the posref distribution, so it loads in every
pytest session of an environment where posref is installed: it imports nothing heavy at load
(no torch, no numba, no numpy); the runner is imported only when a test calls the fixture.

Usage::

    def test_my_rope(posref_conform):
        posref_conform(my_adapter, protocol="rope.apply", dtypes=("float32", "bfloat16"))

The fixture is ``conformance.assert_conforms``: it raises AssertionError carrying the summary
table of failing cases, and returns the Report when everything passed.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def posref_conform():
    """Return ``assert_conforms(fn, protocol=..., layout=..., dtypes=..., **options)``."""

    def _conform(fn, protocol="rope.apply", **options):
        from conformance.api import assert_conforms

        return assert_conforms(fn, protocol=protocol, **options)

    return _conform
