"""RoPE implementations in the three common styles, written for posref.

Each module exposes adapters for the RoPE protocols (docs/design.md, "Protocols"):

    apply(x, positions, spec)   rope.apply: x [batch, seq, heads, head_dim], positions int64 [b, s]
    cache(positions, spec)      rope.cache: (cos, sin), each [batch, seq, rotary_dim // 2]
    frequencies(spec, seq_len)  rope.frequencies: (inv_freq [rotary_dim // 2], attention_factor)

Grade one with ``posref conform examples/rope/hf_rotate_half.py:apply --protocol rope.apply``.
The modules in ``buggy/`` each carry one bug; their docstrings name the diagnosis code the runner
should report.
"""
