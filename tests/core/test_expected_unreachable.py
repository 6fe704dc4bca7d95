"""Issue 24: an in-process adapter could read the expected values of the case it computes from
the runner's live frames (sys._current_frames(), their locals and what those refer to), and
t5.bucket then passed with exit 0. In-process attacks stay out of scope (use --isolate), but the
expected values are no longer in memory while the adapter runs: golden cases read their outputs
from disk when grading asks (reference.golden.store.CaseArrays), fresh cases compute theirs then,
and t5.bucket's black-box checks draw positions no file holds."""

from __future__ import annotations

import gc
import sys
import types

import numpy as np
import torch

from conformance import run_conformance


def _steal(relative_positions, spec):
    """Walk every live frame's locals and their gc referents (no posref code is called) for a dict
    holding this input next to another array of its shape: the expected buckets."""
    r = relative_positions.numpy()
    here = sys._getframe()
    frontier, seen = [], set()
    for frame in sys._current_frames().values():
        while frame is not None:
            if frame is not here:
                frontier.append(frame.f_locals)
            frame = frame.f_back
    for _ in range(10):
        nxt = []
        for obj in frontier:
            if id(obj) in seen or isinstance(obj, (types.ModuleType, type, types.FrameType)):
                continue
            seen.add(id(obj))
            if type(obj) is dict:
                arrays = [v for v in obj.values() if isinstance(v, np.ndarray) and v.shape == r.shape]
                if any(np.array_equal(a, r) for a in arrays):
                    for a in arrays:
                        if not np.array_equal(a, r) and a.dtype.kind in "iu":
                            return torch.from_numpy(np.array(a, dtype=np.int64))
            nxt.extend(gc.get_referents(obj))
        frontier = nxt
    return torch.zeros_like(relative_positions)


def test_an_adapter_that_reads_the_runners_frames_fails():
    report = run_conformance(_steal, "t5.bucket", seed=7)
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert graded and all(c.verdict == "fail" for c in graded), \
        [(c.id, c.verdict) for c in graded if c.verdict != "fail"]
    assert report.summary()["overall"] == "fail"
