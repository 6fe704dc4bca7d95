"""transformers' learned absolute positions, graded through thin adapters as a user would call
them (no download: the models are built from a config and the case's table is loaded).

``gpt2``: a one-block ``GPT2Model`` with the table loaded into ``wpe``, called with
``inputs_embeds=x, position_ids=positions, output_hidden_states=True``; its first hidden state is
the embedding output ``drop(inputs_embeds + wpe(position_ids))`` (dropout off in eval mode) that
the blocks receive. Row = position (variant "absolute"); ``wpe`` is an ``nn.Embedding``, so a
position outside the table raises.

``roberta``: the position ids of ``RobertaEmbeddings.create_position_ids_from_input_ids`` (a real
token counts the real tokens up to it, plus the cache length, plus padding_idx; padding reads
padding_idx), looked up in a ``RobertaEmbeddings``' ``position_embeddings`` holding the case's
table and added to x. The library numbers tokens by counting them, so it can express only rows
whose real tokens are consecutive positions (a prefill after padding, or one decode step at any
cache length): other rows raise Unsupported. Row = position + padding_idx + 1 (variant
"roberta").

Graded at transformers 5.24.0. Adapters: ``gpt2``, ``roberta`` (learned.lookup). Needs
``transformers`` (the ``test`` extra); the tests skip without it.
"""

import torch
from transformers import GPT2Config, GPT2Model, RobertaConfig
from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

from conformance import Unsupported

LIBRARY = "transformers"
SURVEY = [("learned.lookup", "gpt2"), ("learned.lookup", "roberta")]
SURVEY_NOTES = {
    "gpt2": "GPT-2 reads row = position: the RoBERTa-variant cases are unsupported.",
    "roberta": "RoBERTa numbers tokens by counting the real ones (create_position_ids_from_input_ids): rows "
               "whose positions are not consecutive, and the absolute variant, are unsupported.",
}


def gpt2(x, positions, table, spec):
    if spec.variant != "absolute":
        raise Unsupported("GPT-2 reads row = position (variant absolute) only")
    config = GPT2Config(n_layer=1, n_embd=spec.d_model, n_head=1, n_positions=spec.num_positions, vocab_size=1,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2Model(config).to(device=x.device, dtype=x.dtype).eval()
    with torch.no_grad():
        model.wpe.weight.copy_(table)
        out = model(inputs_embeds=x, position_ids=positions, output_hidden_states=True, use_cache=False)
    return out.hidden_states[0]


def _counting_row(row, pad):
    """(input ids, cache length) that make create_position_ids_from_input_ids give this row's
    positions, or None: its real tokens must be consecutive from cache length."""
    real = row.ne(-1)
    values = row[real]
    if values.numel() == 0:
        return row.new_full(row.shape, pad), 0
    start = int(values[0])
    if not torch.equal(values, torch.arange(start, start + values.numel(), device=row.device)):
        return None
    return torch.where(real, pad + 1, pad), start


def roberta(x, positions, table, spec):
    if spec.variant != "roberta":
        raise Unsupported("RoBERTa's position ids are padding_idx + 1 + the token count (variant roberta) only")
    if bool((positions < -1).any()):
        raise ValueError("positions: only -1 (padding) may be negative")
    config = RobertaConfig(vocab_size=spec.padding_idx + 2, hidden_size=spec.d_model, pad_token_id=spec.padding_idx,
                           max_position_embeddings=spec.num_positions)
    embeddings = RobertaEmbeddings(config).to(device=x.device, dtype=x.dtype).eval()
    rows = []
    for row in positions:
        counted = _counting_row(row, spec.padding_idx)
        if counted is None:
            raise Unsupported("RoBERTa counts the real tokens: their positions must be consecutive in a row")
        input_ids, cache_length = counted
        rows.append(embeddings.create_position_ids_from_input_ids(input_ids[None], spec.padding_idx, cache_length))
    with torch.no_grad():
        embeddings.position_embeddings.weight.copy_(table)
        return x + embeddings.position_embeddings(torch.cat(rows))
