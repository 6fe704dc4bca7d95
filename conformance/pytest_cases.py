"""One pytest item per golden case and dtype: ``conformance.cases()``.

::

    import pytest
    import conformance
    from mymodel import apply_rope

    @pytest.mark.parametrize("case", conformance.cases("rope.apply", dtypes=("float32", "bfloat16")))
    def test_rope(case):
        case.check(apply_rope)

Each item is named ``<case id>:<dtype>`` (``rope.apply/llama2-d128/decode-4095:bfloat16``), so
``-k decode-4095``, ``--lf`` and xfail markers work per case. The first ``check`` of an adapter
grades every case of the protocol once (the probe needs them all) and later items read the result,
so a parametrized test costs one run. A failing item's message starts with the cause; then the
error / budget, the mismatch count, the worst element, the first failing position, the repro and
the suite version and vectors digest. A case the implementation does not support is skipped with
the reason. With ``--posref-expected-failures FILE`` (conformance.pytest_plugin), the cases the
baseline lists are marked xfail: a known failure is XFAIL, a listed case that passes is XPASS.

Fresh cases (drawn at run time) are not items: which of them a run draws changes with the seed,
and pytest collects items before any seed is drawn. Grade them, and the black-box identities,
with the ``posref_conform`` fixture or ``posref conform``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

_REPORTS: dict = {}  # (fn, protocol, options) -> Report, for the whole pytest session


@dataclass(frozen=True)
class Case:
    """One golden case in one dtype (dtype None for a dtype-free protocol), as a pytest parameter."""

    protocol: str
    id: str
    dtype: Optional[str]
    options: tuple = ()  # sorted (name, value) pairs passed to run_conformance
    compiled: bool = False  # the result under torch.compile (options has compile=True)

    def __str__(self) -> str:
        name = self.id if self.dtype is None else f"{self.id}:{self.dtype}"
        return name + (":compiled" if self.compiled else "")

    def __repr__(self) -> str:  # pytest prints it in every failing item's traceback
        return f"Case({str(self)!r})"

    def check(self, fn):
        """Grade ``fn`` on this case; AssertionError (cause first) when it fails, pytest.skip when
        the implementation does not support it. Returns the CaseResult."""
        __tracebackhide__ = True
        import pytest

        report = _report(fn, self.protocol, self.options)
        result = next((c for c in report.cases
                       if c.id == self.id and (self.dtype is None or c.dtype == self.dtype)
                       and bool(getattr(c, "compiled", False)) == self.compiled), None)
        unavailable = (report.compile or {}).get("reason")
        if result is None and self.compiled and unavailable:
            pytest.skip(f"{self}: the compiled half was not run: {unavailable}")
        if result is None:
            pytest.fail(f"{self}: not graded (is the case selected by the options?)", pytrace=False)
        if result.verdict == "skip":
            pytest.skip(f"{self}: {result.notes[0] if result.notes else 'skipped'}")
        if result.verdict in ("fail", "error"):
            raise AssertionError(failure_message(report, result))
        return result


def failure_message(report, result) -> str:
    """Cause first, then where it fails, the repro, and what it was graded against."""
    from conformance.reports._common import case_name, case_reason, failure_details, fmt_float

    lines = [f"{case_name(result)} {result.verdict}: {case_reason(result)}"]
    if result.budget_ratio is not None:
        lines.append(f"error/budget {fmt_float(result.budget_ratio)} (max |error| "
                     f"{fmt_float(result.max_abs_error)}, profile {report.profile})")
    lines += failure_details(result)
    lines += result.traceback_lines()  # where the adapter raised, in the user's code
    if result.repro:
        lines += ["repro:", result.repro]
    lines.append(f"posref {report.suite_version}, vectors {report.vectors_digest}")
    return "\n".join(lines)


def _report(fn, protocol: str, options: tuple):
    __tracebackhide__ = True
    key = (fn, protocol, options)
    if key not in _REPORTS:
        from conformance.api import run_conformance

        _REPORTS[key] = run_conformance(fn, protocol, fresh=False, identities=False, **dict(options))
    return _REPORTS[key]


def cases(protocol: str, *, dtypes=None, cases: Optional[str] = None, **options) -> list:
    """pytest parameters, one per golden case of ``protocol`` and dtype (one per case for a
    dtype-free protocol), each a :class:`Case` with id ``<case id>:<dtype>``.

    dtypes default to the runner's (float32, bfloat16); ``cases`` is a glob on case ids as in
    ``--cases``; other options (layout, profile, device, vectors_dir, timeout, isolate) are passed
    to run_conformance when the cases are graded. ``model="llama-3.1-8b"`` (or ``model_config=``
    a config.json path) gives the model's cases instead of the catalog's (conformance.model): its
    committed ones and those drawn from a new seed each session. ``compile=True`` (with
    ``compile_backend``) adds a second item per case and dtype, ``<case id>:<dtype>:compiled``,
    graded with the adapter under torch.compile; where torch.compile cannot run here, those items
    skip with the reason and the eager ones are graded as usual. ``triton_interpret=True`` grades
    Triton kernels through Triton's interpreter on CPU tensors (conformance.triton_interpret); the
    kernels must be imported after TRITON_INTERPRET=1 is set: run pytest with
    ``--posref-triton-interpret``, which sets it before collection.
    """
    import pytest

    from conformance.core import registry
    from conformance.runner import DEFAULT_DTYPES, select_cases

    proto = registry.get(protocol)
    chosen = tuple([dtypes] if isinstance(dtypes, str) else dtypes or DEFAULT_DTYPES)
    settings = tuple(sorted(dict(options, dtypes=chosen, cases=cases).items()))
    at_model = (None, ())  # (stored cases, None: the catalog's; drawn cases)
    if options.get("model") is not None or options.get("model_config") is not None:
        # A model's case ids do not depend on the seed (the values do): list them from any seed.
        from conformance import model as models

        model = models.resolve(options.get("model"), options.get("model_config"))
        at_model = models.model_cases(model, protocol, 0, options.get("vectors_dir"))
    halves = (False, True) if options.get("compile") else (False,)
    params = []
    for golden in select_cases(protocol, cases, options.get("vectors_dir"), *at_model):
        for dtype in (None,) if proto.dtype_free else chosen:
            for half in halves:
                case = Case(protocol, golden.id, dtype, settings, half)
                params.append(pytest.param(case, id=str(case)))
    return params


__all__ = ["Case", "cases", "failure_message"]
