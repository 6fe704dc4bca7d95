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
