"""docs/robustness.md lists each hostile probe with the test that checks it (issue 24): every test
it names must exist, so the page cannot cite a test that was renamed or removed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_the_robustness_page_names_exists():
    page = (ROOT / "docs" / "robustness.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(test_[A-Za-z0-9_]+)", page))
    assert len(named) > 100  # the tables were read, not skipped
    defined = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        defined.update(re.findall(r"^\s*def (test_[A-Za-z0-9_]+)", path.read_text(encoding="utf-8"), re.M))
    assert sorted(named - defined) == []


def test_every_test_file_the_robustness_page_names_exists():
    page = (ROOT / "docs" / "robustness.md").read_text(encoding="utf-8")
    files = set(re.findall(r"(tests/[A-Za-z0-9_/]+\.py)", page))
    assert files
    assert sorted(f for f in files if not (ROOT / f).is_file()) == []
