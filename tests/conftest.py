"""Shared pytest settings: hypothesis profiles sized for the 2-core CI machines, and one
OpenMP thread per xdist worker."""

import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `pytest -n 2` on 2 cores: each worker already has a core. torch's OpenMP pool (2 threads
    # per worker, spinning between ops) would oversubscribe them; the grading subprocesses the
    # tests start inherit the setting. Numba's pools are not limited: its parallel kernels keep
    # their threading under test (below 2^22 values they run on the calling thread anyway).
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("POSREF_HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    """Under `pytest -n N` (N >= 2), the controller fills Numba's disk cache first, two groups in
    parallel (tests/warm.py): on a fresh clone both workers would otherwise compile the same
    kernels at once (the golden rotation kernel alone takes about 100 s)."""
    import subprocess
    import sys
    from pathlib import Path

    workers = getattr(config.option, "numprocesses", None)
    if hasattr(config, "workerinput") or not isinstance(workers, int) or workers < 2:
        return
    warm = Path(__file__).with_name("warm.py")
    procs = [subprocess.Popen([sys.executable, str(warm), group]) for group in ("a", "b")]
    for proc in procs:
        proc.wait()
