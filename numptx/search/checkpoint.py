"""Checkpoint files of a search: versioned, checksummed, written atomically.

Layout (little-endian)::

    b"NXCK"  u16 version  u16 flags  u64 body length  body  blake2b-16(header + body)

The body is zlib-compressed JSON: the search's state (its settings, the genes, the population
with Stack PTX programs as :func:`numptx.stack_ptx.dumps` bytes, the random generator's state,
the history, the data and how it is scored (``evaluate``), the score cache, the constant-fit
memo, semantic dedup's table of output hashes and the Pareto front, :mod:`.front`). :func:`write` writes a
temporary file in the same folder, flushes it to disk, renames it over ``path``
(``os.replace``) and flushes the folder: a crash leaves the old file or the new one, never half
of one. The file gets the mode a new file gets (``0o666`` less the umask). A folder that does
not exist, or a ``path`` that is a folder, raises :class:`CheckpointError`; a temporary file
that a killed writer left (``.nxck-*.tmp``, older than :data:`STALE_TMP_S`) is removed by the
next write in its folder. :func:`read` checks everything and raises :class:`CheckpointError`
naming the path and what is wrong. The body inflates to at most ``max_bytes`` (default
:data:`MAX_BODY`): a compressed "bomb" is refused after that many bytes, never inflated whole;
JSON nested deeper than a checkpoint's few levels, or with more than one list or object per
16 bytes, is refused (not a ``RecursionError``, not gigabytes of empty lists).

The checksum finds damage, it is not a MAC: anyone can write a file that passes it. What a
checkpoint from someone else can do is described in docs/search.md ("Checkpoints from
someone else")::

    from numptx.search import checkpoint
    checkpoint.write("run.nxck", {"kind": "regress", ...})
    state = checkpoint.read("run.nxck")
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import stat
import struct
import time
import warnings
import zlib
from typing import Any

import numpy as np

from .. import stack_ptx as sp
from .config import CACHE_MAX
from ..errors import NumptxWarning
from ..files import atomic_write, checksum
from .genes import SearchError, shown

__all__ = ["CheckpointError", "write", "read", "VERSION", "MAX_BODY", "MAX_BYTES_MAX",
           "STALE_TMP_S", "encode_array", "decode_array", "encode_program", "decode_program",
           "state_of", "path_of"]

#: score-cache entries (16-byte key + loss) a checkpoint keeps: all of them (a run clears its
#: cache past this many), because the children made after a resume depend on which programs
#: were scored (re-variation of duplicates, ``revary``). Constant fits: the most recent ones
#: (a resumed run may fit again what the run had fitted before; only ``fit_top``'s choice
#: among equals can differ).
CACHE_SAVED = CACHE_MAX
FITS_SAVED = 50_000

#: the largest inflated body :func:`read` accepts by default (``max_bytes=`` of ``read`` and
#: :func:`numptx.search.resume` raises it). A checkpoint holds a score cache of at most
#: CACHE_MAX keys and losses (~32 MB as base64 JSON), at most FITS_SAVED constant fits (~75 MB
#: with 64-op programs), the population (~0.8 KB a 64-op program: 4 MB for 4,096) and the data
#: (4/3 of its bytes): 256 MiB holds a full cache and fit memo, a population of 100,000 and
#: ~60 MB of data. :meth:`Result.save` warns when a checkpoint is larger.
MAX_BODY = 256 << 20
#: the largest ``max_bytes`` :func:`read` takes (1 TiB: more than any machine inflates; zlib
#: takes a bound that fits a C ``ssize_t``)
MAX_BYTES_MAX = 1 << 40
#: a temporary file older than this (seconds) is a killed writer's, removed by the next write
#: in its folder (a live writer's is seconds old)
STALE_TMP_S = 3600
_TMP_PREFIX, _TMP_SUFFIX = ".nxck-", ".tmp"
#: array dtypes a checkpoint carries (data and losses)
_DTYPES = ("<f4", "<f8")

MAGIC = b"NXCK"
VERSION = 1
_HEAD = struct.Struct("<4sHHQ")
_DIGEST = 16


class CheckpointError(SearchError):
    """A checkpoint file that cannot be read: missing, truncated, corrupted, of another
    version or another instruction table. ``path`` is the file."""

    def __init__(self, message: str, *, path: str | os.PathLike | None = None):
        self.path = None if path is None else os.fspath(path)
        super().__init__(message)


def encode_array(a: np.ndarray) -> dict:
    """A JSON-able form of an array (dtype, shape, base64 of the bytes)."""
    a = np.ascontiguousarray(a)
    return {"dtype": a.dtype.str, "shape": list(a.shape),
            "data": base64.b64encode(a.tobytes()).decode("ascii")}


def decode_array(d: dict, field: str = "array") -> np.ndarray:
    """Inverse of :func:`encode_array` for the float arrays a checkpoint holds; anything else
    (another dtype, a shape that does not match the bytes, bad base64) is a
    :class:`SearchError` naming ``field``."""
    if not isinstance(d, dict) or set(d) != {"dtype", "shape", "data"}:
        raise SearchError(f"{field}: expected {{'dtype', 'shape', 'data'}}, got "
                          f"{brief(d)}")
    dt, shape, data = d["dtype"], d["shape"], d["data"]
    if dt not in _DTYPES:
        raise SearchError(f"{field}: dtype {brief(dt)} is not one of {', '.join(_DTYPES)}")
    if not isinstance(shape, list) or not 1 <= len(shape) <= 2 or \
            not all(type(n) is int and n >= 0 for n in shape):
        raise SearchError(f"{field}: shape {brief(shape)} is not a list of 1 or 2 sizes")
    if not isinstance(data, str):
        raise SearchError(f"{field}: data is {type(data).__name__}, not base64 text")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError as e:
        raise SearchError(f"{field}: data is not base64 ({e})") from None
    size = int(np.prod(shape, dtype=object)) * np.dtype(dt).itemsize
    if size != len(raw):
        raise SearchError(f"{field}: shape {shape} of {dt} needs {size} bytes; data has "
                          f"{len(raw)}")
    return np.frombuffer(raw, dtype=np.dtype(dt)).reshape(shape).copy()


def brief(v: Any, n: int = 60) -> str:
    """``repr(v)`` cut to ``n`` characters (a forged field can be huge)."""
    r = shown(v) if not isinstance(v, (list, dict, str, bytes)) or len(v) < n else \
        f"{type(v).__name__} of length {len(v)}"
    return r if len(r) <= n else r[:n] + "..."


def encode_program(prog: Any) -> str:
    """A program as base64 of :func:`numptx.stack_ptx.dumps` (carries the table hash)."""
    return base64.b64encode(sp.dumps(list(prog))).decode("ascii")


def decode_program(text: str) -> list:
    """Inverse of :func:`encode_program`."""
    return sp.loads(base64.b64decode(text))


def path_of(path: Any, where: str) -> str:
    """``path`` (str, bytes or os.PathLike) as text; anything else, or a path holding a NUL
    character, is a :class:`SearchError` naming ``where``'s argument::

        path_of(pathlib.Path("run.nxck"), "resume")       # 'run.nxck'
    """
    try:
        text = os.fsdecode(os.fspath(path))
    except TypeError:
        raise SearchError(f"{where}: path={brief(path)}: give a file path (str or "
                          f"os.PathLike)") from None
    if "\0" in text:
        raise SearchError(f"{where}: path={brief(text)}: a path holds no NUL character")
    return text


def write(path: str | os.PathLike, state: dict) -> None:
    """Write ``state`` (JSON-able) to ``path`` atomically (temporary file + ``os.replace``)."""
    path = path_of(path, "save")
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CheckpointError(f"checkpoint {path!r}: is a folder; give a file path such as "
                              f"{os.path.join(path, 'run.nxck')!r}", path=path)
    if not os.path.isdir(folder):
        raise CheckpointError(f"checkpoint {path!r}: the folder {folder!r} does not exist "
                              f"(create it first)", path=path)
    with contextlib.suppress(OSError):          # os.replace would put a file in its place
        mode = os.lstat(path).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            raise CheckpointError(f"checkpoint {path!r}: is a device, a pipe or a socket, not "
                                  f"a file; give a file path", path=path)
    text = json.dumps(state, separators=(",", ":"), allow_nan=True).encode()
    if len(text) > MAX_BODY:
        warnings.warn(f"checkpoint {path!r}: its body inflates to {len(text):,} bytes, over the "
                      f"{MAX_BODY:,} that search.resume reads by default (checkpoint.MAX_BODY); "
                      f"resume it with max_bytes={len(text)}", NumptxWarning, stacklevel=3)
    body = zlib.compress(text, 6)
    head = _HEAD.pack(MAGIC, VERSION, 0, len(body))
    digest = checksum(head, body, size=_DIGEST)
    try:            # a unique temporary file, fsynced, renamed, then the folder fsynced
        atomic_write(path, head + body + digest, prefix=_TMP_PREFIX, suffix=_TMP_SUFFIX,
                     fsync_folder=True)
    except OSError as e:
        raise CheckpointError(f"checkpoint {path!r}: cannot write it in {folder!r} "
                              f"({e.strerror or e})", path=path) from None
    _sweep(folder)


def _sweep(folder: str) -> None:
    """Remove the temporary files (``.nxck-*.tmp``, regular files older than
    :data:`STALE_TMP_S`) that killed writers left in ``folder``; never a link or a folder."""
    now = time.time()
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(_TMP_PREFIX) and name.endswith(_TMP_SUFFIX):
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):       # another writer may sweep it first
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode) and now - st.st_mtime > STALE_TMP_S:
                    os.remove(path)


def read(path: str | os.PathLike, *, kind: str | None = None,
         max_bytes: int | None = None) -> dict:
    """The state in ``path``; a :class:`CheckpointError` names the path and the fault.
    ``kind`` (``"regress"``, ``"map_elites"``, ``"evolve"``), when given, must match.
    ``max_bytes``: the largest inflated body accepted (default :data:`MAX_BODY`)."""
    spath = path_of(path, "read")
    limit = MAX_BODY if max_bytes is None else max_bytes
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BYTES_MAX:
        raise SearchError(f"read: max_bytes={shown(max_bytes)}: give an int in [1, 2**40] (or "
                          f"None: {MAX_BODY:,})")
    # zlib never grows a body by more than ~0.1 % and a few bytes
    most = _HEAD.size + _DIGEST + limit + limit // 1000 + 64
    too_big = (f"more than a body of at most {limit:,} bytes inflated (max_bytes; default "
               f"checkpoint.MAX_BODY) compresses to")
    try:        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below)
        fd = os.open(spath, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_BINARY", 0))
        with open(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):       # /dev/zero never ends, a FIFO blocks
                raise CheckpointError(f"checkpoint {spath!r}: not a regular file (a device, "
                                      f"a pipe or a socket); give a checkpoint file's path",
                                      path=spath)
            if st.st_size > most:
                raise CheckpointError(f"checkpoint {spath!r}: {st.st_size:,} bytes, {too_big}",
                                      path=spath)
            data = f.read(st.st_size + 1)          # (read(n) reserves n bytes at once)
    except OSError as e:
        raise CheckpointError(f"checkpoint {spath!r}: cannot read it ({e.strerror or e})",
                              path=spath) from None
    if len(data) > most:
        raise CheckpointError(f"checkpoint {spath!r}: more than {most:,} bytes, {too_big}",
                              path=spath)
    if len(data) < _HEAD.size + _DIGEST:
        raise CheckpointError(f"checkpoint {spath!r}: {len(data)} bytes is too short for a "
                              f"numptx checkpoint (truncated?)", path=spath)
    magic, version, _flags, n = _HEAD.unpack_from(data, 0)
    if magic != MAGIC:
        raise CheckpointError(f"checkpoint {spath!r}: not a numptx search checkpoint (magic "
                              f"{magic!r}, expected {MAGIC!r})", path=spath)
    if version != VERSION:
        raise CheckpointError(f"checkpoint {spath!r}: format version {version}; this numptx "
                              f"reads version {VERSION}", path=spath)
    if len(data) != _HEAD.size + n + _DIGEST:
        raise CheckpointError(f"checkpoint {spath!r}: {len(data)} bytes, the header announces "
                              f"{_HEAD.size + n + _DIGEST} (truncated or appended to)", path=spath)
    body, digest = data[_HEAD.size:_HEAD.size + n], data[_HEAD.size + n:]
    if checksum(data[:_HEAD.size + n], size=_DIGEST) != digest:
        raise CheckpointError(f"checkpoint {spath!r}: checksum mismatch (the file is corrupted)",
                              path=spath)
    state = _decode_body(body, limit, spath)
    if not isinstance(state, dict) or "kind" not in state:
        raise CheckpointError(f"checkpoint {spath!r}: no search state in it", path=spath)
    if kind is not None and state["kind"] != kind:
        raise CheckpointError(f"checkpoint {spath!r}: holds a {state['kind']!r} search, not "
                              f"{kind!r}", path=spath)
    return state


def _decode_body(body: bytes, limit: int, spath: str) -> Any:
    """The JSON of a compressed body that inflates to at most ``limit`` bytes."""
    inflate = zlib.decompressobj()
    try:
        text = inflate.decompress(body, limit + 1)
        if len(text) > limit or inflate.unconsumed_tail:
            raise CheckpointError(
                f"checkpoint {spath!r}: the body inflates past {limit:,} bytes (max_bytes; "
                f"default checkpoint.MAX_BODY): refused unread. A checkpoint you wrote "
                f"yourself with that much data: pass max_bytes= to resume", path=spath)
        if not inflate.eof:
            raise CheckpointError(f"checkpoint {spath!r}: the body's compressed stream is "
                                  f"incomplete", path=spath)
        if inflate.unused_data:
            raise CheckpointError(f"checkpoint {spath!r}: {len(inflate.unused_data)} bytes "
                                  f"follow the body's compressed stream", path=spath)
    except zlib.error as e:
        raise CheckpointError(f"checkpoint {spath!r}: the body does not decode ({e})",
                              path=spath) from None
    # JSON of many small lists or objects costs ~20x its size in memory; a checkpoint's own
    # rows are 24 bytes or more each (a history row), so past one per 16 bytes it is not one
    containers = text.count(b"[") + text.count(b"{")
    if containers > 1024 + len(text) // 16:
        raise CheckpointError(f"checkpoint {spath!r}: the body holds {containers:,} lists and "
                              f"objects in {len(text):,} bytes, more than a checkpoint's rows "
                              f"(one per 16 bytes): refused unread", path=spath)
    try:
        return json.loads(text)
    except RecursionError:
        raise CheckpointError(f"checkpoint {spath!r}: the body nests deeper than Python's JSON "
                              f"reader goes (a checkpoint nests a few levels): not a checkpoint",
                              path=spath) from None
    except MemoryError:
        raise CheckpointError(f"checkpoint {spath!r}: the body does not fit in memory "
                              f"({len(text):,} bytes of JSON)", path=spath) from None
    except ValueError as e:
        raise CheckpointError(f"checkpoint {spath!r}: the body does not decode ({e})",
                              path=spath) from None


def programs_from(state_programs: list, spath: str) -> list:
    """Decode a list of encoded programs, naming the checkpoint on failure (e.g. a program
    saved under another instruction table)."""
    try:
        return [decode_program(t) for t in state_programs]
    except (sp.SerializationError, ValueError, TypeError) as e:
        raise CheckpointError(f"checkpoint {spath!r}: a program does not load ({e})",
                              path=spath) from None


# ---- a search's state <-> a file (numptx.search.loop calls these) --------------------------
def state_of(search: Any) -> dict:
    """The JSON-able state of a running search (``loop._Search``)."""
    cfg = {k: (list(v) if isinstance(v, tuple) else v) for k, v in search.cfg.to_dict().items()
           if k != "descriptors"}
    if search.kind == "map_elites":       # a user descriptor's function is not saved
        given = search.cfg.descriptors
        cfg["descriptors"] = [d if isinstance(d, str) else d[0] for d in given]
        user = [d[0] for d in given if not isinstance(d, str)]
        if user:
            cfg["user_descriptors"] = user

    def cands(cs):
        return [[encode_program(c.program), c.loss, c.fitted] for c in cs]
    state = {"kind": search.kind, "seed": search.seed, "genes": search.genes.to_dict(),
             "config": cfg, "rng": search.rng.bit_generator.state,
             "population": cands(search.population),
             "archive": [[list(k), *cands([c])[0]] for k, c in search.archive.items()],
             "best": cands([search.best])[0] if search.best else None,
             "history": [list(g) for g in search.history], "evaluated": search.evaluated,
             "children_made": search.children_made, "seconds": search.seconds,
             "improved_at": search.improved_at, "restarts": search.restarts,
             "front": cands(search.front.entries)}
    if search.island_sizes is not None:
        state["islands"] = list(search.island_sizes)
    if search.learned is not None:         # MAP-Elites' learned basis
        state["learned"] = search.learned.state(encode_array)
    if search.screen is not None:          # a predictor's model and what it learned
        from .screening import screen_state
        state["screen"] = screen_state(search.screen, encode_array)
        cfg["predictor"] = {"RandomFeatureRidge": "ridge", "MLP": "mlp"}[state["screen"]["model"]]
    # the score cache (whole) and the fit memo (the most recent entries): dedup and re-variation
    # after a resume see what the uninterrupted run sees, so the children and ``evaluated`` match
    # (past CACHE_SAVED keys the next evaluation clears the cache: saved empty, it is the same)
    keys = list(search.cache) if len(search.cache) <= CACHE_SAVED else []
    state["cache"] = {"keys": base64.b64encode(b"".join(keys)).decode("ascii"),
                      "losses": encode_array(np.array([search.cache[k] for k in keys],
                                                      np.float64))}
    state["fits"] = [[base64.b64encode(k).decode("ascii"), encode_program(p), loss]
                     for k, (p, loss) in list(search.fits.items())[-FITS_SAVED:]]
    sem = search.semantic
    if sem is not None:        # semantic dedup's table: the resumed run finds what this one did
        hs = list(sem.table)[-CACHE_MAX:]     # all of it: at most CACHE_MAX between batches
        state["semantic"] = {"keys": base64.b64encode(b"".join(hs)).decode("ascii"),
                             "losses": encode_array(np.array([sem.table[h] for h in hs],
                                                             np.float64)),
                             "hits": sem.hits}
    if search.evaluator is not None:
        ev = search.evaluator
        state["data"] = {"X": encode_array(ev.X), "y": encode_array(ev.y), "loss": ev.loss,
                         "names": list(ev.names), "evaluate": ev.evaluate, "build": ev.build}
    else:
        u = search.user
        state["evolve"] = {"site": u.site, "select": u.select, "per_module": u.per_module,
                           "build": u.build}
    return state
