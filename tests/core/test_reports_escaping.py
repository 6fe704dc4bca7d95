"""Issue 24: text from the adapter (exception and return type names, messages, the target's file
name) is inert in every report: the terminal shows escapes instead of acting on control
characters, the Markdown shows <script>, </details> and image links as written, JUnit stays
well-formed XML, the JSON keeps the data, and a file name with $ does not break the plot."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conformance.cli import main

CASE = "rope.apply/llama2-d128/prefill-8"
HOSTILE = "<script>alert(1)</script> </details> ![x](http://evil.example/x.png) **b** `c` | \x1b[2J"
ADAPTER = f'''
Evil = type("\\x1b[31mEvil", (Exception,), {{}})
Ret = type("\\x1b[32mRet<img src=x>", (), {{}})

def raises(x, positions, spec):
    raise Evil({HOSTILE!r})

def returns(x, positions, spec):
    return Ret()
'''
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def hostile(tmp_path):
    path = tmp_path / "hostile.py"
    path.write_text(ADAPTER)
    return path


@pytest.mark.parametrize("fn", ["raises", "returns"])
def test_hostile_names_and_messages_are_inert_in_every_report(hostile, tmp_path, fn, capsys):
    md, xml, js = tmp_path / "r.md", tmp_path / "r.xml", tmp_path / "r.json"
    code = main(["conform", f"{hostile}:{fn}", "--protocol", "rope.apply", "--cases", CASE, "--no-fresh",
                 "--dtype", "float32", "-v", "--markdown", str(md), "--junit", str(xml), "--json", str(js)])
    out = capsys.readouterr()
    assert code == 1
    name = "Evil" if fn == "raises" else "Ret"
    # terminal: the escape sequence is shown, not sent
    assert "\x1b" not in out.out + out.err
    assert f"\\x1b[3{1 if fn == 'raises' else 2}m{name}" in out.out
    # Markdown: no raw HTML, no image, no link; the report's own <details> blocks stay balanced
    text = md.read_text()
    assert "\x1b" not in text and "<script>" not in text and "<img" not in text
    assert not re.search(r"!\[|(?<!\\)\]\(", text)  # no image, no link: each bracket escaped
    assert text.count("<details>") == text.count("</details>")
    assert "&lt;script&gt;" in text or "&lt;img" in text
    # JUnit: well-formed, the text escaped as the terminal shows it
    body = xml.read_text()
    ET.fromstring(body)
    assert "\x1b" not in body and f"\\x1b[3{1 if fn == 'raises' else 2}m{name}" in body
    # JSON stays data: parseable, the text as the runner recorded it
    data = json.loads(js.read_text())
    assert name in json.dumps(data)


def test_markdown_escapes_each_active_character_of_a_message():
    from conformance.reports.markdown import _code, _row, _text

    assert _text("<script>") == "&lt;script&gt;"
    assert _text("![x](http://e/x.png)") == "\\!\\[x\\](http://e/x.png)"
    assert _text("a\nb\x1b") == "a b"  # control characters as spaces, one line
    assert _text("\udcff") == "\\\\udcff"  # encodable in UTF-8 (the backslash escaped too)
    assert _row(_code("a`b``c"), "x|y") == "| ```a`b``c``` | x\\|y |"  # no early end of the span


def test_a_target_named_with_dollars_is_plotted(tmp_path, capsys):
    """A file name such as a$^$b.py was read as matplotlib mathtext and ended the run in a
    ParseSyntaxException traceback after grading."""
    pytest.importorskip("matplotlib")
    target = tmp_path / "a$^$b.py"
    shutil.copy(REPO / "examples" / "rope" / "hf_rotate_half.py", target)
    png = tmp_path / "p.png"
    assert main(["conform", f"{target}:apply", "--protocol", "rope.apply", "--cases", CASE, "--no-fresh",
                 "--dtype", "float32", "-q", "--plot", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG")
    assert "Traceback" not in capsys.readouterr().err
