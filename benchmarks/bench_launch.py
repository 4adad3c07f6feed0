"""The host cost of launching a built variant (issue 12, fast launches: <= 10 us with <= 8
arguments; CuPy's RawKernel 5.9 us, a numba kernel 22.8 us, numptx 58-64 us before plans, all on
an H200 machine).

On any machine, side by side in one run, for kernels of 3, 6 and 8 parameters (pointers given as
``__cuda_array_interface__`` objects, ints and floats as scalars):

- argument preparation: the full path (``marshal``, what every launch ran before plans) against
  a plan's (``ArgPlan.prepare``, what a planned launch runs);
- ``variant[grid, block]`` (the launch object, made per call; parsed configurations are kept);
- a planned launch with stand-ins for the two driver calls it makes (the context check and
  ``cuda.core.launch``): everything but those.

With a GPU (``numba.cuda.is_available()``), also real launches of trivial kernels: host time
per launch over batches of launches (``time.perf_counter``; the GPU is synchronized between
batches, outside the timing), plans on and off, a numba kernel, an ``@nx.kernel`` variant, CuPy's
RawKernel when CuPy is installed, and the parts (context check, ``cuda.core.launch`` alone).

    python benchmarks/bench_launch.py [--calls 2000] [--repeats 7] [--launches 1000]
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections import OrderedDict
from types import SimpleNamespace

import numpy as np

import numptx as nx
from numptx.jit.templates import cuda_launch as CL
from numptx.jit.templates import residency as R
from numptx.jit.templates.cuda_launch import ArgPlan, marshal

SOURCES = {
    3: r'''extern "C" __global__ void k3(float* out, const float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float x = a[i], y = x, z;
        PTX_INJECT("f", PTX_IN(F32, x), PTX_IN(F32, y), PTX_OUT(F32, z)); out[i] = z; }
}''',
    6: r'''extern "C" __global__ void k6(float* out, const float* a, const float* b, int n, float s,
        unsigned m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float x = a[i] * s, y = b[i] + (float)m, z;
        PTX_INJECT("f", PTX_IN(F32, x), PTX_IN(F32, y), PTX_OUT(F32, z)); out[i] = z; }
}''',
    8: r'''extern "C" __global__ void k8(float* out, const float* a, const float* b, const float* c,
        int n, float s, double t, long long k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float x = a[i] * s + c[i], y = b[i] + (float)(t * k), z;
        PTX_INJECT("f", PTX_IN(F32, x), PTX_IN(F32, y), PTX_OUT(F32, z)); out[i] = z; }
}''',
}
STUB = "add.f32 %v_z, %v_x, %v_y;"
N = 32


class Cai:
    """A device array as far as ``__cuda_array_interface__`` goes (what CuPy hands over)."""

    def __init__(self, ptr: int):
        self.__cuda_array_interface__ = {"shape": (N,), "typestr": "<f4", "data": (ptr, False),
                                         "version": 3, "strides": None, "stream": None}


def fake_args(nargs: int, pointer=Cai) -> tuple:
    p = [pointer(0x7000_0000 + 0x1000 * k) for k in range(4)]
    return {3: (p[0], p[1], N), 6: (p[0], p[1], p[2], N, 1.5, 3),
            8: (p[0], p[1], p[2], p[3], N, 1.5, 0.25, 2)}[nargs]


def per_call(fn, calls: int, repeats: int) -> tuple[float, float]:
    """(best, median) microseconds per call of ``fn()`` over ``repeats`` loops of ``calls``."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return min(times), statistics.median(times)


def row(name: str, best_med: tuple[float, float], note: str = "") -> None:
    print(f"| {name:<58} | {best_med[0]:7.2f} | {best_med[1]:7.2f} | {note}")


def header(title: str) -> None:
    print(f"\n{title}\n| {'case':<58} | best us | median  |")


def cpu_part(templates: dict, calls: int, repeats: int) -> None:
    header("argument preparation (CPU, no driver call)")
    for nargs, t in templates.items():
        params, args = t.params, fake_args(nargs)
        plan = ArgPlan(t.entry, params)
        assert plan.prepare(args) is not None
        slow = per_call(lambda: marshal(t.entry, params, args), calls, repeats)
        fast = per_call(lambda: plan.prepare(args), calls, repeats)
        row(f"{nargs} args: marshal (full path, as before plans)", slow)
        row(f"{nargs} args: ArgPlan.prepare (planned launch)", fast,
            f"{slow[1] / fast[1]:.1f}x less (median)")

    header("the rest of a planned launch (CPU, stand-ins for the driver calls)")
    for nargs, t in templates.items():
        v = t.inject(f=STUB)
        row(f"{nargs} args: v[1, 32] (launch object, parsed config kept)",
            per_call(lambda: v[1, 32], calls, repeats))
    real_handle = CL.context_handle
    saved = R._loaded
    try:
        R._loaded = OrderedDict()
        CL.context_handle = lambda: 1            # stands in for one cuCtxGetCurrent call
        for nargs, t in templates.items():
            v, args = t.inject(f=STUB), fake_args(nargs)
            key, entry = (v.key, 0), ("fn", None, None)
            R._loaded[key] = entry
            CL._plans[v] = CL._Plan(
                hctx=1, ctx=None, key=key, entry=entry, kernel=None, stream0=None,
                launch=lambda *a: None, to_stream=None,
                make_config=lambda **kw: kw, numba_config=SimpleNamespace(
                    CUDA_ARRAY_INTERFACE_SYNC=1), args=ArgPlan(t.entry, t.params))
            row(f"{nargs} args: v[1, 32](*args), no-op context check and launch",
                per_call(lambda: v[1, 32](*args), calls, repeats))
    finally:
        CL.context_handle = real_handle
        R._loaded = saved
    print("\nGPU-only, not timed here: the context check (one cuCtxGetCurrent) and "
          "cuda.core.launch (its argument holder and cuLaunchKernel).")


def gpu_part(templates: dict, launches: int) -> None:
    import traceback
    import warnings

    from numba import cuda

    warnings.filterwarnings("ignore", message="Grid size")        # numba: low occupancy
    dev = cuda.get_current_device()
    print(f"\nreal launches on {dev.name.decode() if isinstance(dev.name, bytes) else dev.name}"
          f" (host time per launch, {launches} launches in batches of 100)")

    def per_launch(fn) -> tuple[float, float]:
        for _ in range(50):                      # warm-up: loads, plans, first-use costs
            fn()
        cuda.synchronize()
        batches = []
        for _ in range(max(1, launches // 100)):
            t0 = time.perf_counter()
            for _ in range(100):
                fn()
            batches.append((time.perf_counter() - t0) / 100 * 1e6)
            cuda.synchronize()
        return min(batches), statistics.median(batches)

    d = [cuda.device_array(N, np.float32) for _ in range(4)]
    header("launches (GPU)")
    for section in (cuda_rows, numba_rows, cupy_rows, parts):
        try:
            section(templates, d, per_launch)
        except Exception:   # noqa: BLE001 - the other sections still run; say what failed
            print(f"{section.__name__}: failed:\n{traceback.format_exc()}")
        finally:
            R.LAUNCH_PLANS = True


def cuda_rows(templates: dict, d: list, per_launch) -> None:
    for nargs, t in templates.items():
        v = t.inject(f=STUB)
        for kind, pointers in [("numba device arrays", lambda k: d[k]),
                               ("int addresses", lambda k: d[k].device_ctypes_pointer.value)]:
            p = [pointers(k) for k in range(4)]
            args = {3: (p[0], p[1], N), 6: (p[0], p[1], p[2], N, 1.5, 3),
                    8: (p[0], p[1], p[2], p[3], N, 1.5, 0.25, 2)}[nargs]
            R.LAUNCH_PLANS = False
            off = per_launch(lambda: v[1, 32](*args))
            R.LAUNCH_PLANS = True
            on = per_launch(lambda: v[1, 32](*args))
            row(f"{nargs} args, {kind}: plans off (full path)", off)
            row(f"{nargs} args, {kind}: plans on", on, f"{off[1] / on[1]:.1f}x less (median)")


def numba_rows(templates: dict, d: list, per_launch) -> None:
    from numba import cuda

    @cuda.jit
    def plain(out, a, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = a[i] + a[i]
    row("numba @cuda.jit kernel, 3 args (device arrays)",
        per_launch(lambda: plain[1, 32](d[0], d[1], N)))

    @nx.kernel
    def apply(out, a, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = nx.site("f", x=a[i], y=a[i], out={"z": "f32"})
    kv = apply.inject(f=STUB)
    R.LAUNCH_PLANS = False
    off = per_launch(lambda: kv[1, 32](d[0], d[1], N))
    R.LAUNCH_PLANS = True
    on = per_launch(lambda: kv[1, 32](d[0], d[1], N))
    row("@nx.kernel variant, 3 args: plans off", off)
    row("@nx.kernel variant, 3 args: plans on", on, f"{off[1] / on[1]:.1f}x less (median)")


def cupy_rows(templates: dict, d: list, per_launch) -> None:
    try:
        import cupy as cp
    except Exception:   # noqa: BLE001 - CuPy is optional
        print("(CuPy is not installed: no RawKernel row)")
        return
    src = SOURCES[3].replace('PTX_INJECT("f", PTX_IN(F32, x), PTX_IN(F32, y), '
                             'PTX_OUT(F32, z));', "z = x + y;")
    raw = cp.RawKernel(src, "k3")
    ca, cb = cp.zeros(N, cp.float32), cp.zeros(N, cp.float32)
    row("CuPy RawKernel, 3 args (CuPy arrays)",
        per_launch(lambda: raw((1,), (32,), (ca, cb, np.int32(N)))))
    v = templates[3].inject(f=STUB)
    row("numptx 3 args, CuPy arrays (CAI stream synced): plans on",
        per_launch(lambda: v[1, 32](ca, cb, N)))


def parts(templates: dict, d: list, per_launch) -> None:
    from cuda.core import LaunchConfig, launch
    from numba.cuda.cudadrv import devices
    from numba.cuda.cudadrv.driver import _to_core_stream

    header("parts of a planned launch (GPU)")
    v = templates[3].inject(f=STUB)
    v[1, 32](d[0], d[1], N)
    plan = CL._plans[v]
    row("context_handle() (cuCtxGetCurrent)", per_launch(R.context_handle))
    row("numba devices.get_context() (for comparison)", per_launch(devices.get_context))
    values = plan.args.prepare((d[0], d[1], N))[0]
    cfg, stream = LaunchConfig(grid=(1, 1, 1), block=(32, 1, 1), shmem_size=0), _to_core_stream(0)
    row("cuda.core launch() alone, 3 prepared args",
        per_launch(lambda: launch(stream, cfg, plan.kernel, *values)))
    row("ArgPlan.prepare, 3 args (numba device arrays)",
        per_launch(lambda: plan.args.prepare((d[0], d[1], N))))
    row("numba device array __cuda_array_interface__ (one read)",
        per_launch(lambda: d[0].__cuda_array_interface__))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000, help="calls per timing loop (CPU)")
    ap.add_argument("--repeats", type=int, default=7, help="timing loops (CPU)")
    ap.add_argument("--launches", type=int, default=1000, help="launches per case (GPU)")
    opts = ap.parse_args(argv)
    templates = {n: nx.CudaTemplate(src, entry=f"k{n}") for n, src in SOURCES.items()}
    cpu_part(templates, opts.calls, opts.repeats)
    try:
        from numba import cuda
        gpu = cuda.is_available()
    except Exception:   # noqa: BLE001 - a broken driver reads as "no GPU"
        gpu = False
    if not gpu:
        print("\nno CUDA GPU here: real launch timings need a device "
              "(run this script on a GPU machine)")
        return 0
    gpu_part(templates, opts.launches)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
