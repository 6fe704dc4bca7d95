"""``bucket-clamp-missing`` (issue 23, sec. 5): candle's T5 bucketing without the clamp to the
last bucket is named, on the catalog's spans and on fresh cases; correct code is not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from conformance import run_conformance
from conformance.t5.bucket import clamp_missing, unclamped
from conformance.t5.spec import T5Spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "t5"


@pytest.mark.parametrize("seed", [0, 1, 5])
def test_missing_clamp_is_named(seed):
    report = run_conformance(f"{EXAMPLES / 'buggy/clamp_missing.py'}:bucket", "t5.bucket", seed=seed,
                             identities=False, timeout=60.0)
    bad = [c for c in report.cases if c.verdict == "fail"]
    assert any(c.id.endswith("t5-encoder/span") for c in bad) and any(c.id.endswith("t5-decoder/span") for c in bad)
    assert all([d.code for d in c.diagnoses] == ["bucket-clamp-missing"] for c in bad)


def test_the_unclamped_formula_runs_past_the_last_bucket():
    spec = T5Spec(num_buckets=32, max_distance=128, bidirectional=True)
    r = np.array([-4000, -128, -127, 0, 127, 128, 4000])
    free = unclamped(r, spec)
    assert free[0] > 15 and free[-1] > 31  # past each direction's last bucket
    assert free[2] <= 15 and free[4] <= 31  # below max_distance the clamp never binds


def test_correct_and_other_faults_are_not_called_a_missing_clamp():
    from examples.t5.hf_t5 import bucket

    spec = T5Spec(num_buckets=32, max_distance=128, bidirectional=True)
    r = torch.arange(-3000, 3001, 7)
    right = bucket(r, spec).numpy()
    assert not clamp_missing(r.numpy(), right, spec)
    assert not clamp_missing(r.numpy(), bucket(r, spec, sign=-1).numpy(), spec)  # direction swapped
    assert clamp_missing(r.numpy(), bucket(r, spec, clamp=False).numpy(), spec)
