"""The Python blocks of README.md and docs/*.md run as written, so the documentation cannot rot.

Each file runs in a fresh subprocess, its blocks in order in one namespace (a later block may use
names an earlier one made), with a private ``NUMPTX_CACHE_DIR``. An HTML comment on the line
before a block's fence tags it:

- ``<!-- doctest: skip -->``: an API overview with placeholders (``{...}``), never run;
- ``<!-- doctest: gpu -->``: launches a kernel, so it runs only on a GPU (marker ``gpu``);
- ``<!-- doctest: sim -->`` (with ``gpu`` or without): part of the file's simulator run, which
  runs just the ``sim`` blocks, in order, under numba-cuda's CUDA simulator on the CPU.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                              if f.endswith(".md"))
_BLOCK = re.compile(r"(?:^[ \t]*<!-- doctest: ([a-z ]+) -->\n)?^([ \t]*)```python\n(.*?)^\2```",
                    re.M | re.S)
_TAGS = {"skip", "gpu", "sim"}


def doc_blocks(path: str) -> list[tuple[int, set[str], str]]:
    """(line of the first code line, tags, dedented code) for each ```python block of ``path``."""
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    blocks = []
    for m in _BLOCK.finditer(text):
        tags = set((m.group(1) or "").split())
        assert tags <= _TAGS, f"{path}: unknown doctest tags {sorted(tags - _TAGS)}"
        line = text.count("\n", 0, m.start(3)) + 1
        blocks.append((line, tags, textwrap.dedent(m.group(3))))
    return blocks


# Runs the blocks handed to it as JSON on stdin; stops at the first failure and names its line.
_RUNNER = r"""
import json, sys, traceback
path, blocks = json.load(sys.stdin)
ns = {"__name__": "__main__"}
for line, code in blocks:
    try:
        exec(compile("\n" * (line - 1) + code, path, "exec"), ns)
    except BaseException:
        print(f"FAILED: the block at {path}:{line}", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


def _run(path: str, blocks: list[tuple[int, str]], tmp_path, simulator: bool) -> None:
    env = dict(os.environ, NUMPTX_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    res = subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps([path, blocks]),
                         capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]


@pytest.mark.parametrize("path", DOCS)
def test_doc_blocks_run_on_the_cpu(path, tmp_path):
    blocks = [(line, code) for line, tags, code in doc_blocks(path) if not tags & {"skip", "gpu"}]
    if not blocks:
        pytest.skip(f"{path} has no block that runs without a GPU")
    _run(path, blocks, tmp_path, simulator=False)


@pytest.mark.parametrize("path", DOCS)
def test_doc_launch_blocks_run_in_the_simulator(path, tmp_path):
    blocks = [(line, code) for line, tags, code in doc_blocks(path) if "sim" in tags]
    if not blocks:
        pytest.skip(f"{path} has no block for the simulator")
    _run(path, blocks, tmp_path, simulator=True)


@pytest.mark.gpu
@pytest.mark.parametrize("path", DOCS)
def test_doc_blocks_run_on_the_gpu(path, tmp_path):
    blocks = [(line, code) for line, tags, code in doc_blocks(path) if "skip" not in tags]
    if not blocks:
        pytest.skip(f"{path} has no Python block")
    _run(path, blocks, tmp_path, simulator=False)


def test_every_tag_is_known_and_some_blocks_run():
    runnable = sum(1 for p in DOCS for _, tags, _ in doc_blocks(p) if not tags & {"skip", "gpu"})
    assert runnable >= 10


def test_printed_graphs_in_the_docs_are_what_print_shows(tmp_path):
    # a "print(<f>.graph)" line followed by "# graph ..." comment lines shows that output; the
    # blocks run in order, then each printed graph is compared line by line (locations aside)
    for path in DOCS:
        blocks = [(ln, code) for ln, tags, code in doc_blocks(path) if not tags & {"skip", "gpu"}]
        shown = []
        for _, code in blocks:
            lines = code.splitlines()
            for i, line in enumerate(lines):
                m = re.match(r"print\((\w+)\.graph\)", line)
                if m and i + 1 < len(lines) and lines[i + 1].startswith("# graph "):
                    body = [ln[2:] for ln in lines[i + 1:] if ln.startswith("# ")]
                    shown.append((m.group(1), [ln.split("   # ")[0] for ln in body]))
        if not shown:
            continue
        src = "\n".join(code for _, code in blocks)
        probe = src + "\nimport json as _j\nprint('@@' + _j.dumps({k: [ln.split('   # ')[0] " \
            "for ln in str(globals()[k].graph).splitlines()] for k in %r}))" % [k for k, _ in shown]
        r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           env=dict(os.environ, NUMPTX_CACHE_DIR=str(tmp_path / "c")), timeout=600)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout.split("@@")[-1])
        for name, lines in shown:
            assert got[name][:len(lines)] == lines, (path, name, got[name])
