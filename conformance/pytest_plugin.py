"""pytest plugin: the ``posref_conform`` fixture, per-case items and an expected-failures baseline.

Registered as the ``pytest11`` entry point of the posref distribution, so it loads in every
pytest session of an environment where posref is installed: it imports nothing heavy at load
(no torch, no numba, no numpy); the runner is imported only when a test grades something.

Usage::

    def test_my_rope(posref_conform):
        posref_conform(my_adapter, protocol="rope.apply", dtypes=("float32", "bfloat16"))

The fixture is ``conformance.assert_conforms`` (fresh cases and black-box identities included): it
raises AssertionError whose first line is the cause, and returns the Report when everything passed.
For one pytest item per case, parametrize with ``conformance.cases()`` (conformance.pytest_cases).

``--posref-expected-failures FILE`` (the format of ``posref conform --expected-failures``, see
conformance.baseline): items of the cases it lists are marked xfail (a listed case that passes
shows as XPASS), and the fixture applies the file to its whole run: listed cases, fresh-case kinds
and ``identity:`` entries count as expected failures there, so a file that ``posref conform
--write-expected-failures`` wrote keeps the fixture green from one seed to the next.
"""

from __future__ import annotations

import pytest

OPTION = "--posref-expected-failures"


def pytest_addoption(parser):
    parser.getgroup("posref").addoption(
        OPTION, metavar="FILE", default=None,
        help="posref: a baseline of known failing cases ('<case id> [<dtype>]', a fresh kind or "
             "'identity:<protocol>/<id> [<dtype>]' per line); they are xfail")


def _baseline(config):
    path = config.getoption(OPTION, default=None)
    if not path:
        return None
    from conformance import baseline
    from conformance.errors import UsageError

    try:
        return baseline.load(path)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_collection_modifyitems(config, items):
    known = _baseline(config)
    if known is None:
        return
    from conformance.pytest_cases import Case

    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        for value in params.values():
            if isinstance(value, Case):
                entry = known.match(value)
                if entry is not None:
                    item.add_marker(pytest.mark.xfail(
                        reason=f"listed in {known.path}:{entry.line} ({entry})", strict=False))


@pytest.fixture
def posref_conform(request):
    """Return ``assert_conforms(fn, protocol=..., layout=..., dtypes=..., **options)``."""

    def _conform(fn, protocol="rope.apply", **options):
        __tracebackhide__ = True
        from conformance.api import assert_conforms

        path = request.config.getoption(OPTION, default=None)
        if path and "expected_failures" not in options:
            options["expected_failures"] = path
        return assert_conforms(fn, protocol=protocol, **options)

    return _conform
