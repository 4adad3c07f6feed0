"""``numptx demo``: the pipeline end to end on a CPU, with a stage-timing table.

Compiles an annotated CUDA C++ template once (NVRTC), lists its sites, injects a few stubs and
assembles each variant to a cubin (nvJitLink). No GPU is needed.
"""
from __future__ import annotations

import time
from collections.abc import Callable

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
    out(f"    {'stage':<28}{'time':>12}")
    out(f"    {'-' * 28}{'-' * 12}")
    for stage, seconds in timings.items():
        out(f"    {stage:<28}{_fmt(seconds):>12}")
    per_variant = sum(v for k, v in timings.items() if k.startswith(("inject", "assemble"))) / len(DEMO_STUBS)
    out(f"\nA new variant costs {_fmt(per_variant).strip()} (inject + assemble) instead of a full "
        f"compile ({_fmt(t_nvrtc).strip()} of NVRTC alone).")
    return timings
