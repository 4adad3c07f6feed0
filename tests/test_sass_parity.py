"""No template overhead (issue 13): an injected kernel's SASS against the same kernel written by
hand, both built in the test (NVRTC -> nvJitLink, sm_90), so the comparison cannot drift.

- pairwise distances (``acc = f(acc, x, y)`` in a loop unrolled 4 deep) and a register-tiled GEMM
  (a 2x4 tile per thread, k unrolled 8: 64 sites), f32 and f64, with ``@nx.ptx_expr`` formulas
  in the DSL's default mode: instruction counts within 1 %, the same registers;
- the 512-site GEMM (8x8 tile, k unrolled 8): the injected kernel's SASS is instruction for
  instruction the hand-written kernel's with the same PTX in an ``asm`` statement, framed or
  bound: the site adds nothing. Against C++ ``acc + x*y`` this shape differs (f32: 825
  instructions and 128 registers against 807 and 125), because NVVM compiles the loop around
  any inline asm differently, an empty ``asm volatile("")`` included; how much depends on the
  tile (benchmarks/README.md). The 2x4 tile above is one where it does not show;
- numba kernels with ``nx.site``: an 8x8-tile GEMM (k not unrolled: 64 sites) against the same
  kernel with ``cuda.fma``, within 1 %, the same registers.

Kernel sources come from ``benchmarks/bench_kernels.py``, which prints the wider table. Skips
without nvdisasm (``pip install "numptx[tools]"``). No GPU.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import numptx as nx
from numptx.jit.templates.template import find_entries

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_kernels as BK  # noqa: E402

DEFAULT = BK.Mode("default", {}, ())          # @nx.ptx_expr as written, no options
SMALL_TILE = (2, 4, 8)                        # 64 sites


@pytest.fixture(scope="module", autouse=True)
def _needs_nvdisasm():
    from numptx.jit.compile.sass import find_tool
    try:
        find_tool("nvdisasm")
    except nx.NumptxError:
        pytest.skip("no nvdisasm: pip install 'numptx[tools]'")


@pytest.fixture(scope="module")
def builder() -> BK.Builder:
    return BK.Builder()


def assert_parity(hand: BK.Built, injected: BK.Built, what: str) -> None:
    assert abs(injected.instructions - hand.instructions) <= 0.01 * hand.instructions, \
        f"{what}: {injected.instructions} SASS instructions injected, {hand.instructions} by hand"
    assert injected.registers == hand.registers, \
        f"{what}: {injected.registers} registers injected, {hand.registers} by hand"


PAIRWISE = [c for c in BK.CASES if c.name.startswith(("L1", "squared"))]


@pytest.mark.parametrize("case", PAIRWISE, ids=[f"{c.name.split()[0]}-{c.dtype}" for c in PAIRWISE])
def test_pairwise_matches_hand_written(builder, case):
    _, injected = builder.injected(case, DEFAULT)
    assert_parity(builder.hand(case, DEFAULT), injected, case.name)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_register_tiled_gemm_matches_hand_written(dtype):
    mac = BK.typed_formula(lambda acc, x, y: acc + x * y, dtype)
    hand_src = BK.gemm_source(dtype, BK.hand_body("acc + x * y"), SMALL_TILE)
    hand = BK.measure(nx.ptx_to_cubin(nx.cuda_to_ptx(hand_src, arch=BK.ARCH), BK.ARCH), "gemm")
    tmpl = nx.CudaTemplate(BK.gemm_source(dtype, BK.site_body(dtype), SMALL_TILE), entry="gemm",
                           arch=BK.ARCH, cache=False)
    assert tmpl.sites["f"].instances == 64
    assert_parity(hand, BK.measure(tmpl.inject(f=mac).cubin, "gemm"), f"GEMM {SMALL_TILE} {dtype}")


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_512_site_gemm_is_the_hand_written_asm_kernel(dtype):
    from numptx.jit.compile.resources import sass_instructions
    fma = f"fma.rn.{dtype} %0, %1, %2, %0;"
    asm_src = BK.gemm_source(dtype, BK.asm_body(dtype, fma))
    asm = nx.ptx_to_cubin(nx.cuda_to_ptx(asm_src, arch=BK.ARCH), BK.ARCH)
    src = BK.gemm_source(dtype, BK.site_body(dtype))
    stub = fma.replace("%0", "%v_acc").replace("%1", "%v_x").replace("%2", "%v_y")
    want = BK.measure(asm, "gemm")
    for bind in (True, False):
        tmpl = nx.CudaTemplate(src, entry="gemm", arch=BK.ARCH, cache=False, bind=bind)
        assert tmpl.sites["f"].instances == 512
        v = tmpl.inject(f=stub)
        assert sass_instructions(v.cubin, "gemm") == sass_instructions(asm, "gemm"), bind
        assert BK.measure(v.cubin, "gemm").registers == want.registers


# ---------------------------------------------------------------------------------------------
# numba-cuda kernels with nx.site
# ---------------------------------------------------------------------------------------------
TILE_M = TILE_N = 8                          # numba GEMM: an 8x8 tile, k not unrolled (64 sites)


def _numba_gemms(ty):
    """(hand-written, with nx.site) numba GEMM kernels over ``ty``, identical but the mac."""
    from numba import cuda

    def hand(C, A, B, M, N, K):
        row0 = (cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y) * TILE_M
        col0 = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) * TILE_N
        c = cuda.local.array((TILE_M, TILE_N), ty)
        a = cuda.local.array(TILE_M, ty)
        b = cuda.local.array(TILE_N, ty)
        for i in range(TILE_M):
            for j in range(TILE_N):
                c[i, j] = 0
        for k in range(K):
            for i in range(TILE_M):
                a[i] = A[(row0 + i) * K + k]
            for j in range(TILE_N):
                b[j] = B[k * N + col0 + j]
            for i in range(TILE_M):
                for j in range(TILE_N):
                    c[i, j] = cuda.fma(a[i], b[j], c[i, j])
        for i in range(TILE_M):
            for j in range(TILE_N):
                C[(row0 + i) * N + col0 + j] = c[i, j]

    def injected(C, A, B, M, N, K):
        row0 = (cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y) * TILE_M
        col0 = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) * TILE_N
        c = cuda.local.array((TILE_M, TILE_N), ty)
        a = cuda.local.array(TILE_M, ty)
        b = cuda.local.array(TILE_N, ty)
        for i in range(TILE_M):
            for j in range(TILE_N):
                c[i, j] = 0
        for k in range(K):
            for i in range(TILE_M):
                a[i] = A[(row0 + i) * K + k]
            for j in range(TILE_N):
                b[j] = B[k * N + col0 + j]
            for i in range(TILE_M):
                for j in range(TILE_N):
                    c[i, j] = nx.site("f", x=a[i], y=b[j], mod={"acc": c[i, j]})
        for i in range(TILE_M):
            for j in range(TILE_N):
                C[(row0 + i) * N + col0 + j] = c[i, j]
    return hand, injected


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_numba_gemm_matches_hand_written(dtype):
    cuda = pytest.importorskip("numba.cuda")
    if nx.jit.numba_site.SIMULATOR:
        pytest.skip("needs the real numba-cuda")
    from numba.cuda import types as nbt
    ty = {"f32": nbt.float32, "f64": nbt.float64}[dtype]
    sig = (ty[:], ty[:], ty[:], nbt.int32, nbt.int32, nbt.int32)
    mac = BK.typed_formula(lambda acc, x, y: nx.fma(x, y, acc), dtype)
    hand_fn, injected_fn = _numba_gemms(ty)
    ptx, _ = cuda.compile_ptx(hand_fn, sig, cc=(9, 0))
    hand = BK.measure(nx.ptx_to_cubin(ptx, BK.ARCH), find_entries(ptx)[0])
    tmpl = nx.kernel(injected_fn, cache=False).template(*sig)
    assert tmpl.sites["f"].instances == 64
    v = tmpl.inject(f=mac)
    assert_parity(hand, BK.measure(v.cubin, tmpl.entry), f"numba GEMM {dtype}")
