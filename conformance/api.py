"""Library entry points: ``run_conformance`` (a Report) and ``assert_conforms`` (for test suites).

Both take either a callable adapter or a TARGET string ('package.module:name' or
'path/to/file.py:name'). Bad options raise ValueError naming the argument (OptionError is both a
ValueError and the CLI's UsageError); a target that cannot be loaded raises UsageError; golden
vectors that fail their integrity check raise IntegrityError.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Union

from conformance.guard import DEFAULT_MAX_TIME
from conformance.results import Report
from conformance.runner import DEFAULT_DTYPES, IntegrityError, OptionError, Options, run


def run_conformance(
    fn_or_target: Union[Callable, str],
    protocol: str,
    *,
    layout: str = "auto",
    dtypes: Sequence[str] = DEFAULT_DTYPES,
    device: str = "cpu",
    profile: str = "standard",
    cases: Optional[str] = None,
    isolate: bool = False,
    timeout: Optional[float] = None,
    progress=None,
    vectors_dir=None,
    identities: bool = True,
    golden_cases=None,
    fresh: bool = True,
    seed: Optional[int] = None,
    max_time: Optional[float] = DEFAULT_MAX_TIME,
    keep_going: bool = False,
    expected_failures=None,
    shapes: str = "sample",
    grad: bool = False,
    autocast: Optional[str] = None,
    debug: Optional[str] = None,
    model: Optional[str] = None,
    model_config=None,
    compile: bool = False,
    compile_backend: str = "inductor",
    triton_interpret: bool = False,
    framework: str = "torch",
) -> Report:
    """Grade an adapter on the golden vectors of ``protocol`` and return the Report.

    cases: a glob on case ids (several separated by commas), e.g. "rope.apply/llama2-d128/*".
    progress: an object with start(total), advance(case_result), finish(report) (the terminal
    reporter), or None. identities=False skips the black-box identity checks. golden_cases:
    grade these GoldenCase records instead of the committed vectors. fresh: also grade cases
    drawn at run time from ``seed`` (a new seed when None; Report.seed says which). max_time:
    the whole run's deadline in seconds; keep_going: call the adapter even after two timeouts in
    a row (conformance.guard). expected_failures: a baseline file of known failing cases
    (conformance.baseline): they count as xfail, not as failures. shapes: "full" grades the
    whole shape matrix of the fresh cases (rope.apply: batched decode, tile-boundary lengths,
    head counts, ...), "sample" (default) one case of each kind. grad: also grade the gradient of
    each differentiable input (torch.autograd.grad with a cotangent drawn from the case) against the
    float64 reference backward, and run torch.autograd.gradcheck in float64 (protocols with a
    backward: those whose ``differentiable`` is True; `posref conform --help` lists them). autocast: "bfloat16" or "float16": call the adapter inside
    torch.autocast(device, dtype); an output arriving in that dtype is graded with its budget.
    debug: "raise" re-raises the first exception the adapter raises while a case is graded (its
    traceback ends in the adapter's own frame); "pdb" opens pdb.post_mortem on it, once, and the run
    goes on. In-process only: with isolate=True it is an OptionError. model: a zoo model's name
    (`posref models`), or model_config: a Hugging Face config.json path: grade at that model's
    configuration, on cases drawn for it from ``seed`` instead of the committed vectors
    (conformance.model). compile: also grade every case with the adapter wrapped by
    torch.compile (backend ``compile_backend``, "inductor" by default; "aot_eager" or "eager" to
    debug), each as its own result (CaseResult.compiled); a case correct eagerly and wrong compiled
    is diagnosed compile-fault. Where torch.compile cannot run here, the eager half is graded and
    Report.compile says why (conformance.compiled). triton_interpret: run Triton kernels in Triton's
    interpreter on CPU tensors: TRITON_INTERPRET=1 is set before a TARGET string is loaded (a
    callable imported before that keeps compiled kernels; the report names them), and
    Report.triton_interpret names the kernels that ran (conformance.triton_interpret); OptionError
    where Triton is not installed. framework: the array library the adapter takes and returns
    ("torch", "numpy", "jax", "mlx", "cupy"; conformance.frameworks, docs/frameworks.md): its
    inputs arrive as that library's arrays and its outputs are converted back before grading.
    """
    from conformance.loader import load_target

    target = None
    fn = fn_or_target
    if triton_interpret is True:
        from conformance import triton_interpret as interpreter

        interpreter.require()  # before the target (and its kernels) is imported
    if isinstance(fn_or_target, str):
        target = fn_or_target
        fn = None if isolate else load_target(target)
    elif not callable(fn_or_target):
        raise OptionError(f"fn_or_target must be a callable or a TARGET string, got {type(fn_or_target).__name__}")
    opts = Options(
        protocol=protocol,
        layout=layout,
        dtypes=tuple([dtypes] if isinstance(dtypes, str) else dtypes),
        device=device,
        profile=profile,
        cases=cases,
        isolate=isolate,
        timeout=timeout,
        vectors_dir=vectors_dir,
        identities=identities,
        fresh=fresh,
        seed=seed,
        max_time=max_time,
        keep_going=keep_going,
        expected_failures=None if expected_failures is None else str(expected_failures),
        shapes=shapes,
        grad=grad,
        autocast=autocast,
        debug=debug,
        model=model,
        model_config=None if model_config is None else str(model_config),
        compile=compile,
        compile_backend=compile_backend,
        triton_interpret=triton_interpret,
        framework=framework,
    )
    return run(fn, opts, target=target, progress=progress, golden_cases=golden_cases)


def failure_summary(report: Report, limit: int = 20) -> str:
    """The cause first (the largest group of failures by diagnosis code, with its first message),
    then each failing case with where it fails, the failing identities, the summary line."""
    from conformance.core import registry
    from conformance.reports._common import case_name, failure_details, fmt_float, summary_line
    from conformance.reports.causes import failure_causes

    bad = [c for c in report.cases if c.verdict in ("fail", "error") and not c.expected_failure]
    ids = [i for i in report.identities if i.verdict in ("fail", "error")]
    causes = failure_causes(bad, registry.codes())
    if causes:
        top = causes[0]
        head = (f"{len(bad)} case(s) failed; {len(top.cases)} with {', '.join(top.codes)}: "
                f"{top.lines[0][0] if top.lines else top.meaning}")
    elif ids:
        head = f"black-box identity {ids[0].id} [{ids[0].dtype}] {ids[0].verdict}: {ids[0].message}"
    else:
        head = summary_line(report, digest_chars=None)
    lines = [head]
    for c in bad[:limit]:
        why = "; ".join(f"{d.code}: {d.message}" for d in c.diagnoses) or "over budget"
        ratio = "" if c.budget_ratio is None else f", error/budget {fmt_float(c.budget_ratio)}"
        lines.append(f"  {c.verdict} {case_name(c)}{ratio}: {why}")
        lines += [f"      {text}" for text in failure_details(c) + c.traceback_lines()]
    if len(bad) > limit:
        lines.append(f"  ... and {len(bad) - limit} more")
    lines += [f"  identity {i.id} [{i.dtype}] {i.verdict}: {i.message}" for i in ids]
    if bad and bad[0].repro:
        lines += ["repro of the first:", bad[0].repro]
    lines.append(summary_line(report, digest_chars=None))
    return "\n".join(lines)


def assert_conforms(
    fn: Union[Callable, str],
    protocol: str = "rope.apply",
    *,
    layout: str = "auto",
    dtypes: Sequence[str] = DEFAULT_DTYPES,
    **options,
) -> Report:
    """Grade fn and raise AssertionError carrying the summary when a case or identity fails.

    Extra keyword options are those of run_conformance (profile, cases, device, ...). Returns
    the Report when everything graded passed. A run that graded nothing (every case skipped)
    fails too: a check that checked nothing must not look like a pass.
    """
    __tracebackhide__ = True
    return assert_report(run_conformance(fn, protocol, layout=layout, dtypes=dtypes, **options))


def assert_report(report: Report) -> Report:
    """The report when everything graded passed; AssertionError carrying the summary when a case or
    identity failed, or when nothing was graded."""
    __tracebackhide__ = True
    overall = report.summary()["overall"]
    if overall == "fail":
        raise AssertionError(failure_summary(report))
    if overall == "skip":
        raise AssertionError("nothing was graded: every case was skipped\n" + failure_summary(report))
    return report


__all__ = ["IntegrityError", "OptionError", "assert_conforms", "assert_report", "failure_summary", "run_conformance"]
