"""``posref vectors export CASE_ID``: one case's inputs and expected outputs in a file of its own,
for a standalone reproduction (a reviewer citing a case id attaches it).

    posref vectors export rope.apply/llama2-d128/decode-4095 --format npz|pt|json [--out FILE]
    posref vectors export rope.apply/fresh/shape-dim-d80-r20-half --seed 7 --format json

A committed case comes from the checked vectors; a fresh case (``<protocol>/fresh/<test>``) is drawn
again from the seed the run printed and its expected values computed by the reference in golden
mode, as ``posref conform`` grades it. Every format holds the same record: ``id``, ``protocol``,
``params``, ``comment``, ``flags``, ``suite_version``, ``vectors_digest``, ``seed`` (fresh cases, or
null) and ``arrays`` ({role: array}, the inputs and the expected outputs as stored):

    npz   one member per role (float64 / int64 as stored) and ``record``, the record without its
          arrays as a JSON string; np.load(path) reads it without pickles
    pt    torch.save of the record with the arrays as tensors (torch is imported for this format only)
    json  the record, each array as {"dtype", "shape", "data"} with the values nested as lists;
          non-finite values are the strings "NaN", "Infinity", "-Infinity" (strict JSON)

The file is written through the checked writer (reference/safe_files.py); a path inside the
vectors directory is refused.
"""

from __future__ import annotations

import io
import json
import math
import sys

FORMATS = ("npz", "pt", "json")


def add_parser(sub) -> None:
    export = sub.add_parser("export", help="write one case's inputs and expected outputs to a file")
    export.add_argument("case_id", metavar="CASE_ID",
                        help="e.g. rope.apply/llama2-d128/decode-4095, or a fresh id with --seed")
    export.add_argument("--format", choices=FORMATS, default="npz", help="file format (default npz)")
    export.add_argument("--out", metavar="FILE",
                        help="the file to write (default: the case id with '/' as '__', then .FORMAT)")
    export.add_argument("--seed", type=int, metavar="N",
                        help="the seed of a fresh case (the one its run printed)")
    export.set_defaults(func=run_export)


def run_export(args) -> int:
    from conformance.commands.vectors import EXIT_INTEGRITY, _integrity_failure
    from conformance.errors import UsageError
    from conformance.reports._common import check_report_path
    from reference import safe_files
    from reference.golden import catalog, store

    out = args.out if args.out is not None else args.case_id.replace("/", "__") + "." + args.format
    out = check_report_path("--out", out, protected_dirs=(store.vectors_dir(),), parents=False)
    failed = _integrity_failure()
    if failed:
        return failed
    case, seed = _case(args.case_id, args.seed)
    try:
        arrays = {role: case.arrays[role] for role in case.arrays}
        named = catalog.protocol(case.protocol).named
        if named is not None:  # inputs named by their seed (a model's full table): written out, derived
            arrays.update(named(case.params, arrays))
    except (ValueError, TypeError, OSError) as exc:  # a listed file changed since the check
        from conformance.isolation import error_line

        print(f"posref: error: the golden vectors fail their integrity check: {case.id!r}: {error_line(exc)}",
              file=sys.stderr)
        return EXIT_INTEGRITY
    suite_version, digest = _versions()
    record = {"id": case.id, "protocol": case.protocol, "params": _plain(case.params), "comment": case.comment,
              "flags": list(case.flags), "suite_version": suite_version, "vectors_digest": digest, "seed": seed}
    data = {"npz": _npz, "pt": _pt, "json": _json}[args.format](record, arrays)
    try:
        safe_files.write_atomic(out, data, parents=False)
    except (OSError, safe_files.FileRefused) as exc:
        raise UsageError(f"--out: cannot write {out}: {exc}") from None
    print(f"{case.id}: {', '.join(arrays)} written to {out}", file=sys.stderr)
    return 0


def _case(case_id: str, seed):
    """(the GoldenCase, its seed or None); UsageError for an unknown id or a fresh id without --seed."""
    from conformance.errors import UsageError, did_you_mean
    from reference.golden import fresh, store

    if fresh.is_fresh(case_id):
        if seed is None:
            raise UsageError(f"{case_id} is a fresh case: give --seed N, the seed its run printed "
                             "(a fresh id names what was drawn, the seed gives the inputs)")
        if not 0 <= seed <= fresh.MAX_SEED:
            raise UsageError(f"--seed: an integer from 0 to {fresh.MAX_SEED}, got {seed}")
        protocol = case_id.split("/", 1)[0]
        drawn = []
        if protocol in store.protocol_names():
            for shapes in fresh.SHAPES:  # the sampled draw first; --shapes full draws a superset
                drawn = [c for c in fresh.fresh_cases(protocol, seed, shapes=shapes) if c.id == case_id]
                if drawn:
                    break
        if not drawn:
            raise UsageError(f"seed {seed} draws no fresh case {case_id!r} (see the report that cited it)")
        return drawn[0], seed
    try:
        return store.get_case(case_id), None
    except KeyError:
        ids = [c.id for c in store.iter_cases()]
        raise UsageError(f"unknown case id {case_id!r}{did_you_mean(case_id, ids)} (see: posref vectors list)") from None


def _versions() -> tuple:
    from conformance.runner import manifest_info

    return manifest_info()


def _plain(value):
    """JSON-ready parameters (numpy scalars and tuples as Python numbers and lists)."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _npz(record: dict, arrays: dict) -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, record=np.array(json.dumps(record)), **{role: np.asarray(a) for role, a in arrays.items()})
    return buffer.getvalue()


def _pt(record: dict, arrays: dict) -> bytes:
    from conformance.errors import UsageError

    try:
        import torch
    except ImportError:
        raise UsageError("--format pt needs torch (pip install torch); npz and json do not") from None
    buffer = io.BytesIO()
    torch.save({**record, "arrays": {role: torch.from_numpy(a.copy()) for role, a in arrays.items()}}, buffer)
    return buffer.getvalue()


def _finite_or_name(x):
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    return x


def _nested(values):
    return [_nested(v) for v in values] if isinstance(values, list) else _finite_or_name(values)


def _json(record: dict, arrays: dict) -> bytes:
    import numpy as np

    doc = dict(record)
    doc["arrays"] = {role: {"dtype": str(np.asarray(a).dtype), "shape": list(np.shape(a)),
                            "data": _nested(np.asarray(a).tolist())} for role, a in arrays.items()}
    return (json.dumps(doc, allow_nan=False) + "\n").encode("utf-8")
