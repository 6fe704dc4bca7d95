"""Loose speed regression checks of the references (issue 13; docs/performance.md): RoPE, then the
other families and attention (the families table of conformance/commands/bench_families.py).

Each test compares two things timed in the same process on the same inputs, interleaved
(every repetition runs both) and keeps the best of N, so the ratio survives a loaded 2-core
machine; the bounds are several times the ratios measured (docs/performance.md), so only a real
slowdown (an extra pass over memory, a lost fast path, a pool stall per call) fails them.
"""

import time

import numpy as np
import pytest

from reference import rope

# Wall-clock ratios: only meaningful on a quiet machine, so out of the default (parallel) selection;
# .ci/run runs them alone after the suite (`python3 -m pytest -m timing -n 0`).
pytestmark = pytest.mark.timing

REPEAT = 9


def _best_interleaved(fns, repeat=REPEAT):
    """Best time of each callable; one warm-up round (compilation, tables) is discarded."""
    times = [[] for _ in fns]
    for rep in range(repeat + 1):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            if rep:
                times[k].append(time.perf_counter() - t0)
    return [min(t) for t in times]


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(13)


def test_apply_is_within_3x_a_memory_copy(rng):
    # 16 MB in, 16 MB out, on the calling thread: measured 2.5-3x a copy that stays in cache
    # (0.5 ms), 1.3-1.5 ms; the slack keeps a loaded machine from failing it, a 10x slowdown not
    x = rng.standard_normal((1, 1024, 16, 128))
    pos = np.arange(1024, dtype=np.int64)[None, :]
    copy, fast = _best_interleaved([lambda: x.copy(), lambda: rope.apply(x, pos)])
    assert fast <= 3 * copy + 2e-3, f"apply {fast * 1e3:.2f} ms vs copy {copy * 1e3:.2f} ms"


def test_decode_step_is_within_3x_a_copy_plus_slack(rng):
    # 64 sequences, one token each at scattered positions (< 2**20): measured ~3x copy (38 us),
    # on the calling thread (no pool wake-up)
    x = rng.standard_normal((64, 1, 32, 128))
    pos = rng.integers(0, 2**20, size=(64, 1))
    copy, fast = _best_interleaved([lambda: x.copy(), lambda: rope.apply(x, pos)])
    assert fast <= 3 * copy + 300e-6, f"apply {fast * 1e6:.0f} us vs copy {copy * 1e6:.0f} us"


def test_accurate_cos_sin_keeps_up_with_plain_numpy_cos(rng):
    # the accurate table against numpy's cos and sin of the naive float64 angles (not even
    # reduced exactly): measured faster than numpy; fails only if the fast path is lost
    pos = np.arange(2**14, dtype=np.int64)
    theta = rope.inv_freq(128, 10000.0)
    angles = pos[:, None].astype(np.float64) * theta

    def plain():
        return np.cos(angles), np.sin(angles)

    naive, fast = _best_interleaved([plain, lambda: rope.cos_sin(pos, 128, 10000.0)])
    assert fast <= 3 * naive, f"cos_sin {fast * 1e3:.2f} ms vs numpy cos+sin {naive * 1e3:.2f} ms"


def test_golden_mode_stays_within_a_bounded_factor_of_fast(rng):
    # measured ~3-7x for apply and ~13x for cos_sin (docs/performance.md: the 3x target is not
    # met for golden); these bounds catch a further 3x regression
    x = rng.standard_normal((8, 1, 32, 128))
    pos = rng.integers(0, 2**20, size=(8, 1))
    fast, golden = _best_interleaved([lambda: rope.apply(x, pos), lambda: rope.apply(x, pos, mode="golden")])
    assert golden <= 25 * fast + 1e-3, f"golden apply {golden * 1e6:.0f} us vs fast {fast * 1e6:.0f} us"
    cp = np.arange(2**12, dtype=np.int64)
    fast, golden = _best_interleaved([lambda: rope.cos_sin(cp, 128), lambda: rope.cos_sin(cp, 128, mode="golden")])
    assert golden <= 50 * fast + 1e-3, f"golden cos_sin {golden * 1e3:.2f} ms vs fast {fast * 1e3:.2f} ms"


# ---- the other families and attention (conformance/commands/bench_families.py) ----------------
# Each: the cpu fast reference against a copy of its output bytes (or torch for attention), at a
# small workload, interleaved, best of N; the bound is about 4x the ratio measured on the loaded
# 2-core VM (docs/performance.md), written as a multiple of the copy plus a slack for the fixed
# per-call costs (tables, kernel dispatch) and for pool stalls on a loaded machine. Golden modes that evaluate each value in mpmath are checked against fast on a tiny
# workload in the same way.


@pytest.fixture
def one_thread():
    """Time the family kernels on the calling thread: under pytest -n 2 on two cores the other
    worker holds a core, and a parallel region then waits a scheduler slice for its second thread
    on every call (docs/performance.md, "Threads"), which would measure the neighbour, not the
    kernel. The bounds are single-thread ratios; a lost fast path still fails them."""
    import numba

    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(threads)


def _assert_within(name, fast, base, factor, slack):
    assert fast <= factor * base + slack, (
        f"{name}: {fast * 1e3:.2f} ms vs {base * 1e3:.2f} ms (bound {factor}x + {slack * 1e3:.0f} ms)")


def test_bias_families_stay_near_a_memory_copy(rng, one_thread):
    from reference.fire.bench import weights as _fire_weights
    from reference import alibi, fire, kerple

    p = np.arange(1024, dtype=np.int64)
    src = np.ones((4, 1024, 1024))
    # measured: ALiBi 0.8x a copy (3 ms), KERPLE 3.7x (12 ms: one log1p per distance, then a gather)
    copy, a, k = _best_interleaved([lambda: src.copy(), lambda: alibi.bias(4, p, p),
                                    lambda: kerple.bias(p, p, "log", [0.5, 1, 2, 4], [0.25, 0.5, 1, 1.5])])
    _assert_within("alibi.bias [4, 1024, 1024]", a, copy, 3, 5e-3)
    _assert_within("kerple.bias [4, 1024, 1024]", k, copy, 8, 25e-3)
    # FIRE: compute-bound (the MLP per entry): measured 17x a copy that stays in cache, 6 ms
    p5 = np.arange(512, dtype=np.int64)
    src5 = np.ones((4, 512, 512))
    w = _fire_weights(rng, 4)
    copy, f = _best_interleaved([lambda: src5.copy(), lambda: fire.bias(p5, p5, w)])
    _assert_within("fire.bias [4, 512, 512]", f, copy, 20, 20e-3)


def test_table_and_apply_families_stay_within_their_measured_ratios(rng, one_thread):
    from reference.mrope.bench import positions as _mrope_positions
    from reference.rope2d.bench import grid as _grid
    from reference import gaussian_rope, mrope, rope2d, sinusoidal

    # measured: sinusoidal 1024 x 1024 3.6-4x a copy that stays in cache (1.0-1.1 ms against
    # 0.3 ms: cos/sin, then two strided copies into the layout), golden 2.2-2.4x fast (RoPE's
    # quick phase); 2-D RoPE, M-RoPE and Gaussian RoPE [1, 1024, 16, 128] 1.9x, 2.7x and 3.0x
    # (1.0-1.7 ms against 0.55 ms: cos/sin once per distinct position, K(m) once per distance and
    # cached, one pass over x in reference/numerics/stream_kernels.py; the numpy passes they replaced
    # took 25 ms, the per-pair mpmath factor of Gaussian RoPE seconds)
    sp = np.arange(1024, dtype=np.int64)
    s1 = np.ones((1024, 1024))
    copy, fast, golden = _best_interleaved([lambda: s1.copy(), lambda: sinusoidal.table(sp, 1024),
                                            lambda: sinusoidal.table(sp, 1024, mode="golden")])
    # (the cos/sin kernel runs on Numba's pool here: 4-6 ms when other processes hold both cores)
    _assert_within("sinusoidal.table 1024 x 1024", fast, copy, 20, 6e-3)
    _assert_within("sinusoidal.table golden vs fast", golden, fast, 8, 2e-3)
    x = rng.standard_normal((1, 1024, 16, 128))
    pg = np.arange(1024, dtype=np.int64)[None, :]
    copy, r2, mr, ga = _best_interleaved([
        lambda: x.copy(), lambda: rope2d.apply(x, _grid(1024)),
        lambda: mrope.apply(x, _mrope_positions(1024), mrope_section=[16, 24, 24]),
        lambda: gaussian_rope.apply(x, pg, kernel=gaussian_rope.DOCUMENT_KERNEL)], repeat=5)
    _assert_within("rope2d.apply [1, 1024, 16, 128]", r2, copy, 10, 2e-3)
    _assert_within("mrope.apply [1, 1024, 16, 128]", mr, copy, 10, 2e-3)
    _assert_within("gaussian_rope.apply [1, 1024, 16, 128]", ga, copy, 12, 3e-3)


def test_xpos_stays_near_a_memory_copy(rng, one_thread):
    from reference import xpos

    # q, k [1, 1024, 16, 128] against a copy of both: measured 2.4-2.5x (7.9 ms against 3.2 ms:
    # the scale zeta_i^e once per distinct position and pair in float64, xpos/cpu_kernels.py, then
    # one pass over each of q and k); the per-pair mpmath power it replaced took ~6 s here
    x = rng.standard_normal((1, 2048, 16, 128))
    q, k = x[:, :1024], x[:, 1024:]
    p = np.arange(1024, dtype=np.int64)[None, :]
    copy, xp = _best_interleaved([lambda: x.copy(), lambda: xpos.apply(q, k, p)], repeat=5)
    _assert_within("xpos.apply q, k [1, 1024, 16, 128]", xp, copy, 10, 3e-3)


def test_t5_buckets_are_one_pass_over_the_relative_positions(one_thread):
    from reference import t5

    # [1024, 1024] (8 MB in, 8 MB out, one thread): measured 3.0x a copy that stays in cache
    # (430 us against 140 us: one logarithm per distance, cached, then a gather); the per-entry
    # mpmath loop it replaced took ~16 s here
    rel = np.arange(1024, dtype=np.int64)[None, :] - np.arange(1024, dtype=np.int64)[:, None]
    copy, tb = _best_interleaved([lambda: rel.copy(), lambda: t5.bucket(rel)])
    _assert_within("t5.bucket [1024, 1024]", tb, copy, 12, 1e-3)


def test_mpmath_golden_modes_stay_within_a_bounded_factor_of_fast(rng, one_thread):
    from reference.fire.bench import weights as _fire_weights
    from reference.rope2d.bench import grid as _grid
    from reference import alibi, fire, kerple, rope2d

    # tiny workloads; measured golden / fast: ALiBi 56x, KERPLE 68x, FIRE 80x, 2-D RoPE 58x
    a = np.arange(16, dtype=np.int64)
    a8 = a[:8]
    w = _fire_weights(rng, 2)
    xs = rng.standard_normal((1, 2, 2, 128))
    g = _grid(4)[:, :2]
    for name, fast, golden in (
            ("alibi", lambda: alibi.bias(2, a, a), lambda: alibi.bias(2, a, a, mode="golden")),
            ("kerple", lambda: kerple.bias(a, a, "log", [0.5, 2.0], [0.5, 1.5]),
             lambda: kerple.bias(a, a, "log", [0.5, 2.0], [0.5, 1.5], mode="golden")),
            ("fire", lambda: fire.bias(a8, a8, w), lambda: fire.bias(a8, a8, w, mode="golden")),
            ("rope2d", lambda: rope2d.apply(xs, g), lambda: rope2d.apply(xs, g, mode="golden"))):
        f, gd = _best_interleaved([fast, golden], repeat=3)
        _assert_within(f"{name} golden vs fast", gd, f, 300, 40e-3)


def test_attention_stays_within_a_bounded_factor_of_torch_sdpa(one_thread):
    import torch

    from conformance.commands.bench_families import torch_attention
    from reference.attention.bench import inputs as _attention_inputs
    from reference import attention

    # [1, 256, 256], 4 heads of 64, RoPE, causal, both on one thread (torch's too: with two threads
    # each, the other pytest worker's core decided the ratio, which ranged 5.6 to over 8): measured
    # 7.0 to 8.0x torch eager float64 SDPA (50 ms against 6.2 to 7.2 ms; Dot2 throughout) on the
    # 2-core development VM, 2026-11-25. A scalar Dot2 is 4x slower and fails the bound.
    X, W, pos = _attention_inputs(1, 256, 256, 4)
    cfg = attention.Config(num_heads=4, num_kv_heads=4, head_dim=64)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ref, fast = _best_interleaved([torch_attention(X, W, pos, 4), lambda: attention.forward(X, W, pos, cfg)],
                                      repeat=5)
    finally:
        torch.set_num_threads(threads)
    _assert_within("attention.forward [1, 256, 256]", fast, ref, 16, 25e-3)


def test_rotation_golden_modes_stay_within_a_bounded_factor_of_fast(rng, one_thread):
    # issue 31: 2-D RoPE, M-RoPE, Gaussian RoPE and xPos golden run the certified quick phase
    # (phase.rotate_streams / scaled_rotate, stream_kernels.rotate_golden) on the fast workload's
    # shape. On one thread golden is compute-bound (about RoPE's own golden apply, whose test
    # allows 25x) while fast is memory-bound: measured 4.2-23x on the loaded 2-core VM
    # (2026-11-26, load average 8), against ~200x before (mpmath per value, docs/performance.md).
    # The bound is RoPE's 25x plus slack: falling back to mpmath per value fails it by 8x or more.
    from reference.mrope.bench import SECTION, positions as _mrope_positions
    from reference.rope2d.bench import grid as _grid
    from reference import gaussian_rope, mrope, rope2d, xpos

    x = rng.standard_normal((1, 1024, 8, 128))
    q, k = x[:, :512], x[:, 512:]
    g, mp, pos = _grid(1024), _mrope_positions(1024), np.arange(1024, dtype=np.int64)[None]
    kern = gaussian_rope.DOCUMENT_KERNEL
    for name, fast, golden in (
            ("rope2d", lambda: rope2d.apply(x, g), lambda: rope2d.apply(x, g, mode="golden")),
            ("mrope", lambda: mrope.apply(x, mp, mrope_section=SECTION),
             lambda: mrope.apply(x, mp, mrope_section=SECTION, mode="golden")),
            ("gaussian_rope", lambda: gaussian_rope.apply(x, pos, kernel=kern),
             lambda: gaussian_rope.apply(x, pos, kernel=kern, mode="golden")),
            ("xpos", lambda: xpos.apply(q, k, pos[:, :512]), lambda: xpos.apply(q, k, pos[:, :512], mode="golden"))):
        f, gd = _best_interleaved([fast, golden], repeat=5)
        _assert_within(f"{name} golden vs fast", gd, f, 25, 5e-3)


def test_bias_golden_modes_stay_near_fast(rng, one_thread):
    from reference.fire.bench import weights as _fire_weights
    from reference import alibi, fire, kerple

    # issue 31: golden mode is a double-double quick phase with Ziv's rounding test, mpmath only for
    # the values it cannot certify: one value per (head, distance) gathered like fast mode (ALiBi,
    # KERPLE), per entry through the MLP's exact linear segments (FIRE). Measured golden / fast on
    # one thread, loaded 2-core VM: ALiBi 1.2x, KERPLE 2.2x (log and power), FIRE 1.5x (it was
    # 56-80x on a 16-token workload, every value in mpmath); a lost quick phase fails 6x by far
    p = np.arange(1024, dtype=np.int64)
    r1, r2 = [0.5, 1.0, 2.0, 4.0], [0.25, 0.5, 1.0, 1.5]
    fa, ga, fl, gl, fp, gp = _best_interleaved([
        lambda: alibi.bias(4, p, p), lambda: alibi.bias(4, p, p, mode="golden"),
        lambda: kerple.bias(p, p, "log", r1, r2), lambda: kerple.bias(p, p, "log", r1, r2, mode="golden"),
        lambda: kerple.bias(p, p, "power", r1, r2), lambda: kerple.bias(p, p, "power", r1, r2, mode="golden")],
        repeat=5)
    _assert_within("alibi golden vs fast [4, 1024, 1024]", ga, fa, 6, 5e-3)
    _assert_within("kerple log golden vs fast [4, 1024, 1024]", gl, fl, 6, 5e-3)
    _assert_within("kerple power golden vs fast [4, 1024, 1024]", gp, fp, 6, 5e-3)
    p5 = np.arange(512, dtype=np.int64)
    w = _fire_weights(rng, 4)
    ff, gf = _best_interleaved([lambda: fire.bias(p5, p5, w), lambda: fire.bias(p5, p5, w, mode="golden")], repeat=5)
    _assert_within("fire golden vs fast [4, 512, 512], hidden 32", gf, ff, 6, 5e-3)


def test_sinusoidal_table_is_one_pass(one_thread):
    from reference import sinusoidal

    # issue 31: cos/sin stored straight into the table's columns (no arrange pass): measured on one
    # thread at 2048 x 2048 (32 MB, out of cache) 2.3x a copy, the two-pass table 4x; golden 1.5-3x
    n = 2048
    sp = np.arange(n, dtype=np.int64)
    s1 = np.ones((n, n))
    copy, fast, golden = _best_interleaved([lambda: s1.copy(), lambda: sinusoidal.table(sp, n),
                                            lambda: sinusoidal.table(sp, n, mode="golden")], repeat=5)
    _assert_within("sinusoidal.table 2048 x 2048", fast, copy, 6, 5e-3)
    _assert_within("sinusoidal.table golden vs fast 2048 x 2048", golden, fast, 6, 5e-3)
