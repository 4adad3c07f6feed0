"""``numptx demo``: the pipeline end to end, with stage-timing tables.

Part 1 compiles an annotated CUDA C++ template once (NVRTC), lists its sites, injects a few
hand-written PTX stubs and assembles each variant to a cubin (nvJitLink). No GPU is needed.

Part 2 traces a formula with ``@nx.ptx_expr``, builds variants of it (a constant baked in with
``bind``) from the same CUDA template and from a numba template (``@nx.kernel`` with ``nx.site``),
then runs variants and checks them against NumPy: on the GPU when ``numba.cuda.is_available()``
(numba and CUDA template variants), otherwise the numba ones on the CPU under numba-cuda's
simulator (C++ cannot run there). The simulator
has to be switched on before numba.cuda is imported, so that part runs in a subprocess,
``python -m numptx.demo --simulate`` with ``NUMBA_ENABLE_CUDASIM=1``.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable

from . import config
from ._shadow import empty_cwd, shadow_message, shadowing_folder
from .jit.compile import patch as _patch

DEMO_SRC = r'''
extern "C" __global__ void combine_kernel(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i], y = b[i], z;
        PTX_INJECT("combine", PTX_IN(F32, x), PTX_IN(F32, y), PTX_OUT(F32, z));
        out[i] = z;
    }
}
'''

# name -> stub written against the site's registers (filled in with the Variable.reg names)
DEMO_STUBS = {
    "add": "add.rn.f32 %{z}, %{x}, %{y};",
    "mul": "mul.rn.f32 %{z}, %{x}, %{y};",
    "hypot": "{{\n.reg .f32 %t;\nmul.rn.f32 %t, %{y}, %{y};\nfma.rn.f32 %t, %{x}, %{x}, %t;\n"
             "sqrt.rn.f32 %{z}, %t;\n}}",
}


def _timed(fn: Callable, repeat: int = 1):
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return result, best


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:9.2f} ms"


def run(arch: str = "sm_90", out=print) -> dict[str, float]:
    """Run the demo, print what happens and return the stage timings in seconds."""
    import numptx as nx
    folder = shadowing_folder()          # a clone in the current folder, not the package?
    if folder is not None:
        raise SystemExit(f"numptx demo: {shadow_message(folder)}")
    from numptx.jit import nvjitlink_version, nvrtc_version

    out(f"numptx {nx.__version__} demo — NVRTC {'.'.join(map(str, nvrtc_version()))}, "
        f"nvJitLink {'.'.join(map(str, nvjitlink_version()))}, target {arch}\n")
    out("Template (CUDA C++, compiled once):")
    out("\n".join("    " + line for line in DEMO_SRC.strip().splitlines()) + "\n")

    ptx, t_nvrtc = _timed(lambda: nx.cuda_to_ptx(DEMO_SRC, arch=arch))
    inj, t_parse = _timed(lambda: nx.PtxInject(ptx), repeat=50)
    out("Sites:")
    for site in inj.sites.values():
        out(f"    {site.signature}   x{site.instances} instance(s)")
        for v in site.variables:
            out(f"        {v.kind:<3} {v.dtype:<5} {v.name:<3} -> register %{v.reg}")
    site = inj.sites["combine"]
    regs = {v.name: v.reg for v in site.variables}

    timings = {"nvrtc compile (once)": t_nvrtc, "parse sites": t_parse}
    out("\nVariants:")
    for name, template in DEMO_STUBS.items():
        stub = template.format(**regs)
        rendered, t_render = _timed(lambda: inj.render({"combine": stub}), repeat=50)
        cubin, t_link = _timed(lambda: nx.ptx_to_cubin(rendered, arch=arch))
        out(f"    {name:<6} stub {stub.splitlines()[0]!r}{' ...' if chr(10) in stub else ''}"
            f" -> cubin {len(cubin)} bytes")
        timings[f"inject '{name}'"] = t_render
        timings[f"assemble '{name}'"] = t_link

    out("\nStage timings (best of repeats; this machine, no GPU needed):")
    _print_table(timings, out)
    per_variant = sum(v for k, v in timings.items() if k.startswith(("inject", "assemble"))) / len(DEMO_STUBS)
    out(f"\nA new variant costs {_fmt(per_variant).strip()} (inject + assemble) instead of a full "
        f"compile ({_fmt(t_nvrtc).strip()} of NVRTC alone).")
    timings.update(run_formula(arch=arch, out=out))
    return timings


# -- part 2: @nx.ptx_expr, CUDA and numba templates, running variants ----------------------------
#: the constants baked into the formula's variants (one variant each)
FORMULA_CONSTANTS = (0.5, 1.0, 2.0, 1.5)
N_ELEMENTS = 256
cuda = None   # numba.cuda, imported by _numba_kernel (real numba-cuda or the simulator)


def _formula():
    """A fresh ``@nx.ptx_expr`` (a new decorator application: nothing traced yet)."""
    import numptx as nx

    @nx.ptx_expr
    def blend(x: nx.f32, y: nx.f32, c: nx.f32) -> nx.f32:
        return nx.fma(x, c, nx.sqrt(x * x + y * y))
    return blend


def _reference(x, y, c):
    import numpy as np
    x, y = x.astype(np.float32), y.astype(np.float32)
    s = np.sqrt(x * x + y * y)                       # f32 throughout, rounded per operation
    # fma(x, c, s): the f64 product of two f32 values is exact; one rounding of the sum to f32
    # (a double rounding, f64 then f32, differs from a true fma only in rare ties)
    return (x.astype(np.float64) * np.float32(c) + s.astype(np.float64)).astype(np.float32)


def _term_scale(x, y, c):
    """The magnitude the demo's errors are measured in ulps of: ``|x*c| + sqrt(x*x + y*y)``,
    the size of the terms the sum adds. Where they cancel (``x*c`` near ``-sqrt(...)``) the
    result is near zero and its own ulp is tiny: an ulp of the result would report the
    cancellation as thousands of ulp for an error of one rounding of the terms."""
    import numpy as np
    x, y = x.astype(np.float32), y.astype(np.float32)
    return np.abs(x * np.float32(c)) + np.sqrt(x * x + y * y)


def _numba_kernel():
    """The numba template: a ``@nx.kernel`` with one site (made on demand: importing numba.cuda
    decides between the real numba-cuda and the simulator)."""
    global cuda   # a module global: the simulator swaps the kernel's global `cuda` for its own
    import numptx as nx
    from numba import cuda as _cuda
    cuda = _cuda

    @nx.kernel(cache=False)
    def apply(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})
    return apply


def _inputs():
    import numpy as np
    rng = np.random.default_rng(0)
    a = rng.uniform(-4, 4, N_ELEMENTS).astype(np.float32)
    b = rng.uniform(-4, 4, N_ELEMENTS).astype(np.float32)
    return a, b


@contextlib.contextmanager
def _quiet_small_grids():
    """The demo's grids are small on purpose (256 elements): numba-cuda's
    NumbaPerformanceWarning about low occupancy says nothing about numptx, so the demo (and
    only the demo) silences it around its launches."""
    with warnings.catch_warnings():
        from .jit.numba.numba_compat import performance_warnings
        for category in performance_warnings():     # none without numba: nothing to silence
            warnings.simplefilter("ignore", category)
        yield


def _run_and_check(tmpl, stubs: dict, out=print) -> tuple[float, float]:
    """Launch one variant of ``tmpl`` (a numba kernel, or the CUDA template, which also takes
    the element count) per stub, compare with NumPy; return (best run time, max abs error)."""
    import numpy as np
    a, b = _inputs()
    best, worst = float("inf"), 0.0
    grid = (N_ELEMENTS + 63) // 64
    extra = (N_ELEMENTS,) if getattr(tmpl, "src", None) is not None else ()
    for label, (c, stub) in stubs.items():
        res = np.zeros_like(a)
        with _quiet_small_grids():
            t = time.perf_counter()
            tmpl.inject(combine=stub)[grid, 64](res, a, b, *extra)
            best = min(best, time.perf_counter() - t)
        ref = _reference(a, b, c)
        err = float(np.max(np.abs(res - ref)))
        ulp = float(np.max(np.abs(res - ref) / np.spacing(_term_scale(a, b, c))))
        ok = np.allclose(res, ref, rtol=1e-6, atol=1e-6)
        out(f"    {label:<24} {N_ELEMENTS} elements, max |err| {err:.2e} "
            f"({ulp:.1f} ulp of the terms) "
            f"vs NumPy: {'OK' if ok else 'MISMATCH'}")
        if not ok:
            raise SystemExit(f"numptx demo: variant {label} does not match NumPy")
        worst = max(worst, err)
    return best, worst


def _simulate_main() -> int:
    """``python -m numptx.demo --simulate`` (with NUMBA_ENABLE_CUDASIM=1): run the numba
    template's variants on the CPU; the last line of output is the timings as JSON."""
    import numptx  # noqa: F401 - the real package, or a clone in the current folder?
    folder = shadowing_folder()
    if folder is not None:
        print(f"numptx demo: {shadow_message(folder)}", file=sys.stderr)
        return 2
    from .jit.numba.numba_site import SIMULATOR
    if not SIMULATOR:
        print("numptx demo --simulate needs NUMBA_ENABLE_CUDASIM=1 in the environment", file=sys.stderr)
        return 2
    apply = _numba_kernel()
    expr = _formula()
    # the @ptx_expr variants run as their NumPy reference at the site; the PTX text that
    # numptx injects into the numba template (registers %v_x, %v_y, %v_z) runs in the emulator
    stubs = {f"expr c={c}": (c, expr.bind(c=c)) for c in FORMULA_CONSTANTS}
    ptx_stubs = config.demo_ptx_stubs()
    stubs.update({f"PTX stub c={c}": (float(c), text) for c, text in ptx_stubs.items()})
    t_run, _ = _run_and_check(apply, stubs)
    print(json.dumps({"run": t_run}))
    return 0


def run_formula(arch: str = "sm_90", out=print) -> dict[str, float]:
    """Part 2 of the demo; returns its stage timings in seconds. Its stages: trace the
    formula, compile the two templates once, build the variants, run and check them (on the
    GPU, or under the simulator in a subprocess), print the timings."""
    from .jit.numba.numba_site import SIMULATOR

    out("\n" + "=" * 78)
    if SIMULATOR:
        out("Part 2 skipped: NUMBA_ENABLE_CUDASIM=1 is set, and numba templates need the real "
            "numba-cuda (no GPU needed); run `numptx demo` without it")
        return {}
    expr, timings = _trace_formula(out)
    ctmpl, apply, ntmpl = _compile_templates(arch, out, timings)
    out("Variants (stub -> inject -> cubin, no cache). The first of a formula is assembled; the\n"
        "second proves its shape (two trial assemblies); later constants are patched in:")
    _build_variants("CUDA", ctmpl, expr, out, timings)
    ptx_stubs = _build_variants("numba", ntmpl, expr, out, timings)
    gpu = _gpu_name()
    if gpu is not None:
        t_run = _run_on_gpu(gpu, apply, ctmpl, expr, out, timings)
    else:
        t_run = _run_in_simulator(ptx_stubs, out)
    timings["run, CPU simulator" if gpu is None else "run, GPU (numba template)"] = t_run
    out("\nStage timings, part 2 (best of the variants; "
        f"{'GPU' if gpu is not None else 'CPU only, run = simulator'}):")
    _print_table(timings, out)
    return timings


def _print_table(timings: dict[str, float], out) -> None:
    """The stage-timings table (one row per stage)."""
    out(f"    {'stage':<28}{'time':>12}")
    out(f"    {'-' * 28}{'-' * 12}")
    for stage, seconds in timings.items():
        out(f"    {stage:<28}{_fmt(seconds):>12}")


def _trace_formula(out) -> tuple:
    """Part 2's first stage: show the formula and trace it; (the traced ``@nx.ptx_expr``,
    the timings so far)."""
    out("Part 2: a formula in Python (@nx.ptx_expr) -> variants of a CUDA and a numba template\n")
    out("    @nx.ptx_expr")
    out("    def blend(x: nx.f32, y: nx.f32, c: nx.f32) -> nx.f32:")
    out("        return nx.fma(x, c, nx.sqrt(x * x + y * y))")
    out(f"    variants: c = {', '.join(map(str, FORMULA_CONSTANTS))} (expr.bind(c=...))\n")

    def trace():
        e = _formula()
        e.graph
        return e
    expr, t_trace = _timed(trace, repeat=5)
    out("Traced graph (print(blend.graph)):")
    out("\n".join("    " + line for line in str(expr.graph).splitlines()) + "\n")
    return expr, {"trace formula": t_trace}


def _compile_templates(arch: str, out, timings: dict[str, float]) -> tuple:
    """The CUDA C++ template (the demo kernel, compiled once by NVRTC; no cache: real builds)
    and the numba template (compiled once by the real numba-cuda): (CUDA template, the
    ``@nx.kernel``, its template)."""
    import numpy as np

    import numptx as nx
    t = time.perf_counter()
    ctmpl = nx.CudaTemplate(DEMO_SRC, entry="combine_kernel", arch=arch, cache=False)
    t_ctmpl = time.perf_counter() - t
    apply = _numba_kernel()
    x = np.zeros(4, np.float32)
    t = time.perf_counter()
    ntmpl = apply.template(x, x, x, cc=arch)
    t_ntmpl = time.perf_counter() - t
    out(f"Templates: CUDA C++ {ctmpl.entry!r} (NVRTC {_fmt(t_ctmpl).strip()}), numba "
        f"{apply.__name__!r} (numba-cuda {_fmt(t_ntmpl).strip()}) — each compiled once\n")
    timings["CUDA template (once)"] = t_ctmpl
    timings["numba template (once)"] = t_ntmpl
    return ctmpl, apply, ntmpl


def _build_variants(label: str, tmpl, expr, out, timings: dict[str, float]) -> dict[str, str]:
    """One variant of ``tmpl`` per constant: stub, inject, cubin (assembled, proven or
    patched), each timed; returns ``{constant: stub text}`` (what the simulator step runs)."""
    site = tmpl.sites["combine"]
    t_stub = t_inj = float("inf")
    how: dict[str, float] = {}
    texts = {}
    for c in FORMULA_CONSTANTS:
        bound = expr.bind(c=c)
        stub, dt = _timed(lambda: bound.stub(site))
        t_stub = min(t_stub, dt)
        text = getattr(stub, "text", stub)
        variant = tmpl.inject(combine=text)
        _, dt = _timed(lambda: variant.ptx)
        t_inj = min(t_inj, dt)
        shape = tmpl.shape(variant.stubs)
        state = (lambda: tmpl.plans.get(shape.key) if shape else None)
        before = state()
        cubin, dt = _timed(lambda: variant.cubin)
        patched = isinstance(state(), _patch.Plan)
        kind = ("patched" if patched and isinstance(before, _patch.Plan) else
                "proof + patched" if patched else "assembled")
        how.setdefault(kind, dt)
        texts[str(c)] = str(text)
        out(f"    {label:<6} c={c:<4} {len(str(text).splitlines()):>3}-line stub -> cubin "
            f"{len(cubin)} bytes, {kind:<15} {_fmt(dt).strip():>9}, kernel "
            f"{tmpl.entry[:24]}{'...' if len(tmpl.entry) > 24 else ''}")
    timings[f"stub ({label})"] = t_stub
    timings[f"inject ({label})"] = t_inj
    for kind, dt in how.items():
        timings[f"{'assemble' if kind == 'assembled' else kind} ({label})"] = dt
    return texts


def _gpu_name() -> str | None:
    """The current GPU's name, or None when there is none (no driver: the simulator)."""
    try:
        from numba import cuda
        gpu = bool(cuda.is_available())
    except Exception:   # noqa: BLE001 - no driver: the simulator
        return None
    if not gpu:
        return None
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else name


def _run_on_gpu(gpu: str, apply, ctmpl, expr, out, timings: dict[str, float]) -> float:
    """Run the numba and the CUDA template's variants on the GPU, checked against NumPy;
    the numba template's best run time."""
    out(f"\nRun: on the GPU ({gpu}), numba and CUDA template variants, checked against "
        f"NumPy:")
    t_run, _ = _run_and_check(apply, {f"numba expr c={c}": (c, expr.bind(c=c))
                                      for c in FORMULA_CONSTANTS}, out=out)
    t_cuda, _ = _run_and_check(ctmpl, {f"CUDA expr c={c}": (c, expr.bind(c=c))
                                       for c in FORMULA_CONSTANTS}, out=out)
    timings["run, GPU (CUDA template)"] = t_cuda
    return t_run


def _run_in_simulator(ptx_stubs: dict[str, str], out) -> float:
    """Run the numba template's variants under numba-cuda's simulator, in a subprocess
    (``python -m numptx.demo --simulate``); its best run time."""
    from . import demo as _self
    out("\nRun: no GPU here -> CPU, numba-cuda's simulator (subprocess with "
        "NUMBA_ENABLE_CUDASIM=1), checked against NumPy:")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NUMPTX_DEMO_PTX_STUBS=json.dumps(ptx_stubs))
    t = time.perf_counter()
    # run where 'numptx' is the real package, not a clone in the user's folder
    with empty_cwd() as cwd:
        res = subprocess.run([sys.executable, "-m", _self.__name__, "--simulate"], env=env,
                             cwd=cwd, capture_output=True, text=True, timeout=300)
    t_sub = time.perf_counter() - t
    lines = res.stdout.rstrip().splitlines()
    for line in lines[:-1]:
        out(line)
    if res.returncode != 0 or not lines:
        out(res.stdout + res.stderr)
        raise SystemExit("numptx demo: the simulator run failed")
    t_run = json.loads(lines[-1])["run"]
    out(f"    (expr variants run their NumPy reference at the site; PTX stubs run in numptx's "
        f"PTX emulator; subprocess {t_sub:.1f} s in all)")
    return t_run


if __name__ == "__main__":
    if "--simulate" in sys.argv[1:]:
        sys.exit(_simulate_main())
    run()
