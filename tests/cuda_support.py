"""Where the numba.cuda tests run: the simulator everywhere (CI), and a real GPU where there is one.

NUMBA_ENABLE_CUDASIM is read when numba.cuda is first imported, so each target runs its script in
a subprocess with its own environment.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap

import pytest

TARGETS = [pytest.param("simulator", marks=pytest.mark.cudasim), pytest.param("gpu", marks=pytest.mark.gpu)]


def run_script(script: str, env_extra: dict | None = None, timeout: int = 300):
    """Run ``script`` in a fresh interpreter; its last stdout line is JSON, returned decoded."""
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env.update(env_extra or {})
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@functools.cache
def gpu_available() -> bool:
    return run_script("import json; from numba import cuda; print(json.dumps(cuda.is_available()))")


def target_env(target: str) -> dict:
    """The environment for ``target``; skips the real-GPU variant on a machine without a GPU (the
    simulator variant of the same test runs there)."""
    if target == "simulator":
        return {"NUMBA_ENABLE_CUDASIM": "1"}
    if not gpu_available():
        pytest.skip("no CUDA GPU here; the simulator variant of this test ran instead")
    return {}


_COMPARE = """
import json
import numpy as np
from numba import config
{setup}
def run(**kw):
    return np.asarray(call(**kw), dtype=np.float64)
fast, cpu = run(backend="cuda"), run(backend="cpu")
golden, golden_cpu = run(backend="cuda", mode="golden"), run(backend="cpu", mode="golden")
scale = max(float(np.max(np.abs(cpu))), 1e-300)
print(json.dumps({{"simulated": bool(config.ENABLE_CUDASIM), "fast_rel": float(np.max(np.abs(fast - cpu)) / scale),
                  "golden_identical": bool(np.array_equal(golden, golden_cpu))}}))
"""


def assert_cuda_matches_cpu(target: str, setup: str, tolerance: float = 8 * 2.0**-53) -> None:
    """Run ``setup`` (code defining ``call(**kw)`` with backend= and mode= keywords) on ``target``:
    fast cuda within ``tolerance`` of fast cpu (relative to the largest value), golden identical."""
    res = run_script(_COMPARE.format(setup=setup), target_env(target))
    assert res["simulated"] == (target == "simulator")
    assert res["golden_identical"] and res["fast_rel"] <= tolerance, res


# ---- PTX for sm_80 and sm_90 (no GPU needed) -------------------------------------------------

PTX_OPS = {
    "fma": r"\bfma\.rn\.f64\b",
    "mul": r"\bmul(\.rn)?\.f64\b",
    "mul_rn": r"\bmul\.rn\.f64\b",
    "add": r"\badd(\.rn)?\.f64\b",
    "div_rn": r"\bdiv\.rn\.f64\b",
    "sqrt_rn": r"\bsqrt\.rn\.f64\b",
    "atomic": r"\b(atom|red)\.",
    "approx": r"\.approx\b",
}

_PTX = """
import json, re
from types import SimpleNamespace
from unittest import mock
from numba import cuda
import importlib
K = importlib.import_module({module!r})
ops = {ops!r}
kernels = []
for cc in ((8, 0), (9, 0)):
    # numba-cuda compiles device functions for the current device's compute capability, which
    # needs a driver: without a GPU, say it is the target's. With a GPU nothing is patched.
    patch = None
    if not cuda.is_available():
        patch = mock.patch("numba.cuda.dispatcher.get_current_device", lambda: SimpleNamespace(compute_capability=cc))
        patch.start()
    for fn, sig in K.PTX_SIGNATURES:
        ptx, _ = cuda.compile_ptx(fn, sig, cc=cc)
        kernels.append(dict(kernel=fn.__name__, cc="%d%d" % cc, target=re.findall(r"\\.target\\s+(\\S+)", ptx),
                            entry=len(re.findall(r"\\.entry\\s", ptx)),
                            **{{name: len(re.findall(rx, ptx)) for name, rx in ops.items()}}))
    if patch is not None:
        patch.stop()
jitted = sorted(v.py_func.__name__ for v in vars(K).values()
                if type(v).__name__ == "CUDADispatcher" and not v.targetoptions.get("device"))
print(json.dumps({{"kernels": kernels, "jitted": jitted}}))
"""


def ptx_report(module: str) -> list[dict]:
    """Every kernel of ``module``'s ``PTX_SIGNATURES`` compiled to PTX for sm_80 and sm_90 in a
    fresh interpreter: one dict per kernel and target with its name, ``cc`` ("80", "90"), and the
    number of each instruction of ``PTX_OPS``. Asserts what holds for every kernel of the project:
    each compiles to one entry point for its target, and every kernel the module hands to
    ``cuda.jit`` (device functions aside) is listed, so none escapes the check."""
    res = run_script(_PTX.format(module=module, ops=PTX_OPS))
    kernels = res["kernels"]
    names = {k["kernel"] for k in kernels}
    assert set(res["jitted"]) <= names, f"jitted but not in PTX_SIGNATURES: {sorted(set(res['jitted']) - names)}"
    assert len(kernels) == 2 * len(names) and names, kernels
    for k in kernels:
        assert k["target"] == [f"sm_{k['cc']}"] and k["entry"] == 1, k
    return kernels


_REFUSAL = """
import json
import numpy as np
from numba import cuda
if cuda.is_available():
    print(json.dumps("gpu"))
else:
    try:
{call}
        print(json.dumps("returned"))
    except ValueError as exc:
        print(json.dumps(str(exc)))
"""


def assert_refused_without_gpu(call: str) -> None:
    """``call`` (Python statements using backend="cuda") run without a GPU or the simulator must
    raise a one-line ValueError naming the backend (skipped where a GPU is present)."""
    msg = run_script(_REFUSAL.format(call=textwrap.indent(textwrap.dedent(call).strip(), " " * 8)))
    if msg == "gpu":
        pytest.skip("a CUDA GPU is present, so the backend does not refuse")
    assert msg.startswith("backend:") and "\n" not in msg, msg
