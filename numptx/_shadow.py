"""Detect a ``numptx`` folder that shadows the installed package.

Python looks in the current folder first (``python -c``, ``python -m``, a script's folder). Run
from the folder that *holds* a clone named ``numptx``, ``import numptx`` finds the clone's root
(no ``__init__.py`` there) and, with an editable install (setuptools' import hook comes after
Python's own path search), makes it an empty *namespace package*: ``nx.kernel`` then fails with
``module 'numptx' has no attribute 'kernel'``, naming nothing. numptx's own entry points (the
CLI and the demo's simulator step) call :func:`shadowing_folder` and say what happened.

>>> shadowing_folder() is None           # run here, numptx is the real package
True
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

__all__ = ["shadowing_folder", "shadow_message", "empty_cwd"]


def shadowing_folder() -> str | None:
    """The folder a namespace-package ``numptx`` was imported from, or ``None`` when
    ``sys.modules['numptx']`` is the real package (it has a ``__file__``)."""
    mod = sys.modules.get("numptx")
    if mod is None or getattr(mod, "__file__", None):
        return None
    path = list(getattr(mod, "__path__", []) or [])
    return path[0] if path else "?"


def shadow_message(folder: str) -> str:
    """What went wrong and the fix, for a ``numptx`` namespace package found at ``folder``."""
    parent = os.path.dirname(os.path.abspath(folder)) or "."
    return (f"'import numptx' found the folder {folder} (a clone of numptx?) instead of the "
            f"installed package: Python looks in the current folder ({parent}) first, and a "
            f"folder without __init__.py imports as an empty namespace package. Run from "
            f"another folder (for example `cd {folder}`), or install without the import hook: "
            f"pip install -e <clone> --config-settings editable_mode=compat")


@contextlib.contextmanager
def empty_cwd() -> Iterator[str]:
    """An empty folder to run a child ``python -m numptx...`` in: the child's first path entry
    (its current folder) then holds nothing that could shadow numptx or the standard library.

    >>> with empty_cwd() as d:
    ...     os.listdir(d)
    []
    """
    with tempfile.TemporaryDirectory(prefix="numptx-") as d:
        yield d
