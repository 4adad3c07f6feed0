"""Spelling of GPU architectures: every public function takes ``"sm_90"``, ``"sm_90a"``,
``"compute_90"``, ``90``, ``(9, 0)`` or ``(9, 0, "a")`` and means the same thing."""
from __future__ import annotations

import re

from ...errors import NumptxError

_ARCH = re.compile(r"(?:sm_|compute_|lto_)?([1-9]\d{1,2})([af]?)\Z")
#: the largest major version taken (the toolchain in use says which ones it supports)
_MAX_MAJOR = 19


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def normalize_arch(arch: str | int | tuple) -> tuple[int, str]:
    """Return ``(number, suffix)``, e.g. ``normalize_arch("sm_90a") == (90, "a")``.

    >>> normalize_arch((8, 0))
    (80, '')
    """
    if isinstance(arch, tuple):
        if (len(arch) in (2, 3) and all(_is_int(v) for v in arch[:2])
                and 1 <= arch[0] <= _MAX_MAJOR and 0 <= arch[1] <= 9):
            suffix = arch[2] if len(arch) == 3 else ""
            if suffix in ("", "a", "f"):
                return arch[0] * 10 + arch[1], suffix
    elif _is_int(arch):
        if 10 <= arch <= _MAX_MAJOR * 10 + 9:
            return arch, ""
    elif isinstance(arch, str):
        m = _ARCH.match(arch.strip().lower())
        if m and int(m.group(1)) <= _MAX_MAJOR * 10 + 9:
            return int(m.group(1)), m.group(2)
    raise NumptxError(f"unknown GPU architecture {arch!r}: write it as 'sm_90', 'sm_90a', 90 or "
                      f"(9, 0) (major 1-{_MAX_MAJOR}, minor 0-9)")
