"""Issue 14, "the simulator and emulator tell the truth": under numba-cuda's simulator an
``@nx.ptx_expr`` site runs its PTX stub (in the emulator), one evaluation per site for the
threads of a block; ``nx.emulate(..., site=)`` speaks the site's variable names; raw stubs that
never write an output are reported; ``nx.simulator_active()``; ``apply.sites(...)`` under the
simulator; ``nx.site`` misuse is a SiteError on the GPU build and under the simulator alike.

Real components: simulator scripts run in a fresh process under ``NUMBA_ENABLE_CUDASIM=1``;
the GPU build is numba-cuda's real compiler (no GPU needed)."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx
from conftest import run_script
from numba import cuda

# -- item 5: the simulator runs the stub ----------------------------------------------------------
SIM_STUB = r'''
import numpy as np, numptx as nx
from numba import cuda

@nx.kernel
def fma_site(out, a, b, c):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("f", x=a[i], y=b[i], z=c[i], out={"r": nx.f32})

@nx.ptx_expr                               # "cuda" precision: x * y + z contracts into fma
def f(x: nx.f32, y: nx.f32, z: nx.f32):
    return x * y + z

n = 40
e = np.float32(1 + 2**-12)                 # e * e = 1 + 2^-11 + 2^-24: the product rounds
a = np.full(n, e, np.float32)
c = np.full(n, -(1 + 2**-11), np.float32)
out = np.zeros(n, np.float32)
fma_site.inject(f=f)[2, 32](out, a, a, c)
assert f(e, e, c[0]) == 0                  # the NumPy reference rounds the product
assert np.all(out == np.float32(2**-24)), out          # the stub: one rounding (fma)

ref = nx.kernel(fma_site.py_func, simulate="reference")
out[:] = 1
ref.inject(f=f)[2, 32](out, a, a, c)
assert np.all(out == 0), out

# accurate math is bit-exact in the emulator: the simulator gives what nx.emulate gives
@nx.kernel
def lap(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("k", x=a[i], y=b[i], out={}, mod={"acc": out[i]})

@nx.ptx_expr(precision="accurate")
def k(x: nx.f32, y: nx.f32, acc: nx.f32):
    return {"acc": acc + nx.exp(-abs(x - y) * 0.37)}

rng = np.random.default_rng(1)
x = rng.standard_normal(48).astype(np.float32)
y = rng.standard_normal(48).astype(np.float32)
acc = rng.standard_normal(48).astype(np.float32)
out = acc.copy()
lap.inject(k=k)[3, 16](out, x, y)
from numptx.jit.numba.sim_checks import site_for
from numptx.jit.numba.numba_site import SiteSpec
site = site_for(SiteSpec("k", (("in", "f32", "x"), ("in", "f32", "y"), ("mod", "f32", "acc"))))
want = nx.emulate(k.stub(site), {"v_x": x, "v_y": y, "v_acc": acc}, {"v_acc": "f32"})["v_acc"]
assert np.array_equal(out, want), (out, want)
print("STUB OK")
'''


def test_simulator_runs_the_stub_not_the_reference(tmp_path):
    run_script(tmp_path, SIM_STUB, simulator=True, marker="STUB OK")


SIM_BATCH = r'''
import numpy as np, numptx as nx
import numptx.jit.numba.launch as L
from numba import cuda

@cuda.jit(device=True)
def helper(v):
    return nx.site("twice", x=v, out={"z": nx.f32})

@nx.kernel
def k(out, a, cnt):
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    sh = cuda.shared.array(64, np.float32)
    v = a[i] if i < a.size else np.float32(0)
    if t % 3 != 0:                          # divergence: a third of the threads skip the site
        v = helper(v)
    sh[t] = v
    cuda.syncthreads()                      # a barrier after a site some threads skipped
    s = sh[(t + 1) % cuda.blockDim.x]
    for j in range(2):                      # a site in a loop: one batch per iteration
        s = nx.site("twice", x=s, out={"z": nx.f32})
    if i < out.size:
        out[i] = s
        cnt[i] = cuda.syncthreads_count(t % 2)

twice = "add.rn.f32 %v_z, %v_x, %v_x;"
a = np.arange(100, dtype=np.float32)
got = {}
for batch in (True, False):
    L.SIM_BATCH = batch
    out = np.zeros(100, np.float32); cnt = np.zeros(100, np.int32)
    k.inject(twice=twice)[2, 64](out, a, cnt)
    got[batch] = (out, cnt)
L.SIM_BATCH = True
want = np.zeros(128, np.float32)
want[:100] = a
t = np.arange(128) % 64
want = np.where(t % 3 != 0, 2 * want, want)
rot = np.concatenate([np.roll(want[:64], -1), np.roll(want[64:], -1)])
assert np.array_equal(got[True][0], 4 * rot[:100]), got[True][0]
assert np.array_equal(got[True][0], got[False][0])
assert np.all(got[True][1][:64] == 32) and np.all(got[True][1][64:] == 18), got[True][1]

# a stub the emulator refuses raises its own error, from a batch
try:
    k.inject(twice="mov.f32 %v_z, %v_x;\nbrkpt;")[2, 64](out, a, cnt)
except nx.EmulationError as e:
    assert "unknown instruction 'brkpt'" in str(e), e
else:
    raise SystemExit("no error")

@nx.kernel
def fails(out, a):
    i = cuda.grid(1)
    if i == 5:
        out[i] = a[1000]                 # one thread fails while the others wait at the site
    out[i] = nx.site("twice", x=a[i], out={"z": nx.f32})

try:
    fails.inject(twice=twice)[1, 32](out, a)
except IndexError as e:
    assert "tid=[5, 0, 0]" in str(e), e
else:
    raise SystemExit("no error")
print("BATCH OK")
'''


def test_simulator_batches_a_site_across_the_threads_of_a_block(tmp_path):
    """Divergence, syncthreads (also _count) around sites, a site in a loop and in a device
    function, two blocks: the batched launch gives what threads evaluating alone give."""
    run_script(tmp_path, SIM_BATCH, simulator=True, marker="BATCH OK")


SIM_SPECIAL = r'''
import numpy as np, numptx as nx
import numptx.jit.numba.launch as L
from numba import cuda

@nx.kernel
def k(out, a):
    i = cuda.grid(1)
    if i < out.size and i % 2 == 1:
        out[i] = nx.site("s", x=a[i], out={"z": nx.f32})
a = np.zeros(16, np.float32)
tid = "{ .reg .u32 %t; mov.u32 %t, %tid.x; cvt.rn.f32.u32 %v_z, %t; }"
cta = ("{ .reg .u32 %t<4>; mov.u32 %t1, %ctaid.x; mov.u32 %t2, %ntid.x; mov.u32 %t3, %tid.x; "
       "mad.lo.u32 %t0, %t1, %t2, %t3; cvt.rn.f32.u32 %v_z, %t0; }")
for batch in (True, False):
    L.SIM_BATCH = batch
    for stub, want in ((tid, np.arange(16) % 8), (cta, np.arange(16))):
        o = np.full(16, -1, np.float32)
        k.inject(s=stub)[2, 8](o, a)
        assert np.array_equal(o[1::2], want[1::2]) and np.all(o[::2] == -1), (batch, o)
print("SPECIAL OK")
'''


def test_simulator_gives_each_thread_its_special_registers(tmp_path):
    """%tid, %ctaid, %ntid read in a stub are the thread's own, batched or not."""
    run_script(tmp_path, SIM_SPECIAL, simulator=True, marker="SPECIAL OK")


# -- item 6: nx.emulate(..., site=) speaks variable names ----------------------------------------
def _site(*variables):
    from numptx.jit.numba.numba_site import SiteSpec
    from numptx.jit.numba.sim_checks import site_for
    return site_for(SiteSpec("s", tuple(variables)))


def test_emulate_at_a_site_takes_variable_names_and_says_did_you_mean():
    site = _site(("in", "f32", "x"), ("out", "f32", "z"), ("mod", "f32", "acc"))
    stub = "add.rn.f32 %v_z, %v_x, %v_x;\nadd.rn.f32 %v_acc, %v_acc, %v_x;"
    got = nx.emulate(stub, {"x": np.float32([1, 2]), "acc": 3.0}, site=site)
    assert set(got) == {"z", "acc"} and got["z"].dtype == np.float32
    assert got["z"].tolist() == [2, 4] and got["acc"].tolist() == [4, 5]
    assert nx.emulate(stub, {"x": 1.0, "acc": 0.0}, ["acc"], site=site) == {"acc": 1.0}
    with pytest.raises(nx.EmulationError, match=r"unknown input 'xx': site 's' has no in or mod "
                       r"variable of that name \(inputs: x, acc\); did you mean 'x'\?"):
        nx.emulate(stub, {"xx": 1.0, "acc": 0.0}, site=site)
    with pytest.raises(nx.EmulationError, match=r"unknown input 'v_x'.*not their registers: 'x'"):
        nx.emulate(stub, {"v_x": 1.0, "acc": 0.0}, site=site)
    with pytest.raises(nx.EmulationError, match=r"unknown input 'z'.*\(inputs: x, acc\)"):
        nx.emulate(stub, {"z": 1.0}, site=site)
    with pytest.raises(nx.EmulationError, match=r"unknown output 'accc'.*did you mean 'acc'\?"):
        nx.emulate(stub, {"x": 1.0, "acc": 0.0}, ["accc"], site=site)

    @nx.ptx_expr                            # a formula: its stub for the site runs
    def f(x, acc):
        return x + x, acc + x
    got = nx.emulate(f, {"x": np.float32(1.5), "acc": np.float32(1)}, site=site)
    assert got == {"z": 3.0, "acc": 2.5}


# -- item 7: a raw stub that never writes an out variable is reported ----------------------------
def test_a_stub_that_never_writes_an_output_is_reported():
    from numptx.jit.templates.stub_checks import (UnwrittenOutputError, UnwrittenOutputWarning,
                                        check_outputs_written, unwritten_outputs)
    site = _site(("in", "f32", "x"), ("in", "f32", "y"), ("out", "f32", "z"),
                 ("mod", "f32", "acc"))
    assert unwritten_outputs("add.rn.f32 %v_z, %v_x, %v_y;", site) == ()    # mods may pass
    assert unwritten_outputs("add.rn.f32 %v_q, %v_x, %v_y;", site) == ("z",)
    # an instruction the emulator does not know: the first operand counts as written
    assert unwritten_outputs("mystery.op %v_z, %v_x;", site) == ()
    assert unwritten_outputs("st.global.f32 [%v_z], %v_x;", site) == ("z",)
    shadow = "{\n.reg .f32 %v_z;\nadd.rn.f32 %v_z, %v_x, %v_y;\n}"
    assert unwritten_outputs(shadow, site) == ("z",)
    with pytest.warns(UnwrittenOutputWarning, match=r"site 's': the stub never writes out "
                      r"variable 'z' \(%v_z\)"):
        check_outputs_written("add.rn.f32 %v_acc, %v_x, %v_y;", site)
    with pytest.raises(UnwrittenOutputError, match=r"declared inside a \{ \} block \(stub line 2\)") as e:
        check_outputs_written(shadow, site, strict=True)
    assert isinstance(e.value, nx.NumptxError) and e.value.variables == ("z",)


UNWRITTEN = "{\n.reg .f32 %t;\nadd.rn.f32 %t, %v_x, %v_y;\n}"     # never writes %v_z


def test_strict_templates_refuse_a_stub_that_never_writes_an_output(spine_ptx):
    from conftest import SPINE_SRC
    from numptx.jit.templates.stub_checks import UnwrittenOutputError, UnwrittenOutputWarning
    for t in (nx.Template(spine_ptx), nx.CudaTemplate(SPINE_SRC)):
        assert t.strict is False
        with pytest.warns(UnwrittenOutputWarning, match="never writes out variable 'z'"):
            t.inject(combine=UNWRITTEN)
    for t in (nx.Template(spine_ptx, strict=True), nx.CudaTemplate(SPINE_SRC, strict=True)):
        with pytest.raises(UnwrittenOutputError, match=r"site 'combine': the stub never writes "
                           r"out variable 'z' \(%v_z\)") as e:
            t.inject(combine=UNWRITTEN)
        assert e.value.site == "combine" and e.value.variables == ("z",)
        assert t.for_arch("sm_80").strict is True
        t.inject(combine="add.rn.f32 %v_z, %v_x, %v_y;")        # a written output: fine


def _strict_kernel(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("combine", x=a[i], y=a[i], out={"z": nx.f32})


def test_a_strict_kernel_refuses_a_stub_that_never_writes_an_output():
    from numptx.jit.templates.stub_checks import UnwrittenOutputError, UnwrittenOutputWarning
    x = np.ones(4, np.float32)
    with pytest.warns(UnwrittenOutputWarning, match="never writes out variable 'z'"):
        nx.kernel(_strict_kernel).inject(combine=UNWRITTEN).specialize(x, x)
    k = nx.kernel(strict=True)(_strict_kernel)
    assert k.strict is True
    with pytest.raises(UnwrittenOutputError, match="site 'combine': the stub never writes out "
                       "variable 'z'"):
        k.inject(combine=UNWRITTEN).specialize(x, x)


SIM_STRICT = r'''
import warnings
import numpy as np, numptx as nx
from numba import cuda
from numptx.jit.templates.stub_checks import UnwrittenOutputError, UnwrittenOutputWarning

def f(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("combine", x=a[i], y=a[i], out={"z": nx.f32})

stub = "{\n.reg .f32 %t;\nadd.rn.f32 %t, %v_x, %v_y;\n}"
x = np.ones(4, np.float32)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    try:                                    # warned; the emulator then has no z to read
        nx.kernel(f).inject(combine=stub)[1, 4](np.zeros(4, np.float32), x)
    except nx.EmulationError as e:
        assert "unknown output 'v_z'" in str(e), e
assert any(issubclass(c.category, UnwrittenOutputWarning) for c in w), w
try:
    nx.kernel(f, strict=True).inject(combine=stub)[1, 4](np.zeros(4, np.float32), x)
except UnwrittenOutputError as e:
    assert str(e).startswith("site 'combine': the stub never writes out variable 'z'"), e
    assert e.variables == ("z",)
else:
    raise SystemExit("no error")
# any raw text (np.str_ too) is held to strict as the build holds it
for other in (np.str_(stub),):
    try:
        nx.kernel(f, strict=True).inject(combine=other)[1, 4](np.zeros(4, np.float32), x)
    except UnwrittenOutputError as e:
        assert "never writes out variable 'z'" in str(e), e
    else:
        raise SystemExit(f"no error for {type(other).__name__}")
out = np.zeros(4, np.float32)
nx.kernel(f, strict=True).inject(combine="add.rn.f32 %v_z, %v_x, %v_y;")[1, 4](out, x)
assert np.all(out == 2), out
print("STRICT OK")
'''


def test_a_strict_kernel_refuses_the_stub_under_the_simulator_too(tmp_path):
    run_script(tmp_path, SIM_STRICT, simulator=True, marker="STRICT OK")


def test_the_simulator_check_warns_of_an_unwritten_output():
    """The simulator's build check (the real build's, once per text) warns too."""
    from numptx.jit.numba.numba_site import SiteSpec
    from numptx.jit.numba.sim_checks import check_stub
    from numptx.jit.templates.stub_checks import UnwrittenOutputWarning
    spec = SiteSpec("s7", (("in", "f32", "x"), ("out", "f32", "z")))
    with pytest.warns(UnwrittenOutputWarning, match="never writes out variable 'z'"):
        check_stub(spec, "{\n.reg .f32 %t;\nadd.rn.f32 %t, %v_x, %v_x;\n}", "sm_90")


# -- item 8: simulator_active, sites under the simulator -----------------------------------------
SITES_SRC = r'''
import numpy as np, numptx as nx
from numba import cuda

@nx.kernel
def apply(out, a, b, acc):
    i = cuda.grid(1)
    if i < out.size:
        z = nx.site("combine", x=a[i], y=(b[i], nx.u32), out={"z": nx.f32})
        z, s = nx.site("step", x=z, out={"w": nx.f64}, mod={"acc": acc[i]})
        out[i] = z
        acc[i] = s

a = np.ones(4, np.float32); b = np.ones(4, np.uint32)
acc = np.full(4, 7.0); out = np.zeros(4, np.float32)
sites = apply.sites(out, a, b, acc)
assert np.all(acc == 7) and np.all(out == 0)            # the arguments are left alone
print("ACTIVE", nx.simulator_active())
for name, site in sites.items():
    print("SITE", site.signature)
'''


def test_sites_under_the_simulator_match_the_real_build(tmp_path):
    import os
    import subprocess
    import sys
    script = tmp_path / "sites.py"
    script.write_text(SITES_SRC)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "ACTIVE True" in r.stdout
    sim = [ln[5:] for ln in r.stdout.splitlines() if ln.startswith("SITE ")]
    ns: dict = {}
    exec(compile(SITES_SRC.split("a = np.ones")[0], "sites", "exec"), ns)
    a = np.ones(4, np.float32)
    real = [s.signature for s in ns["apply"].sites(a, a, np.ones(4, np.uint32),
                                                    np.ones(4)).values()]
    assert sim == real == ["combine(in f32 x, in u32 y, out f32 z)",
                           "step(in f32 x, out f64 w, mod f64 acc)"]
    assert nx.simulator_active() is False


# -- item 13: nx.site misuse is a SiteError, on the GPU build and under the simulator ----------
MISUSE = r'''
import numpy as np, numptx as nx
from numba import cuda

def typo(out, a):
    out[0] = nx.site("s", x=a[0], outs={"z": nx.f32})

def no_out(out, a):
    out[0] = nx.site("s", x=a[0])

def list_out(out, a):
    out[0] = nx.site("s", x=a[0], out=["z"])

def list_mod(out, a):
    out[0] = nx.site("s", x=a[0], mod=["acc"])

def dict_var(out, a):                       # a dict variable, assigned before a branch: works
    d = {"z": nx.f32}
    if a[0] > 0:
        out[0] = nx.site("s", x=a[0], out=d)

def positional(out, a):                     # a value given positionally
    out[0] = nx.site("s", a[0], out={"z": nx.f32})

def no_name(out, a):
    out[0] = nx.site(x=a[0], out={"z": nx.f32})

def empty_out(out, a):                      # out={} and the result used
    out[0] = nx.site("s", x=a[0], out={})

def in_and_out(out, a):                     # one name both in and out
    out[0] = nx.site("s", x=a[0], out={"x": nx.f32})

def two_signatures(out, a):
    out[0] = nx.site("s", x=a[0], out={"z": nx.f32})
    out[1] = nx.site("s", x=a[1], y=a[2], out={"z": nx.f32})

def two_types(out, a):                      # the same call as declared, values of two types
    out[0] = nx.site("s", x=a[0], out={"z": nx.f32})
    out[1] = nx.site("s", x=np.float64(a[1]), out={"z": nx.f32})

def unpack(out, a):                         # returns z, w, acc; two names unpacked
    r, n = nx.site("s", x=a[0], out={"z": nx.f32, "w": nx.f32}, mod={"acc": a[1]})
    out[0] = r + n

def unused(out, a):                         # out={} and the result not used: builds
    nx.site("s", x=a[0], out={})
'''
MISUSE_WANT = {
    "typo": "site 's': outs= is given a dict, but a variable takes one value (outs=a[i]); did "
            "you mean out=? outputs are declared with out={'z': nx.f32}",
    "no_out": "site 's' has no out= or mod= variables, so it returns nothing, but its result is "
              "used: declare what it returns, e.g. out={'z': nx.f32}",
    "list_out": "site 's': out= must be a dict literal, e.g. out={'z': nx.f32}",
    "list_mod": "site 's': mod= must be a dict literal, e.g. mod={'acc': acc[i]}",
    "positional": "site(name, var=value, ..., out={...}, mod={...}) takes the site name as its "
                  "only positional argument",
    "no_name": "site(name, var=value, ..., out={...}, mod={...}) takes the site name as its only "
               "positional argument",
    "empty_out": "site 's' has no out= or mod= variables, so it returns nothing, but its result "
                 "is used",
    "in_and_out": "site 's': duplicate variable name 'x'",
    "two_signatures": "site 's' is called with two different signatures: s(in x, out f32 z) and "
                      "s(in x, in y, out f32 z); a site name has one signature",
    "two_types": "site 's' is called with two different signatures; a site name has one "
                 "signature (the same variables, kinds and types at each call)",
    "unpack": "site 's' returns 3 values (z, w, acc: its out variables, then its mod variables), "
              "but its result is unpacked into 2 names: unpack 3 names, e.g. z, w, acc = "
              "nx.site('s', ...)",
}
MISUSE_SIM = MISUSE + r'''
x = np.ones(4, np.float32)
z = "mov.f32 %v_z, %v_x;"
stubs = {"typo": z, "no_out": "", "list_out": z, "list_mod": "",
         "dict_var": "add.rn.f32 %v_z, %v_x, %v_x;", "positional": z, "no_name": z,
         "empty_out": z,                    # writes a %v_z the site lacks: never assembled
         "in_and_out": "mov.f32 %v_x, %v_x;", "two_signatures": z, "two_types": z,
         "unpack": "mov.f32 %v_z, %v_x;\nmov.f32 %v_w, %v_x;", "unused": ""}
for name, stub in stubs.items():
    k = nx.kernel(globals()[name])
    out = np.zeros(4, np.float32)
    try:
        k.inject(s=stub)[1, 1](out, x)
    except Exception as e:
        print(f"{name}: {type(e).__name__}: {e}")
    else:
        print(f"{name}: ran {out[0]}")
    try:                                    # apply.sites(...) under the simulator: the same
        k.sites(out, x)
    except Exception as e:
        print(f"sites {name}: {type(e).__name__}: {e}")
    else:
        print(f"sites {name}: ok")
'''


@pytest.mark.parametrize("name", sorted(MISUSE_WANT))
def test_site_misuse_is_a_site_error_on_the_gpu_build(name):
    ns: dict = {}
    exec(compile(MISUSE, "misuse", "exec"), ns)
    x = np.ones(4, np.float32)
    with pytest.raises(nx.SiteError) as e:
        nx.kernel(ns[name]).ptx(x, x)
    assert type(e.value) is nx.SiteError
    assert str(e.value).startswith(f"kernel {name!r}: " + MISUSE_WANT[name]), str(e.value)


def test_a_site_whose_result_is_not_used_needs_no_out_on_the_gpu_build():
    ns: dict = {}
    exec(compile(MISUSE, "misuse", "exec"), ns)
    x = np.ones(4, np.float32)
    assert nx.kernel(ns["unused"]).sites(x, x)["s"].signature == "s(in f32 x)"


def test_a_dict_variable_for_out_builds_on_the_gpu_build():
    ns: dict = {}
    exec(compile(MISUSE, "misuse", "exec"), ns)
    x = np.ones(4, np.float32)
    k = nx.kernel(ns["dict_var"])
    assert k.sites(x, x)["s"].signature == "s(in f32 x, out f32 z)"
    assert k.inject(s="add.rn.f32 %v_z, %v_x, %v_x;").cubin[:4] == b"\x7fELF"


def test_site_misuse_is_the_same_site_error_under_the_simulator(tmp_path):
    import os
    import subprocess
    import sys
    script = tmp_path / "misuse.py"
    script.write_text(MISUSE_SIM)
    r = subprocess.run([sys.executable, str(script)], env=dict(os.environ, NUMBA_ENABLE_CUDASIM="1"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = dict(ln.split(": ", 1) for ln in r.stdout.splitlines() if ": " in ln)
    for name, want in MISUSE_WANT.items():         # the build's class and message
        assert lines[name].startswith(f"SiteError: kernel {name!r}: {want}"), (name, lines[name])
        assert lines[f"sites {name}"] == lines[name], (name, lines[f"sites {name}"])
    assert lines["dict_var"] == "ran 2.0"
    assert lines["unused"] == "ran 0.0"


def test_the_simulator_check_assembles_a_constant_sweep_once(monkeypatch):
    """Texts that differ from one that assembled only in f32/f64 literals are not assembled
    again (a sweep of constants costs one nvJitLink run); a different structure is."""
    from numptx.jit.numba import sim_checks as L
    from numptx.jit.numba.numba_site import SiteSpec
    calls = []
    real = L.ptx_to_cubin
    L._ptx_isa_version("sm_90")         # its probe (an assembly of its own) before the count
    monkeypatch.setattr(L, "ptx_to_cubin", lambda ptx, arch, **kw: (calls.append(1),
                                                                     real(ptx, arch, **kw))[1])
    spec = SiteSpec("sweep", (("in", "f32", "x"), ("out", "f32", "z")))
    for bits in ("3F800000", "40000000", "3E99999A"):
        L.check_stub(spec, f"mul.rn.f32 %v_z, %v_x, 0f{bits};", "sm_90")
    assert len(calls) == 1
    L.check_stub(spec, "add.rn.f32 %v_z, %v_x, 0f3F800000;", "sm_90")
    assert len(calls) == 2
    with pytest.raises(nx.LinkError):       # a failure is never taken from a shape
        L.check_stub(spec, "mul.rn.f64 %v_z, %v_x, 0d3FF0000000000000;", "sm_90")


def test_a_strict_template_fails_such_a_candidate_in_a_pack():
    t = nx.CudaTemplate(r'''extern "C" __global__ void k(float* o, const float* a, unsigned s, int n) {
        int i = threadIdx.x; if (i < n) { float x = a[i], z;
        PTX_INJECT("s", PTX_IN(F32, x), PTX_IN(U32, s), PTX_OUT(F32, z)); o[i] = z; } }''',
                        entry="k", cache=False, strict=True)
    bad = "{ .reg .f32 %q; mov.f32 %q, %v_x; }"
    p = t.pack("s", ["add.rn.f32 %v_z, %v_x, %v_x;", bad], select="s")
    assert list(p.errors) == [1] and "never writes" in str(p.errors[1])
