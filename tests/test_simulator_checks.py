"""Under numba-cuda's simulator a variant refuses what the real build refuses: stubs for sites
the kernel lacks, formulas that do not bind to their site, PTX text nvJitLink does not assemble.

Real components: the checks assemble with nvJitLink (on the CPU); the end-to-end script runs
under ``NUMBA_ENABLE_CUDASIM=1`` in a fresh process."""
from __future__ import annotations

import types

import numpy as np
import pytest

import numptx as nx
from conftest import elf_sections, run_script
from numptx.jit.numba import sim_checks as L
from numptx.jit.numba.numba_site import SiteSpec

COMBINE = SiteSpec("combine", (("in", "f32", "x"), ("in", "f32", "y"), ("out", "f32", "z")))


# ------------------------------------------------------------------ nvJitLink on the site alone
def test_check_stub_refuses_what_nvjitlink_refuses_and_names_the_stub_line():
    for op in ("add.s32", "add.f64"):
        stub = f"mov.f32 %v_z, %v_x;\n{op} %v_z, %v_x, %v_y;"
        with pytest.raises(nx.LinkError, match="Arguments mismatch") as e:
            L.check_stub(COMBINE, stub, "sm_90")
        err = e.value
        assert err.site == "combine" and err.stub_line == f"{op} %v_z, %v_x, %v_y;"
        assert str(err).startswith("invalid stub for site 'combine' (sm_90):")
        assert "stub line 2" in str(err) and "under the simulator" in str(err)
    assert L.check_stub(COMBINE, "add.rn.f32 %v_z, %v_x, %v_y;", "sm_90") == \
        "add.rn.f32 %v_z, %v_x, %v_y;"
    with pytest.raises(nx.LinkError, match="Duplicate definition of variable '%v_z'"):
        L.check_stub(COMBINE, ".reg .f32 %v_z;\nadd.rn.f32 %v_z, %v_x, %v_y;", "sm_90")


def test_check_stub_assembles_each_signature_and_text_once(monkeypatch):
    assert L._ptx_isa_version("sm_80")      # probed once per process and architecture
    calls = []
    real = L.ptx_to_cubin

    def counting(ptx, arch, **kw):          # the real nvJitLink, counted
        calls.append(arch)
        return real(ptx, arch, **kw)
    monkeypatch.setattr(L, "ptx_to_cubin", counting)
    spec = SiteSpec("once", (("in", "u32", "a"), ("out", "u32", "b")))
    bad = "add.f32 %v_b, %v_a, %v_a;"
    for _ in range(3):
        assert L.check_stub(spec, "add.u32 %v_b, %v_a, %v_a;", "sm_80")
        with pytest.raises(nx.LinkError):
            L.check_stub(spec, bad, "sm_80")
    assert len(calls) == 2                  # one per (signature, text)


def test_check_stub_binds_a_formula_like_the_build():
    @nx.ptx_expr
    def three(x, y, w):
        return x + y + w

    @nx.ptx_expr
    def two(x, y):
        return x * y
    with pytest.raises(nx.BindError, match=r"cannot bind three\(x: f32, y: f32, w: f32\) -> out: "
                                           r"f32 to site combine\(in f32 x, in f32 y, out f32 z\)"):
        L.check_stub(COMBINE, three, "sm_90")
    assert "mul" in L.check_stub(COMBINE, two, "sm_90")


def test_ptxas_scopes_a_declaration_from_where_it_appears():
    """The emulator's rule (tests/test_emulator.py), checked against ptxas's machine code: a
    write before an inner declaration reaches the outer register, one after it does not."""
    inj = nx.PtxInject(L.site_check_ptx(COMBINE, "sm_90", L._ptx_isa_version("sm_90")))

    def code(stub):
        cubin = nx.ptx_to_cubin(inj.render({"combine": stub}), "sm_90")
        return elf_sections(cubin)[f".text.{L._CHECK_ENTRY}"]
    written = code("add.rn.f32 %v_z, %v_x, %v_y;")
    late = code("{ add.rn.f32 %v_z, %v_x, %v_y; .reg .f32 %v_z; mov.f32 %v_z, 0f3F800000; }")
    shadowed = code("{ .reg .f32 %v_z; add.rn.f32 %v_z, %v_x, %v_y; }")
    assert late == written and shadowed != written


# ------------------------------------------------------------------ site names from the bytecode
NAME = "from_a_global"


class Names:
    C = "from_a_class"


consts = types.ModuleType("consts")
consts.N = "from_a_module"


def test_site_names_read_like_the_rewrite_reads_them():
    def dev(x):
        return nx.site("in_a_device_function", x=x, out={"y": "f32"})

    def in_a_tuple(x):
        return nx.site("in_a_tuple", x=x, out={"y": "f32"})
    table = (in_a_tuple,)
    closure_name = "from_a_closure"

    def k(out, a):
        out[0] = nx.site("const", x=a[0], out={"z": "f32"})
        out[1] = nx.site(NAME, x=a[0], out={"z": "f32"})
        out[2] = nx.site(Names.C, x=a[0], out={"z": "f32"})
        out[3] = nx.site(consts.N, x=a[0], out={"z": "f32"})
        out[4] = nx.jit.numba_site.site(closure_name, x=a[0], out={"z": "f32"})
        out[5] = dev(a[0]) + table[0](a[0])
    assert set(L.site_names(k)) == {"const", NAME, Names.C, "from_a_module", "from_a_closure",
                                    "in_a_device_function", "in_a_tuple"}


def test_site_names_none_where_a_name_is_not_a_constant():
    def local_name(out, a):
        name = "combine"
        out[0] = nx.site(name, x=a[0], out={"z": "f32"})

    obj = types.SimpleNamespace(site=nx.site)

    def unreadable_site(out, a):
        out[0] = obj.site("combine", x=a[0], out={"z": "f32"})
    assert L.site_names(local_name) is None and L.site_names(unreadable_site) is None

    def no_sites(out, a):
        out[0] = np.float32(a[0])
    assert L.site_names(no_sites) == ()


# ------------------------------------------------------------------ the simulator, end to end
SIM_CHECKS = r'''
import numpy as np, numptx as nx
from numba import cuda
from numptx.jit import sim_checks as L

calls = []                                  # the real nvJitLink, counted
real = getattr(L, "ptx_to_cubin", None)
L.ptx_to_cubin = lambda ptx, arch, **kw: (calls.append(arch), real(ptx, arch, **kw))[1]

@cuda.jit(device=True)
def dev(x):
    return nx.site("dev", x=x, out={"y": nx.f32})

@nx.kernel
def apply(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32}) + dev(a[i])

@nx.ptx_expr
def three(x, y, w):
    return x + y + w

a = np.arange(4, dtype=np.float32); b = np.full(4, 2, np.float32)
good = {"combine": "add.rn.f32 %v_z, %v_x, %v_y;", "dev": "mov.f32 %v_y, %v_x;"}

def fails(kind, stubs, *parts):
    out = np.full(4, -7, np.float32)
    try:
        apply.inject(**stubs)[1, 4](out, a, b)
    except kind as e:
        for p in parts:
            assert p in str(e), (p, str(e))
        assert (out == -7).all() or kind is nx.EmulationError, out
        return e
    raise AssertionError(f"no {kind.__name__} for {stubs}")

# a) nvJitLink refuses these: so does the simulator, naming the site and the stub line
for op in ("add.s32", "add.f64"):
    e = fails(nx.LinkError, {**good, "combine": f"{op} %v_z, %v_x, %v_y;"},
              "invalid stub for site 'combine' (sm_90)", "Arguments mismatch")
    assert e.site == "combine" and e.stub_line == f"{op} %v_z, %v_x, %v_y;", (e.site, e.stub_line)
    assert "tid=" not in str(e), str(e)       # raised as the check raised it
# b) a stub for a site the kernel lacks (the device function's site is found)
fails(nx.RenderError, {**good, "nope": "garbage"}, "no site named 'nope' (sites: 'combine', 'dev')")
# c) a stub that shadows the site's output leaves it unwritten: no value is made up
fails(nx.EmulationError, {**good, "combine": "{ .reg .f32 %v_z; add.rn.f32 %v_z, %v_x, %v_y; }"},
      "unknown output 'v_z'", "shadows")
# D7) a formula that does not bind to its site: the build's BindError, both signatures
fails(nx.BindError, {**good, "combine": three}, "cannot bind three(x: f32, y: f32, w: f32) -> "
      "out: f32 to site combine(in f32 x, in f32 y, out f32 z)")

# the good stubs run, and a launch loop assembles each (signature, stub) once
calls.clear()
for _ in range(3):
    out = np.zeros(4, np.float32)
    apply.inject(**good)[1, 4](out, a, b)
    assert np.array_equal(out, a + b + a), out
assert len(calls) == 2, calls

# missing="empty": a site without a stub is a no-op (outputs read 0 here), as in the build
out = np.full(4, -7, np.float32)
apply.inject(combine="add.rn.f32 %v_z, %v_x, %v_y;", missing="empty")[1, 4](out, a, b)
assert np.array_equal(out, a + b), out
try:
    apply.inject(combine="add.rn.f32 %v_z, %v_x, %v_y;")[1, 4](out, a, b)
except nx.NumptxError as e:
    assert "dev" in str(e), str(e)
else:
    raise AssertionError("a site without a stub ran")
print("CHECKS OK")
'''


def test_the_simulator_refuses_what_the_build_refuses(tmp_path):
    pytest.importorskip("numba.cuda")
    run_script(tmp_path, SIM_CHECKS, simulator=True, marker="CHECKS OK")


_DUCK = r'''
import numpy as np, numptx as nx
from numba import cuda

class Scaled:                         # not a ptx_expr: .stub decides the build
    def stub(self, site): return "add.f32 %v_z, %v_x, %v_y;"
    def __call__(self, x, y): return {"z": x + y, "debug": x}

@nx.kernel
def k(z, a, b):
    i = cuda.grid(1)
    if i < z.size:
        z[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})

a = np.arange(4, dtype=np.float32)
z = np.zeros(4, np.float32)
k.inject(combine=Scaled())[1, 4](z, a, a)
assert np.array_equal(z, 2 * a), z
print("DUCK-OK")
'''


def test_simulator_ignores_result_keys_the_site_lacks(tmp_path):
    """An object with .stub builds from its stub alone; the simulator reads only the keys of
    its reference's dict that the site has (as before issue 11)."""
    from conftest import run_script
    run_script(tmp_path, _DUCK, simulator=True, marker="DUCK-OK")
