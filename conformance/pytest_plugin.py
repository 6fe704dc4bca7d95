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

The project's table (``[tool.posref]`` in pyproject.toml, or posref.toml; conformance.project),
the one ``posref conform`` with no TARGET grades, parametrizes the ``posref_adapter`` fixture: one
item per adapter, named after it::

    def test_positional_encodings(posref_adapter):
        posref_adapter.check()

``check()`` grades the adapter in this process with the table's options and writes the reports
the table names; it fails with the summary (cause first) as ``assert_conforms`` does. The table is
the nearest one from pytest's rootdir upward, or ``--posref-config FILE``.

``--posref-triton-interpret`` sets TRITON_INTERPRET=1 at configuration, before collection imports
the test modules (and the Triton kernels they import), and makes the fixture grade with
``triton_interpret=True`` (conformance.triton_interpret); ``posref_conform(fn, ...,
triton_interpret=True)`` and ``conformance.cases(..., triton_interpret=True)`` take the keyword as
any other run option.
"""

from __future__ import annotations

import pytest

OPTION = "--posref-expected-failures"
CONFIG_OPTION = "--posref-config"
TRITON_OPTION = "--posref-triton-interpret"


def pytest_addoption(parser):
    group = parser.getgroup("posref")
    group.addoption(
        OPTION, metavar="FILE", default=None,
        help="posref: a baseline of known failing cases ('<case id> [<dtype>]', a fresh kind or "
             "'identity:<protocol>/<id> [<dtype>]' per line); they are xfail")
    group.addoption(
        CONFIG_OPTION, metavar="FILE", default=None,
        help="posref: the posref.toml or pyproject.toml whose [tool.posref] adapters parametrize the "
             "posref_adapter fixture (default: the nearest one from the rootdir upward)")
    group.addoption(
        TRITON_OPTION, action="store_true", default=False,
        help="posref: set TRITON_INTERPRET=1 before the test modules are imported (Triton kernels then run in "
             "Triton's interpreter on CPU tensors) and grade with triton_interpret=True in posref_conform")


def pytest_configure(config):
    if config.getoption(TRITON_OPTION, default=False):
        from conformance.errors import UsageError
        from conformance import triton_interpret

        try:
            triton_interpret.require()  # before collection imports the test modules and their kernels
        except UsageError as exc:
            raise pytest.UsageError(f"{TRITON_OPTION}: {exc}") from None


class ProjectAdapter:
    """One adapter of the project's table, as the ``posref_adapter`` parameter."""

    def __init__(self, adapter, root, baseline=None):
        self.adapter, self.root, self.baseline = adapter, root, baseline

    def __repr__(self) -> str:
        return f"ProjectAdapter({self.adapter.name!r})"

    def check(self):
        """Grade the adapter as ``posref conform`` would with the table's options (in this
        process), write the reports the table names, and return the Report; AssertionError with
        the summary when a case or identity failed."""
        __tracebackhide__ = True
        from conformance import project
        from conformance.api import assert_report
        from conformance.commands.conform import check_report_paths, options_from_args, write_outputs
        from conformance.loader import load_target
        from conformance.runner import run

        from conformance.errors import UsageError

        try:
            args = self.adapter.args({"expected_failures": self.baseline} if self.baseline else None)
            for dest, value in project.absolute_paths(vars(args), self.root).items():
                setattr(args, dest, value)
            args.target = project.absolute_target(args.target, self.root)
            check_report_paths(args)
            opts = options_from_args(args)
            if opts.triton_interpret:
                from conformance import triton_interpret

                triton_interpret.require()  # before the adapter (and its kernels) is imported
            report = run(None if opts.isolate else load_target(args.target), opts, target=args.target)
            write_outputs(args, report)
        except UsageError as exc:  # the table's mistake or a target that does not load: one line
            pytest.fail(f"{self.adapter.where}: {exc}", pytrace=False)
        return assert_report(report)


def pytest_generate_tests(metafunc):
    if "posref_adapter" not in metafunc.fixturenames:
        return
    from conformance import project
    from conformance.errors import UsageError

    config = metafunc.config
    path = config.getoption(CONFIG_OPTION, default=None)
    baseline = config.getoption(OPTION, default=None)
    try:
        table = project.load(path, start=config.rootpath)
    except UsageError as exc:
        raise pytest.UsageError(f"posref_adapter: {exc}") from None
    metafunc.parametrize("posref_adapter",
                         [ProjectAdapter(a, table.root, baseline and str(config.invocation_params.dir / baseline))
                          for a in table.adapters],
                         ids=[a.name for a in table.adapters])


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
        if request.config.getoption(TRITON_OPTION, default=False):
            options.setdefault("triton_interpret", True)
        return assert_conforms(fn, protocol=protocol, **options)

    return _conform
