"""A model's learned absolute position table from its Hugging Face ``config.json``: learned.lookup.

``settings(config)`` returns one :class:`Setting` (the table's rows, its width, the position-id
variant and padding index) for the architectures that add a learned absolute table to the token
embeddings, read as transformers' modeling code reads them, or None for any other model:

- ``bert``: ``max_position_embeddings`` rows of ``hidden_size``, position ids 0..L-1
  (BertEmbeddings). ``position_embedding_type`` other than "absolute" (transformers 4's
  "relative_key" / "relative_key_query", which add no absolute table) is a ConfigError;
- ``roberta``, ``xlm-roberta``: the same table, position ids from the padding mask
  (create_position_ids_from_input_ids): real tokens at rows ``pad_token_id`` + 1 onwards,
  padding at row ``pad_token_id`` (variant "roberta", padding_idx = pad_token_id; RobertaConfig's
  default 1 when the config has none, said in the notes);
- ``gpt2``: ``n_positions`` rows of ``n_embd`` (wpe), position ids 0..L-1; an ``n_ctx`` that
  disagrees with ``n_positions`` is a ConfigError naming it.

``PROTOCOLS``: learned.lookup at the model's table (rows and width).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reference.zoo import fields
from reference.zoo.fields import ConfigError

PROTOCOLS = ("learned.lookup",)
ROBERTA_TYPES = ("roberta", "xlm-roberta")
ROBERTA_PAD = 1  # RobertaConfig.pad_token_id's default


@dataclass(frozen=True)
class Setting:
    """The model's table: learned.lookup's parameters (num_positions, d_model, variant, padding_idx)."""

    kind: str
    params: dict
    notes: tuple = field(default_factory=tuple)


def settings(config: dict) -> list | None:
    """[Setting] of the model's learned table; None when it has none."""
    fields.json_object(config)
    model_type = config.get("model_type")
    notes: list = []
    if model_type == "gpt2":
        rows = fields.integer(config, ("n_positions", "max_position_embeddings"))
        if config.get("n_ctx") is not None and config["n_ctx"] != rows:
            raise ConfigError(f"n_ctx: {config['n_ctx']!r} disagrees with n_positions {rows} (the wpe table's rows)")
        width = fields.integer(config, ("n_embd", "hidden_size"))
        variant, padding_idx = "absolute", None
    elif model_type == "bert" or model_type in ROBERTA_TYPES:
        kind = config.get("position_embedding_type", "absolute")
        if kind != "absolute":
            raise ConfigError(f"position_embedding_type: {kind!r}: only the absolute table is a learned.lookup "
                              "(posref does not implement BERT's relative_key embeddings)")
        rows = fields.integer(config, ("max_position_embeddings",))
        width = fields.integer(config, ("hidden_size",))
        variant, padding_idx = "absolute", None
        if model_type in ROBERTA_TYPES:
            variant = "roberta"
            if config.get("pad_token_id") is None:
                notes.append(f"pad_token_id {ROBERTA_PAD}: transformers' RobertaConfig default (the config has none)")
            padding_idx = config.get("pad_token_id", ROBERTA_PAD)
            if padding_idx is None:
                padding_idx = ROBERTA_PAD
            if isinstance(padding_idx, bool) or not isinstance(padding_idx, int) or padding_idx < 0:
                raise ConfigError(f"pad_token_id: a row index, got {padding_idx!r}")
            if padding_idx + 2 > rows:
                raise ConfigError(f"pad_token_id: {padding_idx} leaves no row for a token in max_position_embeddings "
                                  f"{rows} (tokens start at row pad_token_id + 1)")
    else:
        return None
    params = {"num_positions": rows, "d_model": width, "variant": variant, "padding_idx": padding_idx}
    return [Setting("all", params, tuple(notes))]
