"""A model's sinusoidal position table from its config: sinusoidal.table.

``settings(config)`` returns one :class:`Setting` for the configurations whose model adds a
fixed sinusoidal table, or None for any other model. Read today: tensor2tensor's Transformer
(``model_type`` "tensor2tensor-transformer", the zoo's ``transformer-base``: no config.json
exists, the record keeps tensor2tensor's hyperparameter names) with ``pos: "timing"``:
get_timing_signal_1d at ``hidden_size`` channels, [sin | cos] halves (a zero column when odd),
inverse timescales ``1 / min_timescale * (min_timescale / max_timescale)^(i / (n - 1))`` for
n = hidden_size // 2, i.e. sinusoidal.table's exponent "2i/(d-2)" at base max_timescale when
min_timescale is 1 (its default). Another min_timescale divides every position by it, which
sinusoidal.table does not take: a ConfigError naming it, as is a ``pos`` other than "timing".

Transformer-XL's table of relative distances is read by its own family
(reference.transformer_xl.model_config), with this Setting.

``PROTOCOLS``: sinusoidal.table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PROTOCOLS = ("sinusoidal.table",)
T2T_TIMESCALES = {"min_timescale": 1.0, "max_timescale": 1.0e4}  # get_timing_signal_1d's defaults


class ConfigError(ValueError):
    """A field posref cannot read as the model's code would: one line naming the field."""


@dataclass(frozen=True)
class Setting:
    """The model's table: sinusoidal.table's parameters (d_model, layout, exponent, base, dims)."""

    kind: str
    params: dict
    notes: tuple = field(default_factory=tuple)
    max_position: int | None = None  # the largest position the model feeds; None: the config bounds none


def settings(config: dict) -> list | None:
    """[Setting] of the model's sinusoidal table; None when it has none posref reads."""
    if not isinstance(config, dict):
        raise ConfigError(f"a config is a JSON object, got {type(config).__name__}")
    if config.get("model_type") != "tensor2tensor-transformer":
        return None
    pos = config.get("pos", "timing")
    if pos != "timing":
        raise ConfigError(f"pos: {pos!r}: only tensor2tensor's 'timing' signal is a sinusoidal table")
    d = config.get("hidden_size")
    if isinstance(d, bool) or not isinstance(d, int) or d < 4:
        raise ConfigError(f"hidden_size: an integer of at least 4 (two timescales), got {d!r}")
    notes, scales = [], {}
    for name, default in T2T_TIMESCALES.items():
        value = config.get(name, default)
        if name not in config:
            notes.append(f"{name} {default:g}: get_timing_signal_1d's default (the config has none)")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ConfigError(f"{name}: a positive number, got {value!r}")
        scales[name] = float(value)
    if scales["min_timescale"] != 1.0:
        raise ConfigError(f"min_timescale: {config['min_timescale']!r}: sinusoidal.table's timescales start at 1 "
                          "(another minimum divides every position by it)")
    if not scales["max_timescale"] > 1.0:
        raise ConfigError(f"max_timescale: must exceed min_timescale 1, got {config['max_timescale']!r}")
    params = {"d_model": d, "layout": "concatenated", "exponent": "2i/(d-2)", "base": scales["max_timescale"],
              "dims": 1}
    return [Setting("all", params, tuple(notes))]
