"""torchtune's rotary modules, graded through thin adapters as a user would write them:
``torchtune.modules.RotaryPositionalEmbeddings`` (Llama 2 / Llama 3) and
``torchtune.models.llama3_1.Llama3ScaledRoPE`` (Llama 3.1's frequency scaling).

Both pair features (2i, 2i+1) (Meta's interleaved layout, ``x.reshape(..., -1, 2)``), rotate every
feature of their input (``dim`` is the head size), take ``input_pos`` [b, s] and read cos and sin
from a float32 table built at construction for positions 0 .. max_seq_len - 1 (angles are float32
products ``seq_idx * theta``). So the adapters raise Unsupported for the half layout, for partial
rotary and for scalings the module does not implement, and follow ``spec.layout`` by refusing
rather than ignoring it (an adapter that always applied the module would pass interleaved cases
and fail the half ones as layout-swapped: a bug of the adapter, not of torchtune).

- ``apply``: the module torchtune's model builders choose: RotaryPositionalEmbeddings without
  scaling, Llama3ScaledRoPE for ``rope_type`` llama3 (HF ``rope_parameters`` keys mapped to
  ``scale_factor``, ``low_freq_factor``, ``high_freq_factor``, ``old_context_len``);
- ``apply_llama3``: Llama3ScaledRoPE alone, which implements llama3 scaling and nothing else
  (issue 23: graded alone it must pass its llama3 cases and skip the rest on its own word);
- ``cache``: the same modules' table (``cache[..., 0]`` is cos, ``[..., 1]`` sin, pair
  order) read at the positions.

A model builds its module once and calls it with every batch; so does the adapter: one module per
configuration (the last few kept), rebuilt with a longer table when a case needs positions past
its ``max_seq_len`` (a table of 2^17 rows takes seconds to build). Positions of 2^17 and beyond
(past Llama 3.1's 131072-token context, where the table would take gigabytes) raise Unsupported.
Tensor layouts: torchtune takes x [b, s, n_h, h_d]; the adapters transpose ``bhsd`` and add a
batch axis to ``thd`` (positions restart per sequence: the table lookup does not care). Needs ``torchtune`` and a ``torchao`` it can import (the ``test`` extra);
the tests skip without them.
"""

from torchtune.models.llama3_1 import Llama3ScaledRoPE
from torchtune.modules import RotaryPositionalEmbeddings

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "torchtune"
SURVEY = [
    ("rope.apply", "apply"),
    ("rope.apply", "apply_llama3"),
    ("rope.cache", "cache"),
]

MAX_POSITIONS = 2**17  # the longest table built (Llama 3.1's context)


def _table_length(positions):
    length = int(positions.max()) + 1 if positions.numel() else 1
    if length > MAX_POSITIONS:
        raise Unsupported(f"torchtune tabulates cos/sin up to max_seq_len; positions past {MAX_POSITIONS - 1} "
                          "are not built here")
    return length


def _check(spec, layout=True):
    if layout and spec.layout != "interleaved":
        raise Unsupported("torchtune pairs features (2i, 2i+1): interleaved layout only")
    if spec.rotary_dim != spec.head_dim:
        raise Unsupported("torchtune's RoPE rotates every feature of its input: no partial rotary")


def _rotary(spec, length, layout=True):
    """RotaryPositionalEmbeddings without scaling, Llama3ScaledRoPE for llama3 (as the builders);
    ``layout=False`` for the tables, which are the same in both pair layouts."""
    _check(spec, layout)
    params = dict(spec.scaling or {})
    rope_type = params.get("rope_type") or params.get("type") or "default"
    if rope_type == "default":
        return _built(("default", spec.head_dim, spec.base), length,
                      lambda n: RotaryPositionalEmbeddings(dim=spec.head_dim, max_seq_len=n, base=spec.base))
    if rope_type == "llama3":
        return _llama3(spec, params, length)
    raise Unsupported(f"torchtune implements no {rope_type!r} RoPE scaling (Llama3ScaledRoPE: llama3 only)")


def _llama3(spec, params, length):
    keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
    return _built(("llama3", spec.head_dim, spec.base) + tuple(params[k] for k in keys), length,
                  lambda n: Llama3ScaledRoPE(dim=spec.head_dim, max_seq_len=n, base=spec.base,
                                             scale_factor=params["factor"], low_freq_factor=params["low_freq_factor"],
                                             high_freq_factor=params["high_freq_factor"],
                                             old_context_len=params["original_max_position_embeddings"]))


_MODULES = {}  # configuration -> module, most recent last


def _built(key, length, build):
    """The module of this configuration, built once (again with a longer table when needed)."""
    module = _MODULES.pop(key, None)
    if module is None or module.max_seq_len < length:
        module = build(length)
    _MODULES[key] = module
    while len(_MODULES) > 4:
        _MODULES.pop(next(iter(_MODULES)))
    return module


def _run(rope, x, positions, spec):
    """torchtune's forward on x [b, s, n_h, h_d], whatever spec.tensor_layout hands over."""
    layout = getattr(spec, "tensor_layout", "bshd")
    if layout == "bhsd":
        return rope(x.transpose(1, 2), input_pos=positions).transpose(1, 2)
    if layout == "thd":
        return rope(x[None], input_pos=positions[None])[0]
    return rope(x, input_pos=positions)


def apply(x, positions, spec):
    """rope.apply: the module torchtune's builders use for spec.scaling."""
    return _run(_rotary(spec, _table_length(positions)).to(x.device), x, positions, spec)


def apply_llama3(x, positions, spec):
    """rope.apply with Llama3ScaledRoPE alone: llama3 scaling only."""
    _check(spec)
    params = dict(spec.scaling or {})
    if (params.get("rope_type") or params.get("type")) != "llama3":
        raise Unsupported("Llama3ScaledRoPE implements llama3 scaling only")
    return _run(_llama3(spec, params, _table_length(positions)).to(x.device), x, positions, spec)


def cache(positions, spec):
    """rope.cache: the module's [max_seq_len, d/2, 2] table at the positions, as (cos, sin)."""
    table = _rotary(spec, _table_length(positions), layout=False).to(positions.device).cache[positions]
    return table[..., 0], table[..., 1]
