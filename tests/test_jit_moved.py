"""jit's modules live in subpackages that show the pipeline (compile, templates, numba,
populations, tune; issue 24 item 3); their flat paths of before (``numptx.jit.pack``) stay
working as the same module objects (numptx.jit.moved)."""
from __future__ import annotations

import importlib
import os
import pickle
import subprocess
import sys

import pytest

from numptx.jit import moved

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "numptx", "jit")
OLD = sorted(moved.HOMES)


def test_groups_match_the_folders():
    """Every module of a subpackage is in GROUPS, and every GROUPS entry is a file there."""
    for group, names in moved.GROUPS.items():
        files = {f[:-3] for f in os.listdir(os.path.join(ROOT, group))
                 if f.endswith(".py") and f != "__init__.py"}
        assert files == set(names), group
    flat = {f[:-3] for f in os.listdir(ROOT) if f.endswith(".py")}
    assert not flat & set(moved.HOMES), "a module both flat and in a subpackage"


@pytest.mark.parametrize("name", OLD)
def test_old_path_is_the_new_module(name):
    new = importlib.import_module(moved.home(f"numptx.jit.{name}"))
    old = importlib.import_module(f"numptx.jit.{name}")
    assert old is new
    assert old.__spec__.name == new.__name__ == moved.home(f"numptx.jit.{name}")
    import numptx.jit
    assert getattr(numptx.jit, name) is new


def test_from_import_and_monkeypatch_through_the_old_path(monkeypatch):
    from numptx.jit.nvrtc import cuda_to_ptx
    from numptx.jit.compile import nvrtc
    assert cuda_to_ptx is nvrtc.cuda_to_ptx
    monkeypatch.setattr("numptx.jit.nvrtc.cuda_to_ptx", "patched")
    assert nvrtc.cuda_to_ptx == "patched"


def test_pickles_naming_an_old_path_load():
    from numptx.jit.compile.resources import Resources
    assert b"numptx.jit.compile.resources" in pickle.dumps(Resources)
    old = b"cnumptx.jit.resources\nResources\n."     # protocol 0: GLOBAL module\nname\n, STOP
    assert pickle.loads(old) is Resources


def test_reload_keeps_the_module_its_own_spec():
    mod = importlib.import_module("numptx.jit.arch")
    assert importlib.reload(mod) is mod
    assert mod.__spec__.name == "numptx.jit.compile.arch"


def test_unknown_names_still_fail():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("numptx.jit.no_such_module")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("numptx.jit.compile.pack")     # pack lives in populations
    assert moved.home("numptx.pack") is None and moved.home("numptx.jit.compile.arch") is None


def test_an_old_path_in_a_fresh_process_imports_nothing_else():
    """``import numptx.jit.arch`` through the old path loads arch and nothing heavy."""
    code = ("import sys, numptx.jit.arch as a; "
            "print(a.__name__, 'numba' in sys.modules, 'numptx.jit.populations.pack' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["numptx.jit.compile.arch", "False", "False"]
