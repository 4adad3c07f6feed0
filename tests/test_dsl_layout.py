"""The DSL's single sources: the operation table drives the ``nx.*`` functions of both packages
(through the generated numptx/dsl/functions.py), mathlib's decorator is its registry, every
instruction node enters a graph through one route, and the modules keep their layering."""
from __future__ import annotations

import ast
import builtins
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import numptx as nx
import numptx.dsl as dsl
from numptx.dsl import functions, mathlib, ops
from numptx.dsl.graph import Graph
from numptx.dsl.lowering import is_mathlib_lowering

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DSL_DIR = os.path.join(ROOT, "numptx", "dsl")
SHADOWS = {n for n in ops.PUBLIC if hasattr(builtins, n)}


# ---------------------------------------------------------------------------- the public op list
def test_public_list_comes_from_the_table():
    from_table = [n for op in ops.op_table() for n in op.public]
    assert list(ops.PUBLIC) == [*from_table, "bitcast"]
    assert len(set(ops.PUBLIC)) == len(ops.PUBLIC)
    assert SHADOWS == {"abs", "pow", "round"}


def test_functions_module_is_current():
    assert ops.update_functions(check=True), \
        "numptx/dsl/functions.py is stale: python tools/dsl_ops.py"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "dsl_ops.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_functions_module_is_static():
    """Static readers (IDEs, type checkers) see every name as an assignment or an import, and
    ``__all__`` as a literal list."""
    tree = ast.parse(open(functions.__file__, encoding="utf-8").read())
    assigned, all_names = set(), None
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "__all__":
                all_names = ast.literal_eval(node.value)
            else:
                assigned.add(node.targets[0].id)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            assigned |= {a.asname or a.name for a in node.names if not
                         (a.asname or a.name).startswith("_")}
    assert all_names == list(ops.PUBLIC)
    assert assigned == set(ops.PUBLIC)


@pytest.mark.parametrize("name", ops.PUBLIC)
def test_both_packages_export_every_public_name(name):
    fn = getattr(functions, name)
    assert getattr(dsl, name) is fn and getattr(nx, name) is fn
    assert name in dsl.__all__
    assert (name in nx.__all__) == (name not in SHADOWS)     # import * keeps builtins abs/...
    ns: dict = {}
    exec(f"from numptx import {name}", ns)
    assert ns[name] is fn


def test_nothing_else_op_like_is_exported():
    """No other DSL function is reachable as ``nx.<name>``: an operator-only op (add, lt, ...)
    is not, and every exported function made from the table is in the public list."""
    made = {id(getattr(functions, n)) for n in ops.PUBLIC}
    for pkg in (nx, dsl):
        for name in dir(pkg):
            value = getattr(pkg, name)
            if id(value) in made or getattr(value, "__module__", "") in (
                    "numptx.dsl.functions", "numptx.dsl.trace", "numptx.dsl.ops"):
                assert name in ops.PUBLIC, (pkg.__name__, name)
    private = {op.name for op in ops.op_table()} - set(ops.PUBLIC)
    assert {"add", "lt", "bitand", "neg", "floordiv", "mod"} <= private
    for name in private:
        assert not hasattr(nx, name) and not hasattr(dsl, name), name


def test_star_import_leaves_builtins_alone():
    ns: dict = {}
    exec("from numptx import *", ns)
    assert "abs" not in ns and "round" not in ns and "pow" not in ns
    assert ns["sqrt"] is nx.sqrt and ns["absolute"] is nx.abs and ns["power"] is nx.pow
    assert nx.round(np.float32(2.5)) == 2.0 and nx.rint is nx.round


def test_aliases_and_names():
    assert nx.floor_divide.__name__ == "floor_divide" and nx.remainder(7, 3) == 1
    assert "nx.floor_divide(a, b)" in nx.floor_divide.__doc__
    for fn in (nx.sqrt, nx.floor_divide, nx.power, nx.abs):
        assert fn.__module__ == "numptx.dsl.functions"
        assert pickle.loads(pickle.dumps(fn)) is fn


# ----------------------------------------------------------------------------- mathlib registry
def test_every_mathlib_row_has_a_registered_sequence():
    lowered = [op for op in ops.op_table() if is_mathlib_lowering(op.lower)]
    assert {op.name for op in lowered} >= {"exp", "sin", "hypot", "sigmoid", "cbrt"}
    for op in lowered:
        fn, arity, ref = mathlib.FUNCTIONS[op.name]
        assert arity == op.arity and callable(ref), op.name
        assert getattr(mathlib, op.name) is fn
    assert set(mathlib.FUNCTIONS) <= set(mathlib.__all__)


def test_sequence_decorator_registers():
    before = dict(mathlib.FUNCTIONS)
    try:
        @mathlib.functions.sequence(np.hypot, fast=False)
        def _test_seq(b, x, y, *, dtype="f32", fastmath=False):
            return b.instr(f"add.rn.{dtype}", x, y)
        assert mathlib.FUNCTIONS["_test_seq"] == (_test_seq, 2, np.hypot)
        assert float(mathlib.evaluate("_test_seq", 1.0, 2.0)) == 3.0
    finally:
        mathlib.FUNCTIONS.clear()
        mathlib.FUNCTIONS.update(before)
        mathlib.functions.__all__.remove("_test_seq")


# --------------------------------------------------------------------------- one node route
def test_every_instruction_node_takes_one_route(monkeypatch):
    """The fused fast paths, Graph.instr's inlined cases and its general case all append
    instruction nodes through Graph.add_instr."""
    seen = []
    original = Graph.add_instr

    def counting(self, info, args, key):
        node = original(self, info, args, key)
        seen.append((self, node))          # (scratch graphs probe single rows: kept apart)
        return node
    monkeypatch.setattr(Graph, "add_instr", counting)

    @nx.ptx_expr
    def f(x: nx.f32, y: nx.f32, i: nx.s32) -> nx.f32:
        a = nx.fma(x, 0.5, y) * nx.sqrt(x * x + y * y) - 1.0            # fused paths
        b = nx.where(x > y, a, -a) + nx.exp(x) + x // y                 # lowerings via instr
        return b * nx.f32(i >> 1)
    g = f.graph
    instr = [n for n in g.nodes if n.op == "instr"]
    assert len(instr) > 40
    assert [n for gr, n in seen if gr is g] == instr


# ---------------------------------------------------------------------------------- layering
def _module_imports(path: str) -> set[str]:
    """numptx.dsl modules imported at module level (not inside functions) by ``path``."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    out = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out |= {a.name for a in node.names}
    return out


def test_dsl_module_imports_have_no_cycle():
    mods = {f[:-3]: os.path.join(DSL_DIR, f) for f in os.listdir(DSL_DIR) if f.endswith(".py")}
    mods["mathlib"] = os.path.join(DSL_DIR, "mathlib", "__init__.py")
    deps = {m: _module_imports(p) & set(mods) - {m} for m, p in mods.items()}
    deps.pop("__init__")
    order, done = [], set()

    def visit(m, stack):
        assert m not in stack, f"import cycle: {' -> '.join([*stack, m])}"
        if m in done:
            return
        for d in sorted(deps.get(m, ())):
            visit(d, [*stack, m])
        done.add(m)
        order.append(m)
    for m in sorted(deps):
        visit(m, [])
    # the layering the split keeps: the value, the policy, the tracers, the table
    assert order.index("proxy") < order.index("promote") < order.index("trace") \
        < order.index("ops") < order.index("functions")


def test_split_files_stay_under_700_lines():
    """The modules split out of mathlib.py, trace.py and ops.py (coeffs.py is a data table)."""
    names = ["graph", "proxy", "promote", "trace", "lowering", "ops", "functions",
             *(f"mathlib/{m}" for m in ("__init__", "builders", "core", "functions"))]
    for name in names:
        with open(os.path.join(DSL_DIR, f"{name}.py"), encoding="utf-8") as fh:
            n = sum(1 for _ in fh)
        assert n <= 700, (name, n)
