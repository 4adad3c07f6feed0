"""Injected kernels against the same kernels written by hand (issue 13, "no template overhead").

Each kernel is built twice from one CUDA C++ source: hand-written (the formula as C++ in the
loop, NVRTC -> nvJitLink) and injected (a ``PTX_INJECT`` site in its place, compiled once as a
template, the formula as an ``@nx.ptx_expr`` stub). The table gives their SASS instruction counts
(``numptx.jit.compile.resources.sass_instructions``: no NOPs, no closing self-branch) and registers:

- pairwise distances: ``acc = f(acc, x, y)`` in a loop over ``k`` unrolled 4 deep, one row per
  formula of ``CASES`` (name, Python formula, CUDA C++ expression, dtype);
- a register-tiled GEMM (8x8 per thread, k unrolled 8: 512 sites), ``acc + x*y``, in two
  layouts: each k step loads its operands then runs its 64 sites (``per k step``, like
  ``bench_inject.gemm_template``), or the k slice is loaded first (``k slice first``). The
  ``asm fma`` column is the hand-written kernel with the fma written as an ``asm`` statement.

Every DSL case is built once per math mode of ``MODES``; ``fast`` compares with the hand-written
kernel compiled with ``--use_fast_math`` (the template too). ``--gpu`` also times both kernels
with CUDA events (a spin kernel queued before each start event keeps the launch out of the
interval) and reports the time ratio; it needs a CUDA GPU and says so when there is none.

- ``--functions``: every DSL math function in the pairwise loop (``FUNCTION_CASES``), against
  CUDA's own function (``expf``, ``atanf``, ...), f32 and f64.

    python benchmarks/bench_kernels.py              # SASS table (needs numptx[tools])
    python benchmarks/bench_kernels.py --functions --modes cuda    # each math function
    python benchmarks/bench_kernels.py --gpu        # and kernel times on a GPU
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import numptx as nx

ARCH = "sm_90"
#: C++ type, PTX_INJECT type and asm constraint of each dtype
CTYPES = {"f32": ("float", "F32", "f"), "f64": ("double", "F64", "d")}
GEMM_TILE = (8, 8, 8)


# ---------------------------------------------------------------------------------------------
# kernels: one source, BODY is either the hand-written statement or the site
# ---------------------------------------------------------------------------------------------
def pairwise_source(dtype: str, body: str) -> str:
    """``out[i][j] = sum_k f(x[i][k], y[j][k])`` over ``d`` (runtime), k unrolled 4 deep; in
    ``body`` the accumulator is ``acc`` and the operands are ``x`` and ``y``.

    >>> src = pairwise_source("f32", "acc = acc + fabsf(x - y);")
    """
    T = CTYPES[dtype][0]
    return rf'''
extern "C" __global__ void pairwise({T}* out, const {T}* X, const {T}* Y, int n, int d) {{
    const int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || j >= n) return;
    const {T}* xr = X + (long long)i * d;
    const {T}* yr = Y + (long long)j * d;
    {T} acc = 0;
    #pragma unroll 4
    for (int k = 0; k < d; ++k) {{
        const {T} x = xr[k], y = yr[k];
        {body}
    }}
    out[(long long)i * n + j] = acc;
}}'''


def gemm_source(dtype: str, body: str, tile: tuple[int, int, int] = GEMM_TILE,
                preload: bool = False) -> str:
    """A register-tiled GEMM: each thread owns a ``tm x tn`` tile of C, the k loop is unrolled
    ``tk`` deep, so ``body`` (``acc`` the tile element, ``x`` from A, ``y`` from B) appears
    ``tm * tn * tk`` times. ``preload``: load the whole k slice before its sites, else each k
    step loads its operands and then runs its sites.

    >>> src = gemm_source("f64", "acc = fma(x, y, acc);", tile=(4, 4, 4))
    """
    T = CTYPES[dtype][0]
    tm, tn, tk = tile
    load_a = "A[(row0 + i) * K + k0 + kk]"
    load_b = "B[(k0 + kk) * N + col0 + j]"
    step = "[kk]" if preload else ""
    site = f"{{ const {T} x = a{step}[i], y = b{step}[j]; {T} acc = c[i][j]; {body} c[i][j] = acc; }}"
    loop_ij = (f"#pragma unroll\n            for (int i = 0; i < {tm}; ++i)\n"
               f"                #pragma unroll\n                for (int j = 0; j < {tn}; ++j)\n"
               f"                    {site}")
    if preload:
        k_body = rf'''{T} a[{tk}][{tm}], b[{tk}][{tn}];
        #pragma unroll
        for (int kk = 0; kk < {tk}; ++kk) {{
            #pragma unroll
            for (int i = 0; i < {tm}; ++i) a[kk][i] = {load_a};
            #pragma unroll
            for (int j = 0; j < {tn}; ++j) b[kk][j] = {load_b};
        }}
        #pragma unroll
        for (int kk = 0; kk < {tk}; ++kk) {{
            {loop_ij}
        }}'''
    else:
        k_body = rf'''#pragma unroll
        for (int kk = 0; kk < {tk}; ++kk) {{
            {T} a[{tm}], b[{tn}];
            #pragma unroll
            for (int i = 0; i < {tm}; ++i) a[i] = {load_a};
            #pragma unroll
            for (int j = 0; j < {tn}; ++j) b[j] = {load_b};
            {loop_ij}
        }}'''
    return rf'''
extern "C" __global__ void gemm({T}* C, const {T}* A, const {T}* B, int M, int N, int K) {{
    const int row0 = (blockIdx.y * blockDim.y + threadIdx.y) * {tm};
    const int col0 = (blockIdx.x * blockDim.x + threadIdx.x) * {tn};
    {T} c[{tm}][{tn}];
    #pragma unroll
    for (int i = 0; i < {tm}; ++i)
        #pragma unroll
        for (int j = 0; j < {tn}; ++j) c[i][j] = 0;
    for (int k0 = 0; k0 < K; k0 += {tk}) {{
        {k_body}
    }}
    #pragma unroll
    for (int i = 0; i < {tm}; ++i)
        #pragma unroll
        for (int j = 0; j < {tn}; ++j) C[(row0 + i) * N + col0 + j] = c[i][j];
}}'''


def site_body(dtype: str) -> str:
    """The site statement: ``x``, ``y`` in, ``acc`` read and written."""
    t = CTYPES[dtype][1]
    return f'PTX_INJECT("f", PTX_IN({t}, x), PTX_IN({t}, y), PTX_MOD({t}, acc));'


def hand_body(expr: str) -> str:
    """The hand-written statement for a C++ expression of ``acc``, ``x`` and ``y``."""
    return f"acc = {expr};"


def asm_body(dtype: str, ptx: str) -> str:
    """An ``asm`` statement running ``ptx`` with ``%0`` = acc (read, written), ``%1`` = x,
    ``%2`` = y: what a hand-written kernel with inline PTX looks like."""
    c = CTYPES[dtype][2]
    return f'asm("{ptx}" : "+{c}"(acc) : "{c}"(x), "{c}"(y));'


# ---------------------------------------------------------------------------------------------
# cases and math modes
# ---------------------------------------------------------------------------------------------
class Case(NamedTuple):
    """A formula ``acc = f(acc, x, y)``: for ``@nx.ptx_expr`` and as C++."""
    name: str
    formula: Callable
    cuda: str
    dtype: str


CASES = [
    Case("L1 `acc + abs(x-y)`", lambda acc, x, y: acc + nx.abs(x - y), "acc + fabsf(x - y)", "f32"),
    Case("L1 `acc + abs(x-y)`", lambda acc, x, y: acc + nx.abs(x - y), "acc + fabs(x - y)", "f64"),
    Case("squared Euclidean `acc + (x-y)^2`", lambda acc, x, y: acc + (x - y) * (x - y),
         "acc + (x - y) * (x - y)", "f32"),
    Case("squared Euclidean `acc + (x-y)^2`", lambda acc, x, y: acc + (x - y) * (x - y),
         "acc + (x - y) * (x - y)", "f64"),
    Case("Gaussian `acc + exp(-(x-y)^2)`", lambda acc, x, y: acc + nx.exp(-((x - y) * (x - y))),
         "acc + expf(-((x - y) * (x - y)))", "f32"),
    Case("Gaussian `acc + exp(-(x-y)^2)`", lambda acc, x, y: acc + nx.exp(-((x - y) * (x - y))),
         "acc + exp(-((x - y) * (x - y)))", "f64"),
    Case("Laplace `acc + exp(-abs(x-y))`", lambda acc, x, y: acc + nx.exp(-nx.abs(x - y)),
         "acc + expf(-fabsf(x - y))", "f32"),
    Case("Laplace `acc + exp(-abs(x-y))`", lambda acc, x, y: acc + nx.exp(-nx.abs(x - y)),
         "acc + exp(-fabs(x - y))", "f64"),
    Case("`acc + tanh(x*y + 0.5)`", lambda acc, x, y: acc + nx.tanh(x * y + 0.5),
         "acc + tanhf(x * y + 0.5f)", "f32"),
    Case("`acc + tanh(x*y + 0.5)`", lambda acc, x, y: acc + nx.tanh(x * y + 0.5),
         "acc + tanh(x * y + 0.5)", "f64"),
]
#: every DSL math function in the pairwise loop, ``acc + f(x - y)`` (two-argument ones on
#: ``(x, y)``): ``--functions`` adds them to the table
_FUNCTIONS = {  # name -> (DSL formula, C++ call with {f} for the float suffix)
    "exp": (lambda acc, x, y: acc + nx.exp(x - y), "exp{f}(x - y)"),
    "exp2": (lambda acc, x, y: acc + nx.exp2(x - y), "exp2{f}(x - y)"),
    "expm1": (lambda acc, x, y: acc + nx.expm1(x - y), "expm1{f}(x - y)"),
    "log": (lambda acc, x, y: acc + nx.log(x * y), "log{f}(x * y)"),
    "log2": (lambda acc, x, y: acc + nx.log2(x * y), "log2{f}(x * y)"),
    "log10": (lambda acc, x, y: acc + nx.log10(x * y), "log10{f}(x * y)"),
    "log1p": (lambda acc, x, y: acc + nx.log1p(x * y), "log1p{f}(x * y)"),
    "sin": (lambda acc, x, y: acc + nx.sin(x - y), "sin{f}(x - y)"),
    "cos": (lambda acc, x, y: acc + nx.cos(x - y), "cos{f}(x - y)"),
    "tan": (lambda acc, x, y: acc + nx.tan(x - y), "tan{f}(x - y)"),
    "tanh": (lambda acc, x, y: acc + nx.tanh(x - y), "tanh{f}(x - y)"),
    "sinh": (lambda acc, x, y: acc + nx.sinh(x - y), "sinh{f}(x - y)"),
    "cosh": (lambda acc, x, y: acc + nx.cosh(x - y), "cosh{f}(x - y)"),
    "sigmoid": (lambda acc, x, y: acc + nx.sigmoid(x - y), "1 / (1 + exp{f}(-(x - y)))"),
    "pow": (lambda acc, x, y: acc + nx.pow(x, y), "pow{f}(x, y)"),
    "rsqrt": (lambda acc, x, y: acc + nx.rsqrt(x * y), "rsqrt{f}(x * y)"),
    "cbrt": (lambda acc, x, y: acc + nx.cbrt(x - y), "cbrt{f}(x - y)"),
    "arctan": (lambda acc, x, y: acc + nx.arctan(x - y), "atan{f}(x - y)"),
    "hypot": (lambda acc, x, y: acc + nx.hypot(x, y), "hypot{f}(x, y)"),
}
FUNCTION_CASES = [Case(f"`{name}`", fn, "acc + " + call.format(f="f" if d == "f32" else ""), d)
                  for name, (fn, call) in _FUNCTIONS.items() for d in ("f32", "f64")]

#: the GEMM's multiply-add, in both layouts
GEMM_CASES = [Case("GEMM 8x8x8, per k step", lambda acc, x, y: acc + x * y, "acc + x * y", d)
              for d in ("f32", "f64")] + \
             [Case("GEMM 8x8x8, k slice first", lambda acc, x, y: acc + x * y, "acc + x * y", d)
              for d in ("f32", "f64")]


class Mode(NamedTuple):
    """A DSL math mode: its ``@nx.ptx_expr`` keywords and the NVRTC options of both kernels."""
    name: str
    dsl: dict
    nvrtc: tuple


MODES = [Mode("cuda", {"precision": "cuda"}, ()),
         Mode("accurate", {"precision": "accurate"}, ()),
         Mode("fast", {"fastmath": True}, ("--use_fast_math",))]


def typed_formula(formula: Callable, dtype: str, **options: Any):
    """``formula(acc, x, y)`` as an ``@nx.ptx_expr`` over ``dtype`` (``options``: its keywords).

    >>> mac = typed_formula(lambda acc, x, y: acc + x * y, "f64")
    """
    T = getattr(nx, dtype)

    def f(acc, x, y):
        return formula(acc, x, y)
    f.__annotations__ = {"acc": T, "x": T, "y": T, "return": T}
    return nx.ptx_expr(f, **options)


def dsl_formula(case: Case, mode: Mode):
    """``case.formula`` as an ``@nx.ptx_expr`` in ``mode``."""
    return typed_formula(case.formula, case.dtype, **mode.dsl)


# ---------------------------------------------------------------------------------------------
# building and measuring
# ---------------------------------------------------------------------------------------------
class Built(NamedTuple):
    """A kernel's cubin, name, SASS instruction count and registers."""
    cubin: bytes
    entry: str
    instructions: int
    registers: int

    def __repr__(self) -> str:
        return f"<{self.entry}: {self.instructions} instructions, {self.registers} registers>"


def measure(cubin: bytes, entry: str) -> Built:
    """Instruction count and registers of kernel ``entry`` (needs nvdisasm: numptx[tools])."""
    from numptx.jit.compile.resources import cubin_resources, sass_instructions
    return Built(cubin, entry, len(sass_instructions(cubin, entry)),
                 cubin_resources(cubin)[entry].registers)


def source_of(case: Case, body: str) -> tuple[str, str]:
    """(CUDA source, entry) of ``case``'s kernel with ``body`` at its heart."""
    if case.name.startswith("GEMM"):
        return gemm_source(case.dtype, body, preload="slice first" in case.name), "gemm"
    return pairwise_source(case.dtype, body), "pairwise"


class Builder:
    """Builds and measures kernels, NVRTC'ing each source and option set once."""

    def __init__(self, arch: str = ARCH):
        self.arch = arch
        self._hand: dict[tuple, Built] = {}
        self._templates: dict[tuple, nx.CudaTemplate] = {}

    def hand(self, case: Case, mode: Mode, body: str | None = None) -> Built:
        src, entry = source_of(case, body or hand_body(case.cuda))
        key = (src, mode.nvrtc)
        if key not in self._hand:
            ptx = nx.cuda_to_ptx(src, arch=self.arch, options=mode.nvrtc)
            self._hand[key] = measure(nx.ptx_to_cubin(ptx, self.arch), entry)
        return self._hand[key]

    def template(self, case: Case, mode: Mode) -> nx.CudaTemplate:
        src, entry = source_of(case, site_body(case.dtype))
        key = (src, mode.nvrtc)
        if key not in self._templates:
            self._templates[key] = nx.CudaTemplate(src, entry=entry, arch=self.arch,
                                                   options=mode.nvrtc, cache=False)
        return self._templates[key]

    def injected(self, case: Case, mode: Mode, stub: Any = None):
        """(variant, Built) of ``case`` with its DSL formula (or ``stub``) at the site."""
        t = self.template(case, mode)
        v = t.inject(f=stub if stub is not None else dsl_formula(case, mode))
        return v, measure(v.cubin, t.entry)


# ---------------------------------------------------------------------------------------------
# the SASS table
# ---------------------------------------------------------------------------------------------
def sass_rows(builder: Builder, modes=MODES, cases=CASES + GEMM_CASES) -> list[dict]:
    rows = []
    for mode in modes:
        for case in cases:
            row = {"case": case, "mode": mode}
            try:
                row["hand"] = builder.hand(case, mode)
                row["variant"], row["injected"] = builder.injected(case, mode)
                if case.name.startswith("GEMM"):
                    row["asm"] = builder.hand(case, mode, asm_body(
                        case.dtype, f"fma.rn.{case.dtype} %0, %1, %2, %0;"))
            except nx.NumptxError as e:        # e.g. no fast form of an f64 function
                row["error"] = re.sub(r"^\S+:\d+: ", "", str(e).splitlines()[0]).split(" (")[0]
            rows.append(row)
    return rows


def print_sass_table(rows: list[dict]) -> None:
    print("| kernel | dtype | math | hand-written: SASS | regs | injected: SASS | regs | "
          "ratio | asm fma: SASS | regs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        c, m = r["case"], r["mode"]
        head = f"| {c.name} | {c.dtype} | {m.name} "
        if "error" in r:
            print(head + f"| — | | — | | n/a: {r['error'][:70]} | | |")
            continue
        h, i, a = r["hand"], r["injected"], r.get("asm")
        asm = f"{a.instructions} | {a.registers}" if a else " | "
        print(head + f"| {h.instructions} | {h.registers} | {i.instructions} | {i.registers} | "
                     f"{i.instructions / h.instructions:.3f} | {asm} |")


# ---------------------------------------------------------------------------------------------
# --gpu: kernel times with CUDA events
# ---------------------------------------------------------------------------------------------
SPIN_SRC = r'''extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}'''
PAIR_N, PAIR_D = 2048, 128
GEMM_N = 2048


def _inputs(case: Case):
    """(grid, block, args, output) of ``case``'s kernel on random device data."""
    import numpy as np
    from numba import cuda
    dt = np.float32 if case.dtype == "f32" else np.float64
    rng = np.random.default_rng(13)
    if case.name.startswith("GEMM"):
        n = GEMM_N
        a, b = (cuda.to_device(rng.standard_normal(n * n).astype(dt)) for _ in range(2))
        out = cuda.device_array(n * n, dt)
        tm, tn, _ = GEMM_TILE
        return (n // tn // 16, n // tm // 16), (16, 16), (out, a, b, n, n, n), out
    n, d = PAIR_N, PAIR_D
    x, y = (cuda.to_device(rng.standard_normal(n * d).astype(dt)) for _ in range(2))
    out = cuda.device_array(n * n, dt)
    return (n // 32, n // 8), (32, 8), (out, x, y, n, d), out


def _relative_diff(got: np.ndarray, ref: np.ndarray) -> float:
    """max |got - ref| / max |ref| over the finite reference values; a NaN or infinity where
    the reference has the same is no difference, anywhere else it is inf."""
    import numpy as np
    with np.errstate(invalid="ignore"):
        same = (got == ref) | (np.isnan(got) & np.isnan(ref))
    fin = np.isfinite(ref) & np.isfinite(got)
    if not np.all(same | fin):
        return float("inf")
    if not fin.any():
        return 0.0
    return float(np.max(np.abs(got[fin] - ref[fin])) / max(float(np.max(np.abs(ref[fin]))), 1e-300))


def time_kernels(kernels: list, args: tuple, config: tuple, spin, repeats: int) -> list[float]:
    """Median milliseconds of each launchable in ``kernels`` (interleaved, ``repeats`` rounds),
    each timed between two events on stream 0 with ``spin`` queued first."""
    from numba import cuda
    times: list[list[float]] = [[] for _ in kernels]
    for k in kernels:                                  # load and warm up
        k[config](*args)
    cuda.synchronize()
    start, stop = cuda.event(), cuda.event()
    for _ in range(repeats):
        for t, k in zip(times, kernels):
            spin[1, 1](5_000_000)                      # a few ms: the launch below queues behind it
            start.record(stream=0)
            k[config](*args)
            stop.record(stream=0)
            stop.synchronize()
            t.append(cuda.event_elapsed_time(start, stop))
    return [statistics.median(t) for t in times]


def gpu_table(builder: Builder, rows: list[dict], repeats: int) -> int:
    try:
        from numba import cuda
        available = cuda.is_available() and not nx.jit.numba_site.SIMULATOR
    except Exception as e:     # noqa: BLE001 - numba-cuda missing or broken: say so and skip
        print(f"\n--gpu skipped: numba-cuda cannot be used here ({type(e).__name__}: {e})")
        return 0
    if not available:
        print("\n--gpu skipped: no CUDA GPU here (numba.cuda.is_available() is False); the "
              "SASS table above needs none")
        return 0
    import numpy as np
    dev = cuda.get_current_device()
    arch = "sm_{}{}".format(*dev.compute_capability)
    spin = nx.CudaTemplate(SPIN_SRC, entry="spin", arch=arch, cache=False).inject()
    print(f"\nkernel time on {dev.name.decode() if isinstance(dev.name, bytes) else dev.name} "
          f"({arch}), median of {repeats}: pairwise n={PAIR_N} d={PAIR_D}, GEMM {GEMM_N}^3")
    print("| kernel | dtype | math | hand-written ms | injected ms | ratio | "
          "max diff / max value |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            continue
        c, m = r["case"], r["mode"]
        hand_src, entry = source_of(c, hand_body(c.cuda))
        hand = nx.CudaTemplate(hand_src, entry=entry, arch=arch, options=m.nvrtc,
                               cache=False).inject()
        inj = r["variant"].for_arch(arch)
        grid, block, args, out = _inputs(c)
        th, ti = time_kernels([hand, inj], args, (grid, block), spin, repeats)
        hand[grid, block](*args)
        ref = out.copy_to_host()
        inj[grid, block](*args)
        got = out.copy_to_host()
        diff = _relative_diff(got, ref)
        print(f"| {c.name} | {c.dtype} | {m.name} | {th:.3f} | {ti:.3f} | {ti / th:.3f} | "
              f"{diff:.1e} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="store_true", help="also time the kernels on a GPU")
    ap.add_argument("--repeats", type=int, default=20, help="timed launches per kernel (--gpu)")
    ap.add_argument("--modes", default=",".join(m.name for m in MODES),
                    help="math modes to build, comma-separated (default: all)")
    ap.add_argument("--functions", action="store_true",
                    help="add every math function in the pairwise loop (FUNCTION_CASES)")
    args = ap.parse_args(argv)
    try:
        from numptx.jit.compile.sass import find_tool
        find_tool("nvdisasm")
    except nx.NumptxError as e:
        print(f"the SASS table needs nvdisasm: {e}", file=sys.stderr)
        return 1
    modes = [m for m in MODES if m.name in args.modes.split(",")]
    builder = Builder()
    rows = sass_rows(builder, modes, CASES + GEMM_CASES +
                     (FUNCTION_CASES if args.functions else []))
    print(f"SASS instructions and registers, {ARCH}, nvJitLink; ratio = injected / hand-written")
    print_sass_table(rows)
    return gpu_table(builder, rows, args.repeats) if args.gpu else 0


if __name__ == "__main__":
    sys.exit(main())
