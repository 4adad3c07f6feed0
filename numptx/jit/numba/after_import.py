"""Post-import hooks: run a function once a module has been imported, without importing it.

``import numptx`` must not pay for ``numba.cuda`` (about a second), yet ``nx.site`` needs its
numba IR rewrite registered before numba-cuda compiles any kernel, including plain ``@cuda.jit``
kernels and ``cuda.compile_ptx`` calls, which load no extension entry points. So registration
follows numba.cuda's import::

    from numptx.jit.numba.after_import import when_imported
    when_imported("numba.cuda", register)   # now if imported already, else right after its import

A finder at the front of ``sys.meta_path`` lets the other finders (numba-cuda's redirector
included) find the module, wraps the loader's ``exec_module`` and puts the original loader back
once the module has run. The function runs inside the module's import (the import lock is held),
so it must not start threads that import it; an exception it raises is turned into a warning so
that the import itself still succeeds.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
import warnings
from collections.abc import Callable
from types import ModuleType

__all__ = ["when_imported"]

_lock = threading.Lock()


def when_imported(name: str, fn: Callable[[], None]) -> None:
    """Call ``fn()`` now if module ``name`` is imported, else right after it is (once)."""
    with _lock:
        if name not in sys.modules:
            finder = next((f for f in sys.meta_path if isinstance(f, _Finder)), None)
            if finder is None:
                finder = _Finder()
                sys.meta_path.insert(0, finder)
            finder.hooks.setdefault(name, []).append(fn)
            return
    _run(name, fn)


def _run(name: str, fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception as e:   # noqa: BLE001 - never break the user's import of `name`
        warnings.warn(f"numptx: the hook run after importing {name} failed: "
                      f"{type(e).__name__}: {e}", RuntimeWarning, stacklevel=2)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of the modules that have hooks."""

    def __init__(self):
        self.hooks: dict[str, list[Callable[[], None]]] = {}
        self._busy = threading.local()      # our own find_spec call must not come back here

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.hooks or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Loader(spec.loader, self, fullname)
        return spec

    def fire(self, name: str) -> None:
        with _lock:
            fns = self.hooks.pop(name, [])
            if not self.hooks and self in sys.meta_path:
                sys.meta_path.remove(self)
        for fn in fns:
            _run(name, fn)


class _Loader(importlib.abc.Loader):
    """The original loader, then the hooks; the original is put back once the module ran."""

    def __init__(self, loader, finder: _Finder, name: str):
        self.loader, self.finder, self.name = loader, finder, name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        try:
            self.loader.exec_module(module)
        finally:
            if getattr(module, "__loader__", None) is self:
                module.__loader__ = self.loader
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.loader is self:
                spec.loader = self.loader
        self.finder.fire(self.name)

    def __getattr__(self, attr):
        return getattr(self.loader, attr)
