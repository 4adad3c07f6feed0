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

import os
import sys

__all__ = ["shadowing_folder", "shadow_message", "safe_cwd"]


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


def safe_cwd() -> str:
    """A working folder for a child ``python -m numptx...`` where ``numptx`` is the real
    package: the folder that holds the imported package itself."""
    here = os.path.dirname(os.path.abspath(__file__))        # .../numptx
    return os.path.dirname(here)
