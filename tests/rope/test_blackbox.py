"""conformance.rope.blackbox: RoPE's identity checks run on an implementation through an invoker."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import reference.rope as rr  # noqa: E402
from conformance import Unsupported  # noqa: E402
from support import run_blackbox  # noqa: E402
from conformance.isolation import Outcome, make_invoker  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "rope"
APPLY_CHECKS = {"inputs-not-mutated", "dtype-preserved", "shape-preserved", "norm-per-pair", "shift-invariance",
                "linearity", "position-zero", "non-contiguous", "batch-independence", "determinism",
                "batch-independence-decode", "non-contiguous-decode"}


def load(relpath):
    path = EXAMPLES / relpath
    spec = importlib.util.spec_from_file_location("posref_bb_" + path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CountingInvoker:
    """The invoker contract in a few lines: call(*args) -> Outcome, counting the calls."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = 0

    def call(self, *args):
        self.calls += 1
        try:
            return Outcome("ok", self.fn(*args))
        except Unsupported as exc:
            return Outcome("unsupported", None, str(exc))
        except Exception as exc:  # noqa: BLE001
            return Outcome("raised", None, f"{type(exc).__name__}: {exc}")


class ScriptedInvoker:
    def __init__(self, outcome):
        self.outcome = outcome
        self.calls = 0

    def call(self, *args):
        self.calls += 1
        return self.outcome


def by_name(results):
    return {r.id.split("/", 1)[1]: r for r in results}


def reference_apply(x, positions, spec):
    """A float64-exact implementation wrapped as an adapter (output cast back to x.dtype)."""
    out = rr.apply(x.to(torch.float64).numpy(), positions.numpy(), rotary_dim=spec.rotary_dim, base=spec.base,
                   layout=spec.layout)
    return torch.from_numpy(out).to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_correct_implementations_pass_in_every_dtype(dtype):
    for fn, layout in ((reference_apply, "interleaved"), (load("hf_rotate_half.py").apply, "half")):
        inv = CountingInvoker(fn)
        results = run_blackbox(inv, "rope.apply", dtype=dtype, device="cpu", layout=layout)
        named = by_name(results)
        assert set(named) == APPLY_CHECKS
        assert all(r.verdict == "pass" for r in results), [(r.id, r.residual, r.bound) for r in results
                                                           if r.verdict != "pass"]
        assert all(r.dtype == str(dtype).replace("torch.", "") for r in results)
        assert inv.calls <= 15  # cheap: a handful of calls (3 of them at the decode shape)


def test_each_check_can_fail():
    """A defect per check, injected into an otherwise exact implementation."""

    def scaled_tail(x, p, spec):  # not a rotation: pair norms change
        out = reference_apply(x, p, spec)
        out[..., -1] *= 2
        return out

    def quadratic(x, p, spec):  # angles not linear in m: relative scores change with a shift
        return reference_apply(x, p * p // 7, spec)

    def affine(x, p, spec):  # f(0) != 0: not linear
        return reference_apply(x, p, spec) + 0.25

    def batch_mixing(x, p, spec):  # rows depend on each other
        out = reference_apply(x, p, spec)
        return out + 0.01 * out.mean(dim=0, keepdim=True) * (x.shape[0] > 1)

    def contiguity(x, p, spec):
        out = reference_apply(x, p, spec)
        return out if x.is_contiguous() else out * 1.5

    expect = {scaled_tail: "norm-per-pair", quadratic: "shift-invariance", affine: "linearity",
              batch_mixing: "batch-independence", contiguity: "non-contiguous"}
    for fn, check in expect.items():
        named = by_name(run_blackbox(CountingInvoker(fn), "rope.apply", dtype=torch.float32, device="cpu",
                                     layout="half"))
        assert named[check].verdict == "fail", (fn.__name__, named[check])
        assert named[check].residual > named[check].bound


def test_failures_carry_diagnoses():
    def one_based(x, p, spec):
        return reference_apply(x, p + 1, spec)

    named = by_name(run_blackbox(CountingInvoker(one_based), "rope.apply", dtype=torch.float32, device="cpu",
                                 layout="half"))
    zero = named["position-zero"]
    assert zero.verdict == "fail" and [d.code for d in zero.diagnoses] == ["position-offset"]
    assert zero.diagnoses[0].message.startswith("positions shifted by +1")
    assert named["shift-invariance"].verdict == "pass"  # an offset keeps relative positions


def test_input_mutation_is_seen_in_positions_too():
    def mutates_positions(x, p, spec):
        out = reference_apply(x, p, spec)
        p.add_(0)
        p[..., 0] = 3
        return out

    named = by_name(run_blackbox(CountingInvoker(mutates_positions), "rope.apply", dtype=torch.float32,
                                 device="cpu", layout="half"))
    check = named["inputs-not-mutated"]
    assert check.verdict == "fail" and check.diagnoses[0].code == "input-mutated"
    assert "positions" in check.message and "x" not in check.message.split("tensor")[1].split("was")[0].split()


def test_raised_unsupported_and_non_tensor_outcomes():
    raised = run_blackbox(ScriptedInvoker(Outcome("raised", None, "ValueError: nope")), "rope.apply",
                          dtype=torch.float32, device="cpu", layout="half")
    assert all(r.verdict in ("error", "pass") for r in raised)
    assert {d.code for r in raised for d in r.diagnoses} == {"raised"}
    assert by_name(raised)["inputs-not-mutated"].verdict == "pass"

    unsupported = run_blackbox(ScriptedInvoker(Outcome("unsupported", None, "half only")), "rope.apply",
                               dtype=torch.float32, device="cpu", layout="interleaved")
    assert {r.verdict for r in unsupported if not r.id.endswith("inputs-not-mutated")} == {"skip"}

    listy = run_blackbox(ScriptedInvoker(Outcome("ok", [1.0, 2.0])), "rope.apply", dtype=torch.float32,
                         device="cpu", layout="half")
    named = by_name(listy)
    assert named["norm-per-pair"].verdict == "error" and "not a tensor" in named["norm-per-pair"].message


@pytest.mark.parametrize("kind", ["timeout", "crashed"])
def test_no_calls_after_a_hang_or_crash(kind):
    inv = ScriptedInvoker(Outcome(kind, None, f"it {kind}"))
    results = run_blackbox(inv, "rope.apply", dtype=torch.bfloat16, device="cpu", layout="half")
    assert inv.calls == 1
    assert {d.code for r in results for d in r.diagnoses} == {kind}
    assert sum(r.verdict == "skip" for r in results) >= 6


def test_non_finite_output_is_named():
    def nan_past_2_16(x, p, spec):
        out = reference_apply(x, p, spec)
        out[p >= 65536] = float("nan")
        return out

    named = by_name(run_blackbox(CountingInvoker(nan_past_2_16), "rope.apply", dtype=torch.float32,
                                 device="cpu", layout="half"))
    assert "non-finite" in [d.code for d in named["norm-per-pair"].diagnoses]
    # NaN in the same places is the same result
    assert named["determinism"].verdict == "pass" and named["non-contiguous"].verdict == "pass"


def test_results_serialise():
    results = run_blackbox(CountingInvoker(load("buggy/attention_factor.py").apply), "rope.apply",
                           dtype=torch.float32, device="cpu", layout="half")
    for r in results:
        d = r.to_json()
        assert set(d) >= {"id", "dtype", "verdict", "residual", "bound", "message", "diagnoses"}
        assert all(set(x) == {"code", "message"} for x in d["diagnoses"])
    assert len({r.id for r in results}) == len(results)


def test_in_process_invoker_from_isolation():
    inv = make_invoker(load("meta_complex.py").apply, None, isolate=False, timeout=30)
    results = run_blackbox(inv, "rope.apply", dtype=torch.float16, device="cpu", layout="interleaved")
    assert all(r.verdict == "pass" for r in results)


# ------------------------------------------------------------------------------------------
# rope.cache and rope.frequencies


def test_cache_checks():
    hf = load("hf_rotate_half.py")
    good = run_blackbox(CountingInvoker(hf.cache), "rope.cache", dtype=torch.float32, device="cpu", layout="half")
    assert {r.id.split("/")[1] for r in good} == {"inputs-not-mutated", "shape-preserved", "unit-circle",
                                                  "position-zero", "angle-addition", "determinism"}
    assert all(r.verdict == "pass" for r in good), [(r.id, r.residual, r.bound) for r in good]

    named = by_name(run_blackbox(CountingInvoker(load("buggy/attention_factor.py").cache), "rope.cache",
                                 dtype=torch.float32, device="cpu", layout="half"))
    assert named["unit-circle"].verdict == "fail"
    assert [d.code for d in named["unit-circle"].diagnoses] == ["attention-factor"]

    named = by_name(run_blackbox(CountingInvoker(load("buggy/position_offset.py").cache), "rope.cache",
                                 dtype=torch.float32, device="cpu", layout="half"))
    assert named["position-zero"].verdict == "fail"
    assert [d.code for d in named["position-zero"].diagnoses] == ["position-offset"]

    named = by_name(run_blackbox(CountingInvoker(load("buggy/angle_precision.py").cache), "rope.cache",
                                 dtype=torch.float32, device="cpu", layout="half"))
    assert named["angle-addition"].verdict == "fail"
    assert [d.code for d in named["angle-addition"].diagnoses] == ["angle-precision"]

    wide = run_blackbox(CountingInvoker(lambda p, spec: (torch.zeros(3), torch.zeros(3))), "rope.cache",
                        dtype=torch.float32, device="cpu", layout="half")
    assert by_name(wide)["shape-preserved"].diagnoses[0].code == "shape-changed"


def test_frequency_checks():
    good = run_blackbox(CountingInvoker(load("hf_rotate_half.py").frequencies), "rope.frequencies",
                        dtype=torch.bfloat16, device="cpu", layout="half")
    assert {r.id.split("/")[1] for r in good} == {"shape-preserved", "geometric-ladder", "determinism"}
    assert all(r.verdict == "pass" for r in good)
    for path, code in (("frequency_exponent.py", "frequency-exponent"), ("wrong_base.py", "wrong-base")):
        named = by_name(run_blackbox(CountingInvoker(load("buggy/" + path).frequencies), "rope.frequencies",
                                     dtype=torch.float32, device="cpu", layout="half"))
        assert named["geometric-ladder"].verdict == "fail"
        assert code in [d.code for d in named["geometric-ladder"].diagnoses], path

    calls = iter(range(1, 1000))

    def noisy(spec, seq_len):
        # Every call differs (a float32 random factor near 1 could repeat and make this flaky).
        inv = torch.tensor(rr.inv_freq(spec.rotary_dim, spec.base)) * (1 + 1e-6 * next(calls))
        return inv, 1.0

    named = by_name(run_blackbox(CountingInvoker(noisy), "rope.frequencies", dtype=torch.float32, device="cpu",
                                 layout="half"))
    assert named["determinism"].diagnoses[0].code == "not-deterministic"


def test_a_protocol_without_checks_runs_none():
    from conformance.core.protocol import Protocol

    assert Protocol().blackbox(ScriptedInvoker(Outcome("ok", 1)), torch.float32, "cpu", None) == []


def test_inputs_are_rounded_to_the_dtype_before_comparing():
    """The x the implementation sees is the dtype-rounded one: an exact bf16 implementation passes
    position-zero with residual 0 (nothing is lost to the comparison itself)."""
    named = by_name(run_blackbox(CountingInvoker(reference_apply), "rope.apply", dtype=torch.bfloat16,
                                 device="cpu", layout="half"))
    assert named["position-zero"].residual == 0.0
    assert named["norm-per-pair"].residual <= np.finfo(np.float32).eps * 2**16
