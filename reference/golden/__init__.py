"""Golden vectors: the catalog of cases, their deterministic generation, storage and verification.

Modules (one job each):

- ``store``     read the committed vectors: ``vectors_dir``, ``load_manifest``, ``iter_cases``,
                ``get_case`` and the ``GoldenCase`` record (the API the conformance runner uses);
- ``npzio``     byte-deterministic ``.npz`` writing and pickle-free reading;
- ``inputs``    seeded, platform-independent inputs derived from a case id;
- ``catalog``   the records a family's catalog is made of (``reference/<family>/vectors.py``:
                groups, tests, flag notes, protocols) and the registry that discovers them;
- ``generate``  compute the expected arrays with each family's reference and write the files;
- ``manifest``  sha256 of every file and the digest of the whole set;
- ``verify``    integrity checks (schema, hashes, unlisted files, pickles) and re-derivation.

Maintaining the set (``posref vectors ...``):

- add or change cases in the family's ``vectors.py`` (each test needs a comment saying why it
  exists, and flags that have a note), then ``posref vectors regenerate`` and ``posref vectors verify --rederive``;
- case ids are cited in reviews: never rename or reuse one; changing what an existing id holds
  means bumping ``store.SUITE_VERSION``;
- regeneration is deterministic: the metadata is byte-identical, the arrays are bit-identical for
  the same backend (cpu, numpy and the CUDA simulator agreed bit for bit when measured) and within
  ``verify.REDERIVE_ULPS`` across backends and platforms; the manifest digest changes only
  when a file's bytes do.

Nothing here imports torch.
"""
