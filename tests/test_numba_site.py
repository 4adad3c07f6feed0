"""nx.site in numba-cuda kernels: the marker text, types, returns, loops, errors.

Real numba-cuda compiles (``compile_ptx``, no GPU), real PtxInject and nvJitLink."""
from __future__ import annotations

import re

import numpy as np
import pytest

import numptx as nx

cuda = pytest.importorskip("numba.cuda")
from numba.cuda import types as nbt  # noqa: E402
from conftest import run_script  # noqa: E402

pytestmark = pytest.mark.skipif(nx.jit.numba_site.SIMULATOR, reason="needs the real numba-cuda")


class _DslLikeType:
    """Stands in for a DSL dtype object: only ``.name`` matters."""

    def __init__(self, name):
        self.name = name


F32 = _DslLikeType("f32")
S32 = _DslLikeType("s32")


def _ptx(fn, *argtypes, cc=(9, 0)) -> str:
    ptx, _ = cuda.compile_ptx(fn, argtypes, cc=cc)
    return ptx


def _site_block(ptx: str, name: str) -> str:
    """The inline-asm block of site ``name``, machine registers (%f1, %rd2) replaced by %R."""
    for m in re.finditer(r"// begin inline asm\n(.*?)// end inline asm", ptx, re.S):
        if f"// PTX_INJECT_BEGIN {name}\n" in m.group(1):
            return re.sub(r"%(?!v_)[a-z]+\d+", "%R", m.group(1))
    raise AssertionError(f"no site {name} in the PTX")


def test_marker_text_equals_the_cuda_header():
    src = r'''
    extern "C" __global__ void kernel(int* o, const float* a, double* acc) {
        int i = threadIdx.x;
        float x = a[i], y = a[i + 1];
        double m = acc[i];
        int z;
        PTX_INJECT("combine", PTX_IN(F32, x), PTX_IN(F32, y), PTX_MOD(F64, m), PTX_OUT(S32, z));
        o[i] = z; acc[i] = m;
    }'''
    cuda_ptx = nx.cuda_to_ptx(src, arch="sm_90")

    def k(o, a, acc):
        i = cuda.threadIdx.x
        z, m = nx.site("combine", x=a[i], y=a[i + 1], mod={"m": acc[i]}, out={"z": "s32"})
        o[i] = z
        acc[i] = m

    # variables in keyword order (x, y, m, z) as in the C++ call; returns outputs, then mods
    numba_ptx = _ptx(k, nbt.int32[:], nbt.float32[:], nbt.float64[:])
    assert _site_block(numba_ptx, "combine") == _site_block(cuda_ptx, "combine")
    sig = nx.PtxInject(numba_ptx).sites["combine"].signature
    assert sig == nx.PtxInject(cuda_ptx).sites["combine"].signature


def test_spine_kernel_injects_and_assembles():
    @nx.kernel
    def apply(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": F32})

    a = np.zeros(4, np.float32)
    inj = nx.PtxInject(apply.ptx(a, a, a))
    site = inj.sites["combine"]
    assert [(v.kind, v.dtype, v.name, v.reg) for v in site.variables] == [
        ("in", "f32", "x", "v_x"), ("in", "f32", "y", "v_y"), ("out", "f32", "z", "v_z")]
    cubin = nx.ptx_to_cubin(inj.render({"combine": "add.f32 %v_z, %v_x, %v_y;"}), arch="sm_90")
    assert cubin[:4] == b"\x7fELF"


TYPES = [("f16", nbt.float16), ("f32", nbt.float32), ("f64", nbt.float64), ("s32", nbt.int32),
         ("u32", nbt.uint32), ("s64", nbt.int64), ("u64", nbt.uint64)]


@pytest.mark.parametrize("tname,nbtype", TYPES, ids=[t for t, _ in TYPES])
def test_every_type_in_out_mod_for_sm80_and_sm90(tname, nbtype):
    def k(out, a, acc):
        i = cuda.grid(1)
        z, m = nx.site("s", x=a[i], out={"z": tname}, mod={"m": acc[i]})
        out[i] = z
        acc[i] = m

    arr = nbtype[:]
    ptx = _ptx(k, arr, arr, arr, cc=(8, 0))
    inj = nx.PtxInject(ptx)
    site = inj.sites["s"]
    dt = nx.get_dtype(tname)
    assert [(v.kind, v.dtype, v.reg_type) for v in site.variables] == [
        ("in", tname, dt.reg), ("out", tname, dt.reg), ("mod", tname, dt.reg)]
    stub = f"mov.{dt.mov} %v_z, %v_x;\nmov.{dt.mov} %v_m, %v_x;"
    rendered = inj.render({"s": stub})
    for arch in ("sm_80", "sm_90"):
        assert nx.ptx_to_cubin(rendered, arch=arch)[:4] == b"\x7fELF"


def test_bit_types_and_explicit_input_types():
    def k(out, bits, f):
        i = cuda.grid(1)
        # bf16 and b32 carried by same-size integers; f32 from an int32 converts the value
        z, h = nx.site("s", x=(bits[i], "bf16"), w=(f[i], "b32"), c=(i, S32),
                       out={"z": "f32"}, mod={"h": (bits[i], "b16")})
        out[i] = z
        bits[i] = h

    ptx = _ptx(k, nbt.float32[:], nbt.uint16[:], nbt.float32[:])
    site = nx.PtxInject(ptx).sites["s"]
    assert site.signature == "s(in bf16 x, in b32 w, in s32 c, out f32 z, mod b16 h)"
    stub = "mov.b32 %v_z, %v_w;\nmov.b16 %v_h, %v_x;"
    assert nx.ptx_to_cubin(nx.PtxInject(ptx).render({"s": stub}), arch="sm_90")[:4] == b"\x7fELF"


def test_returns_scalar_tuple_or_none_and_several_sites():
    def k(out, a, acc):
        i = cuda.grid(1)
        z = nx.site("one", x=a[i], out={"z": "f32"})                  # one value: a scalar
        p, q, m = nx.site("three", x=z, out={"p": "f32", "q": "f64"}, mod={"m": acc[i]})
        nx.site("only_inputs", t=p)                                    # nothing: None
        out[i] = p + np.float32(q)
        acc[i] = m

    ptx = _ptx(k, nbt.float32[:], nbt.float32[:], nbt.float64[:])
    inj = nx.PtxInject(ptx)
    assert list(inj.sites) == ["one", "three", "only_inputs"]
    assert inj.sites["three"].signature == "three(in f32 x, out f32 p, out f64 q, mod f64 m)"
    stubs = {"one": "mov.f32 %v_z, %v_x;", "only_inputs": "",
             "three": "mov.f32 %v_p, %v_x;\ncvt.f64.f32 %v_q, %v_x;\nadd.f64 %v_m, %v_m, %v_q;"}
    assert nx.ptx_to_cubin(inj.render(stubs), arch="sm_90")[:4] == b"\x7fELF"


def test_site_in_a_loop_and_in_an_inlined_device_function():
    @cuda.jit(device=True, inline="always")
    def dev(x):
        return nx.site("dev", x=x, out={"y": "f64"})

    def k(out, a):
        i = cuda.grid(1)
        acc = np.float32(0)
        for j in range(4):
            z, acc = nx.site("step", x=a[i * 4 + j], out={"z": "f32"}, mod={"acc": acc})
            out[i * 4 + j] = z
        out[i] = acc + np.float32(dev(np.float64(acc)))

    ptx = _ptx(k, nbt.float32[:], nbt.float32[:])
    inj = nx.PtxInject(ptx)
    assert inj.sites["step"].instances >= 1          # NVVM unrolls it: 4 instances, one stub
    assert inj.sites["dev"].signature == "dev(in f64 x, out f64 y)"
    stubs = {"step": "add.f32 %v_acc, %v_acc, %v_x;\nmov.f32 %v_z, %v_acc;",
             "dev": "mov.f64 %v_y, %v_x;"}
    assert nx.ptx_to_cubin(inj.render(stubs), arch="sm_90")[:4] == b"\x7fELF"


def test_type_spellings():
    import numba

    def k(out, a):
        i = cuda.grid(1)
        p, q, r = nx.site("s", x=a[i], out={"p": F32, "q": numba.float64, "r": np.int32})
        out[i] = p + np.float32(q) + np.float32(r)

    site = nx.PtxInject(_ptx(k, nbt.float32[:], nbt.float32[:])).sites["s"]
    assert site.signature == "s(in f32 x, out f32 p, out f64 q, out s32 r)"


def _compile_error(fn, *argtypes) -> str:
    with pytest.raises(Exception) as info:
        _ptx(fn, *argtypes)
    return str(info.value)


def test_errors_name_the_problem():
    def name_not_constant(out, a, names):
        out[0] = nx.site(names[0], x=a[0], out={"z": "f32"})

    def out_not_literal(out, a):
        d = a[0]
        out[0] = nx.site("s", x=a[0], out=d)

    def bad_type(out, a):
        out[0] = nx.site("s", x=a[0], out={"z": "f33"})

    def boolean(out, a):
        out[0] = nx.site("s", x=a[0] > 0, out={"z": "f32"})

    def duplicate(out, a):
        out[0] = nx.site("s", x=a[0], out={"x": "f32"})

    def positional(out, a):
        out[0] = nx.site("s", a[0])

    f = nbt.float32[:]
    assert "site name must be a string constant" in _compile_error(name_not_constant, f, f, f)
    assert "out= must be a dict literal" in _compile_error(out_not_literal, f, f)
    assert "unknown data type 'f33'" in _compile_error(bad_type, f, f)
    assert "cannot feed a site" in _compile_error(boolean, f, f)
    assert "duplicate variable name 'x'" in _compile_error(duplicate, f, f)
    assert "only positional argument" in _compile_error(positional, f, f)


def test_site_outside_a_kernel_says_where_it_works():
    with pytest.raises(nx.SiteError, match="inside a numba-cuda kernel"):
        nx.site("s", x=np.float32(1), out={"z": "f32"})


SIM_TYPES = 'import numpy as np, numptx as nx\nfrom numba import cuda\n\nTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "s32": np.int32,\n         "u32": np.uint32, "s64": np.int64, "u64": np.uint64}\nfor name, npt in TYPES.items():\n    T = getattr(nx, name)\n\n    @nx.kernel\n    def k(out, acc, a):\n        i = cuda.grid(1)\n        if i < out.size:\n            z, s = nx.site("twice", x=a[i], out={"z": T}, mod={"acc": acc[i]})\n            out[i] = z\n            acc[i] = s\n\n    def twice(x: T, acc: T):\n        return x + x, acc + x\n    f = nx.ptx_expr(twice)\n    a = np.arange(1, 9).astype(npt); out = np.zeros_like(a); acc = np.full_like(a, 3)\n    k.inject(twice=f)[1, 8](out, acc, a)\n    assert np.array_equal(out, a + a), (name, out)\n    assert np.array_equal(acc, 3 + a), (name, acc)\n\n@nx.kernel\ndef loop(out, a):\n    i = cuda.grid(1)\n    if i < out.size:\n        acc = a[i]\n        for j in range(4):                     # a site in an unrolled loop\n            acc = nx.site("step", x=a[i], out={}, mod={"acc": acc})\n        out[i] = acc\n\n@nx.ptx_expr\ndef step(x, acc):\n    return {"acc": acc * 2.0 + x}\na = np.arange(8, dtype=np.float32); out = np.zeros_like(a)\nloop.inject(step=step)[1, 8](out, a)\nwant = a.copy()\nfor _ in range(4):\n    want = want * 2 + a\nassert np.array_equal(out, want), out\nprint("TYPES OK")\n'


def test_simulator_every_type_in_out_mod_and_a_site_in_an_unrolled_loop(tmp_path):
    """Under NUMBA_ENABLE_CUDASIM=1 each site evaluates its @ptx_expr's reference: every type
    with out + mod variables, and a site inside a loop (run once per iteration)."""
    run_script(tmp_path, SIM_TYPES, simulator=True, marker="TYPES OK")


def test_a_malformed_site_in_an_nx_kernel_raises_site_error():
    """Through numptx's own API the rewrite's compile error is a SiteError (numba's message,
    with the kernel's source line, inside)."""
    import numpy as np

    @nx.kernel
    def apply(out, a):
        out[0] = nx.site("s", x=a[0], out={"z": "f33"})
    x = np.zeros(4, np.float32)
    with pytest.raises(nx.SiteError) as e:
        apply.ptx(x, x)
    text = str(e.value)
    assert text.startswith("kernel 'apply': site 's', variable 'z': unknown data type 'f33'")
    assert 'out[0] = nx.site("s", x=a[0], out={"z": "f33"})' in text    # numba's source excerpt
    assert "During:" not in text and "Failed in" not in text


def test_the_simulators_check_kernel_lays_out_a_site_like_numba():
    """Under the simulator a stub is assembled in a minimal kernel with the site alone
    (numptx.jit.numba.sim_checks.site_check_ptx): its site block is numba's, operand registers aside."""
    from numptx.jit.numba.sim_checks import site_check_ptx
    from numptx.jit.numba.numba_site import SiteSpec

    def k(o, a, acc, bits):
        i = cuda.threadIdx.x
        z, h, m = nx.site("s", x=a[i], b=(bits[i], "bf16"), out={"z": "s32", "h": "f16"},
                          mod={"m": acc[i]})
        o[i] = z
        acc[i] = m
        bits[i] = h

    numba_ptx = _ptx(k, nbt.int32[:], nbt.float32[:], nbt.float64[:], nbt.uint16[:])
    spec = SiteSpec("s", (("in", "f32", "x"), ("in", "bf16", "b"), ("out", "s32", "z"),
                          ("out", "f16", "h"), ("mod", "f64", "m")))
    check = site_check_ptx(spec, "sm_90", "8.0")
    assert _site_block(check, "s") == _site_block(numba_ptx, "s")
    assert (nx.PtxInject(check).sites["s"].signature
            == nx.PtxInject(numba_ptx).sites["s"].signature)
