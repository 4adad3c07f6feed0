"""The numptx command line: process, sites, demo (real NVRTC and nvJitLink)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from numptx.cli import main

COMMENT_SRC = r'''extern "C" __global__ void k(float* o, const float* a) {
    float x = a[0], z;
    /* PTX_INJECT combine
        in  f32 x
        out f32 z
    */
    o[0] = z;
}
'''


def test_process_writes_inline_asm_and_keeps_lines(tmp_path, capsys):
    src = tmp_path / "a.cu"
    src.write_text(COMMENT_SRC)
    out_dir = tmp_path / "out"
    assert main(["process", str(src), "-o", str(out_dir)]) == 0
    result = (out_dir / "a.cu").read_text()
    assert "asm volatile" in result and "PTX_INJECT_BEGIN combine" in result
    assert result.count("\n") == COMMENT_SRC.count("\n")          # line numbers preserved
    assert "a.cu ->" in capsys.readouterr().out
    # the processed file compiles without numptx's header and has the site
    import numptx as nx
    from numptx.jit.compile import nvrtc
    ptx = nvrtc.cuda_to_ptx(result)
    assert list(nx.PtxInject(ptx).sites) == ["combine"]


def test_process_refuses_to_overwrite_input(tmp_path):
    src = tmp_path / "a.cu"
    src.write_text(COMMENT_SRC)
    with pytest.raises(SystemExit, match="refusing"):
        main(["process", str(src), "-o", str(tmp_path)])


def test_process_reports_annotation_errors(tmp_path, capsys):
    src = tmp_path / "bad.cu"
    src.write_text(COMMENT_SRC.replace("in  f32 x", "in  f99 x"))
    assert main(["process", str(src), "-o", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "bad.cu:4" in err and "f99" in err
    assert not (tmp_path / "o" / "bad.cu").exists()


def test_sites_lists_sites_of_cu_and_ptx(tmp_path, capsys):
    src = tmp_path / "k.cu"
    src.write_text(COMMENT_SRC)
    assert main(["sites", str(src)]) == 0
    out = capsys.readouterr().out
    assert "combine(in f32 x, out f32 z)  x1" in out and "%v_z" in out
    import numptx as nx
    ptx_file = tmp_path / "k.ptx"
    ptx_file.write_text(nx.cuda_to_ptx(COMMENT_SRC))
    assert main(["sites", str(ptx_file)]) == 0
    assert "combine(in f32 x, out f32 z)" in capsys.readouterr().out


def test_demo_runs_as_a_console_script():
    exe = os.path.join(os.path.dirname(sys.executable), "numptx")
    cmd = [exe, "demo"] if os.path.exists(exe) else [sys.executable, "-m", "numptx.cli", "demo"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "combine(in f32 x, in f32 y, out f32 z)" in res.stdout
    assert "assemble 'hypot'" in res.stdout and "cubin" in res.stdout
    # errors in ulps of the terms: a cancelling sum near zero is not thousands of ulp
    ulps = [float(ln.split("(")[1].split(" ulp")[0]) for ln in res.stdout.splitlines()
            if "ulp of the terms" in ln]
    assert len(ulps) == 8 and max(ulps) <= 4, res.stdout


def test_cli_version(capsys):
    from numptx.cli import main
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"numptx {nx_version()}"


def nx_version() -> str:
    import numptx
    return numptx.__version__
