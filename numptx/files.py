"""Files numptx writes: one atomic write-and-replace, and one digest recipe for content keys.

    from numptx.files import atomic_write, checksum, digest
    atomic_write("out/kernel.cu", text.encode())          # readers see the old file or the new one
    atomic_write("run.nxck", data, fsync_folder=True)    # and the rename survives a crash too
    digest("numptx-cubin schema 3", ptx, "sm_90")         # hex blake2b key of the parts
    checksum(header, body, size=16)                       # raw blake2b of the bytes, for a footer

:func:`atomic_write` writes a new temporary file with a unique name (``<prefix><12 hex>
<suffix>``, created exclusively: two writers never share one) in the destination's own folder,
fsyncs it, moves it over the destination with ``os.replace`` and, on request, fsyncs the folder
(the rename itself is then durable). If anything fails, the temporary file is removed and the
error raised; the destination is untouched. ``dir_fd`` names the path relative to an open
folder (what the cubin cache does, so a folder swapped for a symlink meanwhile leads nowhere).

:func:`digest` is the one recipe for content keys (the cubin cache's variant keys, the autotune
cache's entry keys, constant-patch plans, farm templates): blake2b over the parts, each one
length-prefixed so ``("ab", "c")`` and ``("a", "bc")`` differ.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Iterable

__all__ = ["atomic_write", "sync_folder", "temp_name", "digest", "checksum"]

_CREATE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
           | getattr(os, "O_BINARY", 0))
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
#: attempts at a free temporary name before giving up (12 random hex digits each)
_TRIES = 100


def temp_name(prefix: str, suffix: str = ".tmp") -> str:
    """A fresh temporary file name: ``prefix`` + 12 random hex digits + ``suffix``.

    >>> len(temp_name(".k.", ".tmp")) == len(".k.") + 12 + len(".tmp")
    True
    """
    return f"{prefix}{secrets.token_hex(6)}{suffix}"


def _create(folder: str, prefix: str, suffix: str, dir_fd: int | None,
            mode: int) -> tuple[int, str]:
    """An exclusively created new file in ``folder``: ``(descriptor, path)``."""
    for _ in range(_TRIES):
        tmp = os.path.join(folder, temp_name(prefix, suffix))
        try:
            return os.open(tmp, _CREATE, mode, dir_fd=dir_fd), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary file name in {folder or '.'} after {_TRIES} tries")


def atomic_write(path: str | os.PathLike, data: bytes | Iterable[bytes], *,
                 dir_fd: int | None = None, prefix: str | None = None, suffix: str = ".tmp",
                 mode: int = 0o666, fsync: bool = True, fsync_folder: bool = False) -> None:
    """Replace ``path`` with ``data`` (bytes, or chunks of bytes) in one step.

    ``prefix`` (default ``.<name>.``) and ``suffix`` shape the temporary file's name, so a
    caller can recognise a killed writer's leftovers; ``mode`` is the new file's (the umask
    applies); ``fsync`` flushes the file before the rename, ``fsync_folder`` the folder after
    it. ``dir_fd``: ``path`` is relative to this open folder. A symlink at ``path`` is replaced,
    never followed. On failure the temporary file is removed and the error raised.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> atomic_write(os.path.join(d, "a.txt"), [b"one ", b"two"])
    >>> open(os.path.join(d, "a.txt"), "rb").read(), os.listdir(d)
    (b'one two', ['a.txt'])
    """
    path = os.fspath(path)
    folder, name = os.path.split(path)
    fd, tmp = _create(folder, f".{name}." if prefix is None else prefix, suffix, dir_fd, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data:
                f.write(chunk)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    if fsync_folder:
        sync_folder(folder, dir_fd=dir_fd)


def sync_folder(folder: str, *, dir_fd: int | None = None) -> None:
    """Flush ``folder``'s entries (a rename into it) to disk; skipped where the platform
    cannot (Windows) or the folder cannot be opened."""
    if dir_fd is not None and folder in ("", "."):
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)
        return
    try:
        fd = os.open(folder or ".", _DIR, dir_fd=dir_fd)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def digest(*parts: bytes | str, size: int = 32) -> str:
    """The hex blake2b digest (``size`` bytes) of ``parts``, each length-prefixed (str as
    UTF-8, lone surrogates kept): numptx's one recipe for a content key.

    >>> digest("a", "bc") != digest("ab", "c"), len(digest("x", size=16))
    (True, 32)
    """
    h = hashlib.blake2b(digest_size=size)
    for p in parts:
        b = p.encode("utf-8", "surrogateescape") if isinstance(p, str) else bytes(p)
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def checksum(*chunks: bytes, size: int = 32) -> bytes:
    """The raw blake2b digest (``size`` bytes) of the chunks joined, as a file's footer keeps it.

    >>> checksum(b"ab", b"c") == checksum(b"abc")
    True
    """
    h = hashlib.blake2b(digest_size=size)
    for c in chunks:
        h.update(c)
    return h.digest()
