"""diffusers' MAE-style ``get_1d_sincos_pos_embed_from_grid`` / ``get_2d_sincos_pos_embed_from_grid``
(examples/sinusoidal/lib_diffusers_sincos.py) graded on the catalog and fresh cases over three
seeds: every [sin | cos], 2i/d, base-10000 case passes, the 2-D table among them; the rest is
skipped on the adapter's word. Skips without diffusers (the ``test`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("diffusers")

from conformance import run_conformance  # noqa: E402

TARGET = f"{Path(__file__).resolve().parents[2] / 'examples' / 'sinusoidal' / 'lib_diffusers_sincos.py'}:table"


@pytest.mark.parametrize("seed", range(3))
def test_diffusers_sincos_tables_pass(seed):
    from reference.golden import store
    from reference.golden.fresh import fresh_cases

    report = run_conformance(TARGET, "sinusoidal.table", seed=seed)
    bad = [(c.id, c.verdict, [d.code for d in c.diagnoses]) for c in report.cases if c.verdict in ("fail", "error")]
    assert report.summary()["overall"] == "pass" and not bad, bad
    params = {c.id: c.params for c in list(store.iter_cases("sinusoidal.table"))
              + list(fresh_cases("sinusoidal.table", seed))}
    mae = {c.id for c in report.cases if params[c.id]["layout"] == "concatenated" and params[c.id]["exponent"] == "2i/d"
           and params[c.id]["base"] == 10000.0 and params[c.id]["d_model"] % (2 * params[c.id]["dims"]) == 0}
    graded = {c.id for c in report.cases if c.verdict != "skip"}
    assert graded == mae and any(params[i]["dims"] == 2 for i in graded)
