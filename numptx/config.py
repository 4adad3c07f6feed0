"""numptx's environment knobs: every ``NUMPTX_*`` variable, parsed in one place.

    from numptx import config
    config.cache_enabled()          # NUMPTX_CACHE: False for 0/off/no/false
    config.cache_dir()              # NUMPTX_CACHE_DIR, else the platform's user cache folder
    config.cache_max()              # NUMPTX_CACHE_MAX in bytes (None: no cap); default 2 GiB
    config.parse_size("500M")       # 524288000

Each accessor reads the environment when called (a test or a user may set a variable between
two calls), and a value it cannot read is a :class:`ConfigError` naming the variable, the value
and the forms it takes. The table :data:`KNOBS` is the documentation too:
``python -m numptx.config > docs/config.md`` writes the page (a test checks that it is current).
"""
from __future__ import annotations

import functools
import json
import os
import re
import sys
from dataclasses import dataclass

from .errors import NumptxError

__all__ = ["ConfigError", "Knob", "KNOBS", "cache_enabled", "cache_dir", "cache_max",
           "demo_ptx_stubs", "parse_size", "markdown"]


class ConfigError(NumptxError):
    """An environment variable numptx reads holds a value it does not take; ``variable`` names
    it."""

    def __init__(self, variable: str, value: str, forms: str):
        self.variable, self.value = variable, value
        super().__init__(f"{variable}={value!r}: {forms}; fix or unset it")


@dataclass(frozen=True)
class Knob:
    """One environment variable: its name, default (as documented), the forms it takes and
    what it does."""
    name: str
    default: str
    forms: str
    doc: str


_ON, _OFF = ("1", "on", "yes", "true"), ("0", "off", "no", "false")
_SIZE_FORMS = ("a size in bytes: an integer with an optional unit K, M, G or T (powers of 1024, "
               "an optional B or iB after it: 500M, 2G, 1.5GiB), or 0 / none for no cap")

#: every knob numptx reads; ``python -m numptx.config`` prints this table
KNOBS: tuple[Knob, ...] = (
    Knob("NUMPTX_CACHE", "1", "1, on, yes, true / 0, off, no, false (any case; empty: the default)",
         "Whether the cubin cache and the autotune cache use the disk. Off keeps cubins in "
         "memory only and rankings nowhere."),
    Knob("NUMPTX_CACHE_DIR", "$XDG_CACHE_HOME/numptx or ~/.cache/numptx (macOS: "
         "~/Library/Caches/numptx, Windows: %LOCALAPPDATA%\\numptx\\Cache)",
         "a folder path (~ expands; empty: the default)",
         "The folder of the cubin cache (`cubin-v<N>/`) and the autotune cache "
         "(`autotune-v<N>/`). "
         "Nothing outside it is read, written or removed."),
    Knob("NUMPTX_CACHE_MAX", "2G", _SIZE_FORMS,
         "The most bytes of cubin cache entries kept on disk. After a write that takes the cache "
         "past it, the least recently used entries (by modification time, refreshed on every "
         "disk hit) are removed until it holds at most 90% of it."),
    Knob("NUMPTX_DEMO_PTX_STUBS", "{}", "a JSON object mapping a constant to a PTX stub text",
         "Internal: how `numptx demo` hands the PTX stubs it made to its simulator subprocess."),
)
_BY_NAME = {k.name: k for k in KNOBS}


def _raw(name: str) -> str:
    """The variable's text, stripped ("" when unset)."""
    return os.environ.get(name, "").strip()


def cache_enabled() -> bool:
    """``NUMPTX_CACHE``: whether the caches use the disk (default True).

    >>> cache_enabled()            # NUMPTX_CACHE=off in the environment    # doctest: +SKIP
    False
    """
    text = _raw("NUMPTX_CACHE").lower()
    if text in _ON or not text:
        return True
    if text in _OFF:
        return False
    raise ConfigError("NUMPTX_CACHE", os.environ["NUMPTX_CACHE"],
                      f"it takes {_BY_NAME['NUMPTX_CACHE'].forms}")


def cache_dir() -> str:
    """``NUMPTX_CACHE_DIR`` as an absolute path, else the platform's user cache folder +
    ``numptx``."""
    env = _raw("NUMPTX_CACHE_DIR")
    if env:
        if "\0" in env:
            raise ConfigError("NUMPTX_CACHE_DIR", env, "it takes a folder path (no NUL character)")
        return os.path.abspath(os.path.expanduser(env))
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
        return os.path.join(base, "numptx", "Cache")
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/numptx")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "numptx")


#: the cubin cache's default cap (NUMPTX_CACHE_MAX unset)
DEFAULT_CACHE_MAX = 2 << 30
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@functools.lru_cache(maxsize=64)
def parse_size(text: str, variable: str = "NUMPTX_CACHE_MAX") -> int | None:
    """Bytes of a size such as ``500M``, ``2G``, ``1.5GiB`` or ``4096`` (units are powers of
    1024); None for ``0`` or ``none`` (no cap). A :class:`ConfigError` naming ``variable``
    for anything else.

    >>> parse_size("500M"), parse_size("2g"), parse_size("1.5GiB"), parse_size("none")
    (524288000, 2147483648, 1610612736, None)
    """
    t = str(text).strip()
    if t.lower() == "none":
        return None
    m = _SIZE.fullmatch(t)
    if not m:
        raise ConfigError(variable, str(text), f"it takes {_SIZE_FORMS}")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    return None if value == 0 else max(1, int(value))     # 0: no cap; 0.1 is a byte


def cache_max() -> int | None:
    """``NUMPTX_CACHE_MAX`` in bytes (default :data:`DEFAULT_CACHE_MAX`, 2 GiB); None: no
    cap."""
    text = _raw("NUMPTX_CACHE_MAX")
    return DEFAULT_CACHE_MAX if not text else parse_size(text)


def demo_ptx_stubs() -> dict[str, str]:
    """``NUMPTX_DEMO_PTX_STUBS``: the demo's PTX stubs by constant (default none)."""
    text = _raw("NUMPTX_DEMO_PTX_STUBS")
    if not text:
        return {}
    forms = f"it takes {_BY_NAME['NUMPTX_DEMO_PTX_STUBS'].forms}"
    try:
        got = json.loads(text)
    except ValueError:
        raise ConfigError("NUMPTX_DEMO_PTX_STUBS", text[:80], forms) from None
    if not isinstance(got, dict) or not all(isinstance(v, str) for v in got.values()):
        raise ConfigError("NUMPTX_DEMO_PTX_STUBS", text[:80], forms)
    return got


def markdown() -> str:
    """The knobs as a Markdown page (what ``docs/config.md`` holds)."""
    def cell(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")
    lines = ["# Environment variables", "",
             "<!-- generated by `python -m numptx.config > docs/config.md`; do not edit -->", "",
             "numptx reads these when it uses them (not once at import), so a change takes effect "
             "at the next use. A value numptx cannot read is a `numptx.config.ConfigError` naming "
             "the variable and the forms it takes.", "",
             "| variable | default | takes | what it does |", "|---|---|---|---|"]
    lines += [f"| `{k.name}` | {cell(k.default)} | {cell(k.forms)} | {cell(k.doc)} |"
              for k in KNOBS]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - python -m numptx.config > docs/config.md
    sys.stdout.write(markdown())
