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
"""

from __future__ import annotations

from dataclasses import replace

from reference.golden.catalog import TestGroupSpec
from reference.numerics import scaling as scalings
from reference.rope.vectors.catalog import around, decode, left_padded, prefill, row_offsets
from reference.rope.vectors.records import QkTest, RopeTest

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
        original = params["original_max_position_embeddings"]
        for n in sorted({original - 1, original, original + 1} - {L}):  # L: decode-<L-1> above
            tests.append(replace(decode(n - 1, f" Sequence length {n} (original context {original})."),
                                 name=f"decode-{n - 1}-seq{n}", seq_len=n))
    tests = [replace(t, heads=setting.heads, flags=t.flags + ("ModelConfig",)) for t in tests]
    if protocol == "rope.apply_qk":
        tests = [QkTest(**{**vars(t), "kv_heads": setting.kv_heads}) for t in tests]
    return [TestGroupSpec(setting.params, tuple(tests), "")]
