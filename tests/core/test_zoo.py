"""The zoo of real models' positional configurations (reference.zoo, issue 27) and `posref models`.

The records are data read from public files; these tests hold them to the record format, to
coverage of what posref implements, and to internal consistency (a LongRoPE table as long as the
rotated half-dimension, names equal to file names), and check the command and the docs table.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from conformance import cli
from reference import families, zoo
from reference.numerics import scaling

ROOT = Path(__file__).resolve().parents[2]

# Families with a real model's configuration in the zoo, and those posref implements that no
# released model uses as its positional encoding (NoPE, KERPLE, FIRE and xPos are research
# proposals here; attention is the attention forward, graded with another family's positions).
# A new family must be put in one of the two.
REAL_FAMILIES = {"rope", "mrope", "rope2d", "alibi", "t5", "learned", "sinusoidal", "transformer_xl",
                 "gaussian_rope"}
NO_REAL_MODEL = {"nope", "kerple", "fire", "xpos", "attention"}
ROPE_FAMILIES = {"rope", "mrope", "rope2d", "gaussian_rope"}
SCALING_TYPES = {"default", "linear", "dynamic", "yarn", "longrope", "llama3"}


@pytest.fixture(scope="module")
def records():
    return zoo.records()


def test_every_file_validates_against_the_schema():
    validator = jsonschema.Draft202012Validator(zoo.schema())
    validator.check_schema(zoo.schema())
    paths = sorted(zoo.MODELS_DIR.glob("*.json"))
    assert paths
    for path in paths:
        record = json.loads(path.read_text(encoding="utf-8"))
        validator.validate(record)
        zoo.validate(record, path.stem)


def test_names_are_unique_and_equal_to_the_file_names(records):
    stems = [p.stem for p in zoo.MODELS_DIR.glob("*.json")]
    assert sorted(stems) == zoo.names() == [r["name"] for r in records]
    assert len({n.lower() for n in stems}) == len(stems)
    assert len(records) >= 40


def test_every_family_with_a_real_model_is_covered(records):
    assert REAL_FAMILIES | NO_REAL_MODEL == set(families.names())
    seen = {f for r in records for f in r["family"]}
    assert REAL_FAMILIES <= seen, REAL_FAMILIES - seen
    assert not seen & NO_REAL_MODEL


def test_every_scaling_type_appears_and_is_one_posref_implements(records):
    rope = [r for r in records if r["family"][0] in ("rope", "mrope")]
    types = {zoo.derived(r)["scaling"] or "default" for r in rope}
    assert SCALING_TYPES <= types, SCALING_TYPES - types
    assert types <= {"default", *scaling.TYPES}, types - {"default", *scaling.TYPES}


def test_each_record_names_the_file_it_was_read_from(records):
    for r in records:
        url = r["source"]["url"]
        if r["family"] == ["gaussian_rope"]:
            assert url.startswith("seed-document:"), r["name"]  # the only model posref's documents define
        else:
            assert re.match(r"^https://(huggingface\.co|github\.com)/\S+/\S+", url), (r["name"], url)
        assert zoo.source_label(r) in url


def test_head_dim_and_rotary_dim_are_derivable_for_rope_records(records):
    for r in (r for r in records if r["family"][0] in ROPE_FAMILIES):
        d = zoo.derived(r)
        assert isinstance(d["head_dim"], int) and d["head_dim"] > 0 and d["head_dim"] % 2 == 0, r["name"]
        assert isinstance(d["rotary_dim"], int) and d["rotary_dim"] % 2 == 0, r["name"]
        assert 0 < d["rotary_dim"] <= d["head_dim"], r["name"]
        if r["family"][0] in ("rope", "mrope"):  # a language model: query heads share kv heads evenly
            assert d["heads"] and d["kv_heads"] and d["heads"] % d["kv_heads"] == 0, r["name"]


def test_derived_parameters_of_known_models():
    def derived(name):
        return zoo.derived(zoo.load(name))

    assert zoo.summary(zoo.load("llama-3.1-8b")) == "rope θ=500000 llama3 ×8 d=128 32/8 heads 131072"
    assert derived("deepseek-v3")["rotary_dim"] == 64  # MLA: only qk_rope_head_dim rotates
    assert derived("gpt-neox-20b")["rotary_dim"] == 24  # 0.25 of 96
    assert derived("gpt-j-6b")["rotary_dim"] == 64 and derived("gpt-j-6b")["head_dim"] == 256
    assert derived("glm-4-9b-chat-hf")["rotary_dim"] == 64
    assert derived("gemma-3-12b")["local_theta"] == 10000.0
    assert derived("qwen2-vl-7b")["scaling"] is None  # rope_type default: M-RoPE with no scaling
    assert derived("ministral-3-3b")["scaling"] == "yarn"  # read from text_config.rope_parameters
    assert derived("falcon-7b")["kv_heads"] == 1  # multi_query


def test_longrope_tables_cover_the_rotated_half_dimension(records):
    longrope = [r for r in records if zoo.derived(r)["scaling"] == "longrope"]
    assert longrope
    for r in longrope:
        params = r["config"]["rope_scaling"]
        half = zoo.derived(r)["rotary_dim"] // 2
        assert len(params["short_factor"]) == len(params["long_factor"]) == half, r["name"]
        assert all(isinstance(v, (int, float)) and v >= 1.0 for v in params["long_factor"]), r["name"]


def test_mrope_sections_add_up_to_the_rotated_half_dimension(records):
    for r in (r for r in records if r["family"][0] == "mrope"):
        d = zoo.derived(r)
        assert sum(d["mrope_section"]) == d["rotary_dim"] // 2, r["name"]


def test_load_refuses_unknown_names_and_bad_records():
    for bad in ("no-such-model", "../schema", "LLAMA-3.1-8B", "", None):
        with pytest.raises(KeyError):
            zoo.load(bad)
    record = zoo.load("llama-3.1-8b")
    record["config"]["rope_theta"] = 1.0
    assert zoo.load("llama-3.1-8b")["config"]["rope_theta"] == 500000.0  # a fresh dict each time
    del record["source"]["url"]
    with pytest.raises(ValueError, match="source"):
        zoo.validate(record, "llama-3.1-8b")
    with pytest.raises(ValueError, match="not a posref family"):
        zoo.validate({**zoo.load("t5-v1.1-base"), "family": ["t6"]}, "t5-v1.1-base")
    with pytest.raises(ValueError, match="differs from the file name"):
        zoo.validate(zoo.load("gpt2-124m"), "gpt-2")


def test_zoo_imports_neither_torch_nor_conformance():
    code = ("import sys; from reference import zoo; zoo.records(); "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('conformance')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_posref_models_lists_every_record(capsys, monkeypatch, records):
    monkeypatch.setenv("COLUMNS", "200")
    assert cli.main(["models"]) == 0
    out = capsys.readouterr().out
    for r in records:
        assert f"{r['name']}: {zoo.summary(r)}" in out
        assert zoo.source_label(r) in out
    assert f"{len(records)} real models" in out


def test_posref_models_wraps_to_the_width():
    from rich.console import Console

    from conformance.commands import models

    buf = io.StringIO()
    models.print_list(zoo, zoo.records(), console=Console(file=buf, width=60))
    lines = buf.getvalue().splitlines()
    # a long summary goes on under its name (hanging indent 4), the source sits at indent 6
    assert any(re.match(r"^ {4}\S", line) for line in lines)
    for line in lines:
        assert len(line) <= 60 or len(line.split()) == 1, line  # only a single unbreakable word overflows


def test_posref_models_json_and_show(capsys, records):
    assert cli.main(["models", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in listed] == [r["name"] for r in records]
    assert listed[0]["summary"] == zoo.summary(records[0]) and listed[0]["source"] == records[0]["source"]
    assert cli.main(["models", "show", "qwen2-vl-7b"]) == 0
    assert json.loads(capsys.readouterr().out) == zoo.load("qwen2-vl-7b")


def test_an_unknown_model_is_one_line_and_exit_2(capsys):
    assert cli.main(["models", "show", "llama-3.1-8"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "'llama-3.1-8'" in lines[0] and "did you mean 'llama-3.1-8b'" in lines[0]


def test_docs_table_matches_the_records(records):
    page = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    table = page.split("<!-- zoo-table:begin -->\n", 1)[1].split("<!-- zoo-table:end -->", 1)[0]
    assert table == zoo.table_markdown(records)
