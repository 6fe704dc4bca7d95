"""A model's sinusoidal position table from its config: sinusoidal.table.

``settings(config)`` returns one :class:`Setting` for the configurations whose model reads a fixed
sinusoidal table, or None for any other model. Two readings, by ``model_type``:

- tensor2tensor's Transformer (``model_type`` "tensor2tensor-transformer", the zoo's
  ``transformer-base-t2t``: no config.json exists, the record keeps tensor2tensor's hyperparameter
  names) with ``pos: "timing"``: get_timing_signal_1d at ``hidden_size`` channels, [sin | cos]
  halves (a zero column when odd), inverse timescales
  ``1 / min_timescale * (min_timescale / max_timescale)^(i / (n - 1))`` for n = hidden_size // 2,
  i.e. sinusoidal.table's exponent "2i/(d-2)" at base max_timescale when min_timescale is 1 (its
  default). Another min_timescale divides every position by it, which sinusoidal.table does not
  take: a ConfigError naming it, as is a ``pos`` other than "timing".
- Transformer-XL (``model_type`` "transfo-xl"): the table R of relative distances its scores
  read, as the paper's code (kimiyoung/transformer-xl mem_transformer.py, and transformers'
  TransfoXL port) builds it: ``PositionalEmbedding(d_model)``, inverse frequencies
  1 / 10000^(2c / d_model), [sin | cos] halves, at the distances ``pos_seq = arange(klen - 1, -1,
  -1)`` clamped to ``clamp_len`` when it is positive, klen = ``tgt_len`` + ``mem_len``. That is
  sinusoidal.table (concatenated, exponent "2i/d", base 10000) at d_model, graded up to the
  largest distance the model feeds: clamp_len, or klen - 1 when it clamps nothing. ``attn_type``
  other than 0 (the paper's relative attention; 1-3 are other encodings in the same code) is a
  ConfigError naming it, as is an odd ``d_model`` or a negative clamp_len. The score itself,
  transformer_xl.score at the model's shape, is read by reference/transformer_xl/model_config.py.

``PROTOCOLS``: sinusoidal.table (the cases: reference.sinusoidal.model_cases).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reference.zoo import fields
from reference.zoo.fields import ConfigError

PROTOCOLS = ("sinusoidal.table",)
T2T_TIMESCALES = {"min_timescale": 1.0, "max_timescale": 1.0e4}  # get_timing_signal_1d's defaults
XL_BASE = 10000.0  # Transformer-XL's PositionalEmbedding: inv_freq = 1 / 10000^(arange(0, d, 2) / d)


@dataclass(frozen=True)
class Setting:
    """The model's table: sinusoidal.table's parameters (d_model, layout, exponent, base, dims)."""

    kind: str
    params: dict
    notes: tuple = field(default_factory=tuple)
    max_position: int | None = None  # the largest position the model feeds; None: the config bounds none


def settings(config: dict) -> list | None:
    """[Setting] of the model's sinusoidal table; None when it has none posref reads."""
    reader = READERS.get(fields.json_object(config).get("model_type"))
    return None if reader is None else [reader(config)]


def timing_signal(config: dict) -> Setting:
    """tensor2tensor's get_timing_signal_1d at the config's width and timescales."""
    pos = config.get("pos", "timing")
    if pos != "timing":
        raise ConfigError(f"pos: {pos!r}: only tensor2tensor's 'timing' signal is a sinusoidal table")
    d = fields.check_integer(config.get("hidden_size"), "hidden_size", 4, why="two timescales")
    notes, scales = [], {}
    for name, default in T2T_TIMESCALES.items():
        if name not in config:
            notes.append(f"{name} {default:g}: get_timing_signal_1d's default (the config has none)")
        scales[name] = fields.positive_number(config.get(name, default), name)
    if scales["min_timescale"] != 1.0:
        raise ConfigError(f"min_timescale: {config['min_timescale']!r}: sinusoidal.table's timescales start at 1 "
                          "(another minimum divides every position by it)")
    if not scales["max_timescale"] > 1.0:
        raise ConfigError(f"max_timescale: must exceed min_timescale 1, got {config['max_timescale']!r}")
    params = {"d_model": d, "layout": "concatenated", "exponent": "2i/(d-2)", "base": scales["max_timescale"],
              "dims": 1}
    return Setting("all", params, tuple(notes))


def relative_table(config: dict) -> Setting:
    """Transformer-XL's table R of the distances klen - 1 .. 0 (clamped at clamp_len > 0)."""
    attn_type = config.get("attn_type", 0)
    if attn_type != 0:
        raise ConfigError(f"attn_type: {attn_type!r}: only 0, the paper's relative attention, reads a sinusoidal "
                          "table of distances")
    d_model = fields.check_integer(config.get("d_model"), "d_model", 2)
    if d_model % 2:
        raise ConfigError(f"d_model: {d_model} is odd (the table is [sin | cos] halves of d_model / 2 frequencies)")
    # every field is required here (absent: "<name>: ..., got None"); clamp_len and mem_len may be 0
    clamp = fields.check_integer(config.get("clamp_len"), "clamp_len", 0)
    klen = fields.check_integer(config.get("tgt_len"), "tgt_len", 1) + fields.check_integer(
        config.get("mem_len"), "mem_len", 0)
    top = clamp if 0 < clamp < klen else klen - 1
    if top < 19:
        raise ConfigError(f"tgt_len + mem_len: {klen} distances, fewer than the 20 posref's cases read")
    params = {"d_model": d_model, "layout": "concatenated", "exponent": "2i/d", "base": XL_BASE, "dims": 1}
    why = f"clamp_len {clamp}" if top == clamp else f"tgt_len + mem_len {klen} (clamp_len {clamp} clamps nothing)"
    return Setting("all", params, (f"largest distance {top}: {why}",), max_position=top)


# model_type -> the reader of its table
READERS = {"tensor2tensor-transformer": timing_signal, "transfo-xl": relative_table}
