"""``--json FILE``: the report as a JSON document, validated against schemas/report.schema.json.

The document is ``Report.to_json()`` made strict JSON: numpy scalars and arrays become plain
numbers and lists, tuples become lists, and non-finite floats become the strings "Infinity",
"-Infinity" and "NaN" (``float()`` reads them back), because JSON has no literal for them.
A document that fails the schema is a bug in posref, so ``write`` raises instead of writing it.
"""

from __future__ import annotations

import json
import math
import re
import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from conformance.reports._common import write_text_atomic

SCHEMA_NAME = "report.schema.json"


class ReportValidationError(RuntimeError):
    """The report document does not match the schema (a bug in posref, not in the target)."""


def schema() -> dict:
    """The report JSON Schema (shipped as package data next to the conformance package), with
    the diagnosis codes of every registered family as the enum of ``diagnosis.code``."""
    from conformance.core import registry

    doc = json.loads(_schema_text())
    doc["$defs"]["diagnosis"]["properties"]["code"]["enum"] = sorted(registry.codes())
    return doc


@lru_cache(maxsize=1)
def _schema_text() -> str:
    return resources.files("conformance").joinpath("schemas", SCHEMA_NAME).read_text("utf-8")


@lru_cache(maxsize=1)
def _validator():
    import jsonschema

    doc = schema()
    cls = jsonschema.validators.validator_for(doc)
    cls.check_schema(doc)
    return cls(doc)


def plain(obj: Any) -> Any:
    """Convert to strict-JSON-ready Python: dicts, lists, str, int, finite float, bool, None."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        if math.isnan(obj):
            return "NaN"
        if math.isinf(obj):
            return "Infinity" if obj > 0 else "-Infinity"
        return float(obj)
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if hasattr(obj, "tolist"):  # numpy arrays and scalars, torch tensors
        return plain(obj.tolist())
    if hasattr(obj, "item"):
        return plain(obj.item())
    if hasattr(obj, "to_json"):
        return plain(obj.to_json())
    return str(obj)


def document(report) -> dict:
    """The validated JSON document for a Report."""
    doc = plain(report.to_json())
    validate(doc)
    return doc


def errors(doc: dict) -> list:
    """Schema violations of a document, each as 'path.to.field: message' (empty when valid)."""
    out = []
    for err in sorted(_validator().iter_errors(doc), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        out.append(f"{where}: {err.message}")
    return out


def validate(doc: dict) -> None:
    """Raise ReportValidationError naming the first violations when doc does not fit the schema."""
    problems = errors(doc)
    if problems:
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        raise ReportValidationError(
            "the JSON report does not match report.schema.json: " + "; ".join(problems[:3]) + more
        )


# An array of numbers (a curve point, a worst index; non-finite numbers are strings): one line.
# A whole JSON string is matched first and left alone, so text inside a message (e.g. "[0m  ]")
# is never mistaken for an array.
_FLAT_ARRAY = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\[\]{}"]|"(?:-?Infinity|NaN)")*\]')


def dumps(report) -> str:
    text = json.dumps(document(report), indent=2, allow_nan=False, ensure_ascii=False)
    return _FLAT_ARRAY.sub(_one_line, text) + "\n"


def _one_line(match) -> str:
    if match.group(0).startswith('"'):
        return match.group(0)
    return " ".join(match.group(0).split()).replace("[ ", "[").replace(" ]", "]")


def write(report, path) -> None:
    """Validate and write the report to path ("-" means stdout); the file appears whole or not at all."""
    text = dumps(report)
    if str(path) == "-":
        sys.stdout.write(text)
        return
    write_text_atomic(Path(path), text)
