"""Templates, variants, @nx.kernel, build_many and launches (simulator in a subprocess; the GPU
launch test needs a GPU)."""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp

from conftest import SPINE_SRC, run_script

cuda = pytest.importorskip("numba.cuda")
from numba.cuda import types as nbt  # noqa: E402

SIM = nx.jit.numba_site.SIMULATOR
ADD = "add.f32 %v_z, %v_x, %v_y;"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMPTX_CACHE_DIR", str(tmp_path / "cache"))


class Expr:
    """Stands in for a DSL expression: ``.stub(site)`` gives PTX, calling it evaluates it."""

    def __init__(self, fn, ptx):
        self.fn, self.ptx = fn, ptx

    def stub(self, site):
        return self.ptx

    def __call__(self, **inputs):
        return self.fn(**inputs)


@pytest.fixture(scope="module")
def spine():
    return nx.CudaTemplate(SPINE_SRC, entry="kernel", arch="sm_90")


# ---- CUDA C++ templates ------------------------------------------------------------------------
def test_cuda_template_variant(spine):
    assert spine.entry == "kernel" and spine.arch == "sm_90"
    assert list(spine.sites) == ["combine"]
    v = spine.inject(combine=ADD)
    # bound: the stub reads and writes the kernel's registers, no copy frame is left
    assert "PTX_INJECT_BEGIN" not in v.ptx and "%v_" not in v.ptx
    assert re.search(r"add\.f32 %f\d+, %f\d+, %f\d+;", v.ptx)
    assert ADD in spine.inj.render([ADD])
    assert v.cubin[:4] == b"\x7fELF"
    assert v.sites is spine.sites and v.entry == "kernel"
    assert v.stub_map == {"combine": ADD}


def test_stub_kinds_stack_ptx_and_expression(spine):
    site = spine.sites["combine"]
    prog = [sp.input("x"), sp.input("y"), sp.instr("mul.rn.f32")]
    v = spine.inject({"combine": prog})
    assert v.stubs[0] == str(sp.compile(prog, site=site))
    assert v.cubin[:4] == b"\x7fELF"
    e = Expr(lambda x, y: x + y, ADD)
    assert spine.inject(combine=e).stubs == (ADD,)


def test_stub_errors(spine):
    with pytest.raises(nx.NumptxError, match="no stub for site 'combine'"):
        spine.inject()
    assert spine.inject(missing="empty").stubs == ("",)
    with pytest.raises(nx.NumptxError, match="no site named 'nope'"):
        spine.inject(combine=ADD, nope=ADD)
    with pytest.raises(nx.NumptxError, match="not int"):
        spine.inject(combine=3)
    with pytest.raises(nx.LinkError) as info:
        spine.inject(combine="add.f32 %v_z, %v_x, %nosuch;").cubin
    assert info.value.site == "combine"


def test_cuda_template_entry_names():
    src = SPINE_SRC.replace('extern "C" ', "")
    with pytest.raises(nx.NumptxError, match="extern \"C\""):
        nx.CudaTemplate(src, entry="kernel")
    assert "kernel" in nx.CudaTemplate(src, entry=None).entry      # the only kernel, mangled


# ---- numba kernels -----------------------------------------------------------------------------
needs_numba = pytest.mark.skipif(SIM, reason="needs the real numba-cuda")


@needs_numba
def test_numba_kernel_template_and_variant():
    @nx.kernel
    def apply(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": "f32"})

    with pytest.raises(nx.NumptxError, match="no signature yet"):
        apply.inject(combine=ADD).ptx
    a = np.zeros(8, np.float32)
    ptx = apply.ptx(a, a, a)
    t = apply.template()
    assert t.ptx == ptx and t.argtypes == (nbt.float32[::1],) * 3
    assert t.entry.startswith("_Z") and "apply" in t.entry and f".entry {t.entry}(" in ptx
    assert t.arch == "sm_90"
    v = apply.inject(combine=ADD)
    assert v.sites["combine"].signature == "combine(in f32 x, in f32 y, out f32 z)"
    assert v.cubin[:4] == b"\x7fELF" and v.entry == t.entry
    assert apply.template(a, a, a) is t                           # compiled once per signature
    with pytest.raises(nx.NumptxError, match="launch a variant"):
        apply[1, 1](a, a, a)


@needs_numba
def test_numba_kernel_declared_signature_and_cc():
    @nx.kernel("void(float64[:], float64[:])", cc=(8, 0))
    def k(out, a):
        i = cuda.grid(1)
        out[i] = nx.site("s", x=a[i], out={"z": "f64"})

    v = k.inject(s="mov.f64 %v_z, %v_x;")
    assert v.arch == "sm_80" and ".target sm_80" in v.ptx
    assert v.cubin[:4] == b"\x7fELF"
    v90 = v.specialize(cc=(9, 0))
    assert v90.arch == "sm_90" and v90.cubin[:4] == b"\x7fELF"


@needs_numba
def test_numba_kernel_templates_for_a_device_keep_the_arch_suffix_only_for_its_own_cc():
    """What a GPU launch picks: the kernel's own suffix (sm_90a) on a device of its cc, the
    plain architecture on another one; neither changes the default signature."""
    @nx.kernel(cc="sm_90a")
    def k(out, a):
        i = cuda.grid(1)
        out[i] = nx.site("s", x=a[i], out={"z": "f32"})

    assert k.arch == "sm_90a" and nx.kernel(lambda: None).arch == "sm_90"
    argtypes = (nbt.float32[:], nbt.float32[:])
    own = k.template_for_device(argtypes, (9, 0))
    other = k.template_for_device(argtypes, (10, 0))
    assert (own.arch, other.arch) == ("sm_90a", "sm_100")
    with pytest.raises(nx.NumptxError, match="no signature yet"):
        k.inject(s="mov.f32 %v_z, %v_x;").ptx
    assert k.template_for_device(argtypes, (9, 0)) is own and k.template(*argtypes) is own


@needs_numba
def test_numba_kernel_link_error_explains_external_functions():
    from numba.cuda import bf16

    @nx.kernel("void(float32[:])")
    def k(out):
        i = cuda.grid(1)
        out[i] = bf16.bfloat162float(nx.site("s", x=i, out={"z": "bf16"}))

    with pytest.raises(nx.LinkError, match="functions defined elsewhere"):
        k.inject(s="mov.b16 %v_z, 0;").cubin


@needs_numba
def test_numba_kernel_with_a_dsl_expression():
    expr_mod = pytest.importorskip("numptx.dsl.expr")
    T = pytest.importorskip("numptx.dsl.types")

    @expr_mod.ptx_expr
    def fma1(x: T.f32, y: T.f32) -> T.f32:
        return x * y + 1

    @nx.kernel("void(float32[:], float32[:], float32[:])")
    def apply(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": T.f32})

    v = apply.inject(combine=fma1)
    assert v.variant.stubs == (str(fma1.stub(v.sites["combine"])),)
    assert v.cubin[:4] == b"\x7fELF"


# ---- build_many --------------------------------------------------------------------------------
def _stubs(n):
    return [{"combine": f"add.f32 %v_z, %v_x, 0f{0x3F800000 + i:08X};"} for i in range(n)]


def test_build_many_parallel_with_failures(spine):
    batch = _stubs(6)
    batch.insert(3, {"combine": "bogus.f32 %v_z;"})
    batch.append({"nosuchsite": ADD})
    seen = []
    with pytest.raises(nx.BuildError) as info:
        spine.build_many(batch, progress=lambda done, total: seen.append((done, total)))
    err = info.value
    assert sorted(err.errors) == [3, 7]
    assert "variant 3: LinkError" in str(err) and "variant 7: RenderError" in str(err)
    assert isinstance(err.errors[3], nx.LinkError) and err.errors[3].site == "combine"
    built = [v for v in err.variants if v is not None]
    assert len(built) == 6 and all(v.cubin[:4] == b"\x7fELF" for v in built)
    assert sorted(seen) == [(i, 8) for i in range(1, 9)]


def test_build_many_executor_and_return_mode(spine):
    batch = _stubs(4) + [{"combine": "bogus;"}]
    with ThreadPoolExecutor(2) as pool:
        out = spine.build_many(batch, executor=pool, errors="return")
    assert [type(r).__name__ for r in out] == ["Variant"] * 4 + ["LinkError"]
    again = spine.build_many(batch[:4])                               # all cached now
    assert [v.cubin for v in again] == [v.cubin for v in out[:4]]
    assert len({v.key for v in again}) == 4


@needs_numba
def test_kernel_build_many():
    @nx.kernel("void(float32[:], float32[:])")
    def k(out, a):
        i = cuda.grid(1)
        out[i] = nx.site("s", x=a[i], out={"z": "f32"})

    vs = k.build_many([{"s": f"mul.f32 %v_z, %v_x, 0f{0x40000000 + i:08X};"} for i in range(3)])
    assert len({v.cubin for v in vs}) == 3


# ---- launching ---------------------------------------------------------------------------------
@needs_numba
def test_launch_without_gpu_says_how_to_simulate():
    from conftest import gpu_available
    if gpu_available():
        pytest.skip("a GPU is present")

    @nx.kernel
    def k(out, a):
        i = cuda.grid(1)
        out[i] = nx.site("s", x=a[i], out={"z": "f32"})

    a = np.zeros(4, np.float32)
    with pytest.raises(nx.LaunchError, match="NUMBA_ENABLE_CUDASIM=1"):
        k.inject(s="mov.f32 %v_z, %v_x;")[1, 4](a, a)


SIM_SCRIPT = r'''
import numpy as np, numptx as nx
from numba import cuda
from numptx import stack_ptx as sp

class Expr:
    def __init__(self, fn): self.fn = fn
    def stub(self, site): raise AssertionError("no PTX in the simulator")
    def __call__(self, **kw): return self.fn(**kw)

@nx.kernel
def apply(out, acc, a, b):
    i = cuda.grid(1)
    if i < out.size:
        z = nx.site("combine", x=a[i], y=b[i], out={"z": "f32"})
        z, s = nx.site("step", x=z, out={"z": "f32"}, mod={"acc": acc[i]})
        acc[i] = s
        out[i] = z

a = np.arange(8, dtype=np.float32); b = np.full(8, 2, np.float32)
out = np.zeros(8, np.float32); acc = np.ones(8, np.float64)
apply.inject(combine="mul.rn.f32 %v_z, %v_x, %v_y;",
             step=Expr(lambda x, acc: (x + 1, acc + x)))[1, 8](out, acc, a, b)
assert np.array_equal(out, a * b + 1), out
assert np.array_equal(acc, 1 + a * b), acc

prog = [sp.input("x"), sp.input("y"), sp.instr("add.rn.f32")]
apply.inject(combine=prog, step="mov.f32 %v_z, %v_x;\nadd.rn.f64 %v_acc, %v_acc, %v_acc;")[2, 4](
    out, acc, a, b)
assert np.array_equal(out, a + b), out
assert np.array_equal(acc, 2 * (1 + a * b)), acc

for bad in (lambda: apply.ptx(a, a, a, a), lambda: apply.inject(combine="", step="").cubin):
    try:
        bad()
    except nx.NumptxError as e:
        assert "simulator" in str(e)
    else:
        raise AssertionError("no error")
try:
    apply.inject(combine="mov.f32 %v_z, %v_x;")[1, 8](out, acc, a, b)
except nx.SiteError as e:
    assert "no stub for it" in str(e), e
else:
    raise AssertionError("no error")
try:                                          # the @nx.ptx_expr DSL, when present
    from numptx.dsl.expr import ptx_expr
    from numptx.dsl import types as T
except ImportError:
    pass
else:
    @ptx_expr
    def fma1(x: T.f32, y: T.f32) -> T.f32:
        return x * y + 1

    @ptx_expr
    def step(x: T.f32, acc: T.f64):
        return x, acc * 2

    apply.inject(combine=fma1, step=step)[1, 8](out, acc, a, b)
    assert np.array_equal(out, a * b + 1), out
    assert np.array_equal(acc, 4 * (1 + a * b)), acc
print("SIM OK")
'''


def test_simulator_runs_variants_on_the_cpu(tmp_path):
    run_script(tmp_path, SIM_SCRIPT, simulator=True, marker="SIM OK")


@pytest.mark.gpu
def test_gpu_launch_matches_numpy():
    @nx.kernel
    def apply(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": "f32"})

    n = 1000
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    b = np.random.default_rng(1).random(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    apply.inject(combine="mul.rn.f32 %v_z, %v_x, %v_y;")[(n + 127) // 128, 128](out, a, b)
    np.testing.assert_array_equal(out, a * b)
    d_out = cuda.to_device(np.zeros(n, np.float32))
    apply.inject(combine=ADD)[(n + 127) // 128, 128](d_out, cuda.to_device(a), cuda.to_device(b))
    np.testing.assert_array_equal(d_out.copy_to_host(), a + b)


ACCEPTANCE = '''
import numpy as np, numptx as nx
from numba import cuda

@nx.kernel                                   # a numba.cuda kernel with sites
def apply(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})

@nx.ptx_expr
def dist(x, y):
    return nx.sqrt(x * x + y * y)

k = apply.inject(combine=dist)               # stubs may also be raw PTX text or Stack PTX programs
a = np.random.rand(1000).astype(np.float32); b = np.random.rand(1000).astype(np.float32)
out = np.zeros_like(a)
k[4, 256](out, a, b)                         # on a GPU; under the simulator on a CPU
assert np.allclose(out, np.hypot(a, b), rtol=1e-6)
print("ACCEPTANCE OK")
'''


def test_issue_acceptance_code_runs_in_the_simulator(tmp_path):
    """The issue's example, as written, on the CPU under numba-cuda's simulator."""
    run_script(tmp_path, ACCEPTANCE, simulator=True, marker="ACCEPTANCE OK")


@pytest.mark.gpu
def test_issue_acceptance_code_runs_on_the_gpu(tmp_path):
    run_script(tmp_path, ACCEPTANCE, simulator=False, marker="ACCEPTANCE OK")


def test_launch_template_is_the_build_many_template():
    """A GPU launch takes the cubin of the kernel's own template for the launch's argument
    types and the device's architecture (launch.py: ``k.template(*argtypes, cc=device)``): for
    an sm_90 device that is the template ``build_many`` used, so prebuilt variants are reused."""
    import numpy as np

    @nx.kernel(cache=False)
    def apply(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})
    x = np.zeros(8, np.float32)
    built = apply.build_many([{"combine": "add.rn.f32 %v_z, %v_x, %v_y;"}], args=(x, x, x))[0]
    argtypes = apply.argtypes(x, x, x)
    tmpl = apply._template_for(argtypes, (9, 0), "")     # what a launch on sm_90 asks for
    assert tmpl is built.template
    kv = apply.inject(combine="add.rn.f32 %v_z, %v_x, %v_y;")
    assert kv.for_template(tmpl).key == built.key


def test_build_many_progress_bar(spine, capsys, monkeypatch):
    """progress=True draws a tqdm bar that ends at the batch size (without tqdm: a counter)."""
    pytest.importorskip("tqdm")
    batch = [{"combine": f"mul.rn.f32 %v_z, %v_x, 0f{0x3F800000 + 11 * i:08X};"}
             for i in range(5)]
    spine.build_many(batch, progress=True)
    err = capsys.readouterr().err
    assert "numptx build" in err and "5/5" in err
    import builtins
    real_import = builtins.__import__

    def no_tqdm(name, *a, **kw):
        if name.startswith("tqdm"):
            raise ImportError(name)
        return real_import(name, *a, **kw)
    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    batch = [{"combine": f"mul.rn.f32 %v_z, %v_x, 0f{0x3F900000 + 13 * i:08X};"}
             for i in range(3)]
    spine.build_many(batch, progress=True)
    assert "numptx: built 3/3 variant(s)" in capsys.readouterr().err


GPU_TYPES = [("f16", np.float16), ("f32", np.float32), ("f64", np.float64), ("s32", np.int32),
             ("u32", np.uint32), ("s64", np.int64), ("u64", np.uint64)]


@pytest.mark.gpu
@pytest.mark.parametrize("tname,npt", GPU_TYPES, ids=[t for t, _ in GPU_TYPES])
def test_gpu_numba_variant_every_type_out_and_mod(tname, npt):
    T = getattr(nx, tname)

    @nx.kernel
    def k(out, acc, a):
        i = cuda.grid(1)
        if i < out.size:
            z, s = nx.site("twice", x=a[i], out={"z": T}, mod={"acc": acc[i]})
            out[i] = z
            acc[i] = s

    def twice(x, acc):
        return x + x, acc + x
    twice.__annotations__ = {"x": T, "acc": T}      # (this file's annotations are strings)
    a = np.arange(1, 65).astype(npt)
    out, acc = np.zeros_like(a), np.full_like(a, 3)
    k.inject(twice=nx.ptx_expr(twice))[1, 64](out, acc, a)
    np.testing.assert_array_equal(out, a + a)
    np.testing.assert_array_equal(acc, 3 + a)


@pytest.mark.gpu
@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_gpu_numba_variant_takes_cai_arrays(lib):
    """CuPy arrays and PyTorch CUDA tensors go through numba's own marshalling (CAI)."""
    mod = pytest.importorskip(lib)

    @nx.kernel
    def apply(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": "f32"})
    a = np.random.default_rng(2).random(500, dtype=np.float32)
    b = np.random.default_rng(3).random(500, dtype=np.float32)
    if lib == "cupy":
        da, db, dout = mod.asarray(a), mod.asarray(b), mod.zeros(500, dtype=mod.float32)
        back = lambda x: mod.asnumpy(x)                      # noqa: E731
    else:
        da, db = mod.from_numpy(a).cuda(), mod.from_numpy(b).cuda()
        dout = mod.zeros(500, dtype=mod.float32, device="cuda")
        back = lambda x: x.cpu().numpy()                     # noqa: E731
    apply.inject(combine="mul.rn.f32 %v_z, %v_x, %v_y;")[4, 128](dout, da, db)
    np.testing.assert_array_equal(back(dout), a * b)


@pytest.mark.gpu
def test_gpu_numba_variant_on_a_stream_with_dynamic_shared_memory():
    @nx.kernel
    def staged(out, a):
        buf = cuda.shared.array(0, dtype=np.float32)         # dynamic shared memory
        i = cuda.grid(1)
        t = cuda.threadIdx.x
        if i < out.size:
            buf[t] = a[i]
        cuda.syncthreads()
        if i < out.size:
            out[i] = nx.site("s", x=buf[t], out={"z": "f32"})
    a = np.arange(256, dtype=np.float32)
    stream = cuda.stream()
    d_a, d_out = cuda.to_device(a, stream=stream), cuda.device_array(256, np.float32, stream=stream)
    staged.inject(s="add.rn.f32 %v_z, %v_x, %v_x;")[2, 128, stream, 128 * 4](d_out, d_a)
    stream.synchronize()
    np.testing.assert_array_equal(d_out.copy_to_host(), a + a)


@pytest.mark.gpu
def test_gpu_launch_uses_the_variants_build_many_made(tmp_path, monkeypatch):
    """Variants built ahead for the device's architecture launch without another assembly."""
    from numptx.jit.templates import template as T
    from numptx.jit.compile.cache import CubinCache
    cc = cuda.get_current_device().compute_capability

    @nx.kernel(cc=cc, cache=CubinCache(str(tmp_path / "c")))
    def apply(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": "f32"})
    x = np.ones(256, np.float32)
    stubs = [f"mul.rn.f32 %v_z, %v_x, 0f{0x40000000 + k:08X};" for k in range(3)]
    apply.build_many([{"combine": s} for s in stubs], args=(x, x, x))

    def no_assembly(*a, **kw):
        raise AssertionError("a launch assembled a variant that build_many had built")
    monkeypatch.setattr(T, "ptx_to_cubin", no_assembly)
    for s in stubs:
        out = np.zeros_like(x)
        apply.inject(combine=s)[2, 128](out, x, x)
        assert out[0] > 1.9


def test_a_launch_template_leaves_the_default_signature_alone():
    """What a GPU launch compiles (Kernel._template_for) does not change the signature that
    .ptx/.cubin/build_many default to."""
    import numpy as np

    @nx.kernel(cache=False)
    def apply(out, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("s", x=a[i], out={"z": nx.f32})
    x = np.zeros(8, np.float32)
    apply.ptx(x, x)
    before = apply.argtypes()
    apply._template_for(apply.argtypes(np.zeros(8, np.float64), x), (9, 0), "")
    assert apply.argtypes() == before
