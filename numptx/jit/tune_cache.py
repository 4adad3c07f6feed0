"""The ranking cache of :func:`numptx.autotune`: one JSON file per candidate key.

::

    from numptx.jit.tune_cache import TuneCache
    c = TuneCache("/tmp/tunes")
    c.put(key, 1.5e-05, {"cost": "time"})      # atomic: a whole entry or none
    c.get(key)                                  # 1.5e-05; None when absent or corrupt (warned)
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import stat
import tempfile
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["TuneCache", "SCHEMA", "entry_key"]

log = logging.getLogger(__name__)

#: bump when the key recipe or the entry format changes (2: the kernel's entry, nvdisasm's
#: version for cost="sass")
SCHEMA = 2
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
        return os.path.join(self.directory, f"autotune-v{SCHEMA}", key[:2], key + ".json")

    def get(self, key: str) -> float | None:
        """The cost stored under ``key``, or None (no entry, or an unreadable one: warned)."""
        path = self.path(key)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("numptx: autotune cache entry %s is unreadable (%s): measuring again",
                        path, e)
            return None
        try:
            st = os.fstat(fd)      # never read a FIFO or a device standing at an entry's path
            if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_ENTRY:
                why = "not a regular file" if not stat.S_ISREG(st.st_mode) else "too large"
                raise ValueError(why)
            with os.fdopen(fd, "rb", closefd=False) as f:
                entry = json.loads(f.read().decode("utf-8"))
            value = entry["value"] if isinstance(entry, dict) else None
            if (not isinstance(entry, dict) or entry.get("schema") != SCHEMA
                    or entry.get("key") != key or isinstance(value, bool)
                    or not isinstance(value, (int, float)) or not math.isfinite(value)
                    or value < 0):
                raise ValueError("not an autotune entry for this key")
            return float(value)
        except (OSError, ValueError, KeyError, UnicodeDecodeError) as e:
            log.warning("numptx: autotune cache entry %s is corrupt (%s): ignored, measuring "
                        "again", path, e)
            return None
        finally:
            os.close(fd)

    def put(self, key: str, value: float, context: Mapping[str, Any]) -> None:
        """Store ``value`` under ``key`` with ``context`` (what it was measured for, for people
        reading the file); a failing write is logged and ignored."""
        path = self.path(key)
        folder = os.path.dirname(path)
        entry = {"schema": SCHEMA, "key": key, "value": value, "context": dict(context),
                 "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        tmp = None
        try:                  # a whole entry or none: readers never see a half-written file
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=folder)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entry, f, sort_keys=True, default=str)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            tmp = None
            _sweep(folder)
        except OSError as e:
            log.warning("numptx: could not write the autotune cache entry %s: %s", path, e)
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.remove(tmp)


def _sweep(folder: str) -> None:
    """Remove the temporary files in ``folder`` that killed writers left."""
    now = time.time()
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(".") and name.endswith(".tmp"):
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):       # another writer may sweep it first
                if now - os.lstat(path).st_mtime > STALE_TMP_S:
                    os.remove(path)


def entry_key(cost: str, context: Mapping[str, Any], variant_key: str) -> str:
    """The key of one candidate's cost: what it is ranked by, what it was measured for, and
    its variant's cubin key."""
    h = hashlib.blake2b(digest_size=32)
    for part in (f"numptx-autotune schema {SCHEMA}", cost,
                 json.dumps(context, sort_keys=True, default=str), variant_key):
        b = part.encode("utf-8", "surrogateescape")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()
