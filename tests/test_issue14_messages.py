"""Issue 14, items 11, 12, 14, 15, 16: annotations, encoded input order, error messages, the
command line and the docs' numbers (real NVRTC and nvJitLink where they compile)."""
from __future__ import annotations

import __future__

import numpy as np
import pytest

import numptx as nx
from numptx import ast_ptx


def _formula(src: str, future: bool):
    flags = __future__.annotations.compiler_flag if future else 0
    glb = {"nx": nx}
    exec(compile(src, "<formula>", "exec", flags=flags, dont_inherit=True), glb)
    return glb["f"]


@pytest.mark.parametrize("future", [False, True])
def test_python_type_annotations_mean_numpy_types_with_or_without_future(future):
    # item 11: NumPy's float is float64, int int64, bool bool: the same with postponed annotations
    f = nx.ptx_expr(_formula("def f(x: float, n: int, b: bool) -> float:\n"
                             "    return x + nx.f64(n)\n", future))
    assert f.params == {"x": nx.f64, "n": nx.s64, "b": nx.pred}
    assert f.returns in (float, "float")
    assert f(1.5, 2, True).dtype == np.float64


# ---- item 12: an encoding binds its inputs by name ------------------------------------------
SITE_SRC = r'''extern "C" __global__ void k(float* o, const float* a, const float* b) {
    float x = a[0], y = b[0], z;
    PTX_INJECT("combine", PTX_IN(F32, x), PTX_IN(F32, y), PTX_OUT(F32, z));
    o[0] = z;
}'''


@pytest.fixture(scope="module")
def combine():
    from numptx.jit.compile import nvrtc
    return nx.PtxInject(nvrtc.cuda_to_ptx(SITE_SRC)).sites["combine"]


def _run(stub, combine):
    vals = {"v_x": np.float32([7, 1]), "v_y": np.float32([2, 5])}
    return nx.emulate(str(stub), vals, outputs=["v_z"])["v_z"].tolist()


def test_encode_without_names_works_for_named_inputs(combine):
    from numptx import stack_ptx as sp
    prog = [sp.input("x"), sp.input("y"), sp.instr("sub.rn.f32")]      # x - y
    words = sp.encode(prog)                                              # the README's call
    assert words.dtype == np.uint64 and tuple(words.inputs) == ("x", "y")
    assert sp.decode(words) == prog
    assert _run(sp.compile(words, site=combine), combine) == [5.0, -4.0]


def test_encode_in_another_order_than_the_site_binds_by_name(combine):
    from numptx import stack_ptx as sp
    prog = [sp.input("x"), sp.input("y"), sp.instr("sub.rn.f32")]      # x - y
    want = _run(sp.compile(prog, site=combine), combine)
    swapped = sp.encode(prog, ["y", "x"])
    assert _run(sp.compile(swapped, site=combine), combine) == want
    assert [_run(s, combine) for s in sp.compile_many([swapped, prog, swapped[:]],
                                                       site=combine)] == [want] * 3
    assert _run(sp.compile(sp.encode(prog, site=combine), site=combine), combine) == want
    # a name the site lacks is an error that says how to encode for the site
    with pytest.raises(sp.ProgramError, match=r"'w'.*site=site"):
        sp.compile(sp.encode([sp.input("w")], ["w"]), site=combine)


def test_a_plain_array_of_an_encoding_still_binds_by_name(combine, tmp_path):
    """The names travel in the words (INPUT name tags): np.asarray, np.save/np.load and
    np.concatenate drop the Encoded attribute but not the binding."""
    from numptx import stack_ptx as sp
    prog = [sp.input("x"), sp.input("y"), sp.instr("sub.rn.f32")]      # x - y
    want = _run(sp.compile(prog, site=combine), combine)
    plain = np.asarray(sp.encode(prog, ["y", "x"]))
    assert type(plain) is np.ndarray and not hasattr(plain, "inputs")
    np.save(tmp_path / "p.npy", plain)
    loaded = np.load(tmp_path / "p.npy")
    halves = np.concatenate([sp.encode(prog[:1], ["y", "x"]), sp.encode(prog[1:], ["x", "y"])])
    for words in (plain, loaded, halves):
        assert _run(sp.compile(words, site=combine), combine) == want
        assert _run(sp.compile(words, inputs={"y": "f32", "x": "f32"}, outputs={"z": "f32"})
                    .replace("%x", "%v_x").replace("%y", "%v_y").replace("%z", "%v_z"),
                    combine) == want
    assert [_run(s, combine) for s in sp.compile_many([plain, loaded], site=combine)] == [want] * 2
    assert _run(ast_ptx.compile(plain, site=combine), combine) == want
    assert sp.decode(plain, ["x", "y"]) == prog == sp.decode(plain, ["y", "x"])
    # by index stays by position; so do words from before the tags (b = 0)
    assert _run(sp.compile([sp.input(1), sp.input(0), sp.instr("sub.rn.f32")], site=combine),
                combine) == [-5.0, 4.0]
    untagged = plain & np.uint64(0xFFFFFFFF)
    assert _run(sp.compile(untagged, site=combine), combine) == [-5.0, 4.0]


def test_a_plain_array_naming_an_input_the_site_lacks_is_an_error(combine):
    from numptx import stack_ptx as sp
    words = np.asarray(sp.encode([sp.input("x"), sp.input("w"), sp.instr("add.rn.f32")]))
    for call in (lambda: sp.compile(words, site=combine),
                 lambda: ast_ptx.compile(words, site=combine)):
        with pytest.raises(sp.ProgramError, match=r"word 1 reads an input \(name tag 0x[0-9a-f]{8}\)"
                                                  r", which site .combine. does not have \(inputs: "
                                                  r"'x', 'y'\).*site=site"):
            call()
    with pytest.raises(sp.ProgramError, match=r"compile_many: program 1: word 1"):
        sp.compile_many([sp.encode([sp.input("x")]), words], site=combine)
    # decode keeps a word whose name it is not told as it is: the compile binds it by its tag
    ops = sp.decode(words, ["x", "y"])
    assert ops[0] == sp.input("x") and repr(ops[1]).startswith("input(1, tag=0x")
    assert sp.loads(sp.dumps(ops)) == ops and sp.encode(ops).tolist() == words.tolist()
    with pytest.raises(sp.ProgramError, match=r"program: word 1 reads an input"):
        sp.compile(ops, site=combine)
    # an int64 view (the same bits) names the same word and tag
    with pytest.raises(sp.ProgramError, match=r"compile_many: program 1: word 1 reads an input "
                                              r"\(name tag 0x[0-9a-f]{8}\)"):
        sp.compile_many([[sp.input("x")], words.view(np.int64)], site=combine)


def test_an_encoding_pickled_before_the_tags_binds_by_its_names(combine):
    """An Encoded pickled by numptx before the name tags: untagged words and .inputs (its old
    state is (array state, inputs)); unpickling tags the words from .inputs."""
    import pickle
    from numptx import stack_ptx as sp
    from numptx._program.encoding import Encoded
    prog = [sp.input("x"), sp.input("y"), sp.instr("sub.rn.f32")]      # x - y
    new = sp.encode(prog, ["y", "x"])
    old = (new & np.uint64(0xFFFFFFFF)).view(Encoded)
    fn, args, state = old.__reduce__()
    legacy = fn(*args)
    legacy.__setstate__((state[0], ("y", "x")))
    assert legacy.tolist() == new.tolist() and legacy.inputs == ("y", "x")
    want = _run(sp.compile(prog, site=combine), combine)
    assert _run(sp.compile(legacy, site=combine), combine) == want
    assert _run(sp.compile(pickle.loads(pickle.dumps(new)), site=combine), combine) == want


def test_inputs_whose_names_share_a_tag_refuse_tagged_words():
    from numptx import stack_ptx as sp
    from numptx._program import input_tag
    assert input_tag("plumless") == input_tag("buckeroo")          # a CRC-32 collision
    prog = [sp.input("buckeroo"), sp.input("plumless"), sp.instr("sub.rn.f32")]
    io = {"plumless": "f32", "buckeroo": "f32"}
    want = sp.compile(prog, io, {"z": "f32"})                       # ops bind by name: fine
    assert "%buckeroo, %plumless" in want
    with pytest.raises(sp.ProgramError, match="share that name tag.*list of ops"):
        sp.compile(sp.encode(prog, ["buckeroo", "plumless"]), io, {"z": "f32"})


def test_dumps_of_the_old_format_still_loads():
    """Version 1 (before the tags): untagged words, bound through the stored names."""
    import hashlib
    import struct
    from numptx import stack_ptx as sp
    prog = [sp.input("y"), sp.input("x"), sp.instr("sub.rn.f32")]
    body = bytearray(sp.dumps(prog)[:-8])
    assert struct.unpack_from("<H", body, 4)[0] == 2                # magic, then the version
    struct.pack_into("<H", body, 4, 1)
    words = np.frombuffer(bytes(body[-8 * len(prog):]), "<u8") & np.uint64(0xFFFFFFFF)
    body[-8 * len(prog):] = words.astype("<u8").tobytes()
    v1 = bytes(body)
    assert sp.loads(v1 + hashlib.blake2b(v1, digest_size=8).digest()) == prog


# ---- item 14: messages that say what to do ----------------------------------------------------
@pytest.fixture(scope="module")
def tmpl():
    return nx.CudaTemplate(SITE_SRC, entry="k", cache=False)


def test_plain_function_as_stub_says_ptx_expr(tmpl):
    def add(x, y):
        return x + y
    with pytest.raises(nx.NumptxError, match=r"plain function 'add'.*@nx\.ptx_expr"):
        tmpl.inject(combine=add).cubin


def test_variable_name_instead_of_register_says_the_v_rule(tmpl, combine):
    with pytest.raises(nx.LinkError, match=r"%z is not a register.*%v_<name>.*write %v_z"):
        tmpl.inject(combine="add.f32 %z, %v_x, %v_y;").cubin
    # a register the stub declares itself, and special registers, are the stub's own business
    ok = "{ .reg .f32 %z; add.f32 %z, %v_x, %v_y; mov.f32 %v_z, %z; }"
    assert tmpl.inject(combine=ok).cubin
    from numptx.jit.templates.stubs import resolve_stub
    assert resolve_stub("mov.u32 %v_z, %tid.x;", combine)


def test_unquoted_macro_site_name_says_quote_it():
    src = SITE_SRC.replace('PTX_INJECT("combine"', "PTX_INJECT(combine")
    with pytest.raises(nx.CompileError, match=r"numptx_template\.cu:3: .*quote the site name: "
                                              r"PTX_INJECT\(\"combine\""):
        nx.CudaTemplate(src, entry="k", cache=False)
    # a name that is a macro for a string literal stays legal
    ok = '#define SITE "combine"\n' + src.replace("PTX_INJECT(combine", "PTX_INJECT(SITE")
    assert list(nx.CudaTemplate(ok, entry="k", cache=False).sites) == ["combine"]


def test_formatting_a_traced_value_is_a_trace_error():
    @nx.ptx_expr
    def f(x: nx.f32):
        label = f"{x:.3f}"          # noqa: F841
        return x
    with pytest.raises(nx.TraceError, match=r"formatting a traced value.*'\.3f'"):
        f.graph


def test_arch_given_as_cuda_template_entry_says_arch():
    with pytest.raises(nx.NumptxError, match=r"'sm_90' looks like an architecture; pass it as "
                                             r"arch='sm_90'"):
        nx.CudaTemplate(SITE_SRC, "sm_90", cache=False)
    with pytest.raises(nx.NumptxError, match=r"looks like an architecture: pass arch=\(9, 0\)"):
        nx.CudaTemplate(SITE_SRC, (9, 0), cache=False)


# ---- item 15: the command line -----------------------------------------------------------------
TWO_SITES = SITE_SRC.replace("float x = a[0]", "double accumulator = 0; float x = a[0]").replace(
    "o[0] = z;", 'PTX_INJECT("a_longer_site", PTX_MOD(F64, accumulator), PTX_IN(F32, z));\n'
                 "    o[0] = z + (float)accumulator;")


def test_cli_sites_refuses_a_python_file(tmp_path, capsys):
    from numptx.cli import main
    py = tmp_path / "kernels.py"
    py.write_text("import numptx as nx\n")
    assert main(["sites", str(py)]) == 2
    err = capsys.readouterr().err
    assert "is a Python file" in err and ".cu" in err and "NVRTC" not in err


def test_cli_sites_columns_line_up(tmp_path, capsys):
    from numptx.cli import main
    src = tmp_path / "k.cu"
    src.write_text(TWO_SITES)
    assert main(["sites", str(src)]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("    ")]
    assert len(rows) == 5
    assert len({ln.index("%v_") for ln in rows}) == 1          # the register column is aligned
    assert len({ln.index(ln.split()[2]) for ln in rows}) == 1  # and so is the name column


def test_cli_sites_into_a_closed_pipe_is_quiet(tmp_path):
    import subprocess
    import sys
    src = tmp_path / "k.cu"
    src.write_text(TWO_SITES)
    p = subprocess.Popen([sys.executable, "-m", "numptx.cli", "sites", str(src)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()                    # the reader is gone before the first line is written
    err = p.stderr.read().decode()
    p.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


@pytest.mark.parametrize("command", ["demo", "process", "sites", "cache"])
def test_cli_subcommand_help_describes_the_command(command, capsys):
    from numptx.cli import main
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    usage, _, rest = out.partition("\n\n")
    description = rest.split("\n\n")[0]
    assert not description.startswith(("positional", "options")) and len(description) > 40, out
    args = rest.split("positional arguments:")[-1]
    assert all(len(ln.split(None, 1)) == 2 for ln in args.splitlines()[1:] if ln.strip()
               and ln.startswith("  ") and not ln.startswith("    ")), out


# ---- item 16: the demo, the docs' numbers ------------------------------------------------------
def test_demo_launches_silence_numbas_small_grid_warning():
    # a launch that warns as numba-cuda does for the demo's 4-block grids, and computes the
    # reference; the demo's check loop must not let the warning through (and only that one)
    import warnings
    from numba.core.errors import NumbaPerformanceWarning
    from numptx import demo

    class Launch:
        def __init__(self, c):
            self.c = c

        def __getitem__(self, config):
            warnings.warn("Grid size 4 will likely result in GPU under-utilization due to low "
                          "occupancy.", NumbaPerformanceWarning)
            return lambda res, a, b: res.__setitem__(slice(None), demo._reference(a, b, self.c))

    class Tmpl:
        def inject(self, combine):
            return Launch(combine)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        demo._run_and_check(Tmpl(), {"c=0.5": (0.5, 0.5)}, out=lambda *a: None)
        warnings.warn("others still show", UserWarning)
    assert [type(w.message) for w in seen] == [UserWarning]


def test_fmod_and_mod_accuracy_say_where_they_stop_matching_numpy():
    from numptx.dsl import ops
    lines = ops.docs_table().splitlines()
    column = [c.strip() for c in lines[0].split(" | ")].index("accuracy")
    rows = {ln.split("|")[1].strip(): ln for ln in lines[2:]}
    for name in ("mod", "fmod"):
        cells = [c.strip() for c in rows[f"`{name}`"].split(" | ")]
        accuracy = cells[column]
        assert accuracy != "exact" and "2^52" in accuracy and "+-0" in accuracy, accuracy
    # and it is so: beyond 2^52 the emulated stub gives +-0 where NumPy has the exact remainder
    f = nx.ptx_expr(lambda a, b: nx.fmod(a, b))
    a, b = np.float32([2.0 ** 60]), np.float32([3.0])          # 2^60 = 1 (mod 3)
    got = nx.emulate(f.stub(), {"a": a, "b": b}, outputs={"out": nx.f32})["out"]
    assert got[0] == 0 and np.fmod(a, b)[0] != 0
    assert ops.update_docs("docs/dsl.md", check=True), "regenerate docs/dsl.md"


def test_readme_states_no_stale_instruction_count():
    import re
    from pathlib import Path
    from numptx.instructions import BUILTIN_ROWS
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    counts = [int(n) for n in re.findall(r"(\d+) (?:rows|entries|instructions)\b", readme)]
    assert all(n == BUILTIN_ROWS for n in counts), (counts, BUILTIN_ROWS)
    head = (root / "docs" / "instructions.md").read_text()[:2000]
    assert f"{BUILTIN_ROWS} entries" in head and "docs/instructions.md" in readme


@pytest.mark.gpu
def test_gpu_host_arrays_on_a_stream():
    # docs/templates.md: host arrays with a stream were refused by NumPy inside numba-cuda's
    # copy ("NumPy only supports stream=None"); numptx copies them on the stream itself
    from numba import cuda
    from conftest import SPINE_SRC
    t = nx.CudaTemplate(SPINE_SRC, cache=False)
    v = t.inject(combine="add.rn.f32 %v_z, %v_x, %v_y;")
    n = 1000
    a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    stream = cuda.stream()
    out = np.zeros(n, np.float32)
    v[(n + 255) // 256, 256, stream](out, a, b, n)
    stream.synchronize()
    np.testing.assert_array_equal(out, a + b)
    d_out = cuda.device_array(n, np.float32)
    v[(n + 255) // 256, 256, stream](d_out, cuda.to_device(a, stream=stream), b, n)
    np.testing.assert_array_equal(d_out.copy_to_host(stream=stream), a + b)


def test_kernel_arch_option_points_to_cc():
    with pytest.raises(nx.NumptxError, match=r"cc=\(8, 0\)"):
        nx.kernel(arch="sm_80")


def test_numba_variant_reports_its_build():
    from numba import cuda

    @nx.kernel("void(float32[:], float32[:])")
    def k(out, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("f", x=a[i], out={"z": nx.f32})
    v = k.inject(f="mul.rn.f32 %v_z, %v_x, %v_x;")
    v.cubin
    assert v.build_info.how in ("assembled", "memory", "disk")


def test_quoted_python_types_mean_the_same_with_or_without_future(tmp_path):
    import importlib.util
    for future in ("", "from __future__ import annotations\n"):
        p = tmp_path / f"m{len(future)}.py"
        p.write_text(future + "import numptx as nx\n"
                     "def f(x: 'float', i: 'int') -> 'float':\n    return x + 1.0\n")
        spec = importlib.util.spec_from_file_location(p.stem, p)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        e = nx.ptx_expr(m.f)
        assert (e.params["x"].name, e.params["i"].name) == ("f64", "s64"), future


def test_a_comment_naming_a_variable_is_no_register_mistake():
    t = nx.CudaTemplate(r'''extern "C" __global__ void k(float* o, const float* a, int n) {
        int i = threadIdx.x; if (i < n) { float x = a[i], z;
        PTX_INJECT("combine", PTX_IN(F32, x), PTX_OUT(F32, z)); o[i] = z; } }''',
                        entry="k", cache=False)
    assert t.inject(combine="mov.f32 %v_z, %v_x; // was %z").cubin[:4] == b"\x7fELF"
    with pytest.raises(nx.NumptxError, match="%v_z"):
        t.inject(combine="mov.f32 %z, %v_x;").cubin
