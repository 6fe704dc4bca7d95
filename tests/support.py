"""Shared helpers for the tests (no tests here).

- STYLES: the calibration implementations of bench/rope_styles.py, loaded through the loader;
- small inline adapters (a float64 reference adapter and deliberately broken ones);
- load_file: an example file as a module (its CODE, PROTOCOL, OPTIONS and classes).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import torch

from conformance import Unsupported
from conformance.loader import load_target

ROOT = Path(__file__).resolve().parent.parent
STYLES_FILE = ROOT / "bench" / "rope_styles.py"


def load_file(path: Path, prefix: str = "posref_test"):
    """The Python file at ``path`` executed as a fresh module named ``<prefix>_<family>_<stem>``."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"{prefix}_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_example(path: Path):
    """An example file loaded as load_file does; skipped (with the reason) where the array library it
    is written for, an optional extra (docs/frameworks.md), is not installed."""
    import pytest

    try:
        return load_file(path)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in {"jax", "mlx", "cupy"}:
            pytest.skip(f"{Path(path).name}: {exc.name} is not installed (the framework extras)")
        raise


def passing_cases(report) -> list:
    """The report's graded (not skipped) cases, after asserting that none failed or errored and the
    run passed (acceptable included): what a test of a correct library adapter checks first."""
    bad = [(c.id, c.dtype, c.verdict, [d.code for d in c.diagnoses]) for c in report.cases
           if c.verdict in ("fail", "error")]
    assert report.summary()["overall"] in ("pass", "acceptable") and not bad, bad
    return [c for c in report.cases if c.verdict != "skip"]


def style(name: str):
    return load_target(f"{STYLES_FILE}:{name}")


def style_target(name: str) -> str:
    return f"{STYLES_FILE}:{name}"


def reference_adapter(x, positions, spec):
    """Correct to float64 accuracy: the reference itself, rounded once to x's dtype."""
    from reference import rope

    out = rope.apply(
        x.detach().to(torch.float64).numpy(),
        positions.numpy(),
        rotary_dim=spec.rotary_dim,
        base=spec.base,
        layout=spec.layout,
        backend="numpy",
    )
    return torch.from_numpy(out).to(x.dtype)


def fixed_interleaved(x, positions, spec):
    """Ignores spec.layout: always pairs (2i, 2i+1) (Meta / GPT-J), never refusing the half layout."""
    from dataclasses import replace

    return style("meta_complex")(x, positions, replace(spec, layout="interleaved"))


def swapped_layout(x, positions, spec):
    """Applies the opposite of spec.layout."""
    from dataclasses import replace

    flipped = replace(spec, layout="interleaved" if spec.layout == "half" else "half")
    return reference_adapter(x, positions, flipped)


def unsupported_above_4096(x, positions, spec):
    if int(positions.max()) > 4096:
        raise Unsupported("positions above 4096")
    return reference_adapter(x, positions, spec)


def raises(x, positions, spec):
    raise RuntimeError("kernel not built for this GPU")


def returns_nan(x, positions, spec):
    out = reference_adapter(x, positions, spec)
    out[0, 0, 0, 0] = float("nan")
    return out


def returns_wrong_shape(x, positions, spec):
    return reference_adapter(x, positions, spec)[..., : spec.head_dim // 2]


def returns_float32(x, positions, spec):
    return reference_adapter(x, positions, spec).float()


def returns_list(x, positions, spec):
    return reference_adapter(x, positions, spec).tolist()


def mutates_input(x, positions, spec):
    out = reference_adapter(x, positions, spec)
    x.mul_(2)
    return out


def shifted_positions(x, positions, spec):
    return reference_adapter(x, positions + 1, spec)


def by_id(report):
    """{(case id, dtype): CaseResult}."""
    return {(c.id, c.dtype): c for c in report.cases}


def worst(report, dtype=None):
    vals = [c.budget_ratio for c in report.cases if c.verdict != "skip" and (dtype is None or c.dtype == dtype)]
    return max(v if v is not None else np.inf for v in vals)


def run_blackbox(invoker, protocol, *, dtype, device="cpu", layout="half"):
    """A protocol's black-box checks with the layout a probe would have found (or declared)."""
    from conformance.core import registry
    from conformance.core.layout_probe import LayoutProbe

    probe = LayoutProbe(declared=layout) if layout in ("half", "interleaved") else None
    return registry.get(protocol).blackbox(invoker, dtype, device, probe)


def detected_layout(report):
    """The layout rope.apply's probe detected (None when undecided or without a probe)."""
    return (report.probe or {}).get("detected_layout")


def diagnose(case, spec, inputs_f64, output_f64, dtype):
    """The diagnoses the runner would get for a failing output of ``case`` (by its protocol)."""
    from conformance.core import registry
    from conformance.core.protocol import Graded, Prepared

    proto = registry.get(case.protocol)
    return proto.diagnose(case, spec, Prepared((), dict(inputs_f64)), Graded(output_f64=output_f64), dtype)


def rehash_vectors(root) -> None:
    """Rewrite root/MANIFEST.json so every hash, size and the digest match the files as they are
    now: what a careful attacker does after editing a vectors directory."""
    import hashlib
    import json

    from reference.golden import manifest as manifest_mod

    data = json.loads((Path(root) / "MANIFEST.json").read_text())
    for rel in data["files"]:
        blob = (Path(root) / rel).read_bytes()
        data["files"][rel] = {"sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob)}
    data["digest"] = manifest_mod.set_digest({p: e["sha256"] for p, e in data["files"].items()})
    (Path(root) / "MANIFEST.json").write_text(json.dumps(data, indent=2))


def assert_config_error(config: dict, message: str) -> None:
    """Reading ``config`` (reference.zoo.plan) fails with one line that contains ``message``."""
    import pytest

    from reference.zoo.plan import ConfigError, plan

    with pytest.raises(ConfigError) as info:
        plan(config)
    assert message in str(info.value) and "\n" not in str(info.value)
