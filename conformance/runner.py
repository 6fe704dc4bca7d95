"""The grading loop: golden cases x dtypes through a protocol and an invoker into a Report.

Generic over protocols (conformance.core.registry): the runner never looks inside a case. For each
selected case (``--cases`` glob on the case id) and each requested dtype (once per case for
dtype-free protocols) it builds the adapter's arguments, calls the adapter through the invoker
(conformance.isolation), grades the returned value and decides the verdict:

    skip        the adapter raised conformance.Unsupported for this very case, or the user's
                explicit option leaves it out (Protocol.excluded: --layout, --isolate); a probe
                never skips a case
    error       the adapter raised, crashed or timed out (diagnosis raised / crashed / timeout);
                for a case whose right answer is an exception (Protocol.expected_error), raising
                passes and returning fails with the protocol's diagnosis
    fail        a validation problem (shape, dtype, device, NaN/Inf, input mutated) or the
                profile's budget ratio above 1; diagnosis.diagnose() explains the numbers
    acceptable  (profile standard) within the standard budget but above the strict one
    pass        within the profile's budget (and, for standard, within strict as well)

Before grading, the golden vectors' integrity is checked (reference.golden.verify.check):
any problem raises IntegrityError (exit code 3). Then the protocol's probe runs (RoPE: the pair
layout), cases are graded, and the protocol's black-box identities run once per dtype (once in
all for dtype-free protocols). Everything family-specific comes through the protocol's hooks
(conformance.core.protocol). User code never crashes the runner: every call goes through the
invoker, and every returned value through validation.
"""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import re
import shlex
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from conformance.core import registry, tolerance
from conformance.core.tensors import torch_dtype
from conformance.errors import UsageError
from conformance.guard import DEFAULT_MAX_TIME, RunGuard
from conformance.isolation import RealInterrupt, check_timeout, error_line, real_interrupts_marked
from conformance.results import CaseResult, Diagnosis, IdentityResult, Report

DEFAULT_DTYPES = ("float32", "bfloat16")
DEVICES = ("cpu", "cuda")


class OptionError(UsageError, ValueError):
    """A bad option: one line naming it (exit 2 on the command line, a ValueError in the API)."""


class IntegrityError(Exception):
    """The golden vectors fail their integrity check (exit code 3); str() is one line."""

    def __init__(self, problems):
        self.problems = list(problems)
        first = str(self.problems[0]) if self.problems else "unknown problem"
        more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        super().__init__(f"golden vectors fail their integrity check: {first}{more}")


@dataclass
class Options:
    protocol: str
    layout: str = "auto"
    dtypes: tuple = DEFAULT_DTYPES
    device: str = "cpu"
    profile: str = "standard"
    cases: Optional[str] = None
    isolate: bool = False
    timeout: Optional[float] = None
    vectors_dir: Optional[str] = None
    identities: bool = True
    max_time: Optional[float] = DEFAULT_MAX_TIME  # seconds for the whole run (None: no limit)
    keep_going: bool = False  # call the adapter even after two consecutive timeouts
    fresh: bool = True  # also grade cases drawn at run time (reference.golden.fresh)
    seed: Optional[int] = None  # their seed (None: drawn; an old fresh-<seed>/ id in --cases gives it)
    expected_failures: Optional[str] = None  # a baseline file of known failures (conformance.baseline)
    shapes: str = "sample"  # "full": the whole shape matrix of the fresh cases (reference.golden.fresh)
    grad: bool = False  # also grade each differentiable input's gradient (conformance.training)
    autocast: Optional[str] = None  # run the adapter inside torch.autocast(device, this dtype)
    # "raise": re-raise the first exception the adapter raises while a case is graded, with its own
    # traceback; "pdb": open pdb.post_mortem on it, then go on. In-process only (not with isolate).
    debug: Optional[str] = None
    # Grade at a model's configuration (conformance.model): a zoo name, or a config.json path.
    # The cases are drawn for it from the seed instead of the committed vectors.
    model: Optional[str] = None
    model_config: Optional[str] = None
    # Also grade every case with the adapter wrapped by torch.compile (conformance.compiled), each
    # as its own result; compile_backend is torch.compile's backend ("inductor", "aot_eager", ...).
    compile: bool = False
    compile_backend: str = "inductor"
    # Run Triton kernels in Triton's interpreter on CPU tensors (conformance.triton_interpret):
    # TRITON_INTERPRET=1 is set before the target is imported.
    triton_interpret: bool = False
    # The array library the adapter takes and returns (conformance.frameworks): torch, numpy, jax, mlx, cupy.
    framework: str = "torch"


def check_options(opts: Options) -> Options:
    """Validate and normalise options; OptionError (one line) names the bad one."""
    proto = registry.get(opts.protocol)  # UsageError for an unknown protocol
    choices = ("auto",) + tuple(proto.layouts)
    if opts.layout not in choices:
        raise OptionError(f"layout must be one of {', '.join(choices)} for {opts.protocol}, got {opts.layout!r}")
    if isinstance(opts.dtypes, str):
        opts.dtypes = (opts.dtypes,)
    dtypes = tuple(dict.fromkeys(opts.dtypes or DEFAULT_DTYPES))
    for d in dtypes:
        if d not in tolerance.DTYPES:
            raise OptionError(f"dtype must be one of {', '.join(tolerance.DTYPES)}, got {d!r}")
    opts.dtypes = dtypes
    if opts.debug not in (None, "raise", "pdb"):
        raise OptionError(f"debug must be None, 'raise' or 'pdb', got {opts.debug!r}")
    if opts.debug and opts.isolate:
        raise OptionError(f"--{opts.debug} debugs the adapter in this process: it cannot be used with --isolate")
    if opts.profile not in tolerance.PROFILES:
        raise OptionError(f"profile must be one of {', '.join(tolerance.PROFILES)}, got {opts.profile!r}")
    kind, colon, index = str(opts.device).partition(":")
    # An index torch cannot parse (cpu:99999999999999999999999) used to end the run in a
    # traceback while grading: cpu has the one device 0, cuda the ones torch counts.
    if kind not in DEVICES or (colon and not (index.isdigit() and index.isascii() and len(index) <= 9)):
        raise OptionError(f"device must be cpu or cuda (optionally cuda:N), got {opts.device!r}")
    if kind == "cpu" and colon and int(index) != 0:
        raise OptionError(f"device {opts.device!r}: the cpu device has index 0 only")
    if kind == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise OptionError("device cuda requested, but torch.cuda.is_available() is False here")
        if colon and int(index) >= torch.cuda.device_count():
            raise OptionError(f"device {opts.device!r}: torch sees {torch.cuda.device_count()} cuda device(s), "
                              f"numbered from 0")
    if opts.seed is not None:
        from reference.golden.fresh import MAX_SEED

        if isinstance(opts.seed, bool) or not isinstance(opts.seed, int) or not 0 <= opts.seed <= MAX_SEED:
            raise OptionError(f"seed must be an integer from 0 to {MAX_SEED}, got {opts.seed!r}")
    from reference.golden.fresh import SHAPES

    if opts.shapes not in SHAPES:
        raise OptionError(f"shapes must be one of {', '.join(SHAPES)}, got {opts.shapes!r}")
    _check_training(opts, proto)
    _check_compile(opts)
    _check_triton(opts)
    from conformance import frameworks

    frameworks.check(opts, proto)
    for name in ("timeout", "max_time"):
        try:
            setattr(opts, name, check_timeout(getattr(opts, name)))
        except ValueError as exc:
            raise OptionError(str(exc).replace("timeout", name, 1)) from None
    return opts


# ------------------------------------------------------------------------------------------
# Vectors


def check_integrity(directory=None) -> None:
    """Raise IntegrityError when reference.golden.verify finds any problem."""
    from reference.golden import verify

    try:
        problems = verify.check(directory)
    except Exception as exc:  # a verifier that cannot even read the directory: same verdict
        problems = [f"{type(exc).__name__}: {exc}"]
    if problems:
        raise IntegrityError(problems)


def select_cases(protocol: str, pattern: Optional[str], directory=None, golden_cases=None, fresh=()) -> list:
    """The protocol's golden cases, then the ``fresh`` ones, whose id matches the glob (all when
    pattern is None). A comma separates globs; a fresh id of suite 0.5.0 and before
    (``<protocol>/fresh-<seed>/<test>``, ``<protocol>/fresh-*``) selects the cases by the ids they
    have now (``<protocol>/fresh/<test>``)."""
    patterns = _case_patterns(pattern)
    if golden_cases is None:
        from reference.golden import store

        golden_cases = list(store.iter_cases(protocol, directory))
    golden_cases = list(golden_cases) + list(fresh)
    cases = [c for c in golden_cases if c.protocol == protocol]
    if patterns is not None:
        matchers = [re.compile(fnmatch.translate(p)) for p in patterns]
        cases = [c for c in cases if any(m.match(c.id) for m in matchers)]
        if not cases:
            from conformance.errors import did_you_mean

            hint = did_you_mean(patterns[0], [c.id for c in golden_cases if c.protocol == protocol])
            raise OptionError(f"no {protocol} case matches --cases {_shown(pattern)}{hint} (see `posref vectors list`)")
    elif not cases:
        raise OptionError(f"the golden vectors hold no case for protocol {protocol!r}")
    return cases


_OLD_FRESH = re.compile(r"/fresh-(?:[0-9]+|\*)(/|$)")  # the group of suite 0.5.0's fresh ids


def _shown(pattern) -> str:
    text = str(pattern)
    return repr(text if len(text) <= 120 else text[:117] + "...")


def _case_patterns(pattern: Optional[str]) -> Optional[list]:
    """The globs of --cases (None: every case); OptionError (one line) for a value that names none."""
    if pattern is None or pattern == "":
        return None
    text = str(pattern)
    patterns = [_OLD_FRESH.sub(lambda m: "/fresh/" if m[1] else "/fresh/*", p.strip())
                for p in text.split(",") if p.strip()]
    if not patterns:
        raise OptionError(f"cases: {_shown(text)} names no case (give case ids or globs, separated by commas)")
    return patterns


def fresh_seed(opts: Options) -> int:
    """The seed of the run's fresh cases: --seed, else the one a fresh case id of suite 0.5.0 in
    --cases names (``<protocol>/fresh-<seed>/<test>``: such a cited id repeats by itself), else a
    new one. Ids of today's form name no seed: ``--seed N`` repeats them."""
    from reference.golden.fresh import MAX_SEED, new_seed

    if opts.seed is not None:
        return opts.seed
    named = set()
    for digits in re.findall(r"/fresh-([0-9]+)/", str(opts.cases or "")):
        # 2^63 - 1 has 19 digits (and int() refuses strings of more than 4300): compare lengths first.
        digits = digits.lstrip("0") or "0"
        if len(digits) > len(str(MAX_SEED)) or int(digits) > MAX_SEED:
            raise OptionError(f"cases: the seed in fresh-{digits[:20]}{'...' if len(digits) > 20 else ''}/ is "
                              f"not one posref draws (0 to {MAX_SEED})")
        named.add(int(digits))
    return named.pop() if len(named) == 1 else new_seed()


def _foreign_vectors(digest: str, directory) -> Optional[str]:
    """None for the vectors this posref ships. Other vectors: IntegrityError unless the directory
    was named explicitly (``vectors_dir``); then the note every report repeats."""
    from reference.golden import store

    shipped = store.shipped_digest()
    if not shipped or digest == f"sha256:{shipped}":
        return None
    if directory is None:
        raise IntegrityError([f"vectors digest {digest} is not the one this posref ships "
                              f"(sha256:{shipped}): the vectors were changed; grade other vectors "
                              "only by naming them with --vectors-dir"])
    return (f"graded against the vectors in {directory} (digest {digest}), not the ones this posref "
            f"ships (sha256:{shipped})")


def manifest_info(directory=None) -> tuple[str, str]:
    """(suite_version, vectors_digest as 'sha256:<hex>')."""
    from reference.golden import store

    manifest = store.load_manifest(directory)
    digest = str(manifest.get("digest", ""))
    if digest and ":" not in digest:
        digest = f"sha256:{digest}"
    return str(manifest.get("suite_version", store.SUITE_VERSION)), digest or "unknown"


# ------------------------------------------------------------------------------------------
# Repro snippets


def repro_snippet(case_id: str, dtype: str, opts: Options, target: Optional[str], compiled: bool = False) -> str:
    """A command a reviewer can paste to grade this one case again (a fresh case with the run's
    --seed, which draws its inputs again); ``compiled``: the compiled result's (with --compile)."""
    backend = opts.compile_backend if compiled else None
    from reference.golden.fresh import is_fresh

    fresh = is_fresh(case_id)
    seeded = fresh or opts.model is not None or opts.model_config is not None  # drawn from --seed
    if target:
        parts = ["posref", "conform", target, "--protocol", opts.protocol, "--cases", case_id]
        if opts.model is not None:
            parts += ["--model", opts.model]
        if opts.model_config is not None:
            parts += ["--model-config", opts.model_config]
        parts += ["--dtype", dtype]
        if opts.profile != "standard":
            parts += ["--profile", opts.profile]
        if opts.layout != "auto":
            parts += ["--layout", opts.layout]
        if opts.device != "cpu":
            parts += ["--device", opts.device]
        if seeded and opts.seed is not None:
            parts += ["--seed", str(opts.seed)]
        if fresh and opts.shapes != "sample":
            parts += ["--shapes", opts.shapes]
        if opts.grad:
            parts += ["--grad"]
        if opts.autocast:
            parts += ["--autocast", opts.autocast]
        if backend:
            parts += ["--compile"] + (["--compile-backend", backend] if backend != "inductor" else [])
        if opts.triton_interpret:
            parts += ["--triton-interpret"]
        if opts.framework != "torch":
            parts += ["--framework", opts.framework]
        return " ".join(shlex.quote(p) for p in parts)
    return (
        "from conformance import run_conformance; "
        f"print(run_conformance(fn, {opts.protocol!r}, cases={case_id!r}, dtypes=({dtype!r},), "
        f"profile={opts.profile!r}, layout={opts.layout!r}, device={opts.device!r}"
        + (f", model={opts.model!r}" if opts.model is not None else "")
        + (f", model_config={opts.model_config!r}" if opts.model_config is not None else "")
        + (f", seed={opts.seed}" if seeded and opts.seed is not None else "")
        + (f", shapes={opts.shapes!r}" if fresh and opts.shapes != "sample" else "")
        + (", grad=True" if opts.grad else "")
        + (f", autocast={opts.autocast!r}" if opts.autocast else "")
        + (", compile=True" if backend else "")
        + (f", compile_backend={backend!r}" if backend and backend != "inductor" else "")
        + (", triton_interpret=True" if opts.triton_interpret else "")
        + (f", framework={opts.framework!r}" if opts.framework != "torch" else "")
        + ").summary())"
    )


# ------------------------------------------------------------------------------------------
# Grading


def _verdict(graded, profile: str) -> str:
    if graded.problems:
        return "fail"
    ratio = graded.ratio.get(profile)
    if ratio is None or ratio > 1.0:
        return "fail"
    if profile == "standard":
        strict = graded.ratio.get("strict")
        if strict is None or strict > 1.0:
            return "acceptable"
    return "pass"


def _diagnose(proto, case, spec, prepared, graded, dtype) -> tuple[list, list]:
    """(diagnoses, notes) from the protocol's diagnosis; a failure of its own becomes a note, so
    that it never stops the run."""
    try:
        found = proto.diagnose(case, spec, prepared, graded, dtype)
    except Exception as exc:  # noqa: BLE001 - a diagnosis bug must not hide the verdict
        return [], [f"diagnosis could not run: {error_line(exc)}"]
    return list(found or []), []


def grade_case(proto, case, spec, dtype, opts: Options, invoker, target, explanation=None,
               compiled: bool = False) -> CaseResult:
    """Grade one case in one dtype (dtype None for dtype-free protocols) under its own spec;
    ``explanation`` (what the probe saw, Probe.explain) is noted on a failing case; ``compiled``:
    ``invoker`` calls the adapter under torch.compile (the result says so)."""
    start = time.perf_counter()
    label = dtype or opts.dtypes[0]
    result = CaseResult(id=case.id, dtype=label, verdict="error")
    # The adapter gets its own copy of the spec: one that edits it (spec.scaling is a dict, as in
    # HF configs that code rewrites in place) must not change the reference it is graded against.
    prepared = proto.prepare(case, copy.deepcopy(spec), dtype, opts.device)
    if proto.drives_calls:
        prepared.invoker = invoker
    training = None
    if opts.grad or opts.autocast:
        training = _training_call(proto, case, spec, prepared, opts, invoker)
        outcome = training["outcome"]
    else:
        outcome = invoker.call(*prepared.args)
    must_raise = proto.expected_error(case, spec)
    if outcome.kind == "raised" and must_raise is None:
        result.traceback = outcome.where  # the user's file, line and frames (plain data)
        if opts.debug and outcome.exception is not None:
            _debug(outcome.exception, opts, invoker)
    elif outcome.kind != "ok" and outcome.kind != "unsupported":
        result.traceback = outcome.where
    if outcome.kind == "unsupported":
        result.verdict = "skip"
        reason = str(outcome.error or "")
        result.notes.append("unsupported: " + (reason.split(": ", 1)[1] if reason.startswith("Unsupported: ") else reason))
    elif must_raise is not None:
        # The right answer is an exception (e.g. a position past a learned table's last row).
        if outcome.kind == "raised":
            result.verdict = "pass"
            result.notes.append(f"raised as required ({outcome.error})")
        elif outcome.kind == "ok":
            result.verdict = "fail"
            result.diagnoses.append(must_raise)
        else:
            result.diagnoses.append(Diagnosis(outcome.kind, outcome.error or outcome.kind))
    elif outcome.kind != "ok":
        # kind is raised, crashed or timeout (isolation.KINDS), each a diagnosis code too
        result.diagnoses.append(Diagnosis(outcome.kind, outcome.error or outcome.kind))
    else:
        try:
            _grade_value(proto, case, spec, prepared, outcome.value, training, opts, result, explanation)
        except RealInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - whatever the adapter's objects raise is a verdict
            result = _value_raised(case.id, label, exc)
    result.compiled = compiled
    result.repro = repro_snippet(case.id, result.dtype, opts, target, compiled)
    result.duration_s = time.perf_counter() - start
    return result


# The exception --raise re-raised (conformance.supervise: an ordinary end, not a crash of the run).
RERAISED: list = []


def _debug(exc: BaseException, opts: Options, invoker) -> None:
    """--raise: re-raise the adapter's exception (its traceback still ends in the user's frame).
    --pdb: pdb.post_mortem on that traceback (the user's frame is the innermost), once: the run
    then goes on, and the time spent in pdb does not count toward --max-time."""
    if opts.debug == "raise":
        RERAISED.append(exc)
        raise exc
    opts.debug = None  # the first exception only
    import pdb

    print(f"posref --pdb: the adapter raised {type(exc).__name__}; post-mortem in its frame "
          "('c' or 'q' goes on with the run)", file=sys.stderr, flush=True)
    began = time.monotonic()
    pdb.post_mortem(exc.__traceback__)
    if getattr(invoker, "deadline", None) is not None:  # conformance.guard.RunGuard
        invoker.deadline += time.monotonic() - began


def _grade_value(proto, case, spec, prepared, value, training, opts: Options, result, explanation) -> None:
    """Grade a returned value into ``result``. Anything raised here while the adapter's value is
    handled (grading, unpacking a training result, locating, diagnosing) is the adapter's doing:
    grade_case turns it into the case's verdict (_value_raised)."""
    from conformance import wire

    raised = wire.raised_inside(value)
    if raised is not None:  # under --isolate: the value raised while it was sent back
        result.diagnoses.append(Diagnosis("raised", _raised_message(raised)))
        return
    if training is not None:
        value, prepared = _training_value(training, value, prepared, opts)
    graded = proto.grade(case, spec, prepared, value)
    if training is not None and graded.training is not None:
        training["info"] = graded.training  # what the protocol's own calls gave (drives_calls)
    if proto.dtype_free and _plain_str(graded.output_dtype) in tolerance.DTYPES:
        result.dtype = _plain_str(graded.output_dtype)
    result.output_dtype = _plain_str(graded.output_dtype)
    profile = opts.profile
    result.verdict = _verdict(graded, profile)
    result.max_abs_error = graded.max_abs_error
    result.budget_ratio = graded.ratio.get(profile)
    result.worst_index = graded.worst_index.get(profile)
    result.curve = graded.curve.get(profile, [])
    _locate(proto, case, spec, prepared, graded, profile, result)
    result.notes.extend(graded.notes.get(profile, []))
    if result.verdict == "acceptable":
        strict = graded.ratio.get("strict")
        times = f"{strict:.3g} times" if strict is not None else "over"
        result.notes.append(f"within the standard budget but {times} the strict one ({proto.acceptable_note})")
    result.diagnoses.extend(graded.problems)
    if result.verdict == "fail":
        if explanation:
            result.notes.append(explanation)
        if graded.gradable:
            found, notes = _diagnose(proto, case, spec, prepared, graded, result.dtype)
            codes = {d.code for d in result.diagnoses}
            result.diagnoses.extend(d for d in found if d.code not in codes)
            result.notes.extend(notes)
    if training is not None:
        _grade_training(proto, case, spec, prepared, training, graded, opts, result)


def _plain_str(text) -> Optional[str]:
    """An exact str (a str subclass the adapter made, with its own methods, becomes a plain copy)."""
    return str.__str__(text) if issubclass(type(text), str) else None


def _fault_line(exc: BaseException) -> str:
    try:
        return error_line(exc)
    except RealInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - an exception whose description raises in turn
        return "an exception whose description raised in turn"


def _raised_message(line: str) -> str:
    return f"the returned value could not be graded: it raised {line} when used"


def _value_raised(case_id: str, label: str, exc: BaseException) -> CaseResult:
    """The verdict of a case whose returned value raised while posref used it (a tensor subclass
    whose __torch_function__ raises SystemExit, a number whose __float__ raises, a module whose
    posref_output property does): error, code raised. The run goes on."""
    from conformance.isolation import user_traceback

    result = CaseResult(id=case_id, dtype=label, verdict="error")
    result.diagnoses.append(Diagnosis("raised", _raised_message(_fault_line(exc))))
    try:
        result.traceback = user_traceback(exc)  # the adapter's object's frame (its __float__, ...)
    except RealInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - a hostile frame; the message stands
        result.traceback = None
    return result


def _locate(proto, case, spec, prepared, graded, profile, result) -> None:
    """Where the case fails: the mismatch count, the worst element in words, the first position
    over budget."""
    count = graded.mismatch.get(profile)
    if count is not None:
        result.mismatch = {"count": int(count[0]), "total": int(count[1]), "unit": str(count[2])}
    if result.worst_index is not None:
        try:
            result.worst_location = str(proto.locate(case, spec, prepared, result.worst_index))
        except Exception as exc:  # noqa: BLE001 - a place we cannot name is no reason to stop
            result.worst_location = f"element {result.worst_index} ({error_line(exc)})"
    over = [p[0] for p in result.curve if len(p) > 3 and not p[3] <= 1.0]
    on_positions = getattr(proto, "curve_axis", "position") == "position"
    result.first_failing_position = int(min(over)) if over and on_positions else None


# ------------------------------------------------------------------------------------------
# Training: --grad and --autocast (conformance.training; docs/design.md, "Training")


def _check_training(opts: Options, proto) -> None:
    from conformance.training import AUTOCAST_DTYPES

    opts.grad = bool(opts.grad)
    if opts.autocast is not None and opts.autocast not in AUTOCAST_DTYPES:
        raise OptionError(f"autocast must be one of {', '.join(AUTOCAST_DTYPES)}, got {opts.autocast!r}")
    if opts.grad and not getattr(proto, "differentiable", False):
        able = [n for n in registry.protocol_names() if getattr(registry.get(n), "differentiable", False)]
        raise OptionError(f"grad: {proto.name} has no backward to grade (protocols graded with --grad: "
                          f"{', '.join(able) or 'none'})")


def _training_call(proto, case, spec, prepared, opts: Options, invoker) -> dict:
    """Call the adapter with a training plan: {"outcome", "roles" {role: arg index}, "cotangents"}."""
    from conformance.training import make_plan

    roles, cots, note = {}, (), None
    if opts.grad and prepared.dtype is not None:
        try:
            roles = dict(proto.grad_inputs(case, spec, prepared) or {})
            if roles:
                cots = tuple(proto.cotangents(case, spec, prepared))
        except Exception as exc:  # noqa: BLE001 - a protocol bug must not stop the run
            roles, cots, note = {}, (), f"--grad: the gradient could not be set up: {error_line(exc)}"
    plan = make_plan(tuple(roles.values()), cots, opts.autocast, opts.device)
    if proto.drives_calls:
        # The adapter makes the callable (a module); grade() passes the plan on to its calls.
        prepared.plan = plan
        outcome = invoker.call(*prepared.args)
    else:
        outcome = invoker.call(*prepared.args, plan)
    return {"outcome": outcome, "roles": roles, "cotangents": cots, "info": None, "note": note}


def _training_value(training: dict, value, prepared, opts: Options):
    """(the output to grade, the Prepared to grade it with): under autocast, an output that arrived
    in the autocast dtype is graded with that dtype's budget."""
    from conformance.training import budget_dtype, unpack

    value, info = unpack(value)
    training["info"] = info
    chosen = budget_dtype(value, prepared.dtype, opts.autocast)
    if chosen != prepared.dtype:
        prepared = dataclasses.replace(prepared, dtype=chosen)
    return value, prepared


_RANK = {"pass": 0, "acceptable": 1, "fail": 2, "error": 3}


def _grade_training(proto, case, spec, prepared, training: dict, graded, opts: Options, result) -> None:
    """Autocast's note, and the gradients (result.grad; the case's verdict takes the worse)."""
    if opts.autocast:
        result.notes.append(f"autocast {opts.autocast}: the output arrived in {graded.output_dtype or 'no tensor'}"
                            f"; graded with the {prepared.dtype} budget")
    if not opts.grad:
        return
    roles, info = training["roles"], training["info"]
    note = training.get("note") or (info or {}).get("note")
    if note:
        result.notes.append(note)
        return
    if not roles:
        result.notes.append("--grad: no gradient graded for this case (no differentiable input here, "
                            "e.g. an in-place kernel)")
        return
    if info is None:
        result.grad = {"verdict": "error", "budget_ratio": None, "inputs": {}}
        result.diagnoses.append(Diagnosis("raised", "--grad: the call returned no gradients"))
        result.verdict = "error"
        return
    if info.get("problem"):
        raised = info["problem"].startswith("the backward pass raised")
        verdict = "error" if raised else "fail"
        result.grad = {"verdict": verdict, "budget_ratio": None, "inputs": {}, "problem": info["problem"]}
        result.diagnoses.append(Diagnosis("raised" if raised else "backward-missing", info["problem"]))
        if _RANK.get(verdict, 0) > _RANK.get(result.verdict, 0):
            result.verdict = verdict
        return
    if info.get("cotangent_written"):
        result.notes.append("--grad: the backward wrote into its incoming gradient (grad_output) in place; the "
                            "gradient is graded against the cotangent as given")
    applied = tuple(c.to(torch_dtype(d)) if d in tolerance.DTYPES else c
                    for c, d in zip(training["cotangents"], info.get("cotangent_dtypes", ())))
    grads = {role: info["grads"][k] if k < len(info["grads"]) else None for k, role in enumerate(roles)}
    try:
        by_role = proto.grade_backward(case, spec, prepared, applied, grads)
    except Exception as exc:  # noqa: BLE001 - an exotic gradient must not stop the run
        result.grad = {"verdict": "error", "budget_ratio": None, "inputs": {}}
        result.diagnoses.append(Diagnosis("raised", f"the gradient could not be graded: {error_line(exc)}"))
        result.verdict = "error"
        return
    profile = opts.profile
    inputs, worst, ratios, failing = {}, "pass", [], False
    for role, g in by_role.items():
        verdict = _verdict(g, profile)
        ratio = g.ratio.get(profile)
        entry = {"verdict": verdict, "budget_ratio": ratio, "max_abs_error": g.max_abs_error,
                 "worst_index": g.worst_index.get(profile), "dtype": g.output_dtype}
        if entry["worst_index"] is not None:
            try:
                entry["worst_location"] = str(proto.locate(case, spec, prepared, entry["worst_index"]))
            except Exception as exc:  # noqa: BLE001
                entry["worst_location"] = f"element {entry['worst_index']} ({error_line(exc)})"
        count = g.mismatch.get(profile)
        if count is not None:
            entry["mismatch"] = {"count": int(count[0]), "total": int(count[1]), "unit": str(count[2])}
        inputs[role] = entry
        worst = max(worst, verdict, key=lambda v: _RANK.get(v, 0))
        if ratio is not None:
            ratios.append(ratio)
        failing = failing or verdict == "fail"
        codes = {d.code for d in result.diagnoses}
        result.diagnoses.extend(d for d in g.problems if d.code not in codes)
        result.notes.extend(n for n in g.notes.get(profile, []) if n not in result.notes)
    result.grad = {"verdict": worst, "budget_ratio": max(ratios) if ratios else None, "inputs": inputs}
    if failing:
        gradable = {role: g for role, g in by_role.items() if g.gradable}
        try:
            found = proto.diagnose_backward(case, spec, prepared, applied, grads, gradable, prepared.dtype)
        except Exception as exc:  # noqa: BLE001 - a diagnosis bug must not hide the verdict
            found = []
            result.notes.append(f"backward diagnosis could not run: {error_line(exc)}")
        # Where each failing gradient fails, in the words of the reports (which show diagnoses).
        for role, entry in inputs.items():
            if entry["verdict"] != "fail" or entry["budget_ratio"] is None:
                continue
            where = f"gradient of {role}: error/budget {entry['budget_ratio']:.3g}"
            if entry.get("mismatch"):
                m = entry["mismatch"]
                where += f", {m['count']} of {m['total']} {m['unit']} over budget"
            if entry.get("worst_location"):
                where += f", worst at {entry['worst_location']}"
            result.notes.append(where)
            for d in found or []:
                if d.message.startswith(f"{role}: "):
                    d.message += f" ({where})"
                    break
        codes = {d.code for d in result.diagnoses}
        result.diagnoses.extend(d for d in found or [] if d.code not in codes)
    if worst == "acceptable":
        result.notes.append("the gradient is within the standard budget but over the strict one")
    if _RANK.get(worst, 0) > _RANK.get(result.verdict, 0):
        result.verdict = worst


def _explain(probe, spec) -> Optional[str]:
    if probe is None:
        return None
    try:
        return _plain_str(probe.explain(spec))
    except RealInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - an explanation that fails explains nothing
        return f"the probe's explanation could not be built: {_fault_line(exc)}"


def _grad_blackbox(proto, invoker, opts: Options, probe) -> list:
    try:
        return list(proto.grad_blackbox(invoker, opts.device, probe) or [])
    except RealInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the adapter's objects may raise anything here
        return [IdentityResult(id="gradcheck", dtype="float64", verdict="error",
                               message=f"gradient checks could not run: {_fault_line(exc)}")]


def _blackbox(proto, invoker, opts: Options, probe) -> list:
    results = []
    # A dtype-free protocol's adapter never sees the dtype: one round of checks is enough.
    for dtype in opts.dtypes[:1] if proto.dtype_free else opts.dtypes:
        try:
            results.extend(proto.blackbox(invoker, torch_dtype(dtype), opts.device, probe) or [])
        except RealInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - the adapter's objects may raise anything here
            results.append(
                IdentityResult(
                    id="blackbox",
                    dtype=dtype,
                    verdict="error",
                    message=f"black-box checks could not run: {_fault_line(exc)}",
                )
            )
    return results


def run(
    fn: Optional[Callable],
    opts: Options,
    *,
    target: Optional[str] = None,
    progress=None,
    golden_cases: Optional[Iterable] = None,
    check_vectors: bool = True,
) -> Report:
    """Grade ``fn`` (or TARGET loaded in a child when opts.isolate) and return the Report.

    golden_cases: grade these GoldenCase records instead of the committed vectors (tests,
    experiments); the integrity check and the manifest then do not apply.
    """
    from conformance import environment
    from conformance.isolation import make_invoker

    opts = check_options(dataclasses.replace(opts))
    proto = registry.get(opts.protocol)
    if opts.triton_interpret:
        from conformance import triton_interpret

        triton_interpret.enable()  # the callers set it before importing the target; children inherit it
        interpreter_notes = _triton_dtypes(opts)
        launched_before = triton_interpret.launches()
    from conformance import frameworks

    framework_notes = frameworks.default_dtypes(opts, proto, DEFAULT_DTYPES)
    baseline = None
    if opts.expected_failures is not None:
        from conformance import baseline as baselines

        baseline = baselines.load(opts.expected_failures)  # a bad file: UsageError before grading
    if target is None and fn is not None:
        from conformance.loader import target_of

        target = target_of(fn)  # repro lines, and --isolate loads it in the child
    if golden_cases is None:
        if check_vectors:
            check_integrity(opts.vectors_dir)
        suite_version, digest = manifest_info(opts.vectors_dir)
        foreign = _foreign_vectors(digest, opts.vectors_dir)
    else:
        from reference.golden import store

        golden_cases = list(golden_cases)
        suite_version, digest = store.SUITE_VERSION, "unversioned (cases given in code)"
    model = None
    if opts.model is not None or opts.model_config is not None:
        from conformance import model as models

        model = models.resolve(opts.model, opts.model_config)
    fresh = []
    _case_patterns(opts.cases)  # a --cases that names nothing: one line before anything is drawn
    if model is not None:
        opts.seed = fresh_seed(opts)
        # The model's cases only (the report still names the vectors' digest).
        golden_cases, fresh = models.model_cases(model, opts.protocol, opts.seed, opts.vectors_dir)
        _check_model_layout(opts, model, fresh)
        # The black-box identities call the adapter at specs of their own; a port of one model
        # answers only at its configuration, whose cases are drawn anew from every seed.
        opts.identities = False
    elif opts.fresh and golden_cases is None:
        from reference.golden.fresh import fresh_cases

        opts.seed = fresh_seed(opts)
        fresh = fresh_cases(opts.protocol, opts.seed, shapes=opts.shapes)
    cases = select_cases(opts.protocol, opts.cases, opts.vectors_dir, golden_cases, fresh)
    cases, interpreted_out = _triton_sample(cases, opts)

    report = Report(
        suite_version=suite_version,
        vectors_digest=digest,
        protocol=opts.protocol,
        target=target or _describe(fn),
        environment=environment.collect(opts.device, opts.dtypes),
        profile=opts.profile,
        seed=opts.seed if fresh else None,
        training={"grad": opts.grad, "autocast": opts.autocast} if opts.grad or opts.autocast else None,
        model=model.described if model is not None else None,
    )
    if opts.framework != "torch":
        report.environment.update(frameworks.describe(opts))
        report.notes += [frameworks.note(opts)] + framework_notes
    from conformance.loader import signature_problem, source_location

    mismatch = signature_problem(target, fn, proto.arity, proto.signature.split(" ->")[0])
    if mismatch is not None:
        raise UsageError(f"{mismatch}: is it the adapter for another protocol? ({opts.protocol} adapters are "
                         f"{proto.signature})")
    if golden_cases is None and foreign:
        report.notes.append(foreign)
    drawn = len({c.id for c in fresh} & {c.id for c in cases})
    if model is not None and golden_cases:
        report.notes.append(f"{len(golden_cases)} committed case(s) of the zoo's {model.name}: certified, "
                            "stored in the vectors, the same with every seed")
    if model is not None:
        report.notes += [f"{model.name}: {note}" for note in models.reading_notes(model, opts.protocol)]
    if drawn and model is not None:
        report.notes.append(f"{drawn} case(s) drawn for {model.name}'s configuration from seed {opts.seed} "
                            f"(--seed {opts.seed} draws them again); the black-box identities, which call the "
                            "adapter at specs of their own, are not run at a model's configuration")
    elif drawn:
        report.notes.append(f"{drawn} fresh case(s) drawn at run time from seed {opts.seed} "
                            f"(--seed {opts.seed} draws them again)")
    if proto.dtype_free and tuple(opts.dtypes) != DEFAULT_DTYPES:
        # Said once rather than grading float32 silently under --dtype bfloat16 (issue 25).
        report.notes.append(f"--dtype {','.join(opts.dtypes)} does not apply to {opts.protocol}: its adapter "
                            "receives no tensor in a dtype, so each case is graded once, in the dtype of "
                            "the output it returns")
    if opts.triton_interpret:
        _triton_notes(report, opts, interpreted_out)
        report.notes.extend(interpreter_notes)
    where = source_location(target, fn)
    if where is not None:
        report.source = {"file": where[0], "line": where[1]}
    if opts.framework != "torch":
        inner = frameworks.make_invoker(fn, target, opts)
    elif opts.grad or opts.autocast:
        from conformance.training import make_training_invoker

        inner = make_training_invoker(fn, target, isolate=opts.isolate, timeout=opts.timeout)
    else:
        inner = make_invoker(fn, target, isolate=opts.isolate, timeout=opts.timeout)
    invoker = RunGuard(inner, max_time=opts.max_time, keep_going=opts.keep_going)
    compiled = _compiled_invoker(fn, target, opts, report, invoker)
    if hasattr(progress, "planned"):  # the supervised command (conformance.supervise): what is to come
        plan_dtypes = (None,) if proto.dtype_free else opts.dtypes
        halves = (False, True) if compiled is not None else (False,)
        progress.planned(report, [(c.id, d or opts.dtypes[0], repro_snippet(c.id, d or opts.dtypes[0], opts, target, h), h)
                                  for c in cases for d in plan_dtypes for h in halves])
    # For the whole run a real Ctrl-C raises RealInterrupt, so that it stops the run while a
    # KeyboardInterrupt (or SystemExit) raised by what the adapter returned is a verdict.
    with real_interrupts_marked():
        try:
            _grade_all(proto, cases, opts, invoker, target, report, progress, compiled)
        finally:
            invoker.close()
            if compiled is not None:
                compiled.close()
    if opts.triton_interpret:
        from conformance import triton_interpret

        report.triton_interpret = dict(triton_interpret.describe(launched_before), isolated=bool(opts.isolate))
    for guard in (invoker, compiled):
        if guard is not None and guard.note():
            report.notes.append(guard.note())
    if baseline is not None:
        # The matching counts toward --max-time: it stops at the run's deadline with a note.
        baselines.apply(report, baseline, deadline=getattr(invoker, "deadline", None),
                        limit=f"--max-time {opts.max_time:g} s" if opts.max_time is not None else "")
    if progress is not None:
        progress.finish(report)
    return report


def _check_model_layout(opts: Options, model, cases) -> None:
    """An explicit --layout other than the model's would leave every case out: a usage error."""
    layouts = sorted({c.params.get("layout") for c in cases} - {None})
    if opts.layout != "auto" and layouts and opts.layout not in layouts:
        raise OptionError(f"--layout {opts.layout}: {model.name} pairs {' and '.join(layouts)}; at a model's "
                          "configuration the model's layout is graded (leave --layout out)")


def _probe(proto, invoker, cases, opts: Options, report: Report):
    """The protocol's probe, and its summary in the report; what the adapter's objects raise while
    it runs leaves no probe and a note (the probe only explains; the cases are graded anyway)."""
    try:
        probe = proto.probe(invoker, cases, opts)
        if probe is not None:
            report.probe = {"summary": _plain_str(probe.describe()), **probe.to_json()}
        return probe
    except RealInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the adapter's objects may raise anything here
        report.probe = None
        report.notes.append(f"the probe could not run: {_fault_line(exc)}")
        return None


def _grade_all(proto, cases, opts: Options, invoker, target, report: Report, progress, compiled=None) -> None:
    """The probe, every case in every dtype (then again under torch.compile when ``compiled``, the
    compiled half's invoker, is given), then the black-box identities, into ``report``."""
    if opts.isolate:
        invoker.start()  # load errors are UsageErrors: surface them before grading
    probe = _probe(proto, invoker, cases, opts, report)
    dtypes = (None,) if proto.dtype_free else opts.dtypes
    total = len(cases) * len(dtypes) * (2 if compiled is not None else 1)
    if progress is not None:
        progress.start(total)
    for case in cases:
        spec = proto.spec(case)
        # Only the user's explicit option excludes a case here; the adapter's Unsupported
        # skips it in grade_case. What the probe found explains failures, nothing more.
        excluded = proto.excluded(spec, opts)
        explanation = _explain(probe, spec)
        for dtype in dtypes:
            eager = None
            for half, through in ((False, invoker), (True, compiled)):
                if through is None:
                    continue
                if excluded:
                    result = CaseResult(id=case.id, dtype=dtype or opts.dtypes[0], verdict="skip", notes=[excluded],
                                        compiled=half)
                    result.repro = repro_snippet(case.id, result.dtype, opts, target, half)
                else:
                    result = grade_case(proto, case, spec, dtype, opts, through, target, explanation, compiled=half)
                if half:
                    _compile_fault(eager, result, opts)
                eager = result
                report.cases.append(result)
                if progress is not None:
                    progress.advance(result)
    if opts.identities:
        report.identities = _blackbox(proto, invoker, opts, probe)
        if opts.grad:
            report.identities += _grad_blackbox(proto, invoker, opts, probe)


# ------------------------------------------------------------------------------------------
# --compile (conformance.compiled; docs/design.md, "Compiled grading")


def _check_compile(opts: Options) -> None:
    if not isinstance(opts.compile, bool):
        raise OptionError(f"compile must be True or False, got {opts.compile!r}")
    backend = opts.compile_backend
    if not isinstance(backend, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]{0,99}", backend):
        raise OptionError(f"compile_backend must be the name of a torch.compile backend, got {backend!r}")
    if backend != "inductor" and not opts.compile:
        raise OptionError(f"compile_backend {backend!r} applies only with compile (--compile)")


def _compiled_invoker(fn, target, opts: Options, report: Report, guard):
    """The compiled half's invoker (a RunGuard sharing the run's deadline), or None: without
    --compile, or where torch.compile cannot run here (then one note says why, and the eager half
    is graded as usual)."""
    if not opts.compile:
        return None
    from conformance import compiled as compiling

    backend = opts.compile_backend
    reason = compiling.unavailable(backend, opts.device)
    report.compile = {"backend": backend, "ran": reason is None, "reason": reason}
    if reason is not None:
        report.notes.append(f"--compile: the compiled half was not run ({reason}); every case was graded "
                            "eagerly only")
        return None
    inner = compiling.make_compiled_invoker(fn, target, isolate=opts.isolate, timeout=opts.timeout,
                                           training=bool(opts.grad or opts.autocast), backend=backend)
    made = RunGuard(inner, max_time=opts.max_time, keep_going=opts.keep_going)
    made.deadline = guard.deadline  # one --max-time for both halves
    report.notes.append(f"--compile: every case is graded eagerly, then with the adapter wrapped by "
                        f"torch.compile (backend {backend}, dynamic=None; results marked compiled); the probe "
                        "and the black-box identities run eagerly")
    return made


def _compile_fault(eager, result, opts: Options) -> None:
    """Put compile-fault first on a compiled result that fails where the eager one passed."""
    from conformance.compiled import compile_fault

    found = compile_fault(eager, result, opts.compile_backend)
    if found is not None:
        result.diagnoses.insert(0, found)


# ------------------------------------------------------------------------------------------
# --triton-interpret (conformance.triton_interpret; docs/design.md, "Triton kernels on a CPU")


def _check_triton(opts: Options) -> None:
    if not isinstance(opts.triton_interpret, bool):
        raise OptionError(f"triton_interpret must be True or False, got {opts.triton_interpret!r}")
    if not opts.triton_interpret:
        return
    if not str(opts.device).startswith("cpu"):
        raise OptionError(f"--triton-interpret runs Triton kernels in the interpreter on CPU tensors: leave "
                          f"--device {opts.device} out (on a GPU the kernels run compiled without it)")
    from conformance import triton_interpret

    reason = triton_interpret.unavailable()
    if reason is not None:
        raise OptionError(reason)


def _triton_dtypes(opts: Options) -> list:
    """Where the interpreter cannot compute in bfloat16 (conformance.triton_interpret.bfloat16_problem):
    the default dtypes become float32 alone, and an explicit --dtype bfloat16 is graded with a
    warning. Returns the notes."""
    from conformance import triton_interpret

    if "bfloat16" not in opts.dtypes:
        return []
    problem = triton_interpret.bfloat16_problem()
    if problem is None:
        return []
    if tuple(opts.dtypes) == DEFAULT_DTYPES:
        opts.dtypes = tuple(d for d in opts.dtypes if d != "bfloat16")
        return [f"--triton-interpret: bfloat16 is not graded by default: {problem}; grade bfloat16 on a GPU "
                "without --triton-interpret (or ask for it with --dtype bfloat16)"]
    return [f"--triton-interpret: {problem}; the bfloat16 results show the interpreter's arithmetic, not the "
            "kernel's on a GPU"]


def _triton_sample(cases: list, opts: Options) -> tuple[list, list]:
    """Under --triton-interpret with --shapes sample and no --cases: the cases the interpreter
    grades in minutes (conformance.triton_interpret.sample), and those left out."""
    if not opts.triton_interpret or opts.shapes == "full" or opts.cases:
        return cases, []
    from conformance import triton_interpret

    return triton_interpret.sample(cases)


def _triton_notes(report: Report, opts: Options, left_out: list) -> None:
    from conformance import triton_interpret

    report.notes.append("--triton-interpret: TRITON_INTERPRET=1 was set before the target was imported; the "
                        "Triton kernels run in Triton's interpreter on CPU tensors, which cannot see races, "
                        "shared-memory limits or a GPU's fast-math numerics (docs/design.md)")
    if left_out:
        report.notes.append(f"--triton-interpret: {len(left_out)} case(s) over {triton_interpret.MAX_ELEMENTS} "
                            "input elements left out (one of each kind kept, the interpreter runs every program "
                            "instance in Python); --shapes full grades them all")
    early = triton_interpret.compiled_kernels()
    if early:
        report.notes.append(f"--triton-interpret: {len(early)} Triton kernel(s) were imported before "
                            f"TRITON_INTERPRET was set and run compiled, not interpreted ({', '.join(early[:3])}"
                            f"{', ...' if len(early) > 3 else ''}): import the adapter after setting it, or "
                            "grade it by its TARGET string or with --isolate")


def _describe(fn) -> str:
    from conformance.loader import describe

    return describe(fn) if fn is not None else "?"


def exit_code(report: Report) -> int:
    """0 when everything graded passed (acceptable counts as passed), 1 when something failed or
    errored, and 1 when nothing was graded at all (every case skipped): an empty check is not a
    pass."""
    return 0 if report.summary()["overall"] == "pass" else 1


__all__ = [
    "DEFAULT_DTYPES",
    "IntegrityError",
    "OptionError",
    "Options",
    "check_integrity",
    "exit_code",
    "grade_case",
    "repro_snippet",
    "run",
    "select_cases",
]
