"""reference.numerics: the family-free float64 numerics every family builds on, one module per job.

- validate.py: input checks (backends, modes, layouts, positions, x, base, rotary_dim) with
  one-line ValueErrors naming the argument;
- ddmath.py: double-double arithmetic and the exact integer Payne-Hanek reduction (plain Python,
  compiled by Numba for the cpu and cuda kernels);
- phase.py: frequency tables (``FrequencyTable``, ``table_from_mp``, ``ladder``) and the exact
  phase m theta: cos/sin tables and rotations by a table, fast or correctly rounded (golden), and
  the golden building blocks (``to_double``, ``settle``, ``exact_cos_sin``, ``rounded_factors``);
- numpy_twin.py: the phase in vectorised NumPy (backend "numpy", independent of the kernels);
- cpu_kernels.py / cuda_kernels.py: the phase's Numba kernels (backends "cpu", "cuda");
- stream_kernels.py: the one-pass cpu rotation by per-pair streams and amplitudes;
- cuda_launch.py: the block size, grid, device check and host-to-device copy every numba.cuda
  kernel module uses;
- layouts.py: pair layouts (half, interleaved) and rotating pairs by given cos/sin;
- frequencies.py, scaling/, scaling_oracle.py: RoPE-style frequencies theta_i = base**(-2i/r)
  and their long-context scaling types (HF ``rope_type``), in float64 and in mpmath;
- rotation.py, rotation_backward.py, rotation_oracle.py: the rotation by those frequencies
  (RoPE's apply / cos_sin, reused by every rotary family), its VJP and adjoint helpers, and its
  mpmath oracle;
- sinusoid.py, sinusoid_frequencies.py, sinusoid_layouts.py, sinusoid_validate.py: sinusoidal
  position tables (the sinusoidal family's ``table``, Transformer-XL's R): frequency rules, column
  layouts and checks;
- log1p.py: log1p of a product without overflow (KERPLE, FIRE);
- bias/: the relative-position biases (ALiBi, KERPLE, FIRE and its backward, T5 buckets) with
  their kernels and mpmath oracles, shared by their families and the attention composite.

Importing this package imports nothing: import the module you need. Kernel modules (Numba, numba.cuda)
are imported by phase.py on first use of their backend. Never imports torch.
"""
