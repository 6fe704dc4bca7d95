"""posref bench's families table (conformance/commands/bench_families.py): one row per family,
declared by the family itself (reference/<family>/bench.py), its targets checked and rendered."""

from reference import families


def test_families_bench_checks_targets_and_renders_every_row():
    from conformance.commands import bench_families as bf

    fam = {"workloads": bf.workloads(), "golden_workloads": bf.golden_workloads(),
           "repeat": 5, "seconds": {}, "repetitions": {}}
    for name in [n for n in bf.workloads() if n != "attention"]:
        cells = {"copy": 1.0, "fast": 1.2}
        if name not in ("t5", "learned"):
            cells["golden"] = 4.0
        if name in bf.golden_workloads():
            cells["fast_small"] = 1.0
        fam["seconds"][name] = cells
        fam["repetitions"][name] = {c: 5 for c in cells}
    fam["seconds"]["fire"].update(fast=1.4, floor=1.0)  # compute-bound: graded against its arithmetic
    fam["repetitions"]["fire"]["floor"] = 5
    fam["seconds"]["attention"] = {"torch": 1.0, "fast": 1.4, "fast_small": 1.0, "golden": 50.0}
    fam["repetitions"]["attention"] = {c: 5 for c in fam["seconds"]["attention"]}
    targets = {t["target"].split(" (")[0]: t for t in bf.check_targets(fam)}
    verdicts = {name: t["met"] for name, t in targets.items()}
    assert verdicts["sinusoidal fast"] and not verdicts["fire fast"]
    assert "1.3x its arithmetic" in targets["fire fast"]["target"] and targets["fire fast"]["measured"] == "1.40x"
    assert targets["fire fast"]["why"] == bf.row_modules()["fire"].UNMET["fast"]  # the family's reason, printed
    assert not verdicts["sinusoidal golden <= 3x fast"]  # 4 / 1.2 = 3.3x fast
    assert not verdicts["alibi golden <= 3x fast"]  # 4 / 1.0 (fast on the golden workload)
    assert "why" not in targets["alibi golden <= 3x fast"]  # no reason declared: the figure alone
    assert verdicts["attention fast"] and "t5 golden <= 3x fast" not in verdicts  # 1.4x torch, within 1.5x
    fam["seconds"]["attention"]["fast"] = 1.6
    assert [t for t in bf.check_targets(fam) if t["target"].startswith("attention")][0]["met"] is False
    text = bf.render(fam)
    assert all(f"| {name} " in text for name in bf.workloads() if name != "attention")
    assert "torch eager float64 SDPA" in text and "1.40x its arithmetic" in text


def test_every_family_declares_its_bench_row():
    """Adding a family edits no shared list: its row comes from reference/<family>/bench.py (RoPE
    has a table of its own)."""
    import numpy as np

    from conformance.commands import bench_families as bf

    assert set(bf.row_modules()) == set(families.names()) - set(bf.OWN_TABLE)
    for name, module in bf.row_modules().items():
        assert module.WORKLOAD and callable(module.cells), name
    # The small rows are built here (the others allocate hundreds of MB): a copy and a fast cell.
    for name in ("t5", "learned"):
        cells = bf.row_modules()[name].cells(np.random.default_rng(0))
        assert {"copy", "fast"} <= set(cells) and all(callable(f) for f in cells.values())
        assert cells["fast"]().shape == cells["copy"]().shape
