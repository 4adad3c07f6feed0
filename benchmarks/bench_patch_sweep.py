"""Constant patching on real formulas: how many of a 64-value sweep are patched, and the time per
variant (issue 14, item 10).

    python benchmarks/bench_patch_sweep.py [--values 64]      # prints a table; benchmarks/README.md

Formulas, each in the DSL's default precision ("cuda") and in precision="accurate":

- Laplace: ``acc + exp(-abs(x - y) * inv_sigma)``, ``f.bind(inv_sigma=v)`` for each v;
- trig: ``acc + tanh(x * c) + sin(y * c) + log(abs(x) + c)``, ``f.bind(c=v)`` for each v.

Each sweep runs on a fresh ``CudaTemplate`` (``cache=False``, so every variant is built: assembled
by nvJitLink or patched) and times ``tmpl.inject(...).cubin`` over all values, stub compile
included. Assemblies are counted at ``ptx_to_cubin`` (the proof's two trial assemblies count).
"""
from __future__ import annotations

import argparse
import datetime
import time

import numpy as np

import numptx as nx
from numptx.jit.compile import build as build_mod
from numptx.jit.templates import template as template_mod

SRC = r'''
extern "C" __global__ void kernel(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i], y = b[i], acc = out[i];
        PTX_INJECT("k", PTX_IN(F32, x), PTX_IN(F32, y), PTX_MOD(F32, acc));
        out[i] = acc;
    }
}'''


def formulas(precision: str):
    @nx.ptx_expr(precision=precision)
    def laplace(x: nx.f32, y: nx.f32, acc: nx.f32, inv_sigma: nx.f32) -> nx.f32:
        return acc + nx.exp(-abs(x - y) * inv_sigma)

    @nx.ptx_expr(precision=precision)
    def trig(x: nx.f32, y: nx.f32, acc: nx.f32, c: nx.f32) -> nx.f32:
        return acc + nx.tanh(x * c) + nx.sin(y * c) + nx.log(abs(x) + c)

    return (laplace, "inv_sigma"), (trig, "c")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--values", type=int, default=64)
    args = ap.parse_args()
    calls = [0]
    real = template_mod.ptx_to_cubin

    def counted(*a, **k):
        calls[0] += 1
        return real(*a, **k)
    template_mod.ptx_to_cubin = build_mod.ptx_to_cubin = counted
    values = [float(v) for v in np.linspace(0.05, 4.0, args.values).astype(np.float32)]
    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{args.values} values")
    print("| formula | precision | patched | assembled | nvJitLink runs | total | per variant "
          "| `.cubin` of a patched variant (median) |")
    print("|---|---|---|---|---|---|---|---|")
    for precision in ("cuda", "accurate"):
        for f, name in formulas(precision):
            tmpl = nx.CudaTemplate(SRC, arch="sm_90", cache=False)
            calls[0] = 0
            hows, patched_s = [], []
            start = time.perf_counter()
            for v in values:
                var = tmpl.inject(k=f.bind(**{name: v}))
                t0 = time.perf_counter()
                var.cubin
                info = getattr(var, "build_info", None)
                hows.append(info.how if info is not None else "?")
                if info is not None and info.how == "patched":
                    patched_s.append(time.perf_counter() - t0)
            total = time.perf_counter() - start
            n_patched = sum(h in ("patched", "proof") for h in hows)
            counts = (f"{n_patched} | {len(values) - n_patched}" if "?" not in hows
                      else "n/a | n/a")         # a numptx without build_info (a baseline)
            per_patched = (f"{1e3 * sorted(patched_s)[len(patched_s) // 2]:.2f} ms"
                           if patched_s else "")
            print(f"| {f.__name__} | {precision} | {counts} | "
                  f"{calls[0]} | {total:.2f} s | {1e3 * total / len(values):.1f} ms | "
                  f"{per_patched} |")


if __name__ == "__main__":
    main()
