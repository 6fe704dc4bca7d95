"""--framework numpy|jax|mlx|cupy (conformance/frameworks, docs/frameworks.md): adapters of other
array libraries are graded with the same budgets, diagnoses and reports as torch ones.

Each test grades a few committed cases (``rope.apply/llama2-d128/*``, the sinusoidal catalog) to
stay fast; JAX and MLX tests skip where the library is not installed (the framework extras). The
buggy examples are also graded end to end by tests/test_family_contract.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conformance import Unsupported, run_conformance
from conformance.errors import UsageError
from conformance.frameworks import _numpy
from conformance.runner import OptionError
from tests.support import ROOT

EX = ROOT / "examples"
NUMPY_TABLE = f"{EX / 'sinusoidal' / 'numpy_table.py'}:table"
JAX_APPLY = f"{EX / 'rope' / 'jax_maxtext.py'}:apply"
ROPE_CASES = "rope.apply/llama2-d128/*"
QUICK = {"fresh": False, "identities": False, "dtypes": ("float32",), "timeout": 60.0}
GRAD_CASES = "rope.apply/llama2-d128/[pd]*"  # prefill-8, decode-4095, decode-8191: --grad is the costly path


def codes(report) -> set:
    return {d.code for c in report.cases for d in c.diagnoses} | {d.code for i in report.identities
                                                                  for d in i.diagnoses}


def graded(report) -> list:
    return [c for c in report.cases if c.verdict != "skip"]


# ------------------------------------------------------------------------------------------
# NumPy


def test_numpy_table_passes_and_the_environment_names_numpy():
    report = run_conformance(NUMPY_TABLE, "sinusoidal.table", framework="numpy", fresh=False)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases]
    assert graded(report) and report.identities
    assert report.environment["framework"] == "numpy"
    assert report.environment["framework_version"] == np.__version__
    assert any(n.startswith("--framework numpy:") for n in report.notes)
    assert all("--framework numpy" in c.repro for c in report.cases)
    json.dumps(report.to_json())  # the report stays plain data


def test_the_numpy_table_needs_its_framework():
    """The same adapter handed torch tensors (no --framework) raises: the conversion is real."""
    report = run_conformance(NUMPY_TABLE, "sinusoidal.table", **QUICK)
    assert {c.verdict for c in report.cases} == {"error"} and "raised" in codes(report)


def _numpy_table_writing_positions(positions, spec):
    from conformance.loader import load_target

    out = load_target(NUMPY_TABLE)(positions, spec)
    positions[...] = positions + 1  # a numpy input written in place
    return out


def test_a_numpy_adapter_writing_into_its_input_is_input_mutated():
    report = run_conformance(_numpy_table_writing_positions, "sinusoidal.table", framework="numpy", **QUICK)
    assert graded(report) and all(c.verdict == "fail" for c in graded(report))
    assert "input-mutated" in codes(report)


def test_a_numpy_adapter_writing_into_its_input_is_caught_under_isolate(tmp_path):
    path = tmp_path / "writes.py"
    path.write_text("import numpy as np\n\ndef table(positions, spec):\n"
                    "    out = np.zeros((positions.shape[0], spec.d_model), np.float32)\n"
                    "    positions[...] = 7\n    return out\n")
    report = run_conformance(f"{path}:table", "sinusoidal.table", framework="numpy", isolate=True, **QUICK)
    assert "input-mutated" in codes(report)


def test_numpy_table_under_isolate_passes():
    report = run_conformance(NUMPY_TABLE, "sinusoidal.table", framework="numpy", isolate=True, fresh=False,
                             identities=False)
    assert report.summary()["overall"] == "pass"
    assert report.environment["framework"] == "numpy"


def _numpy_identity(x, positions, spec):
    """Returns x as it came: numpy in, numpy out (wrong, but gradable)."""
    assert isinstance(x, np.ndarray) and isinstance(positions, np.ndarray), (type(x), type(positions))
    _numpy_identity.seen.add(x.dtype.name)
    return x.copy()


_numpy_identity.seen = set()


def test_numpy_defaults_to_float32_and_float64_and_bfloat16_through_ml_dtypes():
    report = run_conformance(_numpy_identity, "rope.apply", framework="numpy", cases=ROPE_CASES, fresh=False,
                             identities=False)
    assert report.environment["dtypes"] == ["float32", "float64"]
    assert any("no native bfloat16" in n for n in report.notes)
    assert {c.dtype for c in report.cases} == {"float32", "float64"}
    pytest.importorskip("ml_dtypes")
    report = run_conformance(_numpy_identity, "rope.apply", framework="numpy", cases=ROPE_CASES, fresh=False,
                             identities=False, dtypes=("bfloat16",))
    assert "bfloat16" in _numpy_identity.seen
    assert graded(report) and all(c.verdict == "fail" for c in graded(report))  # graded, and wrong


def test_a_dtype_numpy_cannot_hold_is_reported_as_the_frameworks_limit(monkeypatch):
    monkeypatch.setattr(_numpy, "ml_dtypes", lambda: None)  # as without ml_dtypes
    report = run_conformance(_numpy_identity, "rope.apply", framework="numpy", cases=ROPE_CASES, fresh=False,
                             identities=False, dtypes=("bfloat16",))
    assert report.cases and all(c.verdict == "skip" for c in report.cases)
    assert all(any("numpy has no bfloat16" in n for n in c.notes) for c in report.cases)
    assert report.summary()["overall"] == "skip"  # nothing graded: never a pass


def test_the_numpy_buggy_example_gets_its_code():
    report = run_conformance(f"{EX / 'sinusoidal' / 'buggy' / 'numpy_block_order.py'}:table", "sinusoidal.table",
                             framework="numpy", **QUICK)
    assert "block-order" in codes(report)


# ------------------------------------------------------------------------------------------
# Option errors, a missing framework


@pytest.mark.parametrize("options, words", [
    ({"framework": "numpy", "grad": True}, "--grad with --framework numpy"),
    ({"framework": "numpy", "autocast": "bfloat16"}, "--autocast is torch's"),
    ({"framework": "numpy", "compile": True}, "--compile is torch's"),
    ({"framework": "tensorflow"}, "framework must be one of"),
])
def test_options_that_do_not_go_with_a_framework_are_one_line_errors(options, words):
    with pytest.raises(OptionError) as err:
        run_conformance(_numpy_identity, "rope.apply", cases=ROPE_CASES, **options)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_protocol_whose_adapter_returns_a_module_is_a_usage_error():
    with pytest.raises(OptionError, match="rope.module's adapter returns an object"):
        run_conformance(_numpy_identity, "rope.module", framework="numpy")


@pytest.mark.parametrize("name", ["jax", "mlx", "cupy", "numpy"])
def test_a_framework_that_is_not_installed_is_one_line(monkeypatch, name):
    from conformance import frameworks

    monkeypatch.setattr(frameworks.backend(name), "MODULE", "posref_no_such_library")
    with pytest.raises(OptionError) as err:
        run_conformance(_numpy_identity, "rope.apply", cases=ROPE_CASES, framework=name,
                        device="cuda" if name == "cupy" and torch.cuda.is_available() else "cpu")
    line = str(err.value)
    assert "\n" not in line and (f"{name} is not installed" in line or "runs on cuda only" in line)


def test_the_command_line_takes_framework(capsys, tmp_path):
    from conformance.cli import main

    out = tmp_path / "r.json"
    code = main(["conform", NUMPY_TABLE, "--protocol", "sinusoidal.table", "--framework", "numpy", "--no-fresh",
                 "--json", str(out), "-q"])
    assert code == 0
    assert json.loads(out.read_text())["environment"]["framework"] == "numpy"


# ------------------------------------------------------------------------------------------
# JAX


def test_jax_maxtext_passes_and_the_environment_names_jax():
    jax = pytest.importorskip("jax")
    report = run_conformance(JAX_APPLY, "rope.apply", framework="jax", cases=ROPE_CASES, fresh=False,
                             dtypes=("float32", "bfloat16"))
    assert report.summary()["overall"] == "pass", [(c.id, c.dtype, c.verdict) for c in report.cases]
    assert {c.dtype for c in graded(report)} == {"float32", "bfloat16"}
    assert report.environment["framework"] == "jax" and report.environment["framework_version"] == jax.__version__


def test_jax_grad_through_vjp_passes_for_the_correct_rope_and_fails_for_a_wrong_vjp():
    pytest.importorskip("jax")
    report = run_conformance(JAX_APPLY, "rope.apply", framework="jax", grad=True, cases=GRAD_CASES, fresh=False,
                             dtypes=("float32",))
    assert report.summary()["overall"] == "pass"
    assert graded(report) and all(c.grad and c.grad["verdict"] in ("pass", "acceptable") for c in graded(report))
    assert any(i.id.endswith("gradcheck") and i.verdict == "pass" for i in report.identities)
    bad = run_conformance(f"{EX / 'rope' / 'buggy' / 'jax_backward_transposed.py'}:apply", "rope.apply",
                          framework="jax", grad=True, cases=GRAD_CASES, fresh=False, dtypes=("float32",),
                          isolate=True)  # the child wraps TARGET for --grad (load_training_jax)
    assert "backward-transposed" in codes(bad)
    assert any(i.id.endswith("gradcheck") and i.verdict == "fail" for i in bad.identities)


def test_the_jax_buggy_example_gets_its_code_under_isolate():
    pytest.importorskip("jax")
    report = run_conformance(f"{EX / 'rope' / 'buggy' / 'jax_rotation_reversed.py'}:apply", "rope.apply",
                             framework="jax", cases=ROPE_CASES, isolate=True, **QUICK)
    assert "rotation-reversed" in codes(report)
    assert report.environment["framework"] == "jax"


def _rotated(x, positions, spec):
    from conformance.loader import load_target

    return load_target(JAX_APPLY)(x, positions, spec)


def _returns_torch(x, positions, spec):
    return torch.zeros(tuple(x.shape))


def _returns_list(x, positions, spec):
    return np.asarray(_rotated(x, positions, spec)).tolist()


def _returns_float64(x, positions, spec):
    return _rotated(x, positions, spec).astype("float64")


def _returns_nan(x, positions, spec):
    return _rotated(x, positions, spec) * float("nan")


def _raises(x, positions, spec):
    raise ValueError("no")


def _unsupported(x, positions, spec):
    raise Unsupported("this JAX port has no such case")


@pytest.mark.parametrize("fn, verdict, code", [
    (_returns_torch, "fail", "shape-changed"),
    (_returns_list, "fail", "shape-changed"),
    (_returns_float64, "fail", "dtype-changed"),
    (_returns_nan, "fail", "non-finite"),
    (_raises, "error", "raised"),
])
def test_hostile_jax_returns_are_verdicts(fn, verdict, code):
    pytest.importorskip("jax")
    report = run_conformance(fn, "rope.apply", framework="jax", cases=ROPE_CASES, **QUICK)
    assert report.cases and all(c.verdict == verdict for c in report.cases), [c.verdict for c in report.cases]
    assert code in codes(report)
    if fn is _returns_torch:
        assert any("torch.Tensor (a jax adapter returns jax arrays)" in d.message
                   for c in report.cases for d in c.diagnoses)


def test_unsupported_from_a_jax_adapter_skips_with_its_reason():
    pytest.importorskip("jax")
    report = run_conformance(_unsupported, "rope.apply", framework="jax", cases=ROPE_CASES, **QUICK)
    assert report.cases and all(c.verdict == "skip" for c in report.cases)
    assert all("this JAX port has no such case" in " ".join(c.notes) for c in report.cases)


def test_nested_outputs_and_inputs_convert():
    """rope.apply_qk returns a tuple of jax arrays; rope.cache takes positions alone."""
    pytest.importorskip("jax")
    qk = run_conformance(f"{EX / 'rope' / 'jax_maxtext.py'}:apply_qk", "rope.apply_qk", framework="jax", **QUICK)
    cache = run_conformance(f"{EX / 'rope' / 'jax_maxtext.py'}:cache", "rope.cache", framework="jax", **QUICK)
    for report in (qk, cache):
        assert graded(report) and report.summary()["overall"] == "pass"


# ------------------------------------------------------------------------------------------
# MLX


def test_mlx_examples_pass():
    pytest.importorskip("mlx.core")
    rope = run_conformance(f"{EX / 'rope' / 'mlx_rope.py'}:apply", "rope.apply", framework="mlx", cases=ROPE_CASES,
                           fresh=False, dtypes=("float32", "bfloat16"))
    slopes = run_conformance(f"{EX / 'alibi' / 'mlx_alibi.py'}:slopes", "alibi.slopes", framework="mlx", fresh=False)
    bias = run_conformance(f"{EX / 'alibi' / 'mlx_alibi.py'}:bias", "alibi.bias", framework="mlx", fresh=False)
    for report in (rope, slopes, bias):
        assert graded(report) and report.summary()["overall"] == "pass", report.target
        assert report.environment["framework"] == "mlx"


def test_conversions_round_trip_bits():
    """to_native then to_torch gives back the same bits, in every dtype a framework holds."""
    from conformance import frameworks

    names = ["numpy"] + [n for n, mod in (("jax", "jax"), ("mlx", "mlx.core")) if _importable(mod)]
    for name in names:
        be = frameworks.backend(name)
        for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64):
            t = (torch.randn(3, 5, dtype=torch.float64) * 100).to(dtype)
            back = be.to_torch(be.to_native(t))
            assert back.dtype == t.dtype and torch.equal(back, t), (name, dtype)


def _importable(module: str) -> bool:
    import importlib

    try:
        importlib.import_module(module)
        return True
    except ImportError:
        return False


def test_unknown_framework_names_are_usage_errors():
    from conformance import frameworks

    with pytest.raises(UsageError, match="framework must be one of"):
        frameworks.backend("tensorflow")


def test_a_project_table_entry_names_its_framework(tmp_path, monkeypatch):
    from conformance.cli import main

    (tmp_path / "posref.toml").write_text(
        f'[[adapters]]\nname = "np"\ntarget = "{NUMPY_TABLE}"\nprotocol = "sinusoidal.table"\n'
        f'framework = "numpy"\nno-fresh = true\njson = "np.json"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["conform", "-q"]) == 0
    assert json.loads((tmp_path / "np.json").read_text())["environment"]["framework"] == "numpy"


_SEEN_NESTED: list = []


def _kind(value, jax) -> str:
    return "none" if value is None else "jax" if isinstance(value, jax.Array) else type(value).__name__


def _records_nested(hidden, weights, positions, spec):
    import jax

    _SEEN_NESTED.append((isinstance(hidden, jax.Array), {k: isinstance(v, jax.Array) for k, v in weights.items()},
                         _kind(getattr(spec, "past_keys", None), jax)))
    raise Unsupported("recording only")


def test_tensors_in_dicts_and_in_the_spec_reach_a_jax_adapter_as_jax_arrays():
    """attention.forward hands a dict of weights and, for cached cases, spec.past_keys."""
    pytest.importorskip("jax")
    _SEEN_NESTED.clear()
    report = run_conformance(_records_nested, "attention.forward", framework="jax", **QUICK)
    assert report.cases and all(c.verdict == "skip" for c in report.cases)
    assert _SEEN_NESTED and all(h and all(w.values()) for h, w, _ in _SEEN_NESTED)
    past = {p for _, _, p in _SEEN_NESTED}
    assert past == {"none", "jax"}, past  # cached cases: converted too
