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
are fsynced and moved into place with ``os.replace`` (:func:`numptx.files.atomic_write`): readers
see a whole entry or none (atomic for readers, not crash-durable for the folder).

The disk entries are capped (``NUMPTX_CACHE_MAX``, default 2 GiB, ``0``/``none`` for no cap; or
``max_bytes=``): after a write takes them past the cap, a background thread removes the least
recently used (oldest modification time; every disk hit refreshes it) down to 90% of it. Several
processes may write and evict at once: an entry removed by another process is a miss, never an
error. Constant-patched variants stay in memory (``put(disk=False)``): their shape's plan is on
disk, and patching it again is cheaper than writing the file. A read whose footer or digest does not match, or
whose body is not an ELF file, is a miss (the entry is removed and rebuilt), never an error. Only
regular files of at most 1 GiB are read, without blocking: anything else at an entry's path (a
FIFO, a device, a folder) is a miss with a warning, left in place. Misses are explained at DEBUG level on
the ``numptx.jit.compile.cache`` logger.

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

import logging
import operator
import os
import random
import re
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from ... import config
from ..._version import __version__
from ...errors import NumptxError
from ...files import checksum, digest
from .cache_folder import Folder, NOFOLLOW, OutsideError, numptx_files, open_folder, write_entry
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
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | \
    getattr(os, "O_BINARY", 0) | NOFOLLOW
_KEY = re.compile(r"[0-9a-f]{2,128}")


def check_key(key: str, what: str = "cache") -> str:
    """``key`` when it is a cache key (2 to 128 lowercase hex digits); :class:`NumptxError`
    otherwise, so no key names a path outside its folder (``../..``)."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise NumptxError(f"{what} key {key!r}: keys are 2 to 128 lowercase hex digits (what "
                          f"variant_key and entry_key make)")
    return key


def default_cache_dir() -> str:
    """``NUMPTX_CACHE_DIR`` if set, else the platform's user cache folder + ``numptx``
    (:func:`numptx.config.cache_dir`)."""
    return config.cache_dir()


def entry_digest(key: str, cubin: bytes) -> bytes:
    """The checksum in an entry's footer: blake2b-256 of the key, then the cubin."""
    return checksum(key.encode("ascii", "replace"), cubin)


def template_digest(ptx: str, producer: str = "") -> str:
    """Digest of a template: its PTX text and a description of the compiler that made it."""
    return digest(b"template", producer, ptx)


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
    return digest(f"numptx-cubin schema {SCHEMA}", numptx_v, nvj_v, arch, "\0".join(opts),
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
    ``directory`` (``None``: memory only). Thread-safe; several processes may share a folder.

    ``max_bytes`` caps the disk entries (:meth:`evict`, run after writes): ``"env"`` (the
    default) reads ``NUMPTX_CACHE_MAX`` at each write (2 GiB when unset), an int is bytes, a
    string a size such as ``"500M"``, and ``0`` or None mean no cap.

    >>> cache = CubinCache("/tmp/cubins", max_bytes="64M")          # doctest: +SKIP
    """

    def __init__(self, directory: str | None = None, *, memory_entries: int = 512,
                 disk: bool | None = None, max_bytes: int | str | None = "env"):
        if directory is not None and not isinstance(directory, (str, os.PathLike)):
            raise NumptxError(f"CubinCache(directory=) is a folder path, not {type(directory).__name__}")
        try:
            memory_entries = operator.index(memory_entries)
        except TypeError:
            raise NumptxError(f"CubinCache(memory_entries=) is an int, not "
                              f"{type(memory_entries).__name__}") from None
        if disk is None:
            disk = config.cache_enabled()
        self.directory = (os.path.abspath(directory) if directory else default_cache_dir()) if disk else None
        self.memory_entries = memory_entries
        self.max_bytes = _check_max(max_bytes)
        self._mem: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._evicting = threading.Lock()
        self.hits = self.misses = 0
        #: bytes on disk as last counted plus this process's writes since, and those writes
        self._disk_bytes: int | None = None
        self._written = 0
        self._evictor: threading.Thread | None = None
        self._pid = os.getpid()

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
        if st.st_nlink == 1:       # its last use, for the LRU eviction (never through a
            _touch(fd)              # hard link: the other name may be outside the cache)
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
    def put(self, key: str, cubin: bytes, *, disk: bool = True) -> None:
        """Store ``cubin`` under ``key``: in memory, then (unless ``disk`` is false) an atomic
        file write, after which the disk is kept under the cap (:meth:`evict`). A failing disk
        write is logged and ignored. ``disk=False`` is for what is cheaper to make again than
        to write (a constant-patched variant: its plan is on disk)."""
        cubin = bytes(cubin)
        path = self.path(key)          # the key checked before anything is kept
        with self._lock:
            self._remember(key, cubin)
        if path is None or not disk:
            return
        try:
            with open_folder(self.directory, [_SUBDIR, key[:2]], create=True) as folder:
                write_entry(folder, os.path.basename(path), f".{key[:16]}.",
                            (cubin, _MAGIC + entry_digest(key, cubin)))
        except OSError as e:
            log.warning("numptx: could not write the cubin cache entry %s: %s", path, e)
            return
        self._wrote(len(cubin) + _FOOTER)

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

    # -- the size cap ---------------------------------------------------------------------------
    def cap(self) -> int | None:
        """The most bytes of disk entries kept now (None: no cap): ``max_bytes``, or
        ``NUMPTX_CACHE_MAX`` when it is ``"env"`` (a :class:`~numptx.config.ConfigError` for a
        value that is no size)."""
        m = self.max_bytes
        return config.cache_max() if isinstance(m, str) else m

    def _wrote(self, n: int) -> None:
        """After a write of ``n`` bytes: look at the disk when the count says the cap is
        passed, or when this process wrote an eighth of the cap since it last looked (other
        processes write too), or had not looked yet. The look runs on a background thread,
        one at a time (:meth:`settle` waits for it): a sampled estimate, then, near the cap
        only, the full count and eviction (a full cache holds some 10^5 entries)."""
        cap = self.cap()
        if cap is None:
            return
        with self._lock:
            self._after_fork()
            if self._disk_bytes is not None:
                self._disk_bytes += n
                self._written += n
            due = (self._disk_bytes is None or self._disk_bytes > cap
                   or self._written > cap // _RESCAN)
            if not due or (self._evictor is not None and self._evictor.is_alive()):
                return
            self._evictor = threading.Thread(target=self._evict_quietly, args=(cap,),
                                             name="numptx-cubin-cache-evict", daemon=True)
            self._evictor.start()

    def _after_fork(self) -> None:
        """In a forked child, forget the parent's eviction thread and its lock (held there
        perhaps, by a thread that is not here)."""
        if self._pid != os.getpid():
            self._pid, self._evictor, self._evicting = os.getpid(), None, threading.Lock()

    def _evict_quietly(self, cap: int) -> None:
        """The background thread: a sampled estimate first (a few hundred files, however big
        the cache); the full count and eviction only when it is near the cap."""
        try:
            est = self.estimate_bytes()
            if est <= cap * _NEAR:
                with self._lock:
                    self._disk_bytes, self._written = est, 0
                return
            self.evict(cap)
        except Exception as e:   # noqa: BLE001 - a background thread: say it, never raise
            log.warning("numptx: cubin cache eviction in %s failed: %s", self.directory, e)

    def estimate_bytes(self, enough: int = 64) -> int:
        """The disk entries' total size (every format's), estimated from shard folders taken
        at random until ``enough`` entries are seen: exact for a small cache, a few percent
        off for a big one (keys are uniform, so the shards hold alike) at the cost of a few
        hundred ``lstat`` calls, not one per entry."""
        if self.directory is None:
            return 0
        shards = _shard_folders(self.directory)
        random.shuffle(shards)
        seen = size = scanned = 0
        for parts in shards:
            if seen >= enough:
                break
            try:
                folder = open_folder(self.directory, list(parts), create=False)
                if folder is None:
                    continue
                with folder:
                    for e in folder.entries():
                        if _ENTRY_NAME.fullmatch(e.name) and e.is_file(follow_symlinks=False):
                            size += folder.lstat(e.name).st_size
                            seen += 1
            except OSError:               # removed or swapped meanwhile: not counted
                continue
            scanned += 1
        return size * len(shards) // scanned if scanned else 0

    def settle(self, timeout: float | None = None) -> None:
        """Wait for a background eviction started by a write to finish (a script that wants
        the cap applied before it exits; tests)."""
        t = self._evictor
        if t is not None and self._pid == os.getpid():
            t.join(timeout)

    def evict(self, max_bytes: int | str | None = "cap") -> int:
        """Keep the disk entries within ``max_bytes`` (default :meth:`cap`): when they hold
        more, remove the least recently used (oldest modification time; a disk hit refreshes
        it) until they hold at most 90% of it. Every format's entries count; temporary files
        of writers killed over an hour ago go too. Another process removing or rewriting an
        entry meanwhile is no error (an entry rewritten or read since it was counted stays).
        Returns the number of entries removed.

        >>> CubinCache("/tmp/cubins").evict("100M")              # doctest: +SKIP
        12
        """
        if self.directory is None:
            return 0
        given = self.max_bytes if max_bytes == "cap" else _check_max(max_bytes)
        cap = config.cache_max() if isinstance(given, str) else given
        with self._lock:
            self._after_fork()
            evicting = self._evicting
        with evicting:                    # one eviction at a time in this process
            return self._evict(self.directory, cap)

    def _evict(self, root: str, cap: int | None) -> int:
        """:meth:`evict` of the folder ``root`` with the cap decided and the eviction lock
        held."""
        entries, total = self._census()
        removed = 0
        if cap is not None and total > cap:
            entries.sort()
            goal = int(cap * _LOW_WATER)
            for mtime, size, ino, parts, name in entries:
                if total <= goal:
                    break
                if _remove_if_unchanged(root, parts, name, ino, mtime):
                    removed += 1
                    total -= size
                else:                 # used, rewritten or removed meanwhile
                    total -= size if _gone(root, parts, name) else 0
            if removed:
                log.info("numptx: cubin cache over %d bytes: removed %d least recently "
                         "used entries", cap, removed)
        with self._lock:
            self._disk_bytes, self._written = total, 0
        return removed

    def _census(self) -> tuple[list[tuple[int, int, int, tuple[str, ...], str]], int]:
        """Every format's entries as ``(mtime_ns, size, inode, folder parts, name)`` and their
        total size; stale temporary files are removed on the way."""
        out, total, now = [], 0, time.time()
        for folder, name, kind in self._files(every_schema=True):
            try:
                st = folder.lstat(name)
                if kind == "temp" and now - st.st_mtime > STALE_TMP_S:
                    folder.unlink(name)
            except OSError:               # removed by another process meanwhile
                continue
            if kind == "entry":
                parts = tuple(os.path.relpath(folder.path, self.directory).split(os.sep))
                out.append((st.st_mtime_ns, st.st_size, st.st_ino, parts, name))
                total += st.st_size
        return out, total


#: the folders numptx writes entries in (every format's), its shard folders, its file names
_TOPS = re.compile(r"cubin-v[0-9]{1,6}")
_ENTRY_NAME = re.compile(r"[0-9a-f]{2,128}\.cubin")
_SHARD_NAME = re.compile(r"[0-9a-f]{2}")
#: eviction leaves the disk entries at this share of the cap; a process counts them again
#: after writing 1/_RESCAN of the cap; temporary files older than STALE_TMP_S are a killed
#: writer's
_LOW_WATER = 0.9
_RESCAN = 8
STALE_TMP_S = 3600


#: the background thread counts every entry (and evicts) only when the estimate is past this
#: share of the cap
_NEAR = 0.8


def _shard_folders(root: str) -> list[tuple[str, str]]:
    """``(cubin-v<N>, <ab>)`` of every shard folder under ``root`` (real folders only)."""
    out: list[tuple[str, str]] = []
    try:
        base = open_folder(root, [], create=False)
        if base is None:
            return out
        with base:
            tops = [e.name for e in base.entries()
                    if _TOPS.fullmatch(e.name) and e.is_dir(follow_symlinks=False)]
        for top in tops:
            folder = open_folder(root, [top], create=False)
            if folder is None:
                continue
            with folder:
                out += [(top, e.name) for e in folder.entries()
                        if _SHARD_NAME.fullmatch(e.name) and e.is_dir(follow_symlinks=False)]
    except OSError:
        pass
    return out


def _check_max(max_bytes: int | str | None) -> int | str | None:
    """``max_bytes=`` as bytes (None: no cap) or ``"env"``; NumptxError otherwise."""
    if max_bytes is None or max_bytes == "env":
        return max_bytes
    if isinstance(max_bytes, str):
        try:
            return config.parse_size(max_bytes, "CubinCache(max_bytes=)")
        except config.ConfigError as e:
            raise NumptxError(str(e)) from None
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise NumptxError(f"CubinCache(max_bytes={max_bytes!r}): give bytes (an int >= 0), a "
                          f"size such as '500M' or '2G', 0 or None for no cap, or 'env' "
                          f"(NUMPTX_CACHE_MAX)")
    return max_bytes or None


def _touch(fd: int) -> None:
    """Mark the open entry as used now (its modification time: what eviction orders by)."""
    if os.utime in os.supports_fd:
        try:
            os.utime(fd)
        except OSError:               # a read-only cache folder: no LRU order, no error
            pass


def _remove_if_unchanged(root: str, parts: tuple[str, ...], name: str, ino: int,
                         mtime_ns: int) -> bool:
    """Remove the entry ``name`` if it is still the file counted (same inode, not used
    since); False when it is not, or is gone."""
    try:
        folder = open_folder(root, list(parts), create=False)
        if folder is None:
            return False
        with folder:
            st = folder.lstat(name)
            if st.st_ino != ino or st.st_mtime_ns != mtime_ns or not stat.S_ISREG(st.st_mode):
                return False
            folder.unlink(name)
            return True
    except OSError:                       # gone meanwhile, or not ours to follow
        return False


def _gone(root: str, parts: tuple[str, ...], name: str) -> bool:
    """Whether the entry ``name`` no longer exists (another process removed it)."""
    try:
        folder = open_folder(root, list(parts), create=False)
        if folder is None:
            return True
        with folder:
            folder.lstat(name)
        return False
    except OSError:
        return True


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
        want = default_cache_dir() if config.cache_enabled() else None
        if _default is None or _default.directory != want:
            _default = CubinCache(want, disk=want is not None)
        return _default
