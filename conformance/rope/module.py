"""Protocol ``rope.module``: ``fn(spec) -> module``, a stateful rotary module driven by a script.

The adapter is a factory: ``fn(spec)`` builds the module once per case (and dtype). The runner
then calls that one instance step after step, as a model calls its rotary embedding:

    module(x, positions) -> x rotated            (the default: tensor like x), or
    module(x, positions) -> (cos, sin)           when the module declares
                                                 ``module.posref_output = "cos_sin"``

x [batch, seq, heads, head_dim] in the dtype under test, positions int64 [batch, seq]. cos and sin
come either in pair order [batch, seq, rotary_dim // 2] (as rope.cache) or expanded to
[batch, seq, rotary_dim] in the spec's pair layout (HF's ``cat(freqs, freqs)`` for "half", each
angle twice for "interleaved"); both elements of every pair are graded.

Every step is graded like a rope.apply output (rope.cache for tables), with the same budgets,
against the float64 reference computed afresh for that step: positions as given and
``seq_len`` = the step's current length, largest position + 1 (HF's ``dynamic_rope_update``).
Nothing carries over from step to step in the reference, so state a module keeps shows as an
error of a later step. In cases with ``cast`` the runner first casts the module with
``module.to(dtype)`` (users' ``model.to(torch.bfloat16)``; a module without ``.to`` is used as it
is). The case's ratio is the largest of its steps; the worst element is
``[step, batch, seq, head, dim]`` (tables: ``[step, batch, seq, pair]``).

Diagnoses besides rope.apply's (conformance/rope/module_state.py): ``stale-state`` (a step's
output matches the reference state of an earlier step: its frequencies or its tables),
``longrope-switch`` (LongRoPE's short and long factors chosen at the wrong length) and
``angle-precision`` naming the floating buffers left in a low-precision dtype by the cast.

The module lives in the runner's process: its cases are skipped under ``--isolate`` with the
reason (a module cannot cross the process boundary as plain data). Every step goes through the
run's invoker (``Invoker.call_with``), so the per-call timeout, the run's time limit and the
process-state guard apply to each step as to the factory call; a step that raises or hangs ends
the script with ``raised`` or ``timeout`` naming the step.

Training (``--grad``, ``--autocast``; the protocol ``drives_calls``): the runner hands the case's
training plan to grade(), which passes it on to every step (conformance.training.TrainingCall
around the module): the step runs inside ``torch.autocast`` when asked, and under ``--grad`` x is a
fresh leaf and the step's slice of the case's cotangent g [b, total, h, d] goes back through
autograd. Each step's gradient of x is graded as rope.apply grades its gradient (f R_{-m} g on the
pairs, g on the tail; conformance/rope/backward.py) with that step's spec, and diagnosed with the
backward codes; the case's gradient ratio is its worst step's. Modules that return ``(cos, sin)``
have no float input to differentiate: their cases say so and grade the forward only. The float64
gradcheck (``rope.module.gradcheck``) builds a module for a small spec and checks
``module(x, positions)`` in x.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from conformance.core import rotation_reference as reference
from conformance.core.protocol import Graded, Prepared, Probe, Protocol
from conformance.core.scripted import call_step, merge_step, step_failure
from conformance.core.tensors import type_name, torch_dtype
from conformance.results import Diagnosis, IdentityResult
from conformance.rope.spec import spec_of
from conformance.core.rotation_backward import as_f64, plain_cotangent
from conformance.rope import module_state
from conformance.rope.apply import PROTOCOL as APPLY
from conformance.rope.backward import diagnose_gradient, gradcheck_case, grade_gradient
from conformance.rope.cache import PROTOCOL as CACHE
from conformance.training import budget_dtype, gradcheck_identity, TrainingCall, unpack
from conformance.isolation import error_line

OUTPUT_ATTRIBUTE = "posref_output"  # "x" (default) or "cos_sin"
OUTPUT_FORMS = ("x", "cos_sin")


@dataclass
class Step:
    """One call of the script: its slice of the case's arrays, and what grading found."""

    index: int
    x: np.ndarray  # float64 [b, s, h, d], the case's values (not yet rounded)
    positions: np.ndarray  # int64 [b, s]
    seq_len: int  # current length: largest position + 1
    bounds: tuple = (0, 0)  # (start, stop) of the step along the case's sequence axis
    prepared: Optional[Prepared] = None  # rope.apply's (cache form: positions too); dtype: the budget's
    graded: Optional[Graded] = None
    output: Optional[object] = None  # output_f64 (x form) or (cos, sin) [b, s, r/2 or r]
    training: Optional[dict] = None  # TrainingCall's result under --grad (gradient of x)
    grad_graded: Optional[Graded] = None

    def describe(self) -> str:
        pos = self.positions
        lo, hi = int(pos.min()), int(pos.max())
        where = f"position {lo}" if lo == hi else f"positions {lo}..{hi}"
        return f"step {self.index} ({pos.shape[1]} token(s) at {where}, length {self.seq_len})"


@dataclass
class ModulePrepared(Prepared):
    steps: list = field(default_factory=list)
    cast: bool = False
    form: str = "x"
    low_buffers: dict = field(default_factory=dict)  # buffer name -> (dtype, step it was seen at)
    module: object = None  # the factory's module after the cast (set by grade)


def step_spec(spec, seq_len: int):
    """The spec of one step's reference: the case's, with the step's current length."""
    return dataclasses.replace(spec, seq_len=int(seq_len))


def script(case) -> list:
    """The case's steps (reference.rope.module_vectors: steps concatenated along seq)."""
    # imported on use: module_vectors loads RoPE's mpmath oracles, 5-9 ms at every posref start
    from reference.rope.module_vectors import step_bounds, step_seq_len

    x = np.asarray(case.arrays["x"], dtype=np.float64)
    pos = np.asarray(case.arrays["positions"], dtype=np.int64)
    out = []
    for k, (start, stop) in enumerate(step_bounds(case.params["steps"])):
        p = pos[:, start:stop]
        out.append(Step(k, x[:, start:stop], p, step_seq_len(p), (start, stop)))
    return out


class ModuleProbe(Probe):
    """Records whether the run is isolated and the layout the user declared (the gradcheck's)."""

    def __init__(self, isolated: bool, declared: str = "auto"):
        self.isolated = isolated
        self.declared = declared

    @property
    def blackbox_options(self) -> dict:
        return {"layout": self.declared} if self.declared != "auto" else {}

    def to_json(self) -> dict:
        return {"in_process": not self.isolated, "declared_layout": self.declared}

    def describe(self) -> str:
        return "module driven in the runner's process" if not self.isolated else \
            "rope.module cases skipped under --isolate"


ISOLATED = ("rope.module drives the module across calls in the runner's process; a module cannot come "
            "back from an isolated process: run without --isolate")


class RopeModule(Protocol):
    name = "rope.module"
    family = "rope"
    signature = ("fn(spec) -> module; module(x, positions) -> tensor like x, or (cos, sin) with "
                 "module.posref_output = 'cos_sin'")
    layouts = ("half", "interleaved")
    dtype_free = False
    drives_calls = True
    differentiable = True
    acceptable_note = "float32 angle rounding, growing with position"

    def spec(self, case):
        return spec_of(case.params)

    def prepare(self, case, spec, dtype, device) -> ModulePrepared:
        return ModulePrepared((spec,), {}, {}, dtype, device, steps=script(case),
                              cast=bool(case.params.get("cast", False)))

    def probe(self, invoker, cases, options):
        return ModuleProbe(bool(getattr(invoker, "isolated", False)), options.layout)

    def excluded(self, spec, options) -> Optional[str]:
        # --isolate is the user's explicit option: a module cannot cross the wire.
        return ISOLATED if getattr(options, "isolate", False) else super().excluded(spec, options)

    # -- grading ---------------------------------------------------------------------------

    def grade(self, case, spec, prepared, value) -> Graded:
        problem = self._ready(prepared, value)
        if problem is not None:
            return Graded(problems=[problem])
        module, plan = prepared.module, prepared.plan
        call = module if plan is None else TrainingCall(module)
        autocast = plan.get("autocast") if plan is not None else None
        graded = Graded()
        for step in prepared.steps:
            sspec = step_spec(spec, step.seq_len)
            step.prepared = APPLY.prepare_arrays(step.x, step.positions, sspec, prepared.dtype, prepared.device)
            x_t, pos_t = step.prepared.args[:2]
            outcome = self._call(prepared, call, (x_t, pos_t) + self._step_plan(prepared, step))
            self._watch_buffers(prepared, module, step.index)
            if outcome.kind != "ok":
                graded.problems.append(step_failure(step, outcome))
                break
            out, step.training = unpack(outcome.value)
            chosen = budget_dtype(out, prepared.dtype, autocast)
            if chosen != prepared.dtype:
                step.prepared = dataclasses.replace(step.prepared, dtype=chosen)
            step.graded = self._grade_step(case, sspec, step, prepared, out)
            self._merge(graded, step, step.graded)
        graded.training = self._training(prepared)
        # Under autocast the case is graded with the budget every step's output arrived in, if one.
        chosen = {s.prepared.dtype for s in prepared.steps if s.graded is not None}
        if len(chosen) == 1:
            prepared.dtype = chosen.pop()
        return graded

    @staticmethod
    def _call(prepared, fn, args):
        return call_step(prepared, fn, args)

    @staticmethod
    def _step_plan(prepared, step) -> tuple:
        """The trailing plan of a step's call: the case's, with the step's slice of the cotangent;
        no gradient for a module that returns tables (nothing in them depends on x)."""
        plan = prepared.plan
        if plan is None:
            return ()
        if not plan["grad_args"] or prepared.form != "x":
            return (dict(plan, grad_args=(), cotangents=()),)
        start, stop = step.bounds
        return (dict(plan, cotangents=tuple(c[:, start:stop].contiguous() for c in plan["cotangents"])),)

    @staticmethod
    def _training(prepared) -> Optional[dict]:
        """Graded.training: the steps' gradients in TrainingCall's form (one tuple of per-step
        gradients for x), the first step's problem, or a note when there is nothing to grade."""
        plan = prepared.plan
        if plan is None or not plan["grad_args"]:
            return None
        if prepared.form != "x":
            return {"note": "--grad: the module returns (cos, sin), which do not depend on x: no gradient "
                            "graded (its forward is)"}
        ran = [s for s in prepared.steps if s.training is not None]
        if not ran:
            return {"note": "--grad: no step of the script returned, so no gradient was computed"}
        for s in ran:
            if s.training.get("problem"):
                return {"grads": (), "cotangent_dtypes": (), "problem": f"{s.training['problem']} ({s.describe()})"}
        return {"grads": (tuple(s.training["grads"][0] for s in ran),),
                "cotangent_dtypes": ran[0].training["cotangent_dtypes"], "problem": None}

    def _ready(self, prepared, value) -> Optional[Diagnosis]:
        """Check the factory's result, apply the cast, read the declared output form."""
        if not callable(value):
            return Diagnosis("shape-changed", f"the factory returned a {type_name(value)}, not a callable "
                                              "module")
        form = getattr(value, OUTPUT_ATTRIBUTE, "x")
        if form not in OUTPUT_FORMS:
            return Diagnosis("shape-changed", f"module.{OUTPUT_ATTRIBUTE} must be 'x' or 'cos_sin', got {form!r}")
        prepared.form = form
        module = value
        mover = getattr(value, "to", None)
        try:
            if prepared.cast and prepared.dtype is not None and callable(mover):
                module = mover(torch_dtype(prepared.dtype)) or value  # nn.Module.to returns self
            if prepared.device != "cpu" and callable(getattr(module, "to", None)):
                module = module.to(prepared.device) or module
        except Exception as exc:  # noqa: BLE001 - the module's own .to failing is its verdict

            return Diagnosis("raised", f"module.to({prepared.dtype}) raised {error_line(exc)}")
        prepared.module = module
        self._watch_buffers(prepared, module, None)
        return None

    @staticmethod
    def _watch_buffers(prepared, module, step_index) -> None:
        """Remember floating buffers and parameters held in a low-precision dtype (after the cast,
        and after every step: a module may restore a rounded copy later)."""
        named = []
        for attr in ("named_buffers", "named_parameters"):
            fn = getattr(module, attr, None)
            if callable(fn):
                try:
                    named += list(fn())
                except Exception:  # noqa: BLE001 - a module whose listing fails names nothing
                    pass
        for name, tensor in named:
            dtype = str(getattr(tensor, "dtype", "")).replace("torch.", "")
            if dtype in ("bfloat16", "float16") and name not in prepared.low_buffers:
                prepared.low_buffers[name] = (dtype, step_index)

    def _grade_step(self, case, sspec, step, prepared, value) -> Graded:
        if prepared.form == "x":
            graded = APPLY.grade(case, sspec, step.prepared, value)
            step.output = graded.output_f64
            return graded
        return self._grade_tables(case, sspec, step, prepared, value)

    def _grade_tables(self, case, sspec, step, prepared, value) -> Graded:
        """(cos, sin) in pair order [b, s, r/2], or expanded [b, s, r] in the spec's layout: each
        of the two expansions graded as a rope.cache output, the worse kept."""
        cp = Prepared(step.prepared.args, {"positions": step.positions}, dict(step.prepared.watched), None,
                      prepared.device)
        r = sspec.rotary_dim
        last = _last_dim(value)
        if last != r:
            graded = CACHE.grade(case, sspec, cp, value)
            step.output = graded.output_f64
            return graded
        first, second = reference.pair_indices(r, sspec.layout)
        worst = None
        for idx in (first, second):
            half = tuple(t[..., idx] for t in value)
            g = CACHE.grade(case, sspec, cp, half)
            if worst is None or _worse(g, worst):
                worst = g
        step.output = worst.output_f64
        return worst

    @staticmethod
    def _merge(graded: Graded, step: Step, g: Graded) -> None:
        merge_step(graded, step, g)  # conformance/core/scripted.py, shared with attention.decode

    # -- explaining ------------------------------------------------------------------------

    def diagnose(self, case, spec, prepared, graded, dtype) -> list:
        return module_state.diagnose(spec, prepared, dtype)

    def locate(self, case, spec, prepared, index) -> str:
        k, rest = int(index[0]), list(index[1:])
        step = prepared.steps[k]
        if prepared.form == "x":
            where = APPLY.locate(case, step_spec(spec, step.seq_len), step.prepared, rest)
        else:
            b, s, i = rest
            where = f"batch row {b}, position {int(step.positions[b, s])} (token {s}), pair {i}"
        return f"{step.describe()}: {where}"

    def repro_call(self) -> str:
        return "module = fn(*args)  # then module(x, positions) for each step of the case"

    # -- training (--grad): each step's gradient of x as rope.apply's -------------------------

    def grad_inputs(self, case, spec, prepared) -> dict:
        return {"x": 0}  # into each step's call module(x, positions)

    def cotangents(self, case, spec, prepared) -> tuple:
        return (plain_cotangent(case.id, np.shape(case.arrays["x"]), prepared.dtype, prepared.device),)

    def _graded_steps(self, prepared, grads):
        """(step, its gradient) for the steps that ran to the backward."""
        return zip([s for s in prepared.steps if s.training is not None], grads.get("x") or ())

    def grade_backward(self, case, spec, prepared, cotangents, grads) -> dict:
        g = as_f64(cotangents[0])
        graded = Graded()
        for step, grad in self._graded_steps(prepared, grads):
            start, stop = step.bounds
            step.grad_graded = grade_gradient(APPLY, step_spec(spec, step.seq_len), step.prepared, step.x.shape,
                                              step.positions, g[:, start:stop], grad, "x")
            self._merge(graded, step, step.grad_graded)
        return {"x": graded}

    def diagnose_backward(self, case, spec, prepared, cotangents, grads, graded, dtype) -> list:
        g, found, seen = as_f64(cotangents[0]), [], set()
        for step, _ in self._graded_steps(prepared, grads):
            gg = step.grad_graded
            if gg is None or gg.output_f64 is None or (gg.ratio.get("standard") or np.inf) <= 1.0:
                continue
            start, stop = step.bounds
            for d in diagnose_gradient(APPLY, step_spec(spec, step.seq_len), step.prepared.dtype, g[:, start:stop],
                                       step.positions, gg.output_f64, f"x at {step.describe()}"):
                if d.code not in seen:
                    found.append(d)
                    seen.add(d.code)
        return found

    def grad_blackbox(self, invoker, device, probe) -> list:
        """torch.autograd.gradcheck of module(x, positions) in x, float64, for the first small spec
        the factory supports (rope.apply's gradcheck case: half layout then interleaved, a
        pass-through tail then full rotary)."""
        from types import SimpleNamespace

        ident = f"{self.name}.gradcheck"

        def result(verdict, message):
            return [IdentityResult(id=ident, dtype="float64", verdict=verdict, message=message)]

        if probe is not None and probe.isolated:
            return result("skip", ISOLATED)
        refused = "no spec tried"
        declared = probe.blackbox_options.get("layout") if probe is not None else None
        for layout in (declared,) if declared else ("half", "interleaved"):
            x, positions, spec = gradcheck_case(layout)
            for s in (spec, dataclasses.replace(spec, rotary_dim=spec.head_dim)):
                made = invoker.call(s)
                if made.kind == "unsupported":
                    refused = made.error
                    continue
                if made.kind != "ok" or not callable(made.value):
                    return result("error", f"the factory failed for the gradcheck's spec: "
                                           f"{made.error or type(made.value).__name__ + ' is not callable'}")
                module = made.value
                if getattr(module, OUTPUT_ATTRIBUTE, "x") != "x":
                    return result("skip", "the module returns (cos, sin), which do not depend on x: nothing to "
                                          "differentiate")
                if device != "cpu" and callable(getattr(module, "to", None)):
                    module = module.to(device) or module
                wrapped = TrainingCall(module)
                steps = SimpleNamespace(call=lambda *args: invoker.call_with(wrapped, *args))
                return [gradcheck_identity(steps, (x.to(device), positions.to(device)), (0,), device, ident,
                                           f"module(x, positions), x [1, 4, 1, 8] float64 at positions 0, 1, 7, "
                                           f"1000 ({s.layout} layout, rotary_dim {s.rotary_dim})")]
        return result("skip", f"the factory raised Unsupported for every small spec: {refused}")


def _last_dim(value) -> Optional[int]:
    if isinstance(value, (tuple, list)) and len(value) == 2 and hasattr(value[0], "shape"):
        shape = tuple(value[0].shape)
        return shape[-1] if shape else None
    return None


def _worse(a: Graded, b: Graded) -> bool:
    if a.problems and not b.problems:
        return True
    ra, rb = a.ratio.get("standard"), b.ratio.get("standard")
    return ra is not None and (rb is None or ra > rb)


PROTOCOL = RopeModule()
