"""The hand-edited lists that name families stay complete (issue 26): adding a family or a protocol
must show in docs/design.md, docs/tolerance.md and README.md, or this fails. (Bench rows are found
through the registry: tests/core/test_bench_families.py.)"""

from pathlib import Path

import pytest

from conformance.core import registry

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("doc", ["docs/design.md", "docs/tolerance.md", "README.md"])
def test_every_protocol_is_documented(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    missing = [name for name in registry.protocol_names() if f"{name}" not in text]
    assert missing == [], f"{doc} does not mention {missing}"
