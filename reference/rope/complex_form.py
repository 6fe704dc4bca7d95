"""The complex (Meta ``freqs_cis``) form of RoPE.

Source: RoFormer (arXiv 2104.09864) eq. 35 / section 3.4.3; meta-llama/llama-models
models/llama3/model.py @43e87a37 (``precompute_freqs_cis``, ``apply_rotary_emb``): interleaved
pairs (x[2i], x[2i+1]) are read as the complex number x[2i] + i x[2i+1] and multiplied by
e^{i m theta_i}. This is a separate code path from ``apply`` (NumPy complex multiply), which
the identities compare against apply(layout="interleaved").
"""


from reference.numerics.phase import cos_sin_table, ladder
from reference.numerics.validate import check_base, check_positions, check_rotary_dim, check_x, resolve_rotary_dim


def freqs_cis(positions, rotary_dim, base=10000.0):
    """e^{i m theta_i} as complex128 [..., r/2] for positions [...] (int64)."""
    r = check_rotary_dim(rotary_dim)
    c, s = cos_sin_table(check_positions(positions), ladder(r, check_base(base)), backend="numpy")
    return c + 1j * s


def apply_complex(x, positions, *, rotary_dim=None, base=10000.0):
    """RoPE of x [batch, seq, heads, head_dim] in the complex form; float64 like x.

    Pairs are interleaved. The tail past rotary_dim is copied unchanged.
    """
    out = check_x(x)
    r = resolve_rotary_dim(rotary_dim, out.shape[3])
    m = check_positions(positions, out.shape[:2])
    z = out[..., 0:r:2] + 1j * out[..., 1:r:2]
    z = z * freqs_cis(m, r, base)[:, :, None, :]
    out[..., 0:r:2] = z.real
    out[..., 1:r:2] = z.imag
    return out
