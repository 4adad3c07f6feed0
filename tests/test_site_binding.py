"""One set of rules binds a formula to a site (``PtxExpr.binding``), and the build and numba-cuda's
simulator both follow it: for each formula and site below, the simulator accepts exactly what the
real build accepts (and refuses the rest with the build's error), and computes what the built
stub computes (``nx.emulate`` of its PTX) and what NumPy says.

The real build runs here (numba-cuda compiles the kernels on the CPU, nvJitLink assembles the
variants); the simulator runs the same cases under ``NUMBA_ENABLE_CUDASIM=1`` in a fresh process.
No GPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import numptx as nx
from numptx import site_layout
from numptx.dsl.expr import SiteBinding, output_order
from numptx.inject import Variable

# the cases, imported by this process (the real build) and by the simulator's
CASES_SRC = r'''
import numpy as np
import numptx as nx
from numba import cuda

N = 8
F = nx.f32


@nx.kernel
def combine(z, w, acc, a, b):                  # combine(in x, in y, out z)
    i = cuda.grid(1)
    if i < z.size:
        z[i] = nx.site("combine", x=a[i], y=b[i], out={"z": F})


@nx.kernel
def gauss(z, w, acc, a, b):                    # g(in x, in sigma, out z)
    i = cuda.grid(1)
    if i < z.size:
        z[i] = nx.site("g", x=a[i], sigma=b[i], out={"z": F})


@nx.kernel
def step(z, w, acc, a, b):                     # step(in x, out z, mod acc)
    i = cuda.grid(1)
    if i < z.size:
        zz, s = nx.site("step", x=a[i], out={"z": F}, mod={"acc": acc[i]})
        z[i] = zz
        acc[i] = s


@nx.kernel
def two(z, w, acc, a, b):                      # two(in x, in y, out s, out d)
    i = cuda.grid(1)
    if i < z.size:
        s, d = nx.site("two", x=a[i], y=b[i], out={"s": F, "d": F})
        z[i] = s
        w[i] = d


#: kernel name -> (kernel, site, its in/mod values from the arguments, its out/mod arrays)
KERNELS = {
    "combine": (combine, "combine", lambda z, w, acc, a, b: {"x": a, "y": b},
                lambda z, w, acc: {"z": z}),
    "gauss": (gauss, "g", lambda z, w, acc, a, b: {"x": a, "sigma": b}, lambda z, w, acc: {"z": z}),
    "step": (step, "step", lambda z, w, acc, a, b: {"x": a, "acc": acc},
             lambda z, w, acc: {"z": z, "acc": acc}),
    "two": (two, "two", lambda z, w, acc, a, b: {"x": a, "y": b},
            lambda z, w, acc: {"s": z, "d": w}),
}


@nx.ptx_expr
def only_x(x):                                 # leaves the site's y unused
    return x * 2.0


@nx.ptx_expr
def scale(x, sigma):
    return x * sigma


@nx.ptx_expr
def sub(p, q):                                 # names differ: bound in declaration order
    return p - q


@nx.ptx_expr
def lin(x, y, c=3.0):                          # c: a default the site lacks, baked in
    return x * c + y


@nx.ptx_expr
def grow(x, acc):
    return {"acc": acc * 2.0 + x, "z": x + 1.0}


@nx.ptx_expr
def plus_one(x):                               # z only: the mod acc keeps its value
    return x + 1.0


@nx.ptx_expr
def both(x, acc):                              # a tuple in out/mod order
    return x + 1.0, acc + x


@nx.ptx_expr
def sum_diff(x, y):
    return x + y, x - y


@nx.ptx_expr
def diff_sum(x, y):                            # a dict in another order than the site's
    return {"d": x - y, "s": x + y}


@nx.ptx_expr
def three(x, y, w):                            # one parameter too many
    return x + y + w


@nx.ptx_expr
def wide(x: nx.f32, y: nx.f32) -> nx.f64:      # an f64 result for an f32 output
    return nx.f64(x) + nx.f64(y)


@nx.ptx_expr
def stray(x, y):                               # a dict key the site does not have
    return {"q": x + y}


@nx.ptx_expr
def triple(x, y):                              # three results for two outputs
    return x, y, x + y


@nx.ptx_expr
def partial(accum, x):                         # x matches, accum does not: never by position
    return accum * 2.0 + x


#: case -> (kernel name, formula, what NumPy says from the site's in/mod values or None: the
#: build refuses it)
CASES = {
    "unused site input": ("combine", only_x, lambda v: {"z": v["x"] * 2}),
    "bind() of a site variable": ("gauss", scale.bind(sigma=0.5), lambda v: {"z": v["x"] * 0.5}),
    "bind() of the other one": ("gauss", scale.bind(x=4.0), lambda v: {"z": 4 * v["sigma"]}),
    "declaration order": ("combine", sub, lambda v: {"z": v["x"] - v["y"]}),
    "default baked in": ("combine", lin, lambda v: {"z": v["x"] * 3 + v["y"]}),
    "mod by name": ("step", grow, lambda v: {"z": v["x"] + 1, "acc": v["acc"] * 2 + v["x"]}),
    "mod passed through": ("step", plus_one, lambda v: {"z": v["x"] + 1, "acc": v["acc"]}),
    "mod in a tuple": ("step", both, lambda v: {"z": v["x"] + 1, "acc": v["acc"] + v["x"]}),
    "two outputs": ("two", sum_diff, lambda v: {"s": v["x"] + v["y"], "d": v["x"] - v["y"]}),
    "two outputs by name": ("two", diff_sum,
                            lambda v: {"s": v["x"] + v["y"], "d": v["x"] - v["y"]}),
    "too many parameters": ("combine", three, None),
    "wrong output type": ("combine", wide, None),
    "unknown output name": ("combine", stray, None),
    "too many outputs": ("two", triple, None),
    "some names match": ("step", partial, None),
}


def arrays():
    a = np.arange(1, N + 1, dtype=np.float32)
    return (np.zeros(N, np.float32), np.zeros(N, np.float32), np.full(N, 1.5, np.float32), a,
            (a * 0.5 + 0.25).astype(np.float32))
'''

SIM_SCRIPT = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np, numptx as nx
from binding_cases import CASES, KERNELS, arrays

out = {}
for case, (kname, formula, _) in CASES.items():
    kernel, site, _, outputs = KERNELS[kname]
    z, w, acc, a, b = arrays()
    try:
        kernel.inject(**{site: formula})[1, len(a)](z, w, acc, a, b)
    except nx.NumptxError as e:
        out[case] = {"error": type(e).__name__, "message": str(e).splitlines()[0]}
    else:
        out[case] = {k: v.tolist() for k, v in outputs(z, w, acc).items()}
json.dump(out, open(sys.argv[2], "w"))
print("SIM DONE")
'''


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    folder = tmp_path_factory.mktemp("binding")
    (folder / "binding_cases.py").write_text(CASES_SRC)
    sys.path.insert(0, str(folder))
    try:
        import binding_cases
    finally:
        sys.path.remove(str(folder))
    return folder, binding_cases


def _built(mod, case: str):
    """The real build of a case: ``("error", type, first line)`` or ``("ok", results by site
    variable from nx.emulate of the built stub, the site's in/mod values)``."""
    kname, formula, _ = mod.CASES[case]
    kernel, site, inputs, _ = mod.KERNELS[kname]
    args = mod.arrays()
    try:
        v = kernel.inject(**{site: formula}).specialize(*args)
        assert v.cubin[:4] == b"\x7fELF"                 # nvJitLink assembled it
    except nx.NumptxError as e:
        return "error", type(e).__name__, str(e).splitlines()[0]
    s = v.sites[site]
    values = inputs(*args)
    got = nx.emulate(v.stub_map[site], {site_layout.reg_name(n): x for n, x in values.items()},
                     {site_layout.reg_name(o.name): o.dtype for o in s.outputs})
    return "ok", {o.name: got[site_layout.reg_name(o.name)] for o in s.outputs}, values


def test_the_simulator_accepts_what_the_build_accepts_and_computes_the_same(cases, tmp_path):
    if nx.jit.numba_site.SIMULATOR:
        pytest.skip("the real build needs the real numba-cuda")
    pytest.importorskip("numba.cuda")
    folder, mod = cases
    result = tmp_path / "sim.json"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["NUMBA_ENABLE_CUDASIM"] = "1"
    r = subprocess.run([sys.executable, "-c", SIM_SCRIPT, str(folder), str(result)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "SIM DONE" in r.stdout, r.stdout + r.stderr
    sim = json.loads(result.read_text())
    for case, (_, _, numpy_ref) in mod.CASES.items():
        built = _built(mod, case)
        if numpy_ref is None:
            assert built[0] == "error" and built[1] == "BindError", (case, built)
            assert sim[case] == {"error": built[1], "message": built[2]}, case
            continue
        assert built[0] == "ok", (case, built)
        _, emulated, values = built
        assert "error" not in sim[case], (case, sim[case])
        want = numpy_ref(values)
        assert set(sim[case]) == set(emulated) == set(want), case
        for var in want:
            np.testing.assert_array_equal(np.float32(sim[case][var]), emulated[var], err_msg=case)
            np.testing.assert_array_equal(emulated[var], np.float32(want[var]), err_msg=case)


def test_binding_says_which_variable_feeds_which_parameter(cases):
    _, mod = cases
    inj = nx.PtxInject(nx.cuda_to_ptx(r'''
    extern "C" __global__ void k(float* o, const float* a, float* acc) {
        float x = a[0], m = acc[0], z;
        PTX_INJECT("step", PTX_IN(F32, x), PTX_OUT(F32, z), PTX_MOD(F32, m));
        o[0] = z; acc[0] = m;
    }''', arch="sm_90"))
    step = inj.sites["step"]

    @nx.ptx_expr
    def f(x, m, k=2.0):
        return x * k

    b = f.binding(step)
    assert isinstance(b, SiteBinding) and b.site is step
    assert b.inputs == {"x": "x", "m": "m"} and b.outputs == {"z": 0, "m": None}
    assert b.constants == {"k": 2.0} and b.expr.bound == {"k": 2.0}    # the default baked in
    assert b.evaluate({"x": np.float32(3), "m": np.float32(7)}) == {"z": 6.0, "m": 7.0}
    # x matches by name, so k never binds by position to m: its default is baked in
    b = f.bind(m=0.5).binding(step)
    assert b.inputs == {"x": "x"} and b.constants == {"m": 0.5, "k": 2.0}

    @nx.ptx_expr
    def h(x, m):
        return x * m
    half = h.bind(m=0.5).binding(step)                     # m bound: the site's m is unused
    assert half.inputs == {"x": "x"} and half.constants == {"m": 0.5}
    assert half.evaluate({"x": np.float32(3), "m": np.float32(7)}) == {"z": 1.5, "m": 7.0}

    @nx.ptx_expr
    def g(x):
        return {"m": x + 1.0, "z": x}
    b = g.binding(step)
    assert b.outputs == {"z": 1, "m": 0} and b.expr is g and b.constants == {}
    assert b.evaluate({"x": np.float32(2), "m": np.float32(9)}) == {"z": 2.0, "m": 3.0}
    # the stub compiles by the same binding
    assert f.stub(step).text == f.binding(step).expr.stub(step).text


def test_partial_name_matches_never_bind_the_rest_by_position():
    # issue 22 item 2: f(accum, r) at force(in r, mod acc) bound accum to r and r to acc
    inj = nx.PtxInject(nx.cuda_to_ptx(r'''
    extern "C" __global__ void k(float* o, const float* a, float* acc_) {
        float r = a[0], acc = acc_[0];
        PTX_INJECT("force", PTX_IN(F32, r), PTX_MOD(F32, acc));
        o[0] = acc;
    }''', arch="sm_90"))
    force = inj.sites["force"]

    @nx.ptx_expr
    def f(accum, r):
        return {"acc": accum + r * 2.0}

    for call in (lambda: f.binding(force), lambda: f.stub(force)):
        with pytest.raises(nx.BindError, match=r"'accum' match no site variable while 'r' "
                                               r"binds? by name.*rename it after the site's 'acc'"):
            call()

    @nx.ptx_expr
    def g(acc, r):                                    # the same formula named after the site
        return {"acc": acc + r * 2.0}
    b = g.binding(force)
    assert b.inputs == {"acc": "acc", "r": "r"}
    assert b.evaluate({"r": np.float32(5), "acc": np.float32(2)}) == {"acc": 12.0}

    @nx.ptx_expr
    def k(r, a, c=2.0):                      # only 'a' needs a name: c's default is baked in
        return {"acc": r + a * c}
    with pytest.raises(nx.BindError, match=r"parameter\(s\) 'a' match no site variable while "
                                           r"'r' binds by name.*rename it after the site's "
                                           r"'acc' \('c', with a default, is baked in"):
        k.stub(force)

    @nx.ptx_expr
    def h(p, q):                                      # no name in common: declaration order
        return {"acc": p + q * 2.0}
    assert h.binding(force).inputs == {"p": "r", "q": "acc"}


def test_output_order_is_the_rule_for_every_result_form():
    z = Variable("z", "out", "f32", "f32", "v_z")
    acc = Variable("acc", "mod", "f32", "f32", "v_acc")
    assert output_order("single", ["out"], [z, acc]) == (0, "acc")
    assert output_order("tuple", ["out0", "out1"], [z, acc]) == (0, 1)
    assert output_order("dict", ["acc", "z"], [z, acc]) == (1, 0)
    assert output_order("dict", ["z"], [z, acc]) == (0, "acc")
    for form, names, why in (("dict", ["acc"], "site output 'z' is not returned"),
                             ("dict", ["z", "q"], r"output\(s\) q are not out/mod variables"),
                             ("tuple", ["a", "b", "c"], r"3 output\(s\) for 2 out/mod")):
        with pytest.raises(nx.BindError, match=why):
            output_order(form, names, [z, acc])
