"""Fill the Numba disk cache before `pytest -n 2` starts its workers (tests/conftest.py).

On a fresh clone every cpu kernel compiles on first use; the golden rotation kernel alone takes
about 100 s. Two workers reaching the same kernel at once both compile it. The controller runs
this file twice in parallel, one group of kernels each, and the workers then load them from the
cache. Usage: ``python tests/warm.py a|b``. A failure here is never a test failure: the workers
compile what is missing as before.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def group_a():
    """The rotations: RoPE's kernels and phase.py's golden stream kernel (2-D RoPE, M-RoPE,
    Gaussian RoPE, xPos and scaled RoPE share it)."""
    from reference import gaussian_rope, rope, xpos

    x = np.random.default_rng(0).standard_normal((1, 4, 2, 16))
    pos = np.arange(4)[None]
    for mode in ("fast", "golden"):
        rope.apply(x, pos, mode=mode)
        rope.cos_sin(np.arange(4), 16, mode=mode)
        rope.apply(x, pos, scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2},
                   mode=mode)
        gaussian_rope.apply(x, pos, kernel=gaussian_rope.DOCUMENT_KERNEL, mode=mode)
        xpos.apply(x[:, :2], x[:, 2:], pos[:, :2], mode=mode)


def group_b():
    """The biases, tables and layers."""
    from reference import alibi, attention, fire, kerple, learned, sinusoidal, t5

    rng = np.random.default_rng(0)
    p = np.arange(8)
    w = {"c": 0.1, "L_multiplier": 1.0, "W1": rng.uniform(-0.5, 0.5, (32, 1)), "b1": rng.uniform(-0.5, 0.5, 32),
         "W2": rng.uniform(-0.1, 0.1, (4, 32)), "b2": rng.uniform(-0.1, 0.1, 4)}
    for mode in ("fast", "golden"):
        fire.bias(p, p, w, mode=mode)
        sinusoidal.table(p, 16, mode=mode)
        alibi.bias(4, p, p, mode=mode)
        for variant in ("log", "power"):
            kerple.bias(p, p, variant, [0.5, 1.0], [0.25, 0.5], mode=mode)
    t5.bucket(np.arange(-8, 8)[None])
    learned.lookup(rng.standard_normal((1, 4, 8)), np.arange(4)[None], rng.standard_normal((8, 8)))
    c = attention.Config(4, 2, 4, True, "rope")
    hidden = rng.standard_normal((1, 4, 8))
    weights = {"wq": rng.standard_normal((16, 8)), "wk": rng.standard_normal((8, 8)),
               "wv": rng.standard_normal((8, 8)), "wo": rng.standard_normal((8, 16))}  # 4 heads, 2 kv heads, d 4
    for mode in ("fast", "golden"):
        attention.forward(hidden, weights, np.arange(4)[None], c, mode=mode)


if __name__ == "__main__":
    try:
        {"a": group_a, "b": group_b}[sys.argv[1]]()
    except Exception as exc:  # the workers compile what is missing
        print(f"tests/warm.py {sys.argv[1]}: {type(exc).__name__}: {exc}", file=sys.stderr)
