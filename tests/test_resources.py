"""What kernels use (numptx/jit/compile/resources.py, cubin_elf.py) and their SASS (sass.py).

Real NVRTC, numba-cuda and nvJitLink cubins, read by numptx's ELF reader and checked against
what NVIDIA's tools say about the same bytes: ``cuobjdump --dump-resource-usage`` and nvdisasm
(from ``numptx[tools]``; those checks skip without them) and nvJitLink's own ``-verbose`` ptxas
report (spills). No GPU."""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

import numptx as nx
from numptx.jit.compile import resources as R
from numptx.jit.compile import sass as S
from numptx.jit.compile.cubin_elf import CubinElf

from conftest import SPINE_SRC

ADD = "add.f32 %v_z, %v_x, %v_y;"

# kernels with one known resource each (sm_90)
KERNELS = {
    "shared": r'''extern "C" __global__ void kernel(float* out, const float* a) {
        __shared__ float s[256];
        s[threadIdx.x] = a[threadIdx.x]; __syncthreads();
        out[threadIdx.x] = s[255 - threadIdx.x]; }''',
    "bounds": r'''extern "C" __global__ void __launch_bounds__(128) kernel(float* out, const float* a) {
        out[threadIdx.x] = a[threadIdx.x] * 2.0f; }''',
    "local": r'''extern "C" __global__ void kernel(float* out, const float* a, const int* idx) {
        float loc[64];
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        for (int k = 0; k < 64; ++k) loc[k] = a[i * 64 + k];
        out[i] = loc[idx[i] & 63]; }''',
    "constant": r'''__constant__ float c[64];
        extern "C" __global__ void kernel(float* out, const int* idx) {
        out[threadIdx.x] = c[idx[threadIdx.x] & 63]; }''',
    "two": r'''extern "C" __global__ void k1(float* out) { out[threadIdx.x] = 1.0f; }
        extern "C" __global__ void k2(float* out, double d) {
        __shared__ double s[10]; s[threadIdx.x % 10] = d; __syncthreads();
        out[threadIdx.x] = s[(threadIdx.x + 1) % 10]; }''',
}
# more live values than 32 registers hold: ptxas spills 32-, 64- and 128-bit values
SPILLS = {
    "f32": ("float", "float", "acc += v[k] * v[(k * 7 + r) % N]"),
    "f64": ("double", "double", "acc += v[k] * v[(k * 7 + r) % N]"),
    "f32x4": ("float4", "float", "acc += v[k].x * v[(k * 5 + r) % N].y + v[k].w * v[(k + r) % N].z"),
}
SPILL_SRC = r'''
#define N 40
extern "C" __global__ void kernel(%(acc)s* out, const %(t)s* a) {
    %(t)s v[N]; int i = threadIdx.x; %(acc)s acc = 0;
    #pragma unroll
    for (int k = 0; k < N; ++k) v[k] = a[i + k * 1024];
    #pragma unroll
    for (int r = 0; r < 3; ++r) {
    #pragma unroll
    for (int k = 0; k < N; ++k) %(step)s; }
    out[i] = acc; }'''


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMPTX_CACHE_DIR", str(tmp_path / "cache"))


def _cubin(src: str, arch: str = "sm_90", options=()) -> bytes:
    return nx.ptx_to_cubin(nx.cuda_to_ptx(src, arch=arch), arch, options=options)


@pytest.fixture(scope="module")
def cubins() -> dict[str, bytes]:
    return {name: _cubin(src) for name, src in KERNELS.items()}


def _tool(name: str) -> str:
    try:
        return S.find_tool(name)
    except nx.ToolMissingError:
        pytest.skip(f"{name} is not installed (pip install 'numptx[tools]')")


def _cuobjdump_usage(cubin: bytes, tmp_path) -> dict[str, dict[str, int]]:
    """cuobjdump --dump-resource-usage: kernel -> {REG, STACK, SHARED, LOCAL, CONSTANT[n]}, and
    "" -> the module's ("Common") entries."""
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    out = subprocess.run([_tool("cuobjdump"), "--dump-resource-usage", str(path)],
                         capture_output=True, text=True, check=True).stdout
    head, *funcs = re.split(r"^\s*Function ", out, flags=re.M)
    usage = {"": {k: int(v) for k, v in re.findall(r"(CONSTANT\[\d+\]):(\d+)", head)}}
    for f in funcs:
        name, _, body = f.partition(":")
        usage[name.strip()] = {k: int(v) for k, v in re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", body)}
    return usage


def _agrees_with_cuobjdump(cubin: bytes, tmp_path) -> None:
    usage = _cuobjdump_usage(cubin, tmp_path)
    for name, r in nx.cubin_resources(cubin).items():
        u = usage[name]
        assert r.registers == u["REG"], name
        assert r.local_bytes == u["STACK"] + u["LOCAL"], name
        assert r.shared_bytes + r.reserved_shared_bytes == u["SHARED"], name
        assert r.constant_banks == {int(k[9:-1]): v for k, v in u.items()
                                    if k.startswith("CONSTANT")}, name
        assert r.constant_bytes == sum(usage[""].values()), name


# ---- fields from the ELF ------------------------------------------------------------------------
def test_static_shared_array(cubins):
    r = nx.cubin_resources(cubins["shared"])["kernel"]
    assert r.shared_bytes == 1024                       # __shared__ float s[256]
    assert r.reserved_shared_bytes == 1024              # sm_90 reserves 1 KiB per block
    assert r.local_bytes == 0 and r.spill_stores == 0 and r.launch_bounds is None
    assert r.max_threads_per_block == R.MAX_THREADS_PER_BLOCK == 1024
    assert r.arch == "sm_90" and 4 <= r.registers <= 32
    assert r.param_bytes == 16 and r.constant_banks[0] > r.param_bytes


def test_reserved_shared_without_the_cap_symbol(cubins):
    """nvJitLink 13.0 (an H200's driver stack) names only .nv.reservedSmem.offset0: the 1 KiB is
    still in .nv.shared.<k> and still the system's (the driver reported 1024 B of shared)."""
    old = b".nv.reservedSmem.cap\x00"
    cubin = cubins["shared"]
    assert cubin.count(old) == 1
    r = nx.cubin_resources(cubin.replace(old, b".nv.reservedSmem.xyz\x00"))["kernel"]
    assert (r.shared_bytes, r.reserved_shared_bytes) == (1024, 1024)


def test_launch_bounds(cubins):
    r = nx.cubin_resources(cubins["bounds"])["kernel"]
    assert r.launch_bounds == (128, 1, 1) and r.max_threads_per_block == 128
    assert "up to 128 threads per block (__launch_bounds__)" in str(r)


def test_reqntid_from_ptx_is_an_exact_block():
    ptx = nx.cuda_to_ptx(KERNELS["bounds"], arch="sm_90").replace(".maxntid 128, 1, 1",
                                                                   ".reqntid 64, 2, 1")
    r = nx.cubin_resources(nx.ptx_to_cubin(ptx, "sm_90"))["kernel"]
    assert r.launch_bounds == (64, 2, 1) and r.max_threads_per_block == 128


def test_dynamically_indexed_local_array(cubins):
    r = nx.cubin_resources(cubins["local"])["kernel"]
    assert r.local_bytes >= 256                         # float loc[64] lives in the stack frame
    assert r.spill_stores == 0 and r.spill_loads == 0   # ... and is not a spill


def test_constant_memory(cubins):
    r = nx.cubin_resources(cubins["constant"])["kernel"]
    assert r.constant_bytes == 256                      # __constant__ float c[64]
    assert nx.cubin_resources(cubins["shared"])["kernel"].constant_bytes == 0


def test_every_kernel_of_a_module(cubins):
    res = nx.cubin_resources(cubins["two"])
    assert sorted(res) == ["k1", "k2"]
    assert res["k2"].shared_bytes == 80 and res["k1"].shared_bytes == 0
    assert res["k1"].reserved_shared_bytes == 0 and res["k2"].param_bytes == 16
    with pytest.raises(nx.CubinError, match="no kernel 'k3'.*k2, k1|no kernel 'k3'.*k1, k2"):
        R.kernel_resources(cubins["two"], "k3")


def test_str_is_one_readable_line(cubins):
    text = str(nx.cubin_resources(cubins["shared"])["kernel"])
    assert "\n" not in text and text.startswith("kernel sm_90: ")
    assert "1024 B shared (+1024 B reserved)" in text and "spills 0 B stored / 0 B loaded" in text
    assert R.Resources(**{**nx.cubin_resources(cubins["shared"])["kernel"].as_dict(),
                          "spill_stores": None}).__str__().count("spills unknown") == 1


@pytest.mark.parametrize("arch", ["sm_75", "sm_90", "sm_120"])
def test_fields_agree_with_cuobjdump(cubins, arch, tmp_path):
    _tool("cuobjdump")
    all_cubins = list(cubins.values()) if arch == "sm_90" else \
        [_cubin(KERNELS["shared"], arch), _cubin(KERNELS["two"], arch)]
    for cubin in all_cubins:
        _agrees_with_cuobjdump(cubin, tmp_path)


# ---- spills ---------------------------------------------------------------------------------------
def _ptxas_report(ptx: str, arch: str, options: list[str]) -> tuple[int, int]:
    """(spill store bytes, spill load bytes) of kernel 'kernel' in ptxas's own -verbose report
    through nvJitLink."""
    from cuda.bindings import nvjitlink as nvj
    data = ptx.encode() + b"\0"
    opts = [f"-arch={arch}", "-verbose", *options]
    h = nvj.create(len(opts), opts)
    try:
        nvj.add_data(h, nvj.InputType.PTX, data, len(data), "k.ptx")
        nvj.complete(h)
        buf = bytearray(nvj.get_info_log_size(h))
        nvj.get_info_log(h, buf)
    finally:
        nvj.destroy(h)
    log = bytes(buf).decode(errors="replace")
    m = re.search(r"Function properties for kernel\s*\n.*?(\d+) bytes spill stores, "
                  r"(\d+) bytes spill loads", log)
    assert m, log
    return int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("kind", sorted(SPILLS))
@pytest.mark.parametrize("arch", ["sm_75", "sm_90", "sm_120"])
def test_spills_equal_ptxas_report(kind, arch):
    t, acc, step = SPILLS[kind]
    ptx = nx.cuda_to_ptx(SPILL_SRC % {"t": t, "acc": acc, "step": step}, arch=arch)
    cubin = nx.ptx_to_cubin(ptx, arch, options=["-maxrregcount=32"])
    r = nx.cubin_resources(cubin)["kernel"]
    assert (r.spill_stores, r.spill_loads) == _ptxas_report(ptx, arch, ["-maxrregcount=32"])
    assert r.spill_stores > 0 and r.spill_loads > 0 and r.registers <= 32
    assert r.local_bytes >= r.spill_stores // 4


def test_no_spill_record_is_zero_only_when_ptxas_says_so(cubins):
    """A frame but no annotation: zero spills from ptxas 13 on, unknown (None) otherwise."""
    local = cubins["local"]
    elf = CubinElf(local)
    assert elf.ptxas_release() >= (13, 0)
    note = elf.section(".note.nv.tkinfo")
    old = bytearray(local)
    span = slice(note.offset, note.offset + note.size)
    old[span] = bytes(old[span]).replace(b"release 13.", b"release 12.")
    r = nx.cubin_resources(bytes(old))["kernel"]
    assert r.local_bytes >= 256 and r.spill_stores is None and r.spill_loads is None
    assert "spills unknown" in str(r)


# ---- malformed cubins -------------------------------------------------------------------------
@pytest.mark.parametrize("cut", [0, 3, 20, 63, 64, 200, -100, -1])
def test_truncated_cubin_is_a_numptx_error(cubins, cut):
    data = cubins["two"][:cut] if cut else b""
    with pytest.raises(nx.CubinError):
        nx.cubin_resources(data)


def test_bad_bytes_are_a_numptx_error(cubins):
    good = cubins["two"]
    for bad in (b"not a cubin at all", b"\x7fELF" + b"\0" * 60, good[:4] + b"\x01" + good[5:],
                good[:18] + b"\x3e\x00" + good[18:]):
        with pytest.raises(nx.CubinError):
            nx.cubin_resources(bad)
    with pytest.raises(nx.CubinError, match="a cubin is bytes, not str"):
        nx.cubin_resources("kernel")
    # section headers pointing past the end, and corrupt records: never IndexError/struct.error
    rng = np.random.default_rng(0)
    for _ in range(300):
        b = bytearray(good)
        for pos in rng.integers(0, len(b), size=4):
            b[pos] = int(rng.integers(0, 256))
        try:
            nx.cubin_resources(bytes(b))
        except nx.NumptxError:
            pass


# ---- SASS -------------------------------------------------------------------------------------
def test_sass_needs_the_tool_and_names_the_extra(cubins, monkeypatch, tmp_path):
    monkeypatch.setattr(S, "tool_dirs", lambda: [str(tmp_path)])
    with pytest.raises(nx.ToolMissingError, match=r'pip install "numptx\[tools\]"') as ei:
        R.sass_text(cubins["shared"])
    assert isinstance(ei.value, nx.NumptxError) and ei.value.tool == "nvdisasm"
    assert ei.value.searched == (str(tmp_path),)
    with pytest.raises(nx.ToolMissingError):
        R.sass_instructions(cubins["shared"])
    with pytest.raises(nx.CubinError):          # bad bytes are refused before any tool is sought
        R.sass_text(b"junk")


def test_the_locator_finds_the_wheel_tools():
    try:
        import nvidia  # noqa: F401 - a namespace package when any NVIDIA wheel is installed
    except ImportError:
        pytest.skip("no NVIDIA wheels")
    path = shutil.which("nvdisasm", path=":".join(S.tool_dirs()))
    if path is None:
        pytest.skip("nvdisasm is not installed")
    assert S.find_tool("nvdisasm") == path


def test_sass_text_and_instructions(cubins):
    _tool("nvdisasm")
    text = R.sass_text(cubins["two"])
    assert ".text.k1" in text and ".text.k2" in text
    k1 = R.sass_text(cubins["two"], "k1")
    assert ".text.k1" in k1 and ".text.k2" not in k1
    ins = R.sass_instructions(cubins["two"], "k1")
    assert ins[-1] == "EXIT" and all("NOP" != i and not i.endswith(";") for i in ins)
    assert any(i.startswith("STG") for i in ins)
    assert "NOP" in k1 and "BRA" in k1                  # nvdisasm shows the padding; it is dropped
    with pytest.raises(nx.NumptxError, match="2 kernels"):
        R.sass_instructions(cubins["two"])
    with pytest.raises(nx.NumptxError, match="no function 'nope'"):
        R.sass_text(cubins["two"], "nope")


def test_sass_instructions_rule():
    text = """
k:
.text.k:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @!P0 BRA `(.L_x_1) ;
.L_x_1:
        /*0020*/                   STL [R1+0x4], R2 ;            (*"SpillRefill"*)
        /*0030*/                   NOP;
        /*0040*/                   EXIT ;
.L_x_0:
        /*0050*/                   BRA `(.L_x_0);
        /*0060*/                   NOP;
.L_x_2:
"""
    assert S.instruction_lines(text) == ["LDC R1, c[0x0][0x28]", "@!P0 BRA `(.L_x_1)",
                                         "STL [R1+0x4], R2", "EXIT"]
    loop = ".L_x_3:\n        /*0000*/                   BRA `(.L_x_3);\n"
    assert S.instruction_lines(loop) == []                      # a lone self-branch is padding
    assert S.instruction_lines("/*0000*/ BRA `(.L_x_9);") == ["BRA `(.L_x_9)"]


def test_sass_instructions_count_the_spills():
    _tool("nvdisasm")
    t, acc, step = SPILLS["f64"]
    cubin = nx.ptx_to_cubin(nx.cuda_to_ptx(SPILL_SRC % {"t": t, "acc": acc, "step": step}),
                            "sm_90", options=["-maxrregcount=32"])
    r = nx.cubin_resources(cubin)["kernel"]
    text = R.sass_text(cubin)
    stl = [ln for ln in text.splitlines() if "STL" in ln and "SpillRefill" in ln]
    ldl = [ln for ln in text.splitlines() if "LDL" in ln and "SpillRefill" in ln]
    assert r.spill_stores == 8 * len(stl) and r.spill_loads == 8 * len(ldl)
    ops = [i.split()[0] for i in R.sass_instructions(cubin)]
    assert ops.count("STL.64") == len(stl)


# ---- on variants and packs ----------------------------------------------------------------------
def test_cuda_variant_resources_and_sass():
    tmpl = nx.CudaTemplate(SPINE_SRC, entry="kernel", arch="sm_90")

    @nx.ptx_expr
    def dist(x, y):
        return nx.sqrt(x * x + y * y)

    v = tmpl.inject(combine=dist)
    r = v.resources
    assert isinstance(r, nx.Resources) and r.kernel == "kernel" and r.arch == "sm_90"
    assert r == nx.cubin_resources(v.cubin)["kernel"] and v.resources is r      # kept
    assert r.param_bytes == 28 and r.shared_bytes == 0 and r.spill_stores == 0
    try:
        S.find_tool("nvdisasm")
    except nx.ToolMissingError:
        with pytest.raises(nx.ToolMissingError):
            v.sass()
        return
    sass = v.sass()
    assert ".text.kernel" in sass and "EXIT" in sass
    assert "MUFU.RSQ" in sass or "MUFU.SQRT" in sass


def test_resources_follow_the_cubin():
    """The kept Resources are read again when the cubin changes (a pack dropping a refused
    candidate makes a new one)."""
    tmpl = nx.CudaTemplate(SPINE_SRC, entry="kernel", arch="sm_90", cache=False)
    v = tmpl.inject(combine=ADD)
    first = v.resources
    v.store(nx.ptx_to_cubin(tmpl.render([ADD]), "sm_90", options=["-maxrregcount=16"]))
    assert v.resources is not first and v.resources == nx.cubin_resources(v.cubin)["kernel"]


def test_numba_variant_resources_and_sass():
    cuda = pytest.importorskip("numba.cuda")
    if nx.jit.numba_site.SIMULATOR:
        pytest.skip("needs the real numba-cuda")

    @nx.kernel("void(float32[:], float32[:])", cache=False)
    def k(out, a):
        i = cuda.grid(1)
        sm = cuda.shared.array(64, np.float32)
        sm[cuda.threadIdx.x % 64] = a[i]
        cuda.syncthreads()
        if i < out.size:
            out[i] = nx.site("s", x=sm[(cuda.threadIdx.x + 1) % 64], out={"z": nx.f32})

    kv = k.inject(s="mul.f32 %v_z, %v_x, %v_x;")
    r = kv.resources
    assert r.kernel == kv.entry and r.shared_bytes == 256 and r.registers > 0
    assert r == nx.cubin_resources(kv.cubin)[kv.entry]
    try:
        S.find_tool("nvdisasm")
    except nx.ToolMissingError:
        return
    assert "FMUL" in kv.sass() and "STS" in kv.sass()


def test_pack_resources_and_sass():
    tmpl = nx.CudaTemplate(SPINE_SRC.replace("PTX_IN(F32, y)", "PTX_IN(F32, y), PTX_IN(S32, n)"),
                           entry="kernel", arch="sm_90", cache=False)
    cands = [ADD, "sub.f32 %v_z, %v_x, %v_y;", "mul.f32 %v_z, %v_x, %v_y;"]
    pack = tmpl.pack("combine", cands, select="n")
    r = pack.resources
    assert pack.entry == "kernel" and r == nx.cubin_resources(pack.cubin)["kernel"]
    packs = tmpl.pack_many("combine", cands, select="n", per_module=2)
    assert [p.resources.kernel for p in packs] == ["kernel", "kernel"]
    try:
        S.find_tool("nvdisasm")
    except nx.ToolMissingError:
        return
    ops = " ".join(i.split()[0] for i in R.sass_instructions(pack.cubin))
    assert "FADD" in ops and "FMUL" in ops and "BRX" in ops       # one indirect branch


@pytest.mark.gpu
def test_resources_agree_with_the_driver():
    """The loaded function's attributes (cuFuncGetAttribute, through numba's FuncAttr): the
    same registers and local memory; the driver's threads-per-block limit also counts the
    register file, so it is at most ours."""
    from numba import cuda
    arch = "sm_%d%d" % cuda.get_current_device().compute_capability     # no reassembly
    spill = SPILL_SRC % dict(zip(("t", "acc", "step"), SPILLS["f32"]))
    for name, src, opts in [*((n, s, ()) for n, s in KERNELS.items() if n != "two"),
                            ("spill", spill, ("-maxrregcount=32",))]:
        v = nx.CudaTemplate(src, arch=arch, link_options=opts, cache=False).inject()
        attrs = v.loaded_entry()[1][0].attrs
        r = v.resources
        assert attrs.regs == r.registers, name
        assert attrs.local == r.local_bytes, name
        assert r.shared_bytes <= attrs.shared <= r.shared_bytes + r.reserved_shared_bytes, name
        assert attrs.maxthreads <= r.max_threads_per_block, name
        if r.launch_bounds:
            assert attrs.maxthreads == r.max_threads_per_block, name
