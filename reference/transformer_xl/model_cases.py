"""The transformer_xl.score cases of one Transformer-XL configuration (a model_config Setting), at
the model's full shape: its heads, head width, d_model, clamp_len, a segment of tgt_len queries
after mem_len memory slots (transfo-xl-wt103: 16 heads of 64, d_model 1024, 128 after 1600,
clamp_len 1000). The adapter computes every score; each case grades a subgrid of heads x queries x
keys (vectors.ScoreTest's ``heads``, ``rows``, ``keys``), whose golden values cost a few seconds
(reference.transformer_xl.score_entries), and names its inputs by their seed (22 MB at this shape;
reference.golden.seeded). With L = mem_len and c = clamp_len:

- ``segment-<tgt_len>-mem-<L>``: the model's own segment; queries 0, 1 and the last, keys at the
  largest distance (query last, key 0), across the clamp (distances c - 1, c, c + 1 read R at
  c - 1, c, c: a port without the clamp fails there), the last memory slot and the first segment
  token, and the diagonal (distance 0); heads 0 and the last;
- ``decode-1-mem-<L>``: one query after L memory slots (generation), keys at distances L, c + 1, c,
  c - 1, 1 and 0; heads 0 and the last;
- ``drawn`` (new with the seed): the model's segment, three queries, six keys and four heads drawn.

Distances below clamp_len stand for themselves when the model clamps nothing (clamp_len 0 or past
every distance). ``committed``: all but ``drawn`` (reference.zoo.vectors).
"""

from __future__ import annotations

from reference.golden.catalog import TestGroupSpec
from reference.golden import seeded
from reference.transformer_xl.vectors import ScoreTest
from reference.zoo.vectors import seedless

FLAGS = ("ModelConfig", "Memory", "MaskedNotGraded")


def _keys_at(row: int, mlen: int, klen: int, distances) -> list:
    """The keys j = row + mlen - d of the distances d that have one (0 <= j < klen), distinct, sorted."""
    return sorted({row + mlen - d for d in distances if 0 <= row + mlen - d < klen})


def groups(setting, draw, protocol: str = "transformer_xl.score") -> list:
    """[TestGroupSpec] of transformer_xl.score for ``setting``, the drawn subgrid from ``draw``."""
    p = setting.params
    qlen, mlen, n_head = setting.tgt_len, setting.mem_len, p["n_head"]
    klen = qlen + mlen
    c = p["clamp_len"] if 0 < p["clamp_len"] < klen else klen - 1
    last = qlen - 1
    heads = tuple(sorted({0, n_head - 1}))
    clamp_flags = ("Clamped",) if 0 < p["clamp_len"] < klen else ()
    seg_keys = sorted(set(_keys_at(0, mlen, klen, (c - 1, c, c + 1, 1, 0, -1)) + _keys_at(last, mlen, klen, (
        klen - 1, c - 1, c, c + 1, 0)) + [j for j in (mlen - 1, mlen) if 0 <= j < klen]))
    rows = tuple(sorted({0, min(1, last), last}))
    decode_keys = _keys_at(0, mlen, mlen + 1, (mlen, c + 1, c, c - 1, 1, 0))
    drawn_rows = tuple(sorted(set(draw.integers(0, last, 3))))
    drawn_keys = tuple(sorted(set(draw.integers(0, klen - 1, 6)) | {drawn_rows[0] + mlen}))
    drawn_heads = tuple(sorted(set(draw.integers(0, n_head - 1, 4))))
    tests = (
        ScoreTest(f"segment-{qlen}-mem-{mlen}", f"The model's segment: {qlen} queries after {mlen} memory slots; "
                  f"queries {list(rows)}, keys {seg_keys} (the largest distance {klen - 1}, across clamp_len "
                  f"{p['clamp_len']}, the memory's end, the diagonal), heads {list(heads)}.",
                  FLAGS + clamp_flags, qlen, mlen, heads, rows, tuple(seg_keys)),
        ScoreTest(f"decode-1-mem-{mlen}", f"One query after {mlen} memory slots (a generation step), keys "
                  f"{decode_keys}, heads {list(heads)}.", FLAGS + clamp_flags, 1, mlen, heads, (0,),
                  tuple(decode_keys)),
        ScoreTest("drawn", f"The model's segment; queries {list(drawn_rows)}, keys {list(drawn_keys)} and heads "
                  f"{list(drawn_heads)} drawn (new with the seed).", FLAGS + clamp_flags, qlen, mlen, drawn_heads,
                  drawn_rows, drawn_keys),
    )
    return [TestGroupSpec({**p, "inputs_from": seeded.SOURCE}, tests)]


# The committed, certified cases of the zoo's models (reference.zoo.vectors): all but the drawn one.
committed = seedless(groups)
