"""The cubin cache: memory, then disk, keyed by everything that shapes a variant's cubin.

A key is a blake2b digest of: the schema version, numptx's version, nvJitLink's version, the
target architecture, the normalized link options, the template's digest (its PTX text and the
compiler that produced it) and the stub of each site in site order. A variant whose key is cached
skips both rendering and nvJitLink.

On disk (``NUMPTX_CACHE_DIR``, default ``$XDG_CACHE_HOME/numptx`` or ``~/.cache/numptx``; set
``NUMPTX_CACHE=0`` to keep the cache in memory only) each entry is ``cubin-v3/<ab>/<key>.cubin``:
the raw cubin followed by a 40-byte footer (``NXCUBIN3`` and the blake2b-256 digest of the key and
the cubin, so an entry copied or renamed to another key's file is caught), so ``cuobjdump`` still
reads the file. Writes go to a unique temporary file in the same folder,
are fsynced and moved into place with ``os.replace``: readers see a whole entry or none (atomic
for readers, not crash-durable for the folder). A read whose footer or digest does not match, or
whose body is not an ELF file, is a miss (the entry is removed and rebuilt), never an error. Only
regular files of at most 1 GiB are read, without blocking: anything else at an entry's path (a
FIFO, a device, a folder) is a miss with a warning, left in place. Misses are explained at DEBUG level on
the ``numptx.jit.cache`` logger.

Nothing outside the cache folder is read, written or removed. The folder itself may be a
symlink (the user chose it), but no symlink under it is followed: a ``cubin-v<N>`` or ``<ab>``
folder or an entry that is a symlink is a miss with a warning on reads, refused (warned) on
writes, skipped by :meth:`CubinCache.info`, and unlinked (the link, never its target) by
:meth:`CubinCache.clear`. Each name is opened relative to its folder's open descriptor
(:class:`Folder`, ``dir_fd``), the folder opened without following a link, so a folder swapped
for a symlink by another process after it was checked leads nowhere else either.
:meth:`CubinCache.clear` removes only the files numptx writes, where it writes them; any other
file under the folder is the user's and is left alone. Keys are lowercase hex (what
:func:`variant_key` makes), so no key names a path outside its folder.
"""
from __future__ import annotations

import errno
import hashlib
import logging
import operator
import os
import re
import secrets
import stat
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from .._version import __version__
from ..errors import NumptxError
from .nvjitlink import nvjitlink_version

__all__ = ["CubinCache", "CacheInfo", "default_cache", "default_cache_dir", "variant_key",
           "template_digest", "cache_option", "SCHEMA", "check_key", "Folder", "open_folder",
           "write_entry", "OutsideError"]

log = logging.getLogger(__name__)

#: bump when the key recipe or the file format changes
SCHEMA = 3
_SUBDIR = f"cubin-v{SCHEMA}"
_MAGIC = b"NXCUBIN3"
_ELF = b"\x7fELF"
_FOOTER = len(_MAGIC) + 32
#: the largest entry read back (bigger files are misses, not memory exhaustion)
_MAX_ENTRY = 1 << 30
# never block opening an entry (a FIFO), never hand its descriptor to a child process
# nor follow a symlink standing at an entry's path (out of the cache folder)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | \
    getattr(os, "O_BINARY", 0) | _NOFOLLOW
_KEY = re.compile(r"[0-9a-f]{2,128}")


class OutsideError(OSError):
    """A path under a cache folder that would lead out of it (a symlink, or a name that resolves
    elsewhere): never followed."""


def check_key(key: str, what: str = "cache") -> str:
    """``key`` when it is a cache key (2 to 128 lowercase hex digits); :class:`NumptxError`
    otherwise, so no key names a path outside its folder (``../..``)."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise NumptxError(f"{what} key {key!r}: keys are 2 to 128 lowercase hex digits (what "
                          f"variant_key and entry_key make)")
    return key


# Every name under the cache folder is looked up relative to an open descriptor of the folder
# that holds it (``dir_fd``), opened without following a symlink: a folder swapped for a link
# by another process after it was checked still leads nowhere else. Where ``dir_fd`` is not
# supported (Windows), paths are joined and checked instead (``_AT`` False).
_AT = bool(_NOFOLLOW) and os.scandir in os.supports_fd and all(
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
        if not _NOFOLLOW and os.path.islink(path):      # no O_NOFOLLOW (Windows): look first
            raise OutsideError(f"{self.join(name)} is a symlink: not followed")
        try:
            return os.open(path, flags | _NOFOLLOW, mode, dir_fd=self.fd)
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

    def replace(self, src: str, dst: str) -> None:
        os.replace(self._at(src), self._at(dst), src_dir_fd=self.fd, dst_dir_fd=self.fd)

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
            fd = os.open(path, _DIR_FLAGS | _NOFOLLOW, dir_fd=self.fd)
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
    """Write ``name`` in ``folder`` atomically: a new temporary file ``<prefix><random>.tmp``
    there, fsynced, then renamed over ``name`` (a symlink at ``name`` is replaced, not
    followed). The temporary file is removed if anything fails."""
    for _ in range(100):
        tmp = f"{prefix}{secrets.token_hex(6)}.tmp"
        try:
            fd = folder.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
                             | getattr(os, "O_BINARY", 0))
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"no free temporary file name in {folder.path}")
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in data:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        folder.replace(tmp, name)
    except BaseException:
        try:
            folder.unlink(tmp)
        except OSError:
            pass
        raise


def default_cache_dir() -> str:
    """``NUMPTX_CACHE_DIR`` if set, else the platform's user cache folder + ``numptx``."""
    env = os.environ.get("NUMPTX_CACHE_DIR")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
        return os.path.join(base, "numptx", "Cache")
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/numptx")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "numptx")


def _digest(*parts: bytes | str) -> str:
    h = hashlib.blake2b(digest_size=32)
    for p in parts:
        b = p.encode("utf-8", "surrogateescape") if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def entry_digest(key: str, cubin: bytes) -> bytes:
    """The checksum in an entry's footer: blake2b-256 of the key, then the cubin."""
    h = hashlib.blake2b(key.encode("ascii", "replace"), digest_size=32)
    h.update(cubin)
    return h.digest()


def template_digest(ptx: str, producer: str = "") -> str:
    """Digest of a template: its PTX text and a description of the compiler that made it."""
    return _digest(b"template", producer, ptx)


def _toolchain() -> tuple[str, str]:
    return __version__, ".".join(map(str, nvjitlink_version()))


def normalize_options(options: Iterable[str]) -> tuple[str, ...]:
    """Link options as they reach nvJitLink, spelled one way (``-O3`` and ``-O 3`` collide)."""
    out = []
    for o in options:
        o = " ".join(str(o).split())
        if o.startswith("-") and " " in o and "=" not in o:
            flag, _, val = o.partition(" ")
            o = flag + val if len(flag) == 2 else f"{flag}={val}"
        out.append(o)
    return tuple(out)


def variant_key(template: str, stubs: Sequence[str], arch: str,
                options: Iterable[str] = (), *, bind: bool = False) -> str:
    """The cache key of a variant: ``template`` is :func:`template_digest`, ``stubs`` the stub
    texts in site order, ``arch`` like ``sm_90``, ``bind`` whether stubs were bound to the
    operand registers (the same machine code, but the key keeps the two renderings apart)."""
    numptx_v, nvj_v = _toolchain()
    opts = normalize_options(options)
    return _digest(f"numptx-cubin schema {SCHEMA}", numptx_v, nvj_v, arch, "\0".join(opts),
                   "bind" if bind else "frame", template, str(len(stubs)), *stubs)


class CacheInfo(NamedTuple):
    """What :meth:`CubinCache.info` reports."""
    directory: str | None
    entries: int
    bytes: int
    memory_entries: int
    hits: int
    misses: int


class CubinCache:
    """Cubins by key: an in-memory LRU of ``memory_entries`` cubins, then files under
    ``directory`` (``None``: memory only). Thread-safe; several processes may share a folder."""

    def __init__(self, directory: str | None = None, *, memory_entries: int = 512,
                 disk: bool | None = None):
        if directory is not None and not isinstance(directory, (str, os.PathLike)):
            raise NumptxError(f"CubinCache(directory=) is a folder path, not {type(directory).__name__}")
        try:
            memory_entries = operator.index(memory_entries)
        except TypeError:
            raise NumptxError(f"CubinCache(memory_entries=) is an int, not "
                              f"{type(memory_entries).__name__}") from None
        if disk is None:
            disk = os.environ.get("NUMPTX_CACHE", "1").strip().lower() not in ("0", "off", "no", "false")
        self.directory = (os.path.abspath(directory) if directory else default_cache_dir()) if disk else None
        self.memory_entries = memory_entries
        self._mem: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def __repr__(self) -> str:
        return f"<CubinCache {self.directory or 'memory only'}>"

    def path(self, key: str) -> str | None:
        """Where the entry of ``key`` lives on disk (``key``: lowercase hex, checked)."""
        check_key(key, "cubin cache")
        if self.directory is None:
            return None
        return os.path.join(self.directory, _SUBDIR, key[:2], key + ".cubin")

    # -- lookups ---------------------------------------------------------------------------------
    def in_memory(self, key: str) -> bool:
        """Whether ``key``'s cubin is in the memory layer (a :meth:`get` now reads no file)."""
        with self._lock:
            return key in self._mem

    def get(self, key: str, *, context: str = "", count: bool = True) -> bytes | None:
        """The cubin of ``key``, or None (a miss, explained at DEBUG level with ``context``).
        ``count=False`` leaves the hit and miss counts alone (numptx's own lookups of constant
        plans, which are not cubins of variants)."""
        with self._lock:
            data = self._mem.get(key)
            if data is not None:
                self._mem.move_to_end(key)
                self.hits += count
                return data
        data, why = self._read(key)
        with self._lock:
            if data is None:
                self.misses += count
            else:
                self.hits += count
                self._remember(key, data)
        if data is None and count and log.isEnabledFor(logging.DEBUG):
            log.debug("cubin cache miss %s%s: %s", key[:16], f" ({context})" if context else "", why)
        return data

    def _read(self, key: str) -> tuple[bytes | None, str]:
        path = self.path(key)
        if path is None:
            return None, "not in memory; the disk cache is off (NUMPTX_CACHE=0)"
        name = os.path.basename(path)
        try:
            folder = open_folder(self.directory, [_SUBDIR, key[:2]], create=False)
        except OutsideError as e:
            log.warning("numptx: cubin cache entry for key %s: %s: treated as a miss", key[:16], e)
            return None, f"not in memory, {e}"
        except OSError as e:
            return None, f"not in memory, {path} unreadable ({e})"
        if folder is None:
            return None, f"not in memory, no file {path}"
        with folder:
            try:
                fd = folder.open(name, _OPEN_FLAGS)
            except FileNotFoundError:
                return None, f"not in memory, no file {path}"
            except OutsideError as e:
                log.warning("numptx: cubin cache entry for key %s: %s: treated as a miss",
                            key[:16], e)
                return None, f"not in memory, {e}"
            except OSError as e:
                return None, f"not in memory, {path} unreadable ({e})"
            try:
                raw = self._read_regular(fd, key, path)
            except OSError as e:
                return None, f"not in memory, {path} unreadable ({e})"
            finally:
                os.close(fd)
            if raw is None:
                return None, f"not in memory, {path} is no regular cache file (ignored)"
            body, footer = raw[:-_FOOTER], raw[-_FOOTER:]
            if (len(raw) <= _FOOTER or footer[:len(_MAGIC)] != _MAGIC
                    or not body.startswith(_ELF) or entry_digest(key, body) != footer[len(_MAGIC):]):
                try:
                    folder.unlink(name)
                except OSError:
                    pass
                return None, (f"{path} is corrupt (bad footer, checksum or body): removed, "
                              f"rebuilding")
        return body, ""

    @staticmethod
    def _read_regular(fd: int, key: str, path: str) -> bytes | None:
        """The bytes of an open entry that is a regular file of at most ``_MAX_ENTRY`` bytes
        (read up to the size it had when opened); None, with a warning, for anything else (a
        device, a FIFO, a folder, a huge file)."""
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_ENTRY:
            what = (f"{st.st_size} bytes, more than {_MAX_ENTRY}" if stat.S_ISREG(st.st_mode)
                    else "not a regular file")
            log.warning("numptx: cubin cache entry %s for key %s is %s: treated as a miss",
                        path, key[:16], what)
            return None
        parts, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def _remember(self, key: str, data: bytes) -> None:
        if self.memory_entries <= 0:
            return
        self._mem[key] = data
        self._mem.move_to_end(key)
        while len(self._mem) > self.memory_entries:
            self._mem.popitem(last=False)

    # -- stores -----------------------------------------------------------------------------------
    def put(self, key: str, cubin: bytes) -> None:
        """Store ``cubin`` under ``key`` (memory, then an atomic file write; a failing disk
        write is logged and ignored)."""
        cubin = bytes(cubin)
        path = self.path(key)          # the key checked before anything is kept
        with self._lock:
            self._remember(key, cubin)
        if path is None:
            return
        try:
            with open_folder(self.directory, [_SUBDIR, key[:2]], create=True) as folder:
                write_entry(folder, os.path.basename(path), f".{key[:16]}.",
                            (cubin, _MAGIC + entry_digest(key, cubin)))
        except OSError as e:
            log.warning("numptx: could not write the cubin cache entry %s: %s", path, e)

    # -- maintenance ----------------------------------------------------------------------------
    def _files(self, every_schema: bool = False) -> Iterator[tuple[Folder, str, str]]:
        """``(folder, name, kind)`` of what numptx writes under the cache folder, as
        :func:`numptx_files` finds it (this format's ``cubin-v<N>``, or every format's)."""
        if self.directory is None:
            return
        yield from numptx_files(self.directory, _TOPS if every_schema else re.compile(_SUBDIR),
                                _ENTRY_NAME)

    def info(self) -> CacheInfo:
        """Folder, number and total size of disk entries (regular files only: no symlink is
        followed), memory entries, hits and misses."""
        entries = size = 0
        for folder, name, kind in self._files():
            if kind == "entry":
                try:
                    size += folder.lstat(name).st_size
                    entries += 1
                except OSError:
                    pass
        with self._lock:
            return CacheInfo(self.directory, entries, size, len(self._mem), self.hits, self.misses)

    def clear(self) -> int:
        """Remove every entry (memory and disk, older cache formats' too) and the temporary
        files of writers that were killed; return the number of entries removed. Only what
        numptx writes is removed, where it writes it (``cubin-v<N>/<ab>/<key>.cubin`` and
        ``cubin-v<N>/<ab>/.<key>.<random>.tmp``): any other file, whatever its name, is left
        alone, and a symlink standing at one of those names is unlinked (the link itself,
        with a warning), never followed."""
        with self._lock:
            self._mem.clear()
        n = 0
        for folder, name, kind in self._files(every_schema=True):
            try:
                folder.unlink(name)         # a symlink: the link, not its target
            except OSError:
                continue
            if kind == "link":
                log.warning("numptx: removed the symlink %s from the cubin cache (its target "
                            "was left alone)", folder.join(name))
            n += kind == "entry"
        return n


#: the folders numptx writes entries in (every format's), its shard folders, its file names
_TOPS = re.compile(r"cubin-v[0-9]{1,6}")
_SHARD = re.compile(r"[0-9a-f]{2}")
_ENTRY_NAME = re.compile(r"[0-9a-f]{2,128}\.cubin")
_TEMP_NAME = re.compile(r"\.[0-9a-f]{1,16}\.[A-Za-z0-9_]{1,64}\.tmp")


def numptx_files(root: str, tops: re.Pattern, entry: re.Pattern,
                 temp: re.Pattern = _TEMP_NAME) -> Iterator[tuple[Folder, str, str]]:
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


_default: CubinCache | None = None
_default_lock = threading.Lock()


def cache_option(cache: CubinCache | str | os.PathLike | bool | None) -> CubinCache | bool | None:
    """A template's ``cache=`` checked: True (the default cache), False/None (none), a
    :class:`CubinCache`, or a folder (a :class:`CubinCache` there)."""
    if cache is None or isinstance(cache, (bool, CubinCache)):
        return cache
    if isinstance(cache, (str, os.PathLike)):
        return CubinCache(os.fspath(cache))
    raise NumptxError(f"cache= takes True, False, None, a folder or a CubinCache, not "
                      f"{type(cache).__name__}")


def default_cache() -> CubinCache:
    """The process-wide cache (rebuilt when ``NUMPTX_CACHE_DIR`` or ``NUMPTX_CACHE`` change)."""
    global _default
    with _default_lock:
        want = default_cache_dir() if os.environ.get("NUMPTX_CACHE", "1").strip().lower() not in (
            "0", "off", "no", "false") else None
        if _default is None or _default.directory != want:
            _default = CubinCache(want, disk=want is not None)
        return _default
