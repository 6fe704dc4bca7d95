"""Byte-deterministic ``.npz`` files and pickle-free loading.

``numpy.savez`` stamps every zip member with the current local time, so two regenerations of the
same arrays give different bytes and a different sha256. ``write_npz`` builds the zip itself with
a fixed timestamp, fixed permissions and no compression (ZIP_STORED), member order as given, and
``.npy`` format version 1.0 written by ``numpy.lib.format.write_array`` with ``allow_pickle=False``.
Same arrays in, same bytes out.

``read_npz`` loads with ``allow_pickle=False`` and rejects anything that is not a plain ``.npy``
member (a pickle stored as a raw zip member would otherwise come back as bytes).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from reference.safe_files import write_atomic

_FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # earliest date a zip header can hold
_NPY_MAGIC = b"\x93NUMPY"


class NpzError(ValueError):
    """An .npz file that is not a plain, pickle-free set of numeric arrays."""


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """Serialise ``arrays`` (name -> array, order kept) to the bytes of an .npz file."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, value in arrays.items():
            array = np.array(value, order="C", copy=None)
            if array.dtype.hasobject:
                raise NpzError(f"array {name!r} has an object dtype")
            member = io.BytesIO()
            np.lib.format.write_array(member, array, version=(1, 0), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=_FIXED_DATE)
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            info.create_system = 3  # unix: fixed, so the bytes do not depend on the host OS
            zf.writestr(info, member.getvalue())
    return buffer.getvalue()


def write_npz(path: Path, arrays: dict[str, np.ndarray], *, inside=None) -> None:
    """Write the .npz whole, never through a link (reference.safe_files; ``inside``: the folder
    no write may leave)."""
    write_atomic(path, npz_bytes(arrays), inside=inside)


MAX_MEMBER_BYTES = 256 * 2**20  # one array, decompressed; posref's largest is far below


def read_npz(path: Path, *, members=None, max_total=None, only=None) -> dict[str, np.ndarray]:
    """Load every member of an .npz as a read-only array; NpzError names what is wrong.

    Before anything is inflated, from the zip's directory: every member must be an .npy of at
    most MAX_MEMBER_BYTES, one of ``members`` (the names the group's metadata lists) when given,
    and their sizes together at most ``max_total`` when given (the file's size in the manifest:
    posref stores arrays uncompressed, so its members never claim more bytes than the file has).
    Each member is then decompressed at most up to MAX_MEMBER_BYTES (a deflate bomb whose header
    lies stops there) and parsed from those bytes with ``allow_pickle=False``. ``only`` (array
    names): load just those (the directory is still checked whole)."""
    path = Path(path)
    out: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(path) as zf:
            total = 0
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    raise NpzError(f"member {info.filename!r} is not an .npy array")
                if info.file_size > MAX_MEMBER_BYTES:
                    raise NpzError(f"member {info.filename!r} claims {info.file_size} bytes, over the "
                                   f"{MAX_MEMBER_BYTES // 2**20} MiB limit")
                if members is not None and info.filename not in members:
                    raise NpzError(f"member {info.filename!r} is not an array the metadata lists "
                                   "(not inflated)")
                total += info.file_size
            if max_total is not None and total > max_total:
                raise NpzError(f"members claim {total} bytes uncompressed, more than the {max_total} bytes "
                               "the manifest lists for the whole file (posref stores arrays "
                               "uncompressed; not inflated)")
            for info in zf.infolist():
                if only is not None and info.filename[: -len(".npy")] not in only:
                    continue
                with zf.open(info) as fh:
                    raw = fh.read(MAX_MEMBER_BYTES + 1)
                if len(raw) > MAX_MEMBER_BYTES:
                    raise NpzError(f"member {info.filename!r} inflates past {MAX_MEMBER_BYTES // 2**20} MiB")
                if not raw.startswith(_NPY_MAGIC):
                    raise NpzError(f"member {info.filename!r} is not an .npy array (pickle?)")
                array = np.lib.format.read_array(io.BytesIO(raw), allow_pickle=False)
                if array.dtype.hasobject:
                    raise NpzError(f"array {info.filename!r} has an object dtype")
                array.setflags(write=False)
                out[info.filename[: -len(".npy")]] = array
    except NpzError:
        raise
    except zipfile.BadZipFile as exc:
        raise NpzError(f"not a valid .npz (zip) file: {exc}") from None
    except OSError as exc:
        raise NpzError(f"cannot read: {exc}") from None
    except ValueError as exc:  # numpy refuses object arrays when allow_pickle=False
        raise NpzError(f"object array or pickle refused: {exc}") from None
    except Exception as exc:  # truncated members, bad headers, ...
        raise NpzError(f"unreadable .npz: {type(exc).__name__}: {exc}") from None
    return out
