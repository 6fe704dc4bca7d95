"""The rope.apply cases of one model's RoPE (a reference.rope.model_config Setting), drawn from a seed.

What breaks real ports lives at particular positions of the model's own context L
(max_position_embeddings), so every model gets:

- ``prefill-8``: positions 0..7 (0 must be the identity);
- ``drawn``: one row of eight positions drawn from [2, L - 1] (new with every seed);
- ``around-2^k``: 2^k - 2 .. 2^k + 1 for each k of 11, 16, 20, 24 below the last position graded
  (the float16 and float32 integer limits, long context);
- ``decode-<L-1>``: the last position of the context;
- ``decode-<2L-1>``: past the context, where the scaling type extrapolates (every type but the
  length-dependent ones, whose tables change with the sequence length);
- ``row-offsets``: batched decode, three rows continuing from different cache lengths;
- ``left-padded``: Hugging Face position ids of left-padded rows;
- for the length-dependent types (dynamic, longrope) with original context L0: one decode step
  at sequence lengths L0 - 1, L0, L0 + 1 (and L, the decode at L - 1 above; the reference's
  semantics: the sequence length is the case's ``seq_len``, the tables are those of that length);

each at the model's real number of attention heads (and, for rope.apply_qk, its number of key-value
heads).

``committed(setting, protocol)`` is the seedless part, stored in vectors/ for every zoo model
(reference.zoo.vectors): the last position of the context, one batched decode (a token per row at
3, L/2 and L - 4) and the thresholds of the length-dependent types, at two heads (a RoPE rotates
each head alike; the real head counts are the drawn cases' job). Their ids (``rope.apply/codellama-7b/decode-16383``) do not depend on a
seed, so a review can cite them.
"""

from __future__ import annotations

from dataclasses import replace

from reference.golden.catalog import TestGroupSpec
from reference.numerics import scaling as scalings
from reference.rope.vectors.catalog import around, decode, left_padded, prefill, row_offsets
from reference.rope.vectors.records import LAYOUT_FLAG, QkTest, RopeTest

LENGTH_DEPENDENT = ("dynamic", "longrope")
POWERS = (11, 16, 20, 24)  # those around() describes


def groups(setting, draw, protocol: str = "rope.apply") -> list:
    """[TestGroupSpec] of ``protocol`` (rope.apply, or rope.apply_qk with the model's kv heads)
    for ``setting`` (a Setting), positions drawn from ``draw``."""
    rope_type, params = scalings.resolve(setting.params["scaling"])
    L = setting.max_positions
    extrapolates = rope_type not in LENGTH_DEPENDENT
    last = 2 * L - 1 if extrapolates else L - 1
    drawn = tuple(sorted(draw.integers(2, L - 1, 8)))
    tests = [
        prefill(),
        RopeTest("drawn", f"Eight positions drawn from [2, {L - 1}] (they change with the seed): {list(drawn)}.",
                 (), (drawn,)),
        *(around(k) for k in POWERS if 2**k + 1 <= last),
        decode(L - 1, f" The last position of the model's {L}-token context."),
    ]
    if extrapolates:
        tests.append(decode(2 * L - 1, f" Past the model's {L}-token context: {rope_type} extrapolates."))
    tests += [row_offsets((3, L // 2, L - 4)), left_padded()]
    if not extrapolates:
        tests += _thresholds(params["original_max_position_embeddings"], L)
    return [_at_model(setting, tests, protocol, setting.heads)]


def committed(setting, protocol: str) -> list:
    """[TestGroupSpec] of the certified, seedless cases stored for a zoo model's ``setting``: for
    rope.apply only (rope.apply_qk's kv heads are the drawn cases' job)."""
    if protocol != "rope.apply":
        return []
    rope_type, params = scalings.resolve(setting.params["scaling"])
    L = setting.max_positions
    rows = (3, L // 2, L - 4)
    tests = [
        decode(L - 1, f" The last position of the model's {L}-token context."),
        RopeTest("batched-decode", f"Batched decode: one token per row at {list(rows)}, each row continuing a "
                 "cache of its own length.", ("BatchedDecode", "RowOffsets"), tuple((p,) for p in rows)),
    ]
    if rope_type in LENGTH_DEPENDENT:
        tests += _thresholds(params["original_max_position_embeddings"], L)
    return [_at_model(setting, tests, protocol, 2)]


def _thresholds(original: int, L: int) -> list:
    """One decode step at sequence lengths original - 1, original, original + 1 (L's is decode-<L-1>)."""
    return [replace(decode(n - 1, f" Sequence length {n} (original context {original})."),
                    name=f"decode-{n - 1}-seq{n}", seq_len=n)
            for n in sorted({original - 1, original, original + 1} - {L})]


def _at_model(setting, tests, protocol: str, heads: int):
    layout = LAYOUT_FLAG[setting.params["layout"]]
    tests = [replace(t, heads=heads, flags=t.flags + ("ModelConfig", layout)) for t in tests]
    if protocol == "rope.apply_qk":
        tests = [QkTest(**{**vars(t), "kv_heads": setting.kv_heads}) for t in tests]
    return TestGroupSpec(setting.params, tuple(tests), "")
