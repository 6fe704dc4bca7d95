"""Write a file whole or not at all, never through a link, never into a device or a FIFO.

Every file posref writes goes through ``write_atomic``: the reports of ``posref conform``
(--json, --junit, --markdown, --plot, --write-expected-failures), ``posref identities --json``,
``posref bench --json``, ``posref study`` and every file ``posref vectors regenerate`` writes
(the .npz and .json of each group, MANIFEST.json, reference/golden/SHIPPED_DIGEST). It lives in
``reference`` because the reference (which never imports ``conformance``) writes the vectors.

The rule (issue 24: regenerate followed ``t5.bucket/t5-decoder.json -> ../../../victim`` and
overwrote a file outside --out; identities and bench wrote through symlinks and blocked forever
on a FIFO):

- the data goes into a new file created with O_EXCL | O_NOFOLLOW in the destination's folder,
  which is then renamed over the destination: a killed run leaves the old file or the new one,
  never half of one, and a link planted at the destination is never followed;
- a destination that exists and is not a regular file (a symbolic link, a device such as
  /dev/null or /dev/full, a FIFO, a socket, a folder) is refused (``FileRefused``), not replaced:
  renaming over /dev/null would turn it into a regular file;
- with ``inside`` (a folder posref owns, such as --out), every folder between ``inside`` and the
  file is opened with O_NOFOLLOW, relative to the one above it: a folder that is a symbolic link
  is refused too, so nothing is written outside ``inside``. ``inside`` itself is the user's
  choice and may be a link.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class FileRefused(ValueError):
    """The destination (or a folder on the way to it) may not be written: one line saying why."""


def kind_problem(mode: int) -> str | None:
    """Why an existing entry of this st_mode may not be replaced by a file, or None (a regular
    file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return f"is {kind}: posref writes files only over regular files or at new paths"


def not_a_regular_file(path) -> str | None:
    """Why ``path`` may not be replaced by a file posref writes ("is a symbolic link: ..."), or
    None for a regular file or a path that does not exist yet (a missing or bad parent folder is
    reported when writing)."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"cannot be checked ({exc.strerror})"
    except ValueError:  # an embedded NUL
        return "is not a valid path"
    return kind_problem(mode)


def _open_folder(name, dir_fd=None, *, follow: bool) -> int:
    flags = os.O_RDONLY | _DIRECTORY | _CLOEXEC | (0 if follow else _NOFOLLOW)
    return os.open(name, flags, dir_fd=dir_fd)


def _folder_fd(path: Path, inside, parents: bool) -> int:
    """An open descriptor of path's folder. Without ``inside`` the folder (created if missing
    and ``parents``) is the one the path names, links included; with ``inside``, the folders
    below it are created and opened one by one without following a link (FileRefused)."""
    if inside is None:
        if parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        return _open_folder(path.parent, follow=True)
    inside = Path(inside)
    try:
        parts = path.parent.relative_to(inside).parts
    except ValueError:
        raise FileRefused(f"{path} lies outside {inside}") from None
    inside.mkdir(parents=True, exist_ok=True)
    fd = _open_folder(inside, follow=True)
    walked = inside
    try:
        for part in parts:
            walked = walked / part
            if part in ("..", "."):
                raise FileRefused(f"{walked}: '..' and '.' are not allowed")
            try:
                os.mkdir(part, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                mode = os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
            except FileNotFoundError:  # removed in between: the open below says so
                mode = stat.S_IFDIR
            if not stat.S_ISDIR(mode):
                raise FileRefused(f"{walked} {kind_problem(mode) or 'is not a directory'}")
            try:
                child = _open_folder(part, fd, follow=False)
            except OSError as exc:  # ELOOP: a link planted after the check
                raise FileRefused(f"{walked} cannot be opened as a folder without following a link "
                                  f"({exc.strerror})") from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_atomic(path, data, *, inside=None, parents: bool = True) -> None:
    """Write ``data`` (bytes, or str written as UTF-8) to ``path`` whole or not at all (see the
    module docstring): FileRefused when the destination or, below ``inside``, a folder on the
    way is not a regular file or folder; OSError when the disk or the folder refuses (or, with
    ``parents=False``, when the folder does not exist)."""
    path = Path(os.fspath(path))
    if path.name in ("", ".", ".."):
        raise FileRefused(f"{str(path)!r} does not name a file")
    blob = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    fd = _folder_fd(path, inside, parents)
    tmp = None
    try:
        try:
            mode = os.stat(path.name, dir_fd=fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            mode = None
        problem = None if mode is None else kind_problem(mode)
        if problem:
            raise FileRefused(f"{path} {problem}")
        tmp = f".{path.name[:64]}.{secrets.token_hex(6)}.tmp"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666, dir_fd=fd)
        try:
            view = memoryview(blob)
            while view:
                view = view[os.write(out, view):]
        finally:
            os.close(out)
        os.replace(tmp, path.name, src_dir_fd=fd, dst_dir_fd=fd)
        tmp = None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass
        os.close(fd)
