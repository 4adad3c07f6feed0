"""The folders of numptx's disk caches, held open: nothing outside them is followed.

    with open_folder(root, ["cubin-v3", "ab"], create=True) as folder:
        write_entry(folder, "abcd.cubin", ".abcd.", [data])      # atomic (numptx.files)
    for folder, name, kind in numptx_files(root, tops, entry):    # what numptx wrote there
        ...

Every name under a cache folder is opened, listed, renamed and removed relative to an open
descriptor of the folder that holds it (:class:`Folder`, ``dir_fd``), each folder opened without
following a symlink, so a folder swapped for a link by another process after it was checked
leads nowhere else. Used by the cubin cache (:mod:`numptx.jit.compile.cache`) and the autotune cache
(:mod:`numptx.jit.tune.tune_cache`).
"""
from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterable, Iterator, Sequence

from ...files import atomic_write

__all__ = ["Folder", "open_folder", "write_entry", "numptx_files", "OutsideError", "NOFOLLOW",
           "TEMP_NAME"]

#: O_NOFOLLOW where the platform has it (else 0: links are looked for first)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: the temporary files :func:`write_entry` makes (``.<key prefix>.<random>.tmp``)
TEMP_NAME = re.compile(r"\.[0-9a-f]{1,16}\.[A-Za-z0-9_]{1,64}\.tmp")
_SHARD = re.compile(r"[0-9a-f]{2}")


class OutsideError(OSError):
    """A path under a cache folder that would lead out of it (a symlink, or a name that resolves
    elsewhere): never followed."""



# Every name under the cache folder is looked up relative to an open descriptor of the folder
# that holds it (``dir_fd``), opened without following a symlink: a folder swapped for a link
# by another process after it was checked still leads nowhere else. Where ``dir_fd`` is not
# supported (Windows), paths are joined and checked instead (``_AT`` False).
_AT = bool(NOFOLLOW) and os.scandir in os.supports_fd and all(
    f in os.supports_dir_fd for f in (os.open, os.stat, os.unlink, os.rename, os.mkdir))
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


class Folder:
    """A folder under a cache root, held open: names inside it are opened, listed, renamed and
    removed relative to it (see :func:`open_folder`). Close it (``with``) when done."""

    def __init__(self, path: str, fd: int | None):
        self.path, self.fd = path, fd

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _at(self, name: str) -> str:
        return name if self.fd is not None else os.path.join(self.path, name)

    def join(self, name: str) -> str:
        """The path of ``name`` in this folder (for messages)."""
        return os.path.join(self.path, name)

    def lstat(self, name: str) -> os.stat_result:
        return os.stat(self._at(name), dir_fd=self.fd, follow_symlinks=False)

    def open(self, name: str, flags: int, mode: int = 0o600) -> int:
        """``os.open`` of ``name`` here, never through a symlink at ``name``
        (:class:`OutsideError` for one)."""
        path = self._at(name)
        if not NOFOLLOW and os.path.islink(path):      # no ONOFOLLOW (Windows): look first
            raise OutsideError(f"{self.join(name)} is a symlink: not followed")
        try:
            return os.open(path, flags | NOFOLLOW, mode, dir_fd=self.fd)
        except OSError:
            try:
                link = stat.S_ISLNK(self.lstat(name).st_mode)
            except OSError:
                link = False
            if link:                                     # ELOOP (Linux) or EMLINK (BSD)
                raise OutsideError(f"{self.join(name)} is a symlink: not followed") from None
            raise

    def unlink(self, name: str) -> None:
        """Remove ``name`` here (a symlink: the link itself)."""
        os.unlink(self._at(name), dir_fd=self.fd)

    def entries(self) -> list[os.DirEntry]:
        """What the folder holds (``DirEntry.is_*`` with ``follow_symlinks=False`` only)."""
        with os.scandir(self.fd if self.fd is not None else self.path) as it:
            return list(it)

    def sub(self, name: str, *, create: bool = False) -> Folder | None:
        """The folder ``name`` in this one, opened (made when ``create``); None when missing
        and not ``create``; :class:`OutsideError` when it is a symlink or no folder."""
        path = self._at(name)
        try:
            st = self.lstat(name)
        except FileNotFoundError:
            if not create:
                return None
            try:
                os.mkdir(path, dir_fd=self.fd)
            except FileExistsError:          # another writer made it (or something else)
                pass
            st = self.lstat(name)
        if not stat.S_ISDIR(st.st_mode):
            what = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a folder"
            raise OutsideError(f"{self.join(name)} is {what}: not followed (nothing outside "
                               f"the cache folder is read or written)")
        if self.fd is None:
            return Folder(self.join(name), None)
        try:
            fd = os.open(path, _DIR_FLAGS | NOFOLLOW, dir_fd=self.fd)
        except OSError as e:         # swapped for a link since the lstat: ELOOP, or ENOTDIR
            if e.errno in (errno.ELOOP, errno.ENOTDIR, getattr(errno, "EMLINK", None)):
                raise OutsideError(f"{self.join(name)} changed while opened ({e}): not "
                                   f"followed") from None
            raise
        return Folder(self.join(name), fd)


def open_folder(root: str, parts: Sequence[str], *, create: bool) -> Folder | None:
    """``root/parts[0]/parts[1]...`` held open, each part a real folder (not a symlink) opened
    relative to the one before (made when ``create``; ``root`` may itself be a symlink, the
    user's choice). None when a part is missing and not ``create``; :class:`OutsideError` when
    a part is a symlink or anything but a folder.

    >>> with open_folder("/tmp/c", ["cubin-v3", "ab"], create=True) as f:   # doctest: +SKIP
    ...     f.path
    '/tmp/c/cubin-v3/ab'
    """
    if create:
        try:
            os.makedirs(root, exist_ok=True)
        except FileExistsError:      # a file, a device: say so, not "File exists"
            raise NotADirectoryError(errno.ENOTDIR, "the cache folder is not a folder (point "
                                     "NUMPTX_CACHE_DIR or cache_dir= at a folder)", root) from None
    try:
        folder = Folder(root, os.open(root, _DIR_FLAGS) if _AT else None)
    except FileNotFoundError:
        if create:                    # removed since it was made: a failed write, not None
            raise
        return None
    for part in parts:
        with folder:
            sub = folder.sub(part, create=create)
        if sub is None:
            return None
        folder = sub
    if not _AT:
        real_root, real = os.path.realpath(root), os.path.realpath(folder.path)
        if os.path.commonpath([real_root, real]) != real_root:
            raise OutsideError(f"{folder.path} resolves to {real}, outside the cache folder "
                               f"{real_root}")
    return folder


def write_entry(folder: Folder, name: str, prefix: str, data: Iterable[bytes]) -> None:
    """Write ``name`` in ``folder`` atomically (:func:`numptx.files.atomic_write` relative to
    the open folder): a new temporary file ``<prefix><random>.tmp`` there, fsynced, then renamed
    over ``name`` (a symlink at ``name`` is replaced, not followed). The temporary file is
    removed if anything fails. Entries are private to the user (mode 0600)."""
    at = folder.fd is not None
    atomic_write(name if at else folder.join(name), data, dir_fd=folder.fd, prefix=prefix,
                 suffix=".tmp", mode=0o600)



def numptx_files(root: str, tops: re.Pattern, entry: re.Pattern,
                 temp: re.Pattern = TEMP_NAME) -> Iterator[tuple[Folder, str, str]]:
    """``(folder, name, kind)`` of the files numptx writes under ``root``: in folders named
    like ``tops``, in their two-hex-digit shard folders, files named like ``entry`` whose name
    starts with the shard's (``"entry"``) or like ``temp`` (``"temp"``), and symlinks standing
    at any of those names (``"link"``, never followed or entered). Anything else is not
    numptx's and is not listed. Each ``folder`` is held open (names are relative to it) until
    the next item is asked for, so a folder swapped for a link meanwhile leads nowhere."""
    try:
        root_folder = open_folder(root, [], create=False)
    except OSError:
        return
    if root_folder is None:
        return
    with root_folder:
        try:
            tops_found = [e for e in root_folder.entries() if tops.fullmatch(e.name)]
        except OSError:
            return
        for top in tops_found:
            if top.is_symlink():
                yield root_folder, top.name, "link"
                continue
            yield from _shards(root_folder, top.name, entry, temp)


def _shards(parent: Folder, name: str, entry: re.Pattern,
            temp: re.Pattern) -> Iterator[tuple[Folder, str, str]]:
    """:func:`numptx_files` in the folder ``name`` of ``parent`` and its shard folders."""
    try:
        top = parent.sub(name)
    except OSError:                  # no folder (a user's file), or swapped for a link
        return
    if top is None:
        return
    with top:
        try:
            shards = [e for e in top.entries() if _SHARD.fullmatch(e.name)]
        except OSError:
            return
        for shard in shards:
            if shard.is_symlink():
                yield top, shard.name, "link"
                continue
            try:
                folder = top.sub(shard.name)
            except OSError:
                continue
            if folder is None:
                continue
            with folder:
                try:
                    files = folder.entries()
                except OSError:
                    continue
                for e in files:
                    ours = (entry.fullmatch(e.name) and e.name.startswith(shard.name)
                            and "entry") or (temp.fullmatch(e.name) and "temp")
                    if not ours:
                        continue
                    if e.is_symlink():
                        yield folder, e.name, "link"
                    elif e.is_file(follow_symlinks=False):
                        yield folder, e.name, ours
