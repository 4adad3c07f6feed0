"""Bad input to Stack PTX, AST PTX, @nx.ptx_expr and the command line raises a clear
NumptxError naming what is at fault: never a raw TypeError/AttributeError/KeyError/ValueError/
OverflowError from deep inside, never a hang. Valid neighbours of each bad input keep working."""
from __future__ import annotations

import os
import subprocess
import sys
import typing
import warnings

import numpy as np
import pytest

import numptx as nx
from numptx import ast_ptx as ap
from numptx import stack_ptx as sp
from numptx.dsl.expr import ArgumentError
from numptx.dsl.trace import TraceAttributeError

HERE = os.path.abspath(__file__)
_SRC = open(HERE, encoding="utf-8").read().splitlines()
I, O = {"x": "f32"}, {"z": "f32"}
P = [sp.input("x")]


def line_of(marker: str) -> int:
    hits = [i + 1 for i, text in enumerate(_SRC) if text.rstrip().endswith(marker)]
    assert len(hits) == 1, marker
    return hits[0]


def raises(exc, match: str, call, *args, **kwargs):
    """``call(*args, **kwargs)`` raises ``exc`` (a NumptxError) matching ``match``; no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(exc, match=match) as ei:
            call(*args, **kwargs)
    assert isinstance(ei.value, nx.NumptxError)
    return ei.value


# ---- Stack PTX -----------------------------------------------------------------------------------
@pytest.mark.parametrize("prog", [None, 5, {"a": 1}, "abc", b"\x00" * 8])
def test_compile_rejects_what_is_no_program(prog):
    raises(sp.ProgramError, "expected a list of ops", sp.compile, prog, I, O)
    raises(sp.ProgramError, "expected a list of ops", ap.compile, prog, I, O)
    raises(sp.ProgramError, "expected a list of ops", sp.encode, prog)


def test_an_iterator_program_is_checked_whole():
    """The fast path consumed part of a one-shot iterator and the rest compiled silently."""
    bad = iter([sp.input("x"), 5, sp.input("x")])
    raises(sp.ProgramError, "item 1 is 5", sp.compile, bad, I, O)
    assert sp.compile(iter(P), I, O) == sp.compile(P, I, O)
    assert ap.compile((op for op in P), I, O) == ap.compile(P, I, O)


def test_compile_many_names_the_program_at_fault():
    raises(sp.ProgramError, "list of programs", sp.compile_many, 5, I, O)
    raises(sp.ProgramError, "list of programs", sp.compile_many, None, I, O)
    raises(sp.ProgramError, "program 1: expected a list of ops", sp.compile_many, [P, None], I, O)
    raises(sp.ProgramError, "program 0 item 0 is 5", sp.compile_many, [[5]], I, O)
    raises(sp.ProgramError, "program 1: encoded programs are 1-D",
           sp.compile_many, [P, np.zeros(2, np.float32)], I, O)
    assert sp.compile_many((p for p in [P, sp.encode(P, I)]), I, O) == [sp.compile(P, I, O)] * 2


def test_routines_and_limits_arguments():
    prog = [sp.routine(0)]
    raises(sp.ProgramError, "routine 0: expected a list", sp.compile, prog, I, O, routines=[5])
    raises(sp.ProgramError, "routine 1: expected", sp.compile, prog, I, O, routines=[P, None])
    raises(sp.ProgramError, "routines=: expected a list", sp.compile, prog, I, O, routines=5)
    raises(sp.ProgramError, "routine 0: 3 bytes", sp.compile, prog, I, O, routines=[b"abc"])
    raises(sp.ProgramError, "routine 0: expected", sp.compile_many, [prog], I, O, routines=[5])
    assert sp.compile(prog, I, O, routines=[P]) == sp.compile(P, I, O)
    raises(sp.ProgramError, r"sp\.Limits", sp.compile, P, I, O, limits={"max_steps": 3})
    raises(sp.ProgramError, r"sp\.Limits", sp.compile_many, [P], I, O, limits={})
    raises(sp.ProgramError, "unknown field 'max_step'.*max_steps", sp.Limits, max_step=3)
    raises(sp.ProgramError, "7 positional", sp.Limits, 1, 2, 3, 4, 5, 6, 7)
    assert sp.Limits(64, max_nodes=32).max_nodes == 32
    assert sp.compile(P, I, O, limits=sp.Limits(max_steps=3)) == sp.compile(P, I, O)


def test_compile_io_arguments():
    raises(sp.ProgramError, "register name 5", sp.compile, P, {5: "f32"}, O)
    raises(sp.ProgramError, r"inj\.sites\['combine'\]", sp.compile, P, site="combine")
    raises(sp.ProgramError, "not int", sp.compile, P, site=5)


@pytest.mark.parametrize("name", [5, None, ("tid.x",)])
def test_special_needs_a_register_name(name):
    raises(sp.ProgramError, "special register", sp.special, name)


def test_const_values_are_checked():
    raises(sp.ProgramError, "f16x2.*element 0.*real number", sp.const, ("a", "b"), "f16x2")
    raises(sp.ProgramError, "pair .* not 3 values", sp.const, (1.0, 2.0, 3.0), "f16x2")
    raises(sp.ProgramError, "pair .* not float", sp.const, 1.5, "bf16x2")
    raises(sp.ProgramError, "real number", sp.const, np.complex64(1j), "f32")
    for value, dtype in [(1e300, "f32"), (-1e39, "f32"), (1e6, "f16"), (65520.0, "f16"),
                         (1e39, "bf16"), (10 ** 400, "f64"), (10 ** 400, "f32")]:
        raises(sp.ProgramError, f"out of the {dtype} range", sp.const, value, dtype)
    raises(sp.ProgramError, "element 1: .*out of the f16 range", sp.const, (1.0, 7e4), "f16x2")
    # the largest finite values, and infinities/NaNs given as such, stay valid
    assert sp.const(3.4028235e38, "f32").word >> 32 == 0x7F7FFFFF
    assert sp.const(65504.0, "f16").word >> 32 == 0x7BFF
    assert sp.const(float("inf"), "f32").word >> 32 == 0x7F800000
    assert sp.const(-np.inf, "f16").word >> 32 == 0xFC00
    assert sp.const(float("nan"), "bf16").word >> 32 & 0x7FC0 == 0x7FC0
    assert sp.const(np.float32(np.inf), "f64").extra == 0x7FF0000000000000
    assert sp.const((1.0, float("inf")), "f16x2").word >> 32 == 0x7C00 << 16 | 0x3C00


@pytest.mark.parametrize("words", [[-1], [2 ** 64], None, ["a"], [1.5], "abc"])
def test_decode_rejects_what_is_no_word(words):
    raises(sp.ProgramError, "decode", sp.decode, words)


def test_decode_encode_dumps_name_arguments():
    raises(sp.ProgramError, "inputs=5", sp.decode, [1], inputs=5)
    raises(sp.ProgramError, "inputs=5", sp.encode, P, inputs=5)
    raises(sp.SerializationError, "expected a list of ops", sp.dumps, 5)
    raises(sp.SerializationError, "expected a list of ops", sp.dumps, None)
    two = sp.decode(np.int64([1, 1 << 16 | 1]), inputs=["a", "b"])
    assert two == [sp.input("a"), sp.input("b")]
    assert sp.decode([]) == []


# ---- AST PTX -------------------------------------------------------------------------------------
def test_node_checks_operands_at_construction():
    x = ap.leaf(ap.input("x"))
    raises(ap.ASTError, r"operand 0 is 5, not an ap\.Node", ap.node, "neg.f32", 5)
    raises(ap.ASTError, r"operand 1 is .*input\('y'\)", ap.node, "add.f32", x, ap.input("y"))
    raises(ap.ASTError, "children must be a sequence", ap.Node, ap.input("x"), 5)
    raises(ap.ASTError, "not an op", ap.leaf, 5)
    raises(ap.ASTError, "root 1 is 5", ap.postorder, x, 5)
    raises(ap.ASTError, "limits must be", ap.postorder, x, limits={"max_steps": 3})


def test_nodes_are_immutable():
    x = ap.leaf(ap.input("x"))
    a = ap.node("neg.f32", x)
    raises(ap.ASTError, "immutable", setattr, a, "children", (a,))
    raises(ap.ASTError, "immutable", setattr, a, "op", ap.input("y"))
    raises(ap.ASTError, "immutable", delattr, a, "op")
    assert a.children == (x,) and ap.postorder(a) == [ap.input("x"), ap.instr("neg.f32")]
    import pickle
    b = pickle.loads(pickle.dumps(a))
    assert ap.postorder(b) == ap.postorder(a)


_HANG_SCRIPT = r'''
import resource, time
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))   # a runaway dies, not the machine
import numptx as nx
from numptx import ast_ptx as ap
x = ap.leaf(ap.input("x"))
a = ap.node("neg.f32", ap.node("abs.f32", x))
object.__setattr__(a.children[0], "children", (a,))          # a cycle, bypassing immutability
try:
    ap.postorder(a)
except nx.NumptxError as e:
    assert type(e) is ap.ASTError and "cyclic" in str(e), e
    print("cycle:", e)
d = x
for _ in range(60):
    d = ap.node("add.rn.f32", d, d)           # a DAG standing for 2**61 - 1 ops
t = time.perf_counter()
try:
    ap.postorder(d, limits=ap.Limits())       # what compile will run: 4096 steps
except ap.ASTError as e:
    assert e.index == 4096 and str(2 ** 61 - 1) in str(e) and "limit reached" in str(e), e
    print("dag:", e, time.perf_counter() - t)
try:
    ap.postorder(d)                           # no limits: stops at 2**20, the most any allow
except ap.ASTError as e:
    assert e.index == 1 << 20 and "limit reached" in str(e), e
    print("default cap:", e)
small = d.children[0]
for _ in range(48):
    small = small.children[0]                 # depth 11: 4095 ops, at the limit
assert len(ap.postorder(small)) == 4095
try:
    ap.postorder(small.children[0], small.children[0], small, limits=ap.Limits())
except ap.ASTError as e:
    print("roots:", e)
assert len(ap.postorder(small.children[0], small.children[0], small,
                       limits=ap.Limits(max_steps=8191))) == 8189
print("done")
'''


def test_postorder_without_limits_takes_long_programs():
    """Flattening alone is not capped at compile's default 4096 steps (review finding)."""
    t = ap.leaf(ap.input("x"))
    for _ in range(3000):
        t = ap.node("add.rn.f32", t, ap.leaf(ap.const(1.0, "f32")))
    prog = ap.postorder(t)
    assert len(prog) == 6001
    assert ap.compile(prog, {"x": "f32"}, {"z": "f32"},
                      limits=ap.Limits(max_steps=20000, max_nodes=20000))


def test_cyclic_trees_and_huge_dags_fail_fast(tmp_path):
    """In a subprocess with a memory cap: before the fix a cycle grew memory without bound and
    a depth-60 DAG expanded for ever."""
    script = tmp_path / "hang.py"
    script.write_text(_HANG_SCRIPT)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "done" in r.stdout, r.stdout + r.stderr
    assert all(k in r.stdout for k in ("cycle:", "dag:", "roots:", "default cap:")), r.stdout
    dag_seconds = float(r.stdout.split("dag:")[1].split("\n")[0].split()[-1])
    assert dag_seconds < 1.0, r.stdout


# ---- @nx.ptx_expr -------------------------------------------------------------------------------
def test_missing_attribute_of_a_traced_value_is_a_trace_error():
    def conv(x):
        return x.astype(np.float64)  # E:astype
    e = raises(TraceAttributeError, r"no attribute 'astype' \(in conv\)",
               lambda: nx.ptx_expr(conv).graph)
    assert e.lineno == line_of("# E:astype") and e.filename == HERE
    assert "x.astype(np.float64)" in str(e) and "nx.f64(x)" in str(e)
    assert isinstance(e, nx.TraceError) and isinstance(e, AttributeError)
    # the NumPy reference evaluation goes through the same proxies
    raises(TraceAttributeError, "'real'", nx.ptx_expr(lambda x: x.real), np.float32(1))
    # getattr with a default and hasattr still work inside a formula
    f = nx.ptx_expr(lambda x: x * 2.0 if not hasattr(x, "foo") else getattr(x, "bar", x))
    assert float(f(np.float32(3))) == 6.0 and "mul" in str(f.graph)


def test_keyword_only_parameters():
    def kwonly(x, *, y):  # E:kwonly
        return x + y
    e = raises(nx.TraceError, "keyword-only parameter 'y' has no default", nx.ptx_expr, kwonly)
    assert e.lineno == line_of("# E:kwonly")

    def kwdefault(x, *, scale=2.0):
        return x * scale
    assert float(nx.ptx_expr(kwdefault)(np.float32(3))) == 6.0


def test_decorator_arguments():
    e = raises(ArgumentError, "needs a Python function.*not int", nx.ptx_expr, 5)
    assert isinstance(e, TypeError)
    e = raises(ArgumentError, "'stack', 'ast', not 'foo'", nx.ptx_expr, backend="foo")
    assert isinstance(e, ValueError)
    raises(ArgumentError, "unknown option 'fastmth'.*fastmath", nx.ptx_expr, fastmth=True)
    raises(ArgumentError, "fastmath must be True or False", nx.ptx_expr, fastmath="no")
    raises(ArgumentError, "backend", nx.PtxExpr, lambda x: x, backend="tree")
    f = nx.ptx_expr(lambda x: x + 1.0)
    raises(ArgumentError, "fastmath must be", f.trace, "yes")
    raises(ArgumentError, "'stack', 'ast', not 'nope'", f.stub, backend="nope")
    raises(ArgumentError, "'stack', 'ast', not 'nope'", f.program, "nope")
    raises(ArgumentError, "by name", f.bind, 5)
    assert nx.ptx_expr(fastmath=1)(lambda x: x).fastmath is True


def test_stub_arguments(spine_ptx):
    site = nx.PtxInject(spine_ptx).sites["combine"]
    f = nx.ptx_expr(lambda x, y: x + y)
    raises(nx.BindError, r"inj\.sites\['combine'\]", f.stub, "combine")
    raises(nx.BindError, "expected a numptx Site.*not int", f.stub, 5)
    raises(nx.BindError, "inputs= maps parameter names.*not list", f.stub, inputs=["x"])
    raises(nx.BindError, "outputs= maps output names.*not list", f.stub, outputs=["z"])
    raises(sp.ProgramError, "register name 5", f.stub, inputs={"x": 5})
    assert "add" in f.stub(site) and "%a" in f.stub(inputs={"x": "a"})


def test_return_annotations_are_checked_like_parameters():
    def nonsense(x) -> "nonsense":  # noqa: F821  E:ret
        return x
    e = raises(nx.TraceError, "return annotation 'nonsense' is not a numptx type",
               nx.ptx_expr, nonsense)
    assert e.lineno == line_of("E:ret")

    def bogus(x) -> tuple[nx.f32, "bogus"]:  # noqa: F821
        return x, x
    raises(nx.TraceError, "element 'bogus'", nx.ptx_expr, bogus)

    # what stays valid: numptx types (also as strings), tuples of them, bare containers, and
    # annotations that name no numptx type (typing constructs, Python classes): not checked
    maps = (dict, dict[str, nx.f32], typing.Mapping[str, nx.f32])
    for ann, n in [(nx.f32, 1), ("nx.f32", 1), (tuple[nx.f32, nx.f32], 2), ((nx.f32, nx.f32), 2),
                   (typing.Tuple[nx.f32, "nx.f32"], 2), (tuple, 2), (typing.Tuple, 2), (dict, 1),
                   (tuple[nx.f32, ...], 2), (dict[str, nx.f32], 1), ("tuple[nx.f32, nx.f32]", 2),
                   (typing.Mapping[str, nx.f32], 1), (typing.Any, 1), (np.ndarray, 1),
                   (typing.Optional[nx.f32], 1), (object, 1)]:
        def ok(x):
            return {"a": x} if ann in maps else x if n == 1 else (x, x)
        ok.__annotations__ = {"return": ann}
        assert len(nx.ptx_expr(ok).graph.outputs) == n, ann
    # and a declared count or type is enforced
    def two(x) -> tuple[nx.f32, nx.s32]:
        return x, x
    raises(nx.TraceError, "annotated -> s32", lambda: nx.ptx_expr(two).graph)


def test_a_recursive_formula_is_a_trace_error():
    def rec(x):
        return rec(x)
    raises(nx.TraceError, "recursion limit", lambda: nx.ptx_expr(rec).graph)
    raises(nx.TraceError, "recursion limit", nx.ptx_expr(rec), np.float32(1))


def test_reference_evaluation_arguments():
    f = nx.ptx_expr(lambda x, y: x + y)
    raises(ArgumentError, "takes 2 argument", f, 1.0, 2.0, 3.0)
    raises(ArgumentError, "missing argument 'y'", f, 1.0)
    raises(ArgumentError, "unexpected or repeated argument 'q'", f, 1.0, q=2.0)
    raises(ArgumentError, "argument 'x': cannot convert 'a' to f32", f, "a", 1.0)
    raises(ArgumentError, "argument 'y': cannot convert None", f, 1.0, None)
    raises(ArgumentError, r"shapes do not broadcast \(x: \(3,\), y: \(4,\)\)",
           f, np.ones(3, np.float32), np.ones(4, np.float32))
    assert f(np.ones(3, np.float32), np.float32(1)).tolist() == [2.0, 2.0, 2.0]
    assert float(f(2 ** 70, 0.0)) == float(np.float32(2.0 ** 70))


# ---- command line -------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["sites", "process"])
def test_cli_unreadable_input_is_one_line(tmp_path, capsys, command):
    from numptx.cli import main
    binary = tmp_path / "bin.cu"
    binary.write_bytes(b"\xff\xfe\x00 not utf-8")
    extra = ["-o", str(tmp_path / "out")] if command == "process" else []
    for path, why in [(tmp_path / "missing.cu", "No such file"), (tmp_path, "Is a directory"),
                      (binary, "not a UTF-8 text file")]:
        assert main([command, str(path), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err and str(path) in err, err
        assert err.startswith(f"numptx {command}: error:") and "Traceback" not in err


def test_cli_unwritable_output_folder(tmp_path, capsys):
    from numptx.cli import main
    src = tmp_path / "a.cu"
    src.write_text("// nothing\n")
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["process", str(src), "-o", str(blocker / "sub")]) == 2
    err = capsys.readouterr().err
    assert "cannot create the output folder" in err and err.count("\n") == 1, err


def test_cli_errors_as_a_console_script(tmp_path):
    r = subprocess.run([sys.executable, "-m", "numptx.cli", "sites", str(tmp_path / "none.cu")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "none.cu" in r.stderr, r.stderr
