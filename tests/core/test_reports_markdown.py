"""--markdown: what a reviewer pastes: suite version, full digest, target, counts, citable ids."""

from __future__ import annotations

from conformance.reports import markdown
from test_reports_common import DIGEST, passing_report, sample_report


def _table_rows(text, header_start):
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_header_cites_version_digest_target_environment(tmp_path):
    path = tmp_path / "review.md"
    markdown.write(sample_report(), path)
    text = path.read_text()
    assert text.startswith("## posref conformance: rope.apply — FAIL")
    assert "| Suite version | 0.1.0 |" in text
    assert f"| Vectors digest | `{DIGEST}` |" in text  # the full digest, not an abbreviation
    assert "`examples/rope_buggy.py:apply_offset`" in text
    assert "torch 2.13.0+cpu" in text and "device cpu" in text
    # pass acceptable fail error xfail skip; identities passed, failed, skipped
    assert "| 2 | 1 | 2 | 1 | 0 | 1 | 1 | 1 | 1 |" in text


def test_failing_cases_table_and_citations():
    text = markdown.render(sample_report())
    rows = _table_rows(text, "| case |")
    assert len(rows) == 3
    assert rows[0].startswith("| `rope.apply/llama2-d128/decode-4095` | bfloat16 | fail | 812 |")
    assert "position-offset: positions shifted by +1" in rows[0]
    # The citation block lists the citable ids; the table above already says why each fails.
    block = text.split("### Citations", 1)[1].split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    assert block == ["posref 0.1.0 rope.apply/llama2-d128/decode-4095 [bfloat16]",
                     "posref 0.1.0 rope.apply/llama2-d128/left-pad [bfloat16]",
                     "posref 0.1.0 rope.apply/llama2-d128/decode-65535 [float16]"]
    assert "```python\nimport torch" in text  # the first failure's repro (Python: an API call)


def test_a_command_line_repro_is_fenced_as_shell():
    r = sample_report()
    r.cases[2].repro = "posref conform my.py:apply --protocol rope.apply --cases rope.apply/x/y"
    assert "```shell\nposref conform my.py:apply" in markdown.render(r)


def test_table_cells_cannot_break_the_table():
    r = sample_report()
    rows = _table_rows(markdown.render(r), "| identity |")
    assert len(rows) == 1
    # the message holds "|", a NUL and a line break risk: the row keeps its 6 cells
    cells = rows[0].replace("\\|", "").split("|")
    assert len(cells) == 8 and "\x00" not in rows[0]


def test_passing_report_says_so():
    text = markdown.render(passing_report())
    assert "— PASS" in text
    assert "All 3 graded cases are within their error budgets." in text
    assert "### Citations" not in text and "| case |" not in text
    assert "<details><summary>Skipped cases (1)</summary>" in text


def test_long_failure_lists_are_capped():
    r = sample_report()
    r.cases = [r.cases[2]] * 60
    text = markdown.render(r, max_rows=10)
    assert len(_table_rows(text, "| case |")) == 10
    assert "…and 50 more (see the JSON report)." in text


def test_the_causes_come_first_then_the_seed_acceptable_explained_then_the_tables():
    """Issue 25: a PR comment opens with the causes as the terminal does, carries the seed of the
    fresh cases and a line saying what "acceptable" means, then the tables."""
    r = sample_report(seed=1234, notes=["--dtype bfloat16 does not apply to alibi.bias: graded once"])
    lines = markdown.render(r).splitlines()
    causes = lines.index("### Causes (3 failing cases, by diagnosis code)")
    table = next(i for i, l in enumerate(lines) if l.startswith("| Suite version |"))
    assert 2 < causes < table
    offset = next(l for l in lines if l.startswith("- **FAIL position-offset**"))
    assert offset.startswith("- **FAIL position-offset**: 1 case (bfloat16), error/budget 812: ")
    assert "- **ERROR raised**: 1 case (bfloat16)" in " ".join(lines)
    seed = lines.index("Fresh cases were drawn from seed 1234: `--seed 1234` draws them again.")
    assert causes < seed < table
    assert any(l.startswith("- Note: ") and "does not apply to alibi.bias" in l for l in lines[:table])
    acceptable = next(i for i, l in enumerate(lines) if l.startswith("*acceptable*: "))
    assert "expected, not a bug" in lines[acceptable] and acceptable < lines.index("### Failing cases (3)")
    # a passing run has no causes; one without fresh cases no seed line
    text = markdown.render(passing_report())
    assert "### Causes" not in text and "seed" not in text and "*acceptable*: " in text


def test_a_skipped_identity_is_counted_as_skipped_not_as_not_passed():
    from conformance.results import IdentityResult

    r = passing_report()
    r.identities = [IdentityResult("determinism", "float32", "skip", message="single-threaded target")]
    text = markdown.render(r)
    assert "| identities passed | identities failed | identities skipped |" in text
    assert text.splitlines()[text.splitlines().index(next(l for l in text.splitlines()
                                                         if l.startswith("| pass |"))) + 2].endswith("| 0 | 0 | 1 |")
