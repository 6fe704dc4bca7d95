"""One-pass cpu kernel for rotations whose cos/sin are known per token and pair (issue 13).

Families that turn the pairs of x by angles RoPE's own apply kernel does not cover -- several
position streams (2-D RoPE's x and y, M-RoPE's t, h, w: ``phase.rotate_streams``) or an amplitude
on the rotation (Gaussian RoPE's K(m), xPos's zeta_i^e, a scaled RoPE's attention factor:
``phase.scaled_rotate``) -- get their cos/sin tables from RoPE's fast kernels and then rotate here:
x is read once and a new array written once, instead of a chain of numpy fancy-index passes.

Arithmetic (never fastmath, no contraction into FMA): for pair i of token t with (a, b) its two
elements, c = cos[stream_of_pair[i], t, entry_of_pair[i]], s likewise, f the pair's amplitude,

    out_first = (a c - b s) f,     out_second = (a s + b c) f,

each product and sum rounded once, in this order: the same operations, on the same cos/sin, as
the numpy code it replaces (and as RoPE's apply kernel, times f afterwards), so the results are
bit for bit those of the numpy paths. With no amplitude f = 1.0 (an exact multiplication). The
tail past the 2P rotated elements is copied bit for bit, or (``tail``) multiplied by a per-token
scale; tokens before ``first_token`` are copied unrotated (2-D RoPE's CLS tokens).
"""

import numba
import numpy as np

from .cpu_kernels import run_kernel


@numba.njit(cache=True, fastmath=False, parallel=True)
def rotate_kernel(x, out, cos, sin, index, stream_of_pair, entry_of_pair, factor, tail, scale_tail, layout,
                  first_token):
    """x, out float64 [b, s, h, d] C-contiguous (distinct); cos, sin float64 [S, U, n], the rows of
    each stream's distinct positions; index int64 [S, b*s]: token t of stream k is row index[k, t];
    stream_of_pair, entry_of_pair int64 [P] (2P <= d); factor float64 [b*s, F] with F = P (one
    amplitude per pair) or F = 1 (one per token); tail float64 [b*s] (read when scale_tail);
    layout 0 = half (i, i + P), 1 = interleaved (2i, 2i + 1)."""
    nb, ns, nh, d = x.shape
    pairs = stream_of_pair.shape[0]
    per_pair = factor.shape[1] > 1
    for t in numba.prange(nb * ns):
        bi = t // ns
        si = t % ns
        if si < first_token:
            for h in range(nh):
                for j in range(d):
                    out[bi, si, h, j] = x[bi, si, h, j]
            continue
        cs = np.empty(pairs)
        sn = np.empty(pairs)
        fa = np.empty(pairs)
        for i in range(pairs):
            k = stream_of_pair[i]
            cs[i] = cos[k, index[k, t], entry_of_pair[i]]
            sn[i] = sin[k, index[k, t], entry_of_pair[i]]
            fa[i] = factor[t, i] if per_pair else factor[t, 0]
        for h in range(nh):
            if layout == 0:
                for i in range(pairs):
                    a = x[bi, si, h, i]
                    b = x[bi, si, h, i + pairs]
                    out[bi, si, h, i] = (a * cs[i] - b * sn[i]) * fa[i]
                    out[bi, si, h, i + pairs] = (a * sn[i] + b * cs[i]) * fa[i]
            else:
                for i in range(pairs):
                    a = x[bi, si, h, 2 * i]
                    b = x[bi, si, h, 2 * i + 1]
                    out[bi, si, h, 2 * i] = (a * cs[i] - b * sn[i]) * fa[i]
                    out[bi, si, h, 2 * i + 1] = (a * sn[i] + b * cs[i]) * fa[i]
            if scale_tail:
                g = tail[t]
                for j in range(2 * pairs, d):
                    out[bi, si, h, j] = x[bi, si, h, j] * g
            else:
                for j in range(2 * pairs, d):
                    out[bi, si, h, j] = x[bi, si, h, j]


def rotate(x, cos, sin, index, stream_of_pair, entry_of_pair, layout, *, factor=None, tail=None, first_token=0):
    """The rotated x as a new float64 array (x, a validated float64 C-order [b, s, h, d], is only read).

    cos, sin: [S, U, n] per-stream tables of U rows; index: int [S, b, s], the row of each token
    in its stream's table (``stream_tables``); stream_of_pair, entry_of_pair [P];
    layout "half" | "interleaved"; factor: None, [b, s] (one amplitude per token) or [b, s, P];
    tail: None (copied) or [b, s] (the tail past 2P multiplied by it); first_token: tokens
    before it are copied unrotated. See the module docstring for the arithmetic."""
    nb, ns, nh, d = x.shape
    out = np.empty_like(x)
    if x.size == 0:
        return out
    tokens = nb * ns
    pairs = len(stream_of_pair)
    c = np.ascontiguousarray(cos, dtype=np.float64)
    s = np.ascontiguousarray(sin, dtype=np.float64)
    idx = np.ascontiguousarray(index, dtype=np.int64).reshape(len(index), tokens)
    if factor is None:
        f = np.ones((tokens, 1))  # times 1.0: exact
    else:
        f = np.ascontiguousarray(factor, dtype=np.float64).reshape(tokens, -1)
    if f.shape[1] not in (1, pairs) or 2 * pairs > d:
        raise ValueError(f"factor: {f.shape[1]} amplitudes per token for {pairs} pairs of head_dim {d}")
    g = np.ascontiguousarray(tail, dtype=np.float64).reshape(tokens) if tail is not None else np.empty(0)
    args = (x, out, c, s, idx, np.ascontiguousarray(stream_of_pair, dtype=np.int64),
            np.ascontiguousarray(entry_of_pair, dtype=np.int64), f, g, tail is not None,
            np.int64(0 if layout == "half" else 1), np.int64(first_token))
    run_kernel(rotate_kernel, x.size, *args)  # on one thread below cpu_kernels.PARALLEL_MIN_WORK values
    return out


def stream_tables(streams, cos_sin):
    """(cos, sin [S, U, n], index int64 [S, *stream shape]) for position streams [S, ...]:
    cos_sin(positions int64 [u]) -> (cos, sin [u, n]) is evaluated once per distinct position of
    each stream (an image's rows and columns repeat; a text stream is often constant), U the
    largest count of distinct positions (shorter tables padded with zeros, never read)."""
    uniques = [np.unique(np.asarray(p).reshape(-1), return_inverse=True) for p in streams]
    rows = max(u.size for u, _ in uniques)
    index = np.stack([inv.reshape(np.shape(p)) for (_, inv), p in zip(uniques, streams)]).astype(np.int64)
    tabs = [cos_sin(u) for u, _ in uniques]
    n = tabs[0][0].shape[-1]
    cos = np.zeros((len(tabs), rows, n))
    sin = np.zeros((len(tabs), rows, n))
    for k, (c, s) in enumerate(tabs):
        cos[k, : c.shape[0]] = c
        sin[k, : s.shape[0]] = s
    return cos, sin, index
