"""One home for infrastructure (issue 24, item 4): the atomic writer and digests
(numptx.files), the environment knobs (numptx.config, docs/config.md), the shared X/y checks
(numptx.data), and their users: the CLI, checkpoints, the caches, the fitness and the search."""
from __future__ import annotations

import ast
import doctest
import hashlib
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import numptx as nx
from numptx import config, data, files
from numptx.cli import main
from numptx.config import ConfigError

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "numptx"

COMMENT_SRC = r'''extern "C" __global__ void k(float* o, const float* a) {
    float x = a[0], z;
    /* PTX_INJECT combine
        in  f32 x
        out f32 z
    */
    o[0] = z;
}
'''


# ---- numptx.files --------------------------------------------------------------------------
@pytest.mark.parametrize("mod", [files, config, data])
def test_module_docstrings_run(mod):
    result = doctest.testmod(mod)
    assert result.failed == 0 and result.attempted > 0


def test_atomic_write_replaces_whole_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"old")
    files.atomic_write(path, [b"new ", b"data"], fsync_folder=True)
    assert path.read_bytes() == b"new data" and os.listdir(tmp_path) == ["f.bin"]


def test_atomic_write_failure_removes_its_temporary_file_and_keeps_the_old(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"old")

    def chunks():
        yield b"half"
        raise RuntimeError("the producer failed")
    with pytest.raises(RuntimeError):
        files.atomic_write(path, chunks())
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["f.bin"]


def test_atomic_write_uses_a_fresh_name_each_time(tmp_path, monkeypatch):
    """Two writers never share a temporary file: each one is created exclusively, with a new
    random name (a name taken already is skipped, never opened)."""
    seen, real = [], os.open

    def spy(path, flags, *a, **kw):
        if flags & os.O_CREAT:
            seen.append((os.path.basename(os.fsdecode(path)), bool(flags & os.O_EXCL)))
        return real(path, flags, *a, **kw)
    monkeypatch.setattr(os, "open", spy)
    for _ in range(3):
        files.atomic_write(tmp_path / "f", b"x", prefix=".f.", suffix=".tmp")
    monkeypatch.undo()
    names = [n for n, _ in seen]
    assert len(set(names)) == 3 and all(excl for _, excl in seen)
    assert all(n.startswith(".f.") and n.endswith(".tmp") for n in names)


def test_atomic_write_replaces_a_symlink_without_writing_through_it(tmp_path):
    target = tmp_path / "precious"
    target.write_bytes(b"keep")
    link = tmp_path / "out"
    os.symlink(target, link)
    files.atomic_write(link, b"mine")
    assert target.read_bytes() == b"keep" and not link.is_symlink()
    assert link.read_bytes() == b"mine"


def test_atomic_write_mode_follows_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        files.atomic_write(tmp_path / "a", b"x")
        files.atomic_write(tmp_path / "b", b"x", mode=0o600)
    finally:
        os.umask(old)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "b").stat().st_mode & 0o777 == 0o600


def test_digest_is_length_prefixed_blake2b():
    h = hashlib.blake2b(digest_size=32)
    for b in (b"ab", b"c"):
        h.update(len(b).to_bytes(8, "little") + b)
    assert files.digest("ab", b"c") == h.hexdigest()
    assert files.digest("ab", "c") != files.digest("a", "bc")
    assert len(files.digest("x", size=16)) == 32
    assert files.checksum(b"a", b"bc") == hashlib.blake2b(b"abc", digest_size=32).digest()


_BLAKE_HOMES = {"numptx/files.py", "numptx/stack_ptx.py", "numptx/search/semantic.py",
                "numptx/search/formula.py", "numptx/search/constants.py",
                "numptx/jit/populations/runtime_constants.py", "numptx/instruction_model.py"}


def _calls(name: str) -> set[str]:
    """Files under numptx/ that call ``<something>.<name>(`` (AST)."""
    out = set()
    for path in PKG.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for n in ast.walk(tree):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == name):
                out.add(path.relative_to(ROOT).as_posix())
    return out


def _os_calls(name: str) -> set[str]:
    """Files under numptx/ that call ``os.<name>(`` (AST)."""
    out = set()
    for path in PKG.rglob("*.py"):
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == name and isinstance(n.func.value, ast.Name)
                    and n.func.value.id == "os"):
                out.add(path.relative_to(ROOT).as_posix())
    return out


def test_one_atomic_writer_and_one_digest_recipe():
    """Only numptx.files renames a temporary file into place; content keys are
    numptx.files.digest (the other blake2b users hash search-internal or encoding bytes)."""
    assert _os_calls("replace") | _os_calls("rename") <= {"numptx/files.py"}
    assert _calls("blake2b") <= _BLAKE_HOMES


# ---- the CLI's writes ----------------------------------------------------------------------
def test_process_leaves_a_users_tmp_file_alone(tmp_path):
    """The output's temporary file has a unique name: a user's file at ``<output>.tmp`` is
    neither overwritten nor moved (the fixed ``.tmp`` name did both)."""
    src = tmp_path / "a.cu"
    src.write_text(COMMENT_SRC)
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.cu.tmp").write_text("the user's notes")
    assert main(["process", str(src), "-o", str(out)]) == 0
    assert (out / "a.cu.tmp").read_text() == "the user's notes"
    assert "asm volatile" in (out / "a.cu").read_text()


def test_process_that_cannot_write_leaves_no_temporary_file(tmp_path, capsys):
    src = tmp_path / "a.cu"
    src.write_text(COMMENT_SRC)
    out = tmp_path / "out"
    (out / "a.cu").mkdir(parents=True)            # a folder where the output goes
    (out / "a.cu" / "x").write_text("")
    assert main(["process", str(src), "-o", str(out)]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert sorted(os.listdir(out)) == ["a.cu"]


def test_cache_info_shows_the_cap_and_a_bad_one_names_the_variable(tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.setenv("NUMPTX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("NUMPTX_CACHE", raising=False)
    monkeypatch.setenv("NUMPTX_CACHE_MAX", "500M")
    assert main(["cache", "info"]) == 0
    assert "cap:       524288000 bytes (500.0 MiB; NUMPTX_CACHE_MAX)" in capsys.readouterr().out
    monkeypatch.setenv("NUMPTX_CACHE_MAX", "lots")
    assert main(["cache", "info"]) == 1
    assert "numptx cache: error: NUMPTX_CACHE_MAX='lots': it takes" in capsys.readouterr().err


# ---- numptx.config ---------------------------------------------------------------------------
def test_every_numptx_variable_read_is_in_the_table():
    """Every NUMPTX_* name in the package's Python code is a knob of numptx.config, and only
    numptx.config reads os.environ for one."""
    names, readers = set(), set()
    for path in PKG.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                names.update(w for w in _words(n.value) if w.startswith("NUMPTX_"))
            if (isinstance(n, ast.Subscript) or isinstance(n, ast.Call)) and "environ" in \
                    ast.unparse(n) and "NUMPTX_" in ast.unparse(n):
                readers.add(path.relative_to(ROOT).as_posix())
    known = {k.name for k in config.KNOBS}
    assert names <= known, names - known
    assert readers <= {"numptx/config.py", "numptx/demo.py"}, readers   # demo: sets it for a child


def _words(s: str) -> set[str]:
    import re
    return set(re.findall(r"NUMPTX_[A-Z_]+[A-Z]", s))


def test_docs_config_md_is_current():
    """docs/config.md is what ``python -m numptx.config`` prints (regenerate it so)."""
    res = subprocess.run([sys.executable, "-m", "numptx.config"], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert (ROOT / "docs" / "config.md").read_text(encoding="utf-8") == res.stdout
    for k in config.KNOBS:
        assert f"`{k.name}`" in res.stdout


@pytest.mark.parametrize("value, want", [("", True), ("1", True), ("ON", True), (" yes ", True),
                                         ("true", True), ("0", False), ("Off", False),
                                         ("no", False), ("FALSE", False)])
def test_numptx_cache_forms(monkeypatch, value, want):
    monkeypatch.setenv("NUMPTX_CACHE", value)
    assert config.cache_enabled() is want


def test_a_bad_numptx_cache_names_the_variable_and_the_forms(monkeypatch):
    monkeypatch.setenv("NUMPTX_CACHE", "maybe")
    with pytest.raises(ConfigError, match=r"NUMPTX_CACHE='maybe': it takes 1, on.*0, off") as e:
        config.cache_enabled()
    assert isinstance(e.value, nx.NumptxError) and e.value.variable == "NUMPTX_CACHE"
    with pytest.raises(ConfigError, match="NUMPTX_CACHE="):       # at use: the default cache
        nx.default_cache()


@pytest.mark.parametrize("value, want", [("", 2 << 30), ("4096", 4096), ("500M", 500 << 20),
                                         ("2G", 2 << 30), ("2gib", 2 << 30), ("1.5GB", 3 << 29),
                                         ("64k", 64 << 10), ("0", None), ("none", None),
                                         ("NONE", None), ("1T", 1 << 40),
                                         ("0.0", None), ("0.1", 1)])
def test_numptx_cache_max_forms(monkeypatch, value, want):
    monkeypatch.setenv("NUMPTX_CACHE_MAX", value)
    assert config.cache_max() == want


@pytest.mark.parametrize("value", ["lots", "-5M", "5X", "1e9", "M", "2 G B"])
def test_a_bad_numptx_cache_max_names_the_variable_and_the_forms(monkeypatch, value):
    monkeypatch.setenv("NUMPTX_CACHE_MAX", value)
    with pytest.raises(ConfigError, match=r"NUMPTX_CACHE_MAX=.*500M, 2G.*0 / none"):
        config.cache_max()


def test_numptx_cache_dir_is_read_at_use(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMPTX_CACHE_DIR", str(tmp_path / "a"))
    assert config.cache_dir() == str(tmp_path / "a")
    monkeypatch.setenv("NUMPTX_CACHE_DIR", "~/x")
    assert config.cache_dir() == os.path.expanduser("~/x")
    monkeypatch.setenv("NUMPTX_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert config.cache_dir() == str(tmp_path / "xdg" / "numptx")


def test_bad_demo_stubs_name_the_variable(monkeypatch):
    monkeypatch.setenv("NUMPTX_DEMO_PTX_STUBS", "{not json")
    with pytest.raises(ConfigError, match="NUMPTX_DEMO_PTX_STUBS=.*JSON object"):
        config.demo_ptx_stubs()
    monkeypatch.setenv("NUMPTX_DEMO_PTX_STUBS", '{"1.5": "mov.f32 %v_z, %v_x;"}')
    assert config.demo_ptx_stubs() == {"1.5": "mov.f32 %v_z, %v_x;"}


def test_a_bad_cap_given_to_a_cache_is_a_numptx_error(tmp_path):
    with pytest.raises(nx.NumptxError, match=r"max_bytes.*500M"):
        nx.CubinCache(str(tmp_path), max_bytes="plenty")
    with pytest.raises(nx.NumptxError, match=r"max_bytes=-1"):
        nx.CubinCache(str(tmp_path), max_bytes=-1)
    assert nx.CubinCache(str(tmp_path), max_bytes="1M").cap() == 1 << 20
    assert nx.CubinCache(str(tmp_path), max_bytes=0).cap() is None


# ---- numptx.data: one home for the X/y checks --------------------------------------------------
BAD_DATA = [
    (np.zeros((0, 2)), np.zeros(0),
     r"X must be an \(n samples, d columns\) array with n, d >= 1; got shape"),
    (np.zeros((4, 2)), np.zeros(3), r"y has shape \(3,\); X has 4 samples.*one target per sample"),
    (np.array([["a"], ["b"]]), np.zeros(2), "X holds <U1 values; it takes real numbers"),
    (np.array([[1.0], [np.inf]]), np.zeros(2), r"X holds 1 non-finite value.*index \(1, 0\)"),
    (np.array([[1e39], [1.0]]), np.zeros(2), r"X holds 1 value\(s\) that overflow f32, past the "
                                             r"f32 range"),
]


@pytest.mark.parametrize("X, y, match", BAD_DATA)
def test_fitness_and_the_search_check_data_alike(X, y, match):
    """The fitness kernel's and the search's checks are one: the same fault, the same words,
    each under its own error class and site."""
    from numptx.jit.populations.fitness import FitnessError, prepare
    from numptx.search import SearchError
    from numptx.search.evaluate import check_data
    with pytest.raises(SearchError, match="regress: " + match):
        check_data(X, y, dtype="f32")
    with pytest.raises(FitnessError, match="fitness: " + match):
        prepare(["mov.f32 %v_p, %v_x0;"], X, y)


def test_check_data_keeps_its_conversions():
    from numptx.search.evaluate import check_data
    X, y = check_data([1, 2, 3], [1, 2, 3])
    assert X.dtype == y.dtype == np.float32 and X.shape == (3, 1) and X.flags.c_contiguous
    X, y = check_data(np.ones((3, 2)), [1, 2, 3])
    assert X.dtype == y.dtype == np.float64


def test_config_error_is_public():
    import numptx as nx
    assert nx.ConfigError is ConfigError and issubclass(nx.ConfigError, nx.NumptxError)
    assert "ConfigError" in nx.__all__
