"""reference.zoo: real models' positional configurations, one JSON record per model (issue 27).

A record is ``reference/zoo/models/<name>.json``::

    {"name": "llama-3.1-8b",                    # = the file name
     "family": ["rope"],                         # posref families it exercises, main one first
     "source": {"url": ..., "revision": ..., "note": ...},   # where the values were read
     "config": {...}}                            # the positional fields, verbatim

``config`` keeps the source's own spelling (a Hugging Face ``config.json`` where the model has
one: ``rope_theta``, ``rope_scaling`` or ``rope_parameters`` with every field,
``partial_rotary_factor``, ``head_dim`` ...); nothing is renamed or defaulted, so a later
``--model`` grader parses a record exactly as it parses a user's ``--model-config`` file. Models
without a config.json (the original Transformer, RoPE-ViT, the seed document's Gaussian-kernel
RoPE) use the reference code's values under HF-like names and say so in ``source.note``. The
record format is ``schema.json`` (JSON Schema 2020-12).

``derived`` reads a few key parameters out of a record (head_dim, rotary dim, base, scaling,
heads, context) by the rules written in its docstring; it is what ``posref models`` and
docs/models.md show, not a grader's parser. Pure Python: no torch, no conformance import.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Optional
from urllib.parse import urlparse

MODELS_DIR = Path(__file__).with_name("models")
SCHEMA_PATH = Path(__file__).with_name("schema.json")

_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$")


def names() -> list[str]:
    """The record names, sorted (one per ``models/*.json``)."""
    return sorted(p.stem for p in MODELS_DIR.glob("*.json"))


@functools.lru_cache(maxsize=1)
def schema() -> dict:
    """The record schema (schema.json), parsed."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def validate(record, name: Optional[str] = None) -> None:
    """ValueError (one line, naming the field) unless ``record`` follows schema.json, its families
    are posref families and, when ``name`` is given, its name is that file name."""
    import jsonschema

    from reference import families

    errors = sorted(jsonschema.Draft202012Validator(schema()).iter_errors(record), key=lambda e: list(e.path))
    if errors:
        err = errors[0]
        where = "/".join(str(p) for p in err.path) or "(record)"
        raise ValueError(f"zoo record {name or '?'}: {where}: {err.message}")
    unknown = [f for f in record["family"] if f not in families.names()]
    if unknown:
        raise ValueError(f"zoo record {record['name']}: family: {unknown[0]!r} is not a posref family")
    if name is not None and record["name"] != name:
        raise ValueError(f"zoo record {name}: name: {record['name']!r} differs from the file name")


@functools.lru_cache(maxsize=None)
def _text(name: str) -> str:
    return (MODELS_DIR / f"{name}.json").read_text(encoding="utf-8")


def load(name: str) -> dict:
    """The record called ``name``, validated; a fresh dict on every call (callers may change it).

    KeyError for a name with no record (the caller words the usage error and its did-you-mean),
    ValueError for a record that is not valid JSON or not of the schema."""
    if not isinstance(name, str) or not _NAME.match(name) or name not in names():
        raise KeyError(name)
    try:
        record = json.loads(_text(name))
    except json.JSONDecodeError as exc:
        raise ValueError(f"zoo record {name}: not valid JSON: {exc}") from None
    validate(record, name)
    return record


def records() -> list[dict]:
    """Every record, validated, in name order."""
    return [load(n) for n in names()]


# --- key parameters -------------------------------------------------------------------------

def _first(cfg: dict, *keys):
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return None


def _text_config(cfg: dict) -> dict:
    """The language model's part of a multimodal config (``text_config``), else the config."""
    return cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg


def _rope_params(cfg: dict) -> dict:
    """``rope_parameters`` (transformers 5 form) or ``rope_scaling`` (the older form), or {}."""
    for key in ("rope_parameters", "rope_scaling"):
        if isinstance(cfg.get(key), dict):
            return cfg[key]
    return {}


def derived(record: dict) -> dict:
    """Key parameters of a record, read by these rules (None where the config does not say):

    - the text part of a multimodal config (``text_config``) when there is one;
    - heads: num_attention_heads | n_head | num_heads | n_heads; kv heads: num_key_value_heads |
      num_kv_heads | multi_query_group_num | 1 when ``multi_query`` is true | the heads;
    - hidden: hidden_size | n_embd | d_model | n_embed | embed_dim;
    - head_dim: head_dim | d_kv | d_head | kv_channels | qk_nope_head_dim + qk_rope_head_dim
      (DeepSeek's MLA) | hidden / heads;
    - rotary_dim (RoPE families): qk_rope_head_dim (MLA) | rotary_dim | head_dim x
      (partial_rotary_factor, in the config or its rope parameters | rotary_pct |
      rotary_emb_fraction), else head_dim;
    - ChatGLM's format (model_type chatglm): theta 10000 x rope_ratio, rotary_dim head_dim / 2;
    - theta: rope_theta (top level or in rope_parameters) | rotary_emb_base | max_timescale;
      local_theta: rope_local_base_freq (Gemma 3's sliding layers);
    - scaling: rope_type | type of rope_scaling / rope_parameters unless "default" (Qwen2-VL's
      legacy "mrope" is M-RoPE with no scaling); factor with it;
    - max_positions: max_position_embeddings | n_positions | max_seq_len | model_max_length |
      seq_length;
    - mrope_section (M-RoPE), buckets / max_distance (T5), clamp_len / mem_len (Transformer-XL),
      alibi_bias_max (MPT), kernel (Gaussian-kernel RoPE).
    """
    cfg = _text_config(record["config"])
    rp = _rope_params(cfg)
    heads = _first(cfg, "num_attention_heads", "n_head", "num_heads", "n_heads")
    kv = _first(cfg, "num_key_value_heads", "num_kv_heads", "multi_query_group_num")
    if kv is None and cfg.get("multi_query") is True:
        kv = 1
    hidden = _first(cfg, "hidden_size", "n_embd", "d_model", "n_embed", "embed_dim")
    head_dim = _first(cfg, "head_dim", "d_kv", "d_head", "kv_channels")
    if head_dim is None and cfg.get("qk_rope_head_dim") is not None and cfg.get("qk_nope_head_dim") is not None:
        head_dim = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]  # MLA: the query/key head
    if head_dim is None and hidden and heads and hidden % heads == 0:
        head_dim = hidden // heads
    rotary = _first(cfg, "qk_rope_head_dim", "rotary_dim")
    fraction = _first(cfg, "partial_rotary_factor", "rotary_pct", "rotary_emb_fraction")
    if fraction is None:
        fraction = rp.get("partial_rotary_factor")
    if rotary is None and head_dim is not None:
        rotary = int(round(head_dim * fraction)) if fraction is not None else head_dim
    theta = _first(cfg, "rope_theta", "rotary_emb_base", "max_timescale") or rp.get("rope_theta")
    if cfg.get("model_type") == "chatglm" and head_dim is not None:
        theta, rotary = 10000.0 * cfg.get("rope_ratio", 1), head_dim // 2
    rope_type = rp.get("rope_type", rp.get("type"))
    scaling = rope_type if rope_type not in (None, "default", "mrope") else None
    attn = cfg.get("attn_config") if isinstance(cfg.get("attn_config"), dict) else {}
    return {
        "family": record["family"][0],
        "heads": heads,
        "kv_heads": kv if kv is not None else heads,
        "hidden": hidden,
        "head_dim": head_dim,
        "rotary_dim": rotary,
        "theta": theta,
        "local_theta": cfg.get("rope_local_base_freq"),
        "scaling": scaling,
        "factor": rp.get("factor") if scaling else None,
        "max_positions": _first(cfg, "max_position_embeddings", "n_positions", "max_seq_len",
                                "model_max_length", "seq_length"),
        "mrope_section": rp.get("mrope_section", cfg.get("mrope_section")),
        "buckets": cfg.get("relative_attention_num_buckets"),
        "max_distance": cfg.get("relative_attention_max_distance"),
        "clamp_len": cfg.get("clamp_len"),
        "mem_len": cfg.get("mem_len"),
        "alibi_bias_max": attn.get("alibi_bias_max"),
        "kernel": cfg.get("kernel"),
    }


def _num(x) -> str:
    """A number as short as it reads: 500000.0 -> 500000, 1e6 -> 1000000, 0.707 -> 0.707."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e16:
        x = int(x)
    return str(x) if isinstance(x, int) else format(x, "g")


def summary(record: dict) -> str:
    """The key parameters in one short line, e.g. "rope θ=500000 llama3 ×8 d=128 32/8 heads
    131072" (family, base, scaling, head and rotary dims, heads / kv heads, context)."""
    d = derived(record)
    fam = d["family"]
    parts = [fam]
    if fam in ("rope", "mrope", "rope2d", "gaussian_rope", "sinusoidal"):
        if d["theta"] is not None:
            parts.append(f"θ={_num(d['theta'])}")
        if d["local_theta"] is not None:
            parts.append(f"local θ={_num(d['local_theta'])}")
        if d["scaling"]:
            parts.append(d["scaling"] + (f" ×{_num(d['factor'])}" if d["factor"] is not None else ""))
        if d["mrope_section"]:
            parts.append("sections " + "/".join(str(s) for s in d["mrope_section"]))
        if d["kernel"]:
            k = d["kernel"]
            parts.append(f"a={_num(k['a1'])}/{_num(k['a2'])} σ={_num(k['s1'])}/{_num(k['s2'])}")
    if fam == "t5":
        parts.append(f"{d['buckets']} buckets" + (f" max {d['max_distance']}" if d["max_distance"] else ""))
    if fam == "transformer_xl":
        parts.append(f"clamp {d['clamp_len']} mem {d['mem_len']}")
    if fam == "alibi" and d["alibi_bias_max"] is not None:
        parts.append(f"max bias {_num(d['alibi_bias_max'])}")
    if fam in ("learned", "sinusoidal") and d["hidden"] is not None:
        parts.append(f"width {d['hidden']}")  # absolute tables are as wide as the model
    elif d["head_dim"] is not None:
        dim = f"d={d['head_dim']}"
        if fam in ("rope", "mrope") and d["rotary_dim"] not in (None, d["head_dim"]):
            dim += f" rot {d['rotary_dim']}"
        parts.append(dim)
    if d["heads"] is not None:
        kv = d["kv_heads"]
        parts.append(f"{d['heads']}/{kv} heads" if kv != d["heads"] else f"{d['heads']} heads")
    if d["max_positions"] is not None and fam not in ("t5",):
        parts.append(str(d["max_positions"]))
    return " ".join(parts)


def source_label(record: dict) -> str:
    """Where a record was read, short: host and the repository part of the path
    ("huggingface.co/Qwen/Qwen2-7B", "github.com/mlc-ai/mlc-llm"), or the seed document."""
    url = record["source"]["url"]
    if not url.startswith("https://"):
        return url
    parsed = urlparse(url)
    repo = [p for p in parsed.path.split("/") if p][:2]
    return "/".join([parsed.netloc, *repo])


def table_markdown(recs: Optional[list] = None) -> str:
    """The zoo as a Markdown table (name, families, key parameters, source link), as
    docs/models.md holds it between its ``zoo-table`` markers."""
    rows = ["| model | family | key parameters | source |", "| --- | --- | --- | --- |"]
    for r in recs if recs is not None else records():
        fam = ", ".join(r["family"])
        rows.append(f"| `{r['name']}` | {fam} | {summary(r)} | [{source_label(r)}]({r['source']['url']}) |"
                    if r["source"]["url"].startswith("https://")
                    else f"| `{r['name']}` | {fam} | {summary(r)} | {source_label(r)} |")
    return "\n".join(rows) + "\n"
