"""Launching CUDA C++ template variants: parameter lists (C source checked against the PTX),
argument marshalling, launch configurations and the errors without a GPU run on the CPU with
the real NVRTC, nvJitLink and cuda.core; the launches themselves are marked ``gpu``."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import numptx as nx
from numptx.jit.numba import numba_site
from numptx.jit.templates.cuda_launch import _for_device, marshal
from numptx.jit.templates.params import Param, kernel_params, parse_c_params, parse_ptx_params, signature

from conftest import SPINE_SRC, gpu_available

ADD = "add.f32 %v_z, %v_x, %v_y;"
MUL = "mul.rn.f32 %v_z, %v_x, %v_y;"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMPTX_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def spine():
    return nx.CudaTemplate(SPINE_SRC, entry="kernel", arch="sm_90")


class Dev:
    """A device array as far as the ``__cuda_array_interface__`` protocol goes (no memory)."""

    def __init__(self, ptr, shape=(4,), typestr="<f4", strides=None, stream=None, mask=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (ptr, False), "version": 3,
                                         "strides": strides, "stream": stream, "mask": mask}


class HostLike:
    """A host array that is not an ndarray (NumPy's ``__array__`` protocol)."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a


# ---- parameter lists ---------------------------------------------------------------------------
DECLS = [
    ("float*a", "a", "float*", True, "float32"),
    ("const float* __restrict__ a", "a", "const float* __restrict__", True, "float32"),
    ("float const *b", "b", "float const*", True, "float32"),
    ("const float * const restrict q", "q", "const float* const restrict", True, "float32"),
    ("float2* v", "v", "float2*", True, None),
    ("void *p", "p", "void*", True, None),
    ("float a[]", "a", "float*", True, "float32"),
    ("T* p", "p", "T*", True, None),
    ("unsigned", "param_0", "unsigned", False, "uint32"),
    ("unsigned int n", "n", "unsigned int", False, "uint32"),
    ("signed char c", "c", "signed char", False, "int8"),
    ("char c", "c", "char", False, None),                   # signed or not, by host
    ("char* s", "s", "char*", True, None),
    ("unsigned char c", "c", "unsigned char", False, "uint8"),
    ("short int s", "s", "short int", False, "int16"),
    ("long long int x", "x", "long long int", False, "int64"),
    ("unsigned long long", "param_0", "unsigned long long", False, "uint64"),
    ("std::size_t n", "n", "std::size_t", False, "uint64"),
    ("cuda::std::int32_t k", "k", "cuda::std::int32_t", False, "int32"),
    ("ptrdiff_t d", "d", "ptrdiff_t", False, "int64"),
    ("uint16_t u", "u", "uint16_t", False, "uint16"),
    ("__half h", "h", "__half", False, "float16"),
    ("const int n = 3", "n", "const int", False, "int32"),
    ("Foo<int, 2> f", "f", "Foo<int, 2>", False, None),
    ("T v", "v", "T", False, None),
]


@pytest.mark.parametrize("decl,name,ctype,is_pointer,dtype", DECLS)
def test_c_declarations(decl, name, ctype, is_pointer, dtype):
    src = f"// __global__ void k(int nope)\nextern \"C\" __global__ void k({decl}) {{ }}"
    assert parse_c_params(src, "k") == [Param(name, ctype, is_pointer, dtype, 0)]


def test_c_parameter_lists():
    src = r'''
    /* extern "C" __global__ void k(double* wrong); */
    extern "C" __global__ void k(float* out, int n);         // a prototype
    extern "C" __global__ void __launch_bounds__(256, 2)
    k(float* out,
      int n) { out[0] = n; }
    extern "C" __global__ void other(double x) { }
    extern "C" __global__ void none(void) { }
    '''
    assert [(p.name, p.dtype) for p in parse_c_params(src, "k")] == [("out", "float32"),
                                                                      ("n", "int32")]
    assert parse_c_params(src, "none") == []
    assert parse_c_params(src, "missing") is None
    overloads = "__global__ void f(int a) {}\n__global__ void f(float a) {}"
    assert parse_c_params(overloads, "f") is None                 # ambiguous: the PTX decides


TYPES_SRC = r'''
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef signed char int8_t;
typedef float* fptr;
struct P { float a; double b; };
#define MORE int m, unsigned k
extern "C" __global__ void k(float* out, const float* __restrict__ a, float const* b, float2* c,
    bool f, char ch, unsigned char uc, short s, unsigned short us, int i, unsigned u, long l,
    unsigned long long ull, size_t sz, __half h, float x, double d, P p, float2 v,
    __nv_bfloat16 bf, int8_t i8, const int* const q, __grid_constant__ const P gp, fptr w) {
    float z = x;
    PTX_INJECT("s", PTX_MOD(F32, z));
    out[0] = a[0] + b[0] + c[0].x + f + ch + uc + s + us + i + u + l + ull + sz
        + __half2float(h) + z + d + p.a + v.y + __bfloat162float(bf) + i8 + q[0] + gp.b + w[0];
}
extern "C" __global__ void macro(float* out, MORE) { out[0] = m + k; }
template <typename T> __global__ void tk(T* out, T v) { out[0] = v; }
template __global__ void tk<double>(double*, double);
'''


@pytest.fixture(scope="module")
def types_ptx():
    return nx.cuda_to_ptx(TYPES_SRC, arch="sm_90")


def test_params_checked_against_the_ptx(types_ptx):
    ps = kernel_params(types_ptx, "k", TYPES_SRC)
    got = {p.name: (p.ctype, p.is_pointer, p.dtype, p.size) for p in ps}
    assert got["out"] == ("float*", True, "float32", 8)
    assert got["a"] == ("const float* __restrict__", True, "float32", 8)
    assert got["c"] == ("float2*", True, None, 8)
    assert got["f"] == ("bool", False, "bool", 1)
    assert got["ch"] == ("char", False, None, 1) and got["uc"][2:] == ("uint8", 1)
    assert got["us"][2:] == ("uint16", 2) and got["u"][2:] == ("uint32", 4)
    assert got["l"][2:] == ("int64", 8) and got["sz"][2:] == ("uint64", 8)
    assert got["h"] == ("__half", False, "float16", 2)
    assert got["bf"] == ("__nv_bfloat16", False, "bfloat16", 2)
    assert got["d"] == ("double", False, "float64", 8)
    assert got["p"] == ("P", False, "struct", 16)                  # .align 8 .b8 [16]
    assert got["v"] == ("float2", False, "struct", 8)
    assert got["gp"] == ("__grid_constant__ const P", False, "struct", 16)
    assert got["i8"][2:] == ("int8", 1) and got["q"][1:] == (True, "int32", 8)
    assert got["w"] == ("fptr", None, None, 8)                     # typedef: pointer or integer
    assert signature("k", ps[:2]) == "k(float* out, const float* __restrict__ a)"


def test_params_fall_back_to_the_ptx(types_ptx):
    # a macro hides two parameters: the counts disagree, so the PTX types all of them
    ps = kernel_params(types_ptx, "macro", TYPES_SRC)
    assert [(p.name, p.ctype, p.is_pointer, p.size) for p in ps] == [
        ("param_0", ".u64", None, 8), ("param_1", ".u32", False, 4), ("param_2", ".u32", False, 4)]
    # a template: the mangled name finds the C declaration, T is typed by the PTX
    plain = nx.CudaTemplate(SPINE_SRC.replace('extern "C" ', ""), entry=None)   # _Z6kernel...
    assert [p.decl for p in plain.params][::3] == ["float* out", "int n"]
    entry = next(e for e in nx.jit.template.find_entries(types_ptx) if "tk" in e)
    out, v = kernel_params(types_ptx, entry, TYPES_SRC)
    assert (out.name, out.is_pointer) == ("out", True)
    assert (v.name, v.ctype, v.dtype) == ("v", "T", "float64")


def test_ptx_parameter_lists():
    ptx = """
.visible .entry e(
    .param .u64 .ptr .global .align 4 e_param_0,
    .param .f32 e_param_1,
    .param .align 8 .b8 e_param_2[24],
    .param .u16 e_param_3
)
{ ret; }
.visible .entry empty()
{ ret; }
"""
    assert parse_ptx_params(ptx, "e") == [
        Param("param_0", ".u64", True, None, 8), Param("param_1", ".f32", False, "float32", 4),
        Param("param_2", ".b8[24]", False, "struct", 24), Param("param_3", ".u16", False, None, 2)]
    assert parse_ptx_params(ptx, "empty") == []


def test_template_params(spine, spine_ptx):
    assert [p.decl for p in spine.params] == ["float* out", "const float* a", "const float* b",
                                              "int n"]
    assert spine.params is spine.params                            # computed once
    raw = nx.Template(spine_ptx)                                   # PTX only
    assert [(p.ctype, p.is_pointer) for p in raw.params] == [(".u64", None)] * 3 + [(".u32", False)]


# ---- marshalling -------------------------------------------------------------------------------
def _bytes(values, sizes):
    """What cuda.core's launch() hands the driver for ``values``: the bytes at each address."""
    holder_mod = pytest.importorskip("cuda.core._kernel_arg_handler")
    holder = holder_mod.ParamHolder(values)
    addrs = (ctypes.c_void_p * len(values)).from_address(holder.ptr)
    return [ctypes.string_at(addrs[i], n) for i, n in enumerate(sizes)]


def test_marshal_device_arrays_and_scalars(spine):
    m = marshal("kernel", spine.params, (Dev(0x1000), Dev(0x2000, stream=7), None, np.int16(9)))
    assert [type(v) for v in m.values] == [ctypes.c_uint64] * 3 + [ctypes.c_int32]
    assert m.streams == [7]
    assert _bytes(m.values, [8, 8, 8, 4]) == [(0x1000).to_bytes(8, "little"),
                                              (0x2000).to_bytes(8, "little"), bytes(8),
                                              (9).to_bytes(4, "little")]
    assert marshal("kernel", spine.params, (0xAB00, 0, 1, -5)).values[0].value == 0xAB00


def test_marshal_scalar_types(types_ptx):
    ps = {p.name: p for p in kernel_params(types_ptx, "k", TYPES_SRC)}

    def one(name, value):
        return marshal("k", [ps[name]], [value]).values[0]

    assert one("f", True).value is True and one("f", np.bool_(False)).value is False
    assert one("ch", -128).value == 128 and one("ch", 255).value == 255     # char: either sign
    assert one("uc", 255).value == 255
    assert one("u", np.uint64(4_000_000_000)).value == 4_000_000_000
    assert one("ull", 2**64 - 1).value == 2**64 - 1 and one("l", -(2**63)).value == -(2**63)
    assert one("x", 3).value == 3.0 and isinstance(one("x", 0.1), ctypes.c_float)
    assert one("d", np.float32(0.5)).value == 0.5
    assert one("h", 1.5).value == int(np.float16(1.5).view(np.uint16))
    assert one("bf", 1.0).value == 0x3F80 and one("bf", -2.0).value == 0xC000
    assert one("bf", 1.00390625).value == 0x3F80                     # a tie rounds to even
    assert one("w", 5).value == 5                                     # fptr: an integer...
    assert one("w", Dev(0x3000)).value == 0x3000                      # ...or an array
    values = [one(n, v) for n, v in [("f", 1), ("us", 65535), ("i", -2), ("h", -0.25),
                                     ("x", 2.5), ("d", -1.0)]]
    assert _bytes(values, [1, 2, 4, 2, 4, 8]) == [
        b"\x01", b"\xff\xff", (-2).to_bytes(4, "little", signed=True),
        np.float16(-0.25).tobytes(), np.float32(2.5).tobytes(), np.float64(-1.0).tobytes()]


@pytest.mark.parametrize("name,value,match", [
    ("i", 2**31, r"parameter 9 'i' \(int\): 2147483648 is out of range for int32"),
    ("uc", -1, "out of range for uint8"),
    ("ch", 256, "256 does not fit in 8 bits"),
    ("u", 2**32, "out of range for uint32"),
    ("i", 1.5, "takes an integer, got float"),
    ("i", "3", "takes an integer, got str"),
    ("f", 2, "takes a bool"),
    ("x", 1e39, "overflows float32"),
    ("h", 70000.0, "overflows float16"),
    ("d", 1j, "takes a real number"),
    ("i", np.zeros(2, np.int32), "takes a number, got an array"),
    ("p", 0, r"parameter 17 'p' \(P\) is a 16-byte struct passed by value"),
    ("v", 0, "float2.*struct passed by value"),
    ("out", Dev(1, typestr="<f8"), "array of float64, but the kernel reads float32"),
    ("q", Dev(1, typestr="<f4"), "array of float32, but the kernel reads int32"),
    ("out", Dev(1, shape=(4, 4), strides=(4, 32)), r"not contiguous \(strides \(4, 32\)\)"),
    ("out", Dev(1, mask=Dev(2)), "masked arrays"),
    ("out", [1.0, 2.0], "not list"),
    ("out", -1, "device address -1 is out of range"),
    ("out", True, "takes an array or a device address"),
    ("out", np.zeros(4, np.float32), "ndarray cannot be passed without a GPU"),
    ("out", HostLike(np.zeros(4, np.float32)), "HostLike cannot be passed without a GPU"),
    ("out", HostLike(np.zeros(4, np.int64)), "array of int64, but the kernel reads float32"),
    ("out", np.zeros((4, 4), np.float32)[:, ::2], "not contiguous"),
])
def test_marshal_errors(types_ptx, name, value, match):
    ps = kernel_params(types_ptx, "k", TYPES_SRC)
    i = next(k for k, p in enumerate(ps) if p.name == name)
    # the parameters before it get valid values (the structs among them turned into integers)
    before = [p._replace(dtype="int32", size=4) if p.dtype == "struct" else p for p in ps[:i]]
    args = [None if p.is_pointer else 0 for p in before] + [value]
    with pytest.raises(nx.LaunchError, match=match):
        marshal("k", before + [ps[i]], args)


def test_marshal_counts_and_pointee_checks(spine):
    with pytest.raises(nx.LaunchError, match=r"kernel\(float\* out, const float\* a, const "
                                             r"float\* b, int n\) takes 4 argument\(s\), got 3"):
        marshal("kernel", spine.params, (None, None, None))
    ok = marshal("k", [Param("p", "void*", True, None, 8)], [Dev(1, typestr="<f8")])
    assert ok.values[0].value == 1                                    # void* takes anything
    ok = marshal("k", [Param("p", "int*", True, "int32", 8)], [Dev(1, typestr="<u4")])
    assert ok.values[0].value == 1                                    # signedness is not checked


def test_marshal_host_arrays_go_through_to_device(spine):
    seen = []

    def to_device(value):
        seen.append(value)
        return 0x5000 + len(seen)

    cuda = pytest.importorskip("numba.cuda")
    a = np.arange(4, dtype=np.float32)
    m = marshal("kernel", spine.params, (a, cuda.In(a), Dev(0x9000), 4), to_device=to_device)
    assert [v.value for v in m.values[:3]] == [0x5001, 0x5002, 0x9000]
    assert seen[0] is a and isinstance(seen[1], cuda.args.In)
    with pytest.raises(nx.LaunchError, match="array of float64"):
        marshal("kernel", spine.params, (cuda.Out(np.zeros(4)), None, None, 4), to_device=to_device)


# ---- launch configurations and the errors without a GPU ----------------------------------------
@pytest.mark.parametrize("config,match", [
    ((0, 32), "grid is a positive int"),
    ((1, (1, 2, 3, 4)), "block is a positive int"),
    ((1, 32.0), "block is a positive int"),
    ((1, 32, 0, -1), "sharedmem is a number of bytes"),
    ((1, 32, 0, 0, 0), r"\[grid, block\] or \[grid, block, stream, sharedmem\]"),
])
def test_bad_launch_configurations(spine, config, match):
    with pytest.raises(nx.LaunchError, match=match):
        spine.inject(combine=ADD)[config]


def test_launch_without_gpu_says_the_gpu_is_needed(spine):
    if gpu_available():
        pytest.skip("a GPU is present")
    v = spine.inject(combine=ADD)
    a = np.zeros(4, np.float32)
    launch = v[(1,), (4, 1)]
    with pytest.raises(nx.LaunchError) as info:
        launch(a, a, a, 4)
    msg = str(info.value)
    assert "no CUDA GPU is available to launch this CudaTemplate variant (kernel)" in msg
    assert "simulator" in msg and "@nx.kernel and nx.site" in msg
    assert v.cubin[:4] == b"\x7fELF"                                  # building still works


def test_simulator_says_cpp_needs_a_gpu(spine, monkeypatch):
    monkeypatch.setattr(numba_site, "SIMULATOR", True)
    with pytest.raises(nx.LaunchError, match=r"simulator \(NUMBA_ENABLE_CUDASIM=1\) cannot run "
                                             r"CUDA C\+\+: this CudaTemplate variant"):
        spine.inject(combine=ADD)[1, 4](None, None, None, 4)


def test_variants_are_assembled_for_the_device(spine):
    v = spine.inject(combine=ADD)
    assert _for_device(v, (9, 0)) is v
    v100 = _for_device(v, (10, 0))
    assert v100.arch == "sm_100" and v100.stubs == v.stubs and v100.key != v.key
    assert v100.cubin[:4] == b"\x7fELF" and v100.cubin != v.cubin
    assert _for_device(spine.inject(combine=MUL), (10, 0)).template is v100.template
    with pytest.raises(nx.LaunchError, match="built for sm_90, which cannot run on this sm_80"):
        _for_device(v, (8, 0))


def test_retargeting_is_a_method_that_shares_the_ptx_and_keeps_state_apart(spine):
    """Template.for_arch / Variant.for_arch: one template per architecture, the same PTX,
    sites and digest, its own constant-patch plans; the original is left as it was."""
    t100 = spine.for_arch("sm_100")
    assert spine.for_arch("sm_90") is spine and spine.for_arch((10, 0)) is t100
    assert type(t100) is type(spine) and t100.src is spine.src and t100.inj is spine.inj
    assert (t100.arch, spine.arch) == ("sm_100", "sm_90") and t100.digest == spine.digest
    assert t100.plans is not spine.plans and t100.for_arch("sm_100") is t100
    v = spine.inject(combine=ADD)
    assert v.for_arch("sm_90") is v and v.for_arch("sm_100").template is t100
    assert v.for_arch("sm_100").key == t100.key_of(v.stubs) != v.key


# ---- on a GPU ----------------------------------------------------------------------------------
N = 1000
GRID, BLOCK = (N + 127) // 128, 128


def _inputs():
    rng = np.random.default_rng(0)
    return rng.random(N, dtype=np.float32), rng.random(N, dtype=np.float32)


@pytest.mark.gpu
def test_gpu_numba_device_arrays_and_host_arrays(spine):
    from numba import cuda
    a, b = _inputs()
    d_out = cuda.device_array(N, np.float32)
    spine.inject(combine=ADD)[GRID, BLOCK](d_out, cuda.to_device(a), cuda.to_device(b), N)
    np.testing.assert_array_equal(d_out.copy_to_host(), a + b)
    out = np.zeros(N, np.float32)                      # host arrays: copied there and back
    spine.inject(combine=MUL)[GRID, BLOCK](out, a, b, np.int32(N))
    np.testing.assert_array_equal(out, a * b)
    half = np.zeros(N, np.float32)
    spine.inject(combine=ADD)[GRID, BLOCK](half, a, b, N // 2)
    np.testing.assert_array_equal(half[:N // 2], (a + b)[:N // 2])
    assert not half[N // 2:].any()


@pytest.mark.gpu
def test_gpu_cupy_arrays(spine):
    cp = pytest.importorskip("cupy")
    a, b = _inputs()
    out = cp.zeros(N, cp.float32)
    spine.inject(combine=MUL)[GRID, BLOCK](out, cp.asarray(a), cp.asarray(b), N)
    np.testing.assert_array_equal(cp.asnumpy(out), a * b)


@pytest.mark.gpu
def test_gpu_torch_tensors(spine):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    a, b = _inputs()
    out = torch.zeros(N, dtype=torch.float32, device="cuda")
    spine.inject(combine=ADD)[GRID, BLOCK](out, torch.from_numpy(a).cuda(),
                                           torch.from_numpy(b).cuda(), N)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), a + b)


SHARED_SRC = r'''
extern "C" __global__ void staged(float* out, const float* a, float scale, unsigned n) {
    extern __shared__ float tile[];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? a[i] : 0.0f;
    __syncthreads();
    if (i < n) {
        float x = tile[blockDim.x - 1 - threadIdx.x], y = scale, z;
        PTX_INJECT("combine", PTX_IN(F32, x), PTX_IN(F32, y), PTX_OUT(F32, z));
        out[i] = z;
    }
}'''


@pytest.mark.gpu
def test_gpu_stream_and_dynamic_shared_memory():
    from numba import cuda
    tmpl = nx.CudaTemplate(SHARED_SRC, entry="staged")
    n, block = 512, 128
    a = np.arange(n, dtype=np.float32)
    stream = cuda.stream()
    d_a, d_out = cuda.to_device(a, stream=stream), cuda.device_array(n, np.float32, stream=stream)
    tmpl.inject(combine=MUL)[n // block, block, stream, block * 4](d_out, d_a, 2.0, n)
    out = d_out.copy_to_host(stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out, a.reshape(-1, block)[:, ::-1].ravel() * 2)


SCALARS_SRC = r'''
#include <cuda_fp16.h>
extern "C" __global__ void scalars(double* out, const double* null, signed char c,
        unsigned char uc, short s, unsigned short us, int i, unsigned u, long long ll,
        unsigned long long ull, bool b, float f, double d, __half h) {
    double z;
    PTX_INJECT("s", PTX_IN(F64, d), PTX_OUT(F64, z));
    out[0] = c; out[1] = uc; out[2] = s; out[3] = us; out[4] = i; out[5] = u; out[6] = ll;
    out[7] = ull; out[8] = b; out[9] = f; out[10] = z; out[11] = __half2float(h);
    out[12] = null == nullptr;
}'''


SCALAR_ARGS = (-5, 200, -300, 60000, -70000, 3_000_000_000, -(2**40), 2**50, True, 0.25, 1.5,
               -2.5)
TWICE = "add.f64 %v_z, %v_d, %v_d;"


def test_the_gpu_kernels_build_and_take_their_arguments():
    scalars = nx.CudaTemplate(SCALARS_SRC, entry="scalars")
    assert [p.dtype for p in scalars.params] == [
        "float64", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
        "uint64", "bool", "float32", "float64", "float16"]
    m = marshal("scalars", scalars.params, (0x100, None) + SCALAR_ARGS)
    assert [v.value for v in m.values[2:10]] == list(SCALAR_ARGS[:8])
    assert scalars.inject(s=TWICE).cubin[:4] == b"\x7fELF"
    staged = nx.CudaTemplate(SHARED_SRC, entry="staged")
    assert [p.decl for p in staged.params] == ["float* out", "const float* a", "float scale",
                                               "unsigned n"]
    assert staged.inject(combine=MUL).cubin[:4] == b"\x7fELF"


@pytest.mark.gpu
def test_gpu_scalars_arrive_as_declared():
    tmpl = nx.CudaTemplate(SCALARS_SRC, entry="scalars")
    out = np.zeros(13)
    tmpl.inject(s=TWICE)[1, 1](out, None, *SCALAR_ARGS)
    want = list(SCALAR_ARGS[:10]) + [3.0, -2.5, 1]
    np.testing.assert_array_equal(out, np.array(want, np.float64))


@pytest.mark.gpu
def test_gpu_runs_a_template_built_for_an_older_architecture():
    from numba import cuda
    tmpl = nx.CudaTemplate(SPINE_SRC, entry="kernel", arch="sm_80")   # rebuilt for the device
    a, b = _inputs()
    d_out = cuda.device_array(N, np.float32)
    tmpl.inject(combine=ADD)[GRID, BLOCK](d_out, a, b, N)
    np.testing.assert_array_equal(d_out.copy_to_host(), a + b)


@pytest.mark.gpu
def test_gpu_raw_ptx_template(spine_ptx):
    raw = nx.Template(spine_ptx)                        # .u64 parameters: arrays or addresses
    a, b = _inputs()
    out = np.zeros(N, np.float32)
    raw.inject(combine=MUL)[GRID, BLOCK](out, a, b, N)
    np.testing.assert_array_equal(out, a * b)


def test_loaded_modules_are_kept_lru_and_unloaded_beyond_the_bound(monkeypatch):
    """keep_loaded: the least recently launched modules beyond MAX_LOADED are unloaded (after
    a synchronize), and a module loaded twice for one key (two threads) is unloaded again;
    loaded() marks a hit as the most recently launched."""
    from collections import OrderedDict
    from numptx.jit.numba import launch as L
    from numptx.jit.templates import residency as R
    assert L.keep_loaded is R.keep_loaded          # both launchers keep modules in one place

    class Ctx:
        def __init__(self):
            self.events = []

        def synchronize(self):
            self.events.append("sync")

        def unload_module(self, m):
            self.events.append(("unload", m))
    ctx = Ctx()
    monkeypatch.setattr(R, "_loaded", OrderedDict())
    monkeypatch.setattr(R, "MAX_LOADED", 2)
    assert R.keep_loaded("a", ("fa", ctx, "ma")) == ("fa", ctx, "ma")
    R.keep_loaded("b", ("fb", ctx, "mb"))
    assert ctx.events == [] and R.loaded("a") == ("fa", ctx, "ma") and R.loaded("x") is None
    R.keep_loaded("c", ("fc", ctx, "mc"))
    assert ctx.events == ["sync", ("unload", "mb")] and list(R._loaded) == ["a", "c"]
    ctx.events.clear()
    assert R.keep_loaded("c", ("fc2", ctx, "mc2")) == ("fc", ctx, "mc")
    assert ctx.events == ["sync", ("unload", "mc2")] and list(R._loaded) == ["a", "c"]
