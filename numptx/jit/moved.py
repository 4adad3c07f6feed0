"""The flat paths of jit's modules (``numptx.jit.pack``, ``numptx.jit.nvrtc``, ...) kept working
after the modules moved into subpackages that show the pipeline:

* ``compile``: CUDA C++ -> PTX -> cubin (NVRTC, nvJitLink), the cubin cache, constant patching,
  batch builds and the farm, and reading cubins (ELF, resources, SASS);
* ``templates``: CUDA C++ templates, their stubs and parameters, and launching their variants;
* ``numba``: ``nx.site`` and ``@nx.kernel`` in numba-cuda kernels, their launches and simulator;
* ``populations``: packs of many candidates in one module, run-time constants, fitness (compiled
  or interpreted, on the CPU or the GPU);
* ``tune``: ``nx.autotune`` and its ranking cache.

An old path is the same module object as its new home, not a copy, so ``import
numptx.jit.pack``, ``from numptx.jit.pack import Pack`` and ``monkeypatch.setattr`` through either
path reach the one module; pickles that name an old path load. New code imports the new paths::

    >>> import numptx.jit.pack, numptx.jit.populations.pack
    >>> numptx.jit.pack is numptx.jit.populations.pack
    True
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

#: subpackage -> the modules that live in it
GROUPS: dict[str, tuple[str, ...]] = {
    "compile": ("arch", "build", "cache", "cache_folder", "cubin_elf", "farm", "nvjitlink",
                "nvrtc", "options", "patch", "plans", "resources", "sass",),
    "templates": ("cuda_launch", "device_tables", "params", "residency", "stub_checks", "stubs",
                  "template",),
    "numba": ("after_import", "kernel", "launch", "launch_plan", "numba_compat", "numba_intrinsic",
              "numba_rewrite", "numba_site", "sim_checks", "sim_waves", "site_spec",),
    "populations": ("fitness", "fitness_checks", "fitness_facts", "fitness_interpret",
                    "interpret_gpu", "interpret_gpu_source", "pack", "pack_kernels",
                    "runtime_constants",),
    "tune": ("autotune", "autotune_args", "autotune_decorator", "autotune_options", "autotune_sim",
             "autotune_types", "tune_cache",),
}
#: a moved module's name -> its subpackage
HOMES: dict[str, str] = {m: g for g, ms in GROUPS.items() for m in ms}


def home(name: str) -> str | None:
    """The new path of an old flat one (``numptx.jit.pack`` -> ``numptx.jit.populations.pack``);
    None for any other name."""
    parent, _, base = name.rpartition(".")
    return f"numptx.jit.{HOMES[base]}.{base}" if parent == "numptx.jit" and base in HOMES else None


class OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old flat path as its new module (one object under both names)."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = home(fullname)
        return None if new is None else importlib.machinery.ModuleSpec(fullname, self,
                                                                       origin=new)

    def __init__(self) -> None:
        self._own: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(str(spec.origin))
        self._own[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system has set the old path's spec on the module: give it back its own
        module.__spec__ = self._own.pop(module.__name__, module.__spec__)


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (``numptx.jit`` does at its import)."""
    if not any(isinstance(f, OldPaths) for f in sys.meta_path):
        sys.meta_path.append(OldPaths())
