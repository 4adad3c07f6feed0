"""The ranking cache of :func:`numptx.autotune`: one JSON file per candidate key.

::

    from numptx.jit.tune.tune_cache import TuneCache
    c = TuneCache("/tmp/tunes")
    c.put(key, 1.5e-05, {"cost": "time"})      # atomic: a whole entry or none
    c.get(key)                                  # 1.5e-05; None when absent or corrupt (warned)

Nothing outside the cache folder is read, written or removed: the folder may itself be a
symlink, but an ``autotune-v<N>`` or ``<ab>`` folder or an entry that is a symlink is never
followed (a miss with a warning on reads, a logged refusal on writes), nor is a folder swapped
for one after it was checked (names are opened relative to their open folder, see
:class:`~numptx.jit.compile.cache.Folder`). An entry that is not a
whole, valid entry (bad JSON, JSON nested too deep for the parser, wrong types or key) is a
miss with a warning, never an exception.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import stat
import time
from collections.abc import Mapping
from typing import Any

from ...files import digest
from ..compile.cache import check_key
from ..compile.cache_folder import Folder, open_folder, write_entry

__all__ = ["TuneCache", "SCHEMA", "entry_key"]

log = logging.getLogger(__name__)

#: bump when the key recipe or the entry format changes (2: the kernel's entry, nvdisasm's
#: version for cost="sass")
SCHEMA = 2
_SUBDIR = f"autotune-v{SCHEMA}"
_MAX_ENTRY = 1 << 20
#: a temporary file older than this (seconds) is a killed writer's, removed by the next write
#: in its folder (a live writer's is seconds old)
STALE_TMP_S = 3600


class TuneCache:
    """Measured costs by key, one JSON file each under
    ``directory/autotune-v<SCHEMA>/<ab>/<key>.json``. Writes are atomic (a temporary file in the
    same folder, ``os.replace``); an entry that is not a whole, valid entry for its key is
    ignored with a warning (and overwritten by the next measurement), never an error. A write
    also removes the folder's temporary files older than :data:`STALE_TMP_S` (left by killed
    writers)."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = os.path.abspath(os.fspath(directory))

    def __repr__(self) -> str:
        return f"<TuneCache {self.directory}>"

    def path(self, key: str) -> str:
        """Where the entry of ``key`` (lowercase hex, checked) lives."""
        check_key(key, "autotune cache")
        return os.path.join(self.directory, _SUBDIR, key[:2], key + ".json")

    def get(self, key: str) -> float | None:
        """The cost stored under ``key``, or None (no entry, or an unreadable or corrupt one:
        warned). Never raises for what is on disk."""
        path = self.path(key)
        try:
            folder = open_folder(self.directory, [_SUBDIR, key[:2]], create=False)
            if folder is None:
                return None
            with folder:
                fd = folder.open(os.path.basename(path), _READ_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as e:            # OutsideError too: a symlink is never followed
            log.warning("numptx: autotune cache entry %s is unreadable (%s): measuring again",
                        path, e)
            return None
        try:
            return _parse(fd, key)
        except (OSError, ValueError, TypeError, KeyError, OverflowError, RecursionError,
                MemoryError) as e:     # UnicodeDecodeError and JSONDecodeError are ValueErrors
            log.warning("numptx: autotune cache entry %s is corrupt (%s): ignored, measuring "
                        "again", path, f"{type(e).__name__}: {e}"[:200])
            return None
        finally:
            os.close(fd)

    def put(self, key: str, value: float, context: Mapping[str, Any]) -> None:
        """Store ``value`` under ``key`` with ``context`` (what it was measured for, for people
        reading the file); a failing write is logged and ignored."""
        path = self.path(key)
        entry = {"schema": SCHEMA, "key": key, "value": value, "context": dict(context),
                 "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        try:                  # a whole entry or none: readers never see a half-written file
            data = json.dumps(entry, sort_keys=True, default=str).encode("utf-8")
            with open_folder(self.directory, [_SUBDIR, key[:2]], create=True) as folder:
                write_entry(folder, os.path.basename(path), f".{key[:16]}.", (data,))
                _sweep(folder)
        except (OSError, ValueError, TypeError) as e:   # TypeError: a context json cannot take
            log.warning("numptx: could not write the autotune cache entry %s: %s", path, e)


#: read an entry without blocking on a FIFO or handing its descriptor to a child process
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | \
    getattr(os, "O_BINARY", 0)


def _parse(fd: int, key: str) -> float:
    """The value of the entry open at ``fd`` for ``key``; ValueError (or the parser's
    RecursionError for JSON nested too deep) when it is none."""
    st = os.fstat(fd)      # never read a FIFO or a device standing at an entry's path
    if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_ENTRY:
        raise ValueError("not a regular file" if not stat.S_ISREG(st.st_mode) else "too large")
    with os.fdopen(fd, "rb", closefd=False) as f:
        text = f.read(_MAX_ENTRY + 1).decode("utf-8")
    if _depth(text) > _MAX_DEPTH:      # the parser would recurse that deep
        raise ValueError(f"JSON nested deeper than {_MAX_DEPTH} levels")
    entry = json.loads(text)
    value = entry.get("value") if isinstance(entry, dict) else None
    if (not isinstance(entry, dict) or entry.get("schema") != SCHEMA
            or entry.get("key") != key or isinstance(value, bool)
            or not isinstance(value, (int, float)) or not _finite(value) or value < 0):
        raise ValueError("not an autotune entry for this key")
    return float(value)


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:             # an int beyond float's range
        return False


#: deeper JSON is no entry (an entry nests 3 levels); checked before parsing
_MAX_DEPTH = 32


#: a JSON string, or an unterminated one running to the end of the text (so no attempt fails
#: and restarts at the next quote: one linear pass, whatever the quotes and escapes)
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def _depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``text`` outside JSON strings, or the number of
    them when that is within :data:`_MAX_DEPTH`, or :data:`_MAX_DEPTH` + 1 once deeper (a
    linear scan; the parser stops at an unterminated string, so what follows one is not
    counted).

    >>> _depth('[{"a": "[[[["}]'), _depth('["' + '[' * 99)
    (2, 1)
    """
    bare = _STRING.sub("", text)
    opens = bare.count("[") + bare.count("{")
    if opens <= _MAX_DEPTH:
        return opens
    depth = deepest = 0
    for m in _BRACKETS.finditer(bare):
        if m.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > _MAX_DEPTH:
                break
        else:
            depth -= 1
    return deepest


def _sweep(folder: Folder) -> None:
    """Remove the temporary files in ``folder`` that killed writers left (relative to the
    open folder: a folder swapped for a link meanwhile is not swept)."""
    now = time.time()
    try:
        items = folder.entries()
    except OSError:
        return
    for e in items:
        if e.name.startswith(".") and e.name.endswith(".tmp"):
            with contextlib.suppress(OSError):       # another writer may sweep it first
                st = e.stat(follow_symlinks=False)   # a symlink: the link is removed
                if now - st.st_mtime > STALE_TMP_S and not stat.S_ISDIR(st.st_mode):
                    folder.unlink(e.name)


def entry_key(cost: str, context: Mapping[str, Any], variant_key: str) -> str:
    """The key of one candidate's cost: what it is ranked by, what it was measured for, and
    its variant's cubin key."""
    return digest(f"numptx-autotune schema {SCHEMA}", cost,
                  json.dumps(context, sort_keys=True, default=str), variant_key)
