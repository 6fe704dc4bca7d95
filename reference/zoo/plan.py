"""What posref grades for a model: each family's reading of a config, by protocol.

A family that can read a model's configuration has ``reference/<family>/model_config.py`` with
``PROTOCOLS`` (the protocols its settings are graded with), ``ConfigError`` (reference.zoo.fields's,
imported, as are the field readers two families share) and ``settings(config) -> list | None``
(None: the config's model does not use this family). ``plan`` asks every family, so adding one
edits nothing here.
"""

from __future__ import annotations

from reference import families
from reference.zoo.fields import ConfigError


def plan(config: dict) -> dict:
    """{protocol: [setting, ...]} for every family that reads ``config``; ConfigError when a
    family cannot read a field it needs, or no family reads the model."""
    out = {}
    for family in families.names():
        reader = families.part(family, "model_config")
        if reader is None:
            continue
        try:
            found = reader.settings(config)
        except reader.ConfigError as exc:
            raise ConfigError(str(exc)) from None
        for protocol in reader.PROTOCOLS if found else ():
            out.setdefault(protocol, []).extend(found)
    if not out:
        model_type = config.get("model_type") if isinstance(config, dict) else None
        raise ConfigError(f"model_type {model_type!r}: no posref family reads this model's positional encoding yet")
    return out
