"""transformers' own M-RoPE decode positions (protocol mrope.decode), through a tiny Qwen2-VL.

The session holds one ``Qwen2VLModel`` (built from a small config, no download: one layer, one
head of the spec's head_dim and mrope_section, a one-block vision tower) and runs its real ``forward``
as a hand-written generation loop does: ``prefill`` calls it on the prompt with a new
``DynamicCache``, ``input_ids``, ``mm_token_type_ids`` and ``image_grid_thw`` (the protocol's
merged grids with h and w doubled: spatial_merge_size 2); ``decode(c)`` calls it on one token with
that cache (whose length is c). The answer is the ``position_ids`` the model hands its rotary
embedding, read by a forward pre-hook on ``language_model.rotary_emb``: what actually rotates.
No pixel values are passed: the image tokens keep their token embeddings, which changes no
position.

What transformers 5.24 does over two generations (tests/mrope/test_mrope_decode.py asserts it):
``compute_3d_position_ids`` recomputes ``rope_deltas`` when the cache is empty and the prompt
carries images (the fix of PR 36013), so a second image prompt decodes right. A text-only prompt
after an image prompt does not: with no ``image_grid_thw`` the prefill leaves ``self.rope_deltas``
as the image prompt set them, and the decode steps add them (case ``image-then-text``:
``mrope-stale-deltas``). ``generate`` resets them to zero for a text-only prompt in
``_prepare_position_ids_for_generation``; a loop that calls ``forward`` itself gets the stale ones.

Needs transformers 5 (written against 5.24); the tests skip without it.
"""

import torch

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "transformers"
SURVEY = [
    ("mrope.decode", "decode"),
]
SURVEY_NOTES = {
    "decode": "A real fault of a hand-written generation loop: a text-only prompt after an image prompt "
              "decodes with the image prompt's rope_deltas (mrope-stale-deltas), which the prefill "
              "leaves as they were; generate() resets them, a loop calling forward() does not.",
}

MERGE = 2  # Qwen2-VL's spatial_merge_size


def _model(spec):
    from transformers import Qwen2VLConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    if spec.layout != "half" or spec.variant != "qwen2" or spec.rotary_dim != spec.head_dim:
        raise Unsupported("Qwen2-VL: half layout, consecutive (qwen2) sections, whole head")
    rope = {"rope_type": "default", "rope_theta": spec.base, "mrope_section": list(spec.mrope_section)}
    text = dict(hidden_size=spec.head_dim, intermediate_size=16, num_hidden_layers=1, num_attention_heads=1,
                num_key_value_heads=1, head_dim=spec.head_dim, vocab_size=16, bos_token_id=None, eos_token_id=None,
                rope_parameters=rope)
    vision = dict(depth=1, embed_dim=8, hidden_size=16, num_heads=1, mlp_ratio=1, spatial_merge_size=MERGE)
    return Qwen2VLModel(Qwen2VLConfig(text_config=text, vision_config=vision)).eval()


class Session:
    def __init__(self, spec):
        self.model = _model(spec)  # a fresh instance per session: its own rope_deltas
        self.cache = None
        self.seen = []
        self.model.language_model.rotary_emb.register_forward_pre_hook(self._record, with_kwargs=True)

    def _record(self, module, args, kwargs):
        self.seen.append(kwargs.get("position_ids", args[1] if len(args) > 1 else None))

    def _forward(self, **inputs):
        self.seen.clear()
        with torch.no_grad():
            self.model(cache=self.cache, use_cache=True, **inputs)
        return self.seen[-1].clone()

    def prefill(self, token_types, grids):
        from transformers import DynamicCache

        self.cache = DynamicCache(config=self.model.config.text_config)  # a new generation
        grid_thw = None
        if grids.shape[0]:
            grid_thw = grids.clone()
            grid_thw[:, 1:] *= MERGE  # the patch grid before the merge, as the processor reports it
        return self._forward(input_ids=torch.zeros_like(token_types), mm_token_type_ids=token_types.int(),
                             image_grid_thw=grid_thw)

    def decode(self, cache_position):
        if self.cache.get_seq_length() != cache_position:
            raise ValueError(f"this loop decodes the next token only: the cache holds {self.cache.get_seq_length()} "
                             f"tokens, cache_position is {cache_position}")
        rows = self.cache.layers[0].keys.shape[0]
        return self._forward(input_ids=torch.zeros(rows, 1, dtype=torch.int64))


def decode(spec):
    return Session(spec)
