"""PTX Inject speed through the Python API.

(a) a tiled GEMM-like CUDA template whose unrolled inner loop yields 512 instances of one site
    (~150 KB of PTX): parse (PtxInject(ptx)) and render (inj.render({...}));
(b) 8192 unique sites: parse, and render against a plain "".join of the same pieces.

    python benchmarks/bench_inject.py            # prints a table; targets in benchmarks/README.md
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numptx as nx
from numptx.annotate import emit_site

TARGETS = {"a_parse": 150e-6, "a_render": 41e-6, "b_parse": 10e-3, "b_render_ratio": 2.0}


def gemm_template(tm: int = 8, tn: int = 8, tk: int = 8) -> str:
    """A register-tiled GEMM: each thread owns a tm x tn tile; the k loop is unrolled tk deep,
    so the 'mac' site appears tm * tn * tk times (512 by default)."""
    return rf'''
extern "C" __global__ void gemm(float* C, const float* A, const float* B, int M, int N, int K) {{
    const int row0 = (blockIdx.y * blockDim.y + threadIdx.y) * {tm};
    const int col0 = (blockIdx.x * blockDim.x + threadIdx.x) * {tn};
    float acc[{tm}][{tn}];
    #pragma unroll
    for (int i = 0; i < {tm}; ++i)
        #pragma unroll
        for (int j = 0; j < {tn}; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += {tk}) {{
        #pragma unroll
        for (int kk = 0; kk < {tk}; ++kk) {{
            float a[{tm}], b[{tn}];
            #pragma unroll
            for (int i = 0; i < {tm}; ++i) a[i] = A[(row0 + i) * K + k0 + kk];
            #pragma unroll
            for (int j = 0; j < {tn}; ++j) b[j] = B[(k0 + kk) * N + col0 + j];
            #pragma unroll
            for (int i = 0; i < {tm}; ++i)
                #pragma unroll
                for (int j = 0; j < {tn}; ++j)
                    PTX_INJECT("mac", PTX_IN(F32, a, a[i]), PTX_IN(F32, b, b[j]),
                               PTX_MOD(F32, acc, acc[i][j]));
        }}
    }}
    #pragma unroll
    for (int i = 0; i < {tm}; ++i)
        #pragma unroll
        for (int j = 0; j < {tn}; ++j) C[(row0 + i) * N + col0 + j] = acc[i][j];
}}'''


def unique_sites_ptx(n: int = 8192) -> str:
    """PTX text with n unique sites, each laid out exactly as the CUDA annotation emits it
    (NVRTC on 8192 inline-asm statements would take minutes; the parser sees the same text)."""
    import re
    body = []
    for i in range(n):
        asm = emit_site(f"site_{i}", [("in", "f32", "x", "x"), ("in", "f32", "y", "y"),
                                      ("out", "f32", "z", "z")])
        m = re.search(r'asm volatile\("(.*?)"\s*:', asm, re.S)
        text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(0))) if m else ""
        text = (text.encode().decode("unicode_escape").replace("%%", "%")
                .replace("%0", f"%f{3 * i}").replace("%1", f"%f{3 * i + 1}").replace("%2", f"%f{3 * i + 2}"))
        body.append(f"\t// begin inline asm\n\t{text}\n\t// end inline asm\n\tadd.f32 %f{3*i+1}, %f{3*i+2}, %f{3*i};\n")
    return (".version 9.0\n.target sm_90\n.address_size 64\n\n.visible .entry k()\n{\n"
            f"\t.reg .f32 %f<{3 * n + 1}>;\n" + "".join(body) + "\tret;\n}\n")


def join_pieces(inj: nx.PtxInject, stubs: dict[str, str]) -> list[str]:
    """The output of inj.render(stubs) as 2n+1 pieces: the PTX between instances (with the
    PTX_INJECT_STUB comment lines around each stub) and the stubs, ready for a join."""
    ctx, ptx = inj._ctx, inj.ptx
    pieces, prev, close = [], 0, ""
    for k in range(ctx.n_instances):
        inst = ctx.instances[k]
        name = inj._names[inst.site]
        pieces.append(f"{close}{ptx[prev:inst.begin]}\t// PTX_INJECT_STUB {name}\n")
        pieces.append(stubs[name])
        prev, close = inst.end, "\n\t// PTX_INJECT_STUB_END\n"
    pieces.append(close + ptx[prev:])
    return pieces


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args(argv)
    rows = []

    ptx_a = nx.cuda_to_ptx(gemm_template(), arch="sm_90")
    inj = nx.PtxInject(ptx_a)
    site = inj.sites["mac"]
    a, b, acc = site["a"].reg, site["b"].reg, site["acc"].reg
    stub = f"fma.rn.f32 %{acc}, %{a}, %{b}, %{acc};"
    stubs = {"mac": stub}
    t_parse, m_parse = best(lambda: nx.PtxInject(ptx_a), args.repeat)
    t_render, m_render = best(lambda: inj.render(stubs), args.repeat)
    assert nx.ptx_to_cubin(inj.render(stubs), arch="sm_90")
    rows.append(("(a) GEMM 512 instances: parse", f"{len(ptx_a) / 1024:.0f} KB, {site.instances} inst",
                 t_parse, m_parse, TARGETS["a_parse"]))
    rows.append(("(a) GEMM 512 instances: render", "", t_render, m_render, TARGETS["a_render"]))
    # binding scans each stub per instance (C core): what it costs per variant
    t_bind, m_bind = best(lambda: inj.render(stubs, bind=True), max(20, args.repeat // 10))
    rows.append(("(a) render(bind=True)", f"{len(inj.render(stubs, bind=True)) / 1024:.0f} KB out",
                 t_bind, m_bind, None))

    ptx_b = unique_sites_ptx(8192)
    inj_b = nx.PtxInject(ptx_b)
    assert len(inj_b.sites) == 8192
    stubs_b = {name: f"add.f32 %v_z, %v_x, %v_y; // {i}" for i, name in enumerate(inj_b.sites)}
    rep_b = max(10, args.repeat // 10)
    t_parse_b, m_parse_b = best(lambda: nx.PtxInject(ptx_b), rep_b)
    t_render_b, m_render_b = best(lambda: inj_b.render(stubs_b), rep_b)
    stub_list = list(stubs_b.values())
    assert inj_b.render(stub_list) == inj_b.render(stubs_b)
    t_render_l, m_render_l = best(lambda: inj_b.render(stub_list), rep_b)
    t_bytes_b, m_bytes_b = best(lambda: inj_b.render_bytes(stub_list), rep_b)
    # the baseline: a plain "".join of the same pieces (the PTX between the sites, and each stub
    # with its tag line), as if the pieces were already laid out in a Python list
    pieces = join_pieces(inj_b, stubs_b)
    assert "".join(pieces) == inj_b.render(stubs_b)
    t_join, m_join = best(lambda: "".join(pieces), rep_b)
    rows.append(("(b) 8192 unique sites: parse", f"{len(ptx_b) / 1024:.0f} KB", t_parse_b, m_parse_b,
                 TARGETS["b_parse"]))
    rows.append(("(b) render(dict of 8192 stubs)", "", t_render_b, m_render_b, None))
    rows.append(("(b) render(list in site order)", "", t_render_l, m_render_l, None))
    rows.append(("(b) render_bytes (C core)", "", t_bytes_b, m_bytes_b, None))
    rows.append(('(b) plain "".join of the pieces', f"{len(pieces)} pieces", t_join, m_join, None))

    print(f"{'case':<36}{'size':<22}{'best':>12}{'median':>12}{'target':>12}  ok")
    ok_all = True
    for name, size, t, m, target in rows:
        ok = "" if target is None else ("yes" if t <= target else "NO")
        ok_all &= ok != "NO"
        tgt = "" if target is None else f"{target * 1e6:.0f} us"
        print(f"{name:<36}{size:<22}{t * 1e6:>9.1f} us{m * 1e6:>9.1f} us{tgt:>12}  {ok}")
    ratio = t_render_l / t_join
    ok = ratio <= TARGETS["b_render_ratio"]
    ok_all &= ok
    print(f"{'(b) render(list) / join':<36}{'':<22}{ratio:>11.2f}x{'':>12}{'<= 2.0x':>12}  {'yes' if ok else 'NO'}")
    print(f"{'(b) render(dict) / join':<36}{'':<22}{t_render_b / t_join:>11.2f}x"
          "   (name -> site mapping of 8192 dict entries included)")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
