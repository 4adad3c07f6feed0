"""Compiler and linker options as numptx takes them: one string or an iterable of strings."""
from __future__ import annotations

import os
from collections.abc import Iterable

from ...errors import NumptxError


def option_list(value: str | os.PathLike | Iterable[str] | None, what: str) -> tuple[str, ...]:
    """``value`` as a tuple of strings. One string is one option (``"-lineinfo"``), never its
    characters; ``None`` is none. Anything else names ``what`` in a :class:`NumptxError`.

    >>> option_list("-lineinfo", "link_options"), option_list(["-O3", "-lineinfo"], "options")
    (('-lineinfo',), ('-O3', '-lineinfo'))
    """
    if value is None:
        return ()
    if isinstance(value, (str, os.PathLike)):
        return (os.fspath(value),)
    if isinstance(value, (bytes, bytearray)):
        raise NumptxError(f"{what}: give str options, not {type(value).__name__}")
    try:
        items = tuple(value)
    except TypeError:
        raise NumptxError(f"{what} takes a string or a list of strings, not "
                          f"{type(value).__name__}") from None
    for i, item in enumerate(items):
        if not isinstance(item, (str, os.PathLike)):
            raise NumptxError(f"{what}[{i}] is {type(item).__name__} {item!r}: options are strings")
    return tuple(os.fspath(item) for item in items)
