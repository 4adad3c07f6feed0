"""Spelling of GPU architectures: every public function takes ``"sm_90"``, ``"sm_90a"``,
``"compute_90"``, ``90``, ``(9, 0)`` or ``(9, 0, "a")`` and means the same thing."""
from __future__ import annotations

import re

from ..errors import NumptxError

_ARCH = re.compile(r"(?:sm_|compute_|lto_)?(\d{2,3})([af]?)\Z")


def normalize_arch(arch: str | int | tuple) -> tuple[int, str]:
    """Return ``(number, suffix)``, e.g. ``normalize_arch("sm_90a") == (90, "a")``.

    >>> normalize_arch((8, 0))
    (80, '')
    """
    if isinstance(arch, tuple):
        if len(arch) in (2, 3) and all(isinstance(v, int) for v in arch[:2]):
            suffix = arch[2] if len(arch) == 3 else ""
            if suffix in ("", "a", "f"):
                return arch[0] * 10 + arch[1], suffix
    elif isinstance(arch, int) and not isinstance(arch, bool):
        if 50 <= arch <= 1299:
            return arch, ""
    elif isinstance(arch, str):
        m = _ARCH.match(arch.strip().lower())
        if m:
            return int(m.group(1)), m.group(2)
    raise NumptxError(f"unknown GPU architecture {arch!r}: write it as 'sm_90', 'sm_90a', 90 or (9, 0)")
