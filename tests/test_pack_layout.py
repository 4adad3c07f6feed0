"""Pack layouts and build modes (numptx/jit/populations/pack_kernels.py), on the real NVRTC and nvJitLink:
a large pack as several kernels of one module (``layout="kernels"``), the screening build
(``build="fast"``, -Ofc=max), the candidate -> kernel mapping, and their bad input."""
from __future__ import annotations

import random

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx.jit.populations.pack import PackError, PackKernel, PerKernel
from numptx.jit.populations.pack_kernels import FAST_LINK_OPTIONS, merge_kernels
from numptx.jit.compile.resources import cubin_resources
from numptx.jit.compile.sass import sass_instructions

FIT = r'''
extern "C" __global__ void fit(float* err, const float* X, const float* Y, int n) {
    unsigned cand = blockIdx.y;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float e = 0.0f;
    if (i < n) {
        float x = X[i], y;
        PTX_INJECT("f", PTX_IN(U32, cand), PTX_IN(F32, x), PTX_OUT(F32, y));
        float d = y - Y[i];
        e = d * d;
    }
    for (int o = 16; o > 0; o >>= 1) e += __shfl_down_sync(0xffffffffu, e, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(&err[cand], e);
}'''
_BIN = ["add.rn.f32", "sub.rn.f32", "mul.rn.f32", "min.f32", "max.f32"]


def program(seed: int, n: int = 6) -> list:
    r = random.Random(seed)
    p = [sp.input("x")]
    for _ in range(n):
        p += [sp.const(r.uniform(-2, 2), "f32"), sp.instr(r.choice(_BIN))]
    return p


@pytest.fixture(scope="module")
def tmpl():
    return nx.CudaTemplate(FIT, entry="fit", cache=False)


@pytest.fixture(scope="module")
def progs():
    return [program(s) for s in range(40)]


def test_kernels_layout_makes_one_entry_per_run(tmpl, progs):
    p = tmpl.pack("f", progs, select="cand", layout="kernels", per_kernel=16)
    assert p.kernels == (PackKernel(0, "fit__nx_k0", 0, 16), PackKernel(1, "fit__nx_k1", 16, 32),
                         PackKernel(2, "fit__nx_k2", 32, 40))
    assert sorted(cubin_resources(p.cubin)) == ["fit__nx_k0", "fit__nx_k1", "fit__nx_k2"]
    assert p.ptx.count(".entry") == 3 and p.entry == "fit__nx_k0"
    assert p.kernel_of(20) == (p.kernels[1], 4)
    assert p.kernel_of(39) == (p.kernels[2], 7)
    with pytest.raises(PackError, match="candidate 40: not in this pack"):
        p.kernel_of(40)


def test_each_kernel_is_the_machine_code_of_its_run_alone(tmpl, progs):
    """Kernel j of a several-kernel module is what ptxas makes of a one-function pack of the
    same run: the same SASS, instruction for instruction."""
    p = tmpl.pack("f", progs, select="cand", layout="kernels", per_kernel=16)
    for k in p.kernels:
        alone = tmpl.pack("f", progs[k.start:k.stop], select="cand")
        assert sass_instructions(p.cubin, k.entry) == sass_instructions(alone.cubin, "fit")


def test_one_function_is_unchanged(tmpl, progs):
    """The default layout and build are today's: the template's own variant, one kernel."""
    p = tmpl.pack("f", progs[:10], select="cand")
    assert p.kernels == (PackKernel(0, "fit", 0, 10),)
    assert p.cubin == tmpl.inject(f=p.population).cubin


def test_a_refused_candidate_is_named_by_its_pack_index(tmpl, progs):
    bad = "add.s32 %v_y, %v_x, 1;"          # ptxas: an s32 add on f32 registers
    cands = progs[:20] + [bad] + progs[20:30]
    p = tmpl.pack("f", cands, select="cand", layout="kernels", per_kernel=8)
    p.cubin
    assert sorted(p.errors) == [20]
    assert "candidate 20:" in str(p.errors[20]) and "Arguments mismatch" in str(p.errors[20])
    assert len(p.ok) == 30 and sorted(cubin_resources(p.cubin)) == [
        f"fit__nx_k{j}" for j in range(4)]


def test_fast_build_assembles_with_ofc_max(tmpl, progs):
    full = tmpl.pack("f", progs[:24], select="cand")
    fast = tmpl.pack("f", progs[:24], select="cand", build="fast")
    assert fast.kernels == (PackKernel(0, "fit", 0, 24),)
    assert fast.key != full.key
    assert fast.cubin == nx.ptx_to_cubin(full.ptx, tmpl.arch,
                                         options=tmpl.link_options + FAST_LINK_OPTIONS)
    assert fast.cubin != full.cubin
    # the run-time cost of the screening build, as SASS instructions: more of them
    assert len(sass_instructions(fast.cubin, "fit")) > len(sass_instructions(full.cubin, "fit"))


def test_pack_many_in_kernels_and_fast(tmpl, progs):
    packs = tmpl.pack_many("f", progs, select="cand", per_module=24, layout="kernels",
                           per_kernel=10, build="fast", max_workers=1)
    assert [(p.offset, len(p.kernels)) for p in packs] == [(0, 3), (24, 2)]
    for p in packs:
        one = tmpl.pack("f", p.candidates, select="cand", layout="kernels", per_kernel=10,
                        build="fast")
        assert p.cubin == one.cubin


def test_encodings_and_texts_pack_alike(tmpl, progs):
    words = [sp.encode(p, ["x"]) for p in progs[:12]]
    a = tmpl.pack("f", words, select="cand", layout="kernels", per_kernel=5)
    b = tmpl.pack("f", [str(sp.compile(p, site=tmpl.sites["f"])) for p in progs[:12]],
                  select="cand", layout="kernels", per_kernel=5)
    assert a.cubin == b.cubin


@pytest.mark.parametrize("kw, match", [
    ({"layout": "tree"}, "layout='tree'"),
    ({"build": "O0"}, "build='O0'"),
    ({"layout": "kernels", "per_kernel": 0}, "per_kernel=0"),
    ({"layout": "kernels", "per_kernel": True}, "per_kernel=True"),
    ({"layout": "kernels", "constants": "runtime"}, "constants='runtime' packs are one"),
])
def test_bad_layout_arguments(tmpl, progs, kw, match):
    with pytest.raises(PackError, match=match):
        tmpl.pack("f", progs[:4], select="cand", **kw)
    with pytest.raises(PackError, match=match):
        tmpl.pack_many("f", progs[:4], select="cand", **kw)


def test_a_site_outside_the_kernel_is_refused():
    renders = [".version 8.0\n.func g()\n{\nA\n}\n.entry k(\n)\n{\n}\n",
               ".version 8.0\n.func g()\n{\nB\n}\n.entry k(\n)\n{\n}\n"]
    with pytest.raises(nx.NumptxError, match="site 'f' lies outside kernel 'k'"):
        merge_kernels(renders, "k", "f")


def test_merge_counts_braces_outside_comments():
    ptx = ".version 8.0\n.visible .entry k(\n.param .u32 a\n)\n{\n// a { in a comment\n{\n}\n}\n"
    merged = merge_kernels([ptx, ptx], "k", "f")
    assert merged.count(".entry k__nx_k0(") == 1 and merged.count(".entry k__nx_k1(") == 1
    assert merged.startswith(".version 8.0\n") and merged.count(".version") == 1


def test_fitness_scores_alike_in_every_layout():
    """nx.fitness passes layout and build through: raw PTX candidates are packed (ptxas's
    refusals score +inf) and the rest scored; the scores agree across layouts."""
    X = np.linspace(-1, 1, 64, dtype=np.float32)[:, None]
    y = 2 * X[:, 0]
    cands = ["add.f32 %v_p, %v_x0, %v_x0;", "add.s32 %v_p, %v_x0, 1;",
             "mul.f32 %v_p, %v_x0, 0f40400000;"] * 50
    base = nx.fitness(cands, X, y, device="cpu")
    for layout, build in (("kernels", "full"), ("kernels", "fast"), ("function", "fast")):
        got = nx.fitness(cands, X, y, device="cpu", layout=layout, build=build)
        np.testing.assert_array_equal(got, base)
    assert np.isinf(base[1::3]).all() and (base[0::3] == 0).all()


@pytest.mark.gpu
def test_one_launch_runs_every_kernel():
    """pack[PerKernel(...)](PerKernel(...), ...) launches every kernel of the module: the same
    errors as one function."""
    from numba import cuda
    t = nx.CudaTemplate(FIT, entry="fit", cache=False)
    progs = [program(s) for s in range(300)]
    X = np.linspace(-1, 1, 256, dtype=np.float32)
    Y = 2 * X
    out = {}
    for layout in ("function", "kernels"):
        p = t.pack("f", progs, select="cand", layout=layout)
        err = cuda.to_device(np.zeros(len(progs), np.float32))
        p[PerKernel(lambda k: ((1, len(k)), 256))](
            PerKernel(lambda k, err=err: err[k.start:k.stop]), X, Y, len(X))
        out[layout] = err.copy_to_host()
    np.testing.assert_allclose(out["kernels"], out["function"], rtol=1e-6)


def test_value_registers_are_declared_once_per_kernel(tmpl, progs):
    """In a layout, compiled programs share their value registers (one .reg line a type per
    kernel); raw PTX keeps its own. ptxas makes the same machine code of the shorter text."""
    raw = "{\n.reg .f32 %_s0;\nadd.f32 %_s0, %v_x, %v_x;\nmov.f32 %v_y, %_s0;\n}"
    cands = progs[:15] + [raw]
    one = tmpl.pack("f", cands, select="cand")
    shared = tmpl.pack("f", cands, select="cand", layout="kernels", per_kernel=16)
    assert one.ptx.count(".reg .f32 %_s0;") == 16
    assert shared.ptx.count(".reg .f32 %_s0;") == 1          # the raw candidate's own
    assert ".reg .f32 %_s0, %_s1, %_s2" in shared.ptx
    assert len(shared.ptx) < len(one.ptx)
    assert sass_instructions(shared.cubin, "fit__nx_k0") == sass_instructions(one.cubin, "fit")


def test_a_refused_compiled_stub_names_its_own_line(tmpl, progs):
    """A compiled stub whose declarations went to the kernel's top (shared registers) and that
    ptxas refuses (compiled for another site: %v_q) is named by the line of its own text, as in
    one function."""
    other = nx.CudaTemplate(FIT.replace("PTX_IN(F32, x)", "PTX_IN(F32, q)")
                            .replace("X[i]", "X[i], q = x"), entry="fit", cache=False)
    stub = sp.compile([sp.input("q"), sp.const(2.0, "f32"), sp.instr("mul.rn.f32")],
                      site=other.sites["f"])
    cands = progs[:5] + [stub]
    shared = tmpl.pack("f", cands, select="cand", layout="kernels", per_kernel=4)
    one = tmpl.pack("f", cands, select="cand")
    shared.cubin, one.cubin
    assert sorted(shared.errors) == sorted(one.errors) == [5]
    assert str(shared.errors[5]) == str(one.errors[5])
    assert "stub line 5: 'mul.rn.f32 %_s1, %v_q, %_s0;'" in str(shared.errors[5])


def test_layout_packs_go_through_the_cubin_cache(tmp_path, progs):
    from numptx.jit.compile.cache import CubinCache
    cache = CubinCache(str(tmp_path))
    t = nx.CudaTemplate(FIT, entry="fit", cache=cache)
    first = t.pack("f", progs[:20], select="cand", layout="kernels", per_kernel=8)
    assert first.variant.build_info is None
    cubin = first.cubin
    assert first.variant.build_info.how == "assembled"
    again = t.pack("f", progs[:20], select="cand", layout="kernels", per_kernel=8)
    assert again.cubin == cubin and again.variant.build_info.how == "memory"
    fresh = nx.CudaTemplate(FIT, entry="fit", cache=CubinCache(str(tmp_path)))
    disk = fresh.pack("f", progs[:20], select="cand", layout="kernels", per_kernel=8)
    assert disk.cubin == cubin and disk.variant.build_info.how == "disk"
    other = t.pack("f", progs[:20], select="cand", layout="kernels", per_kernel=8, build="fast")
    assert other.cubin != cubin and other.variant.build_info.how == "assembled"


def test_fast_build_replaces_the_templates_optimization_level(progs):
    """ptxas refuses -O1..-O3 next to -Ofc=max ("Conflicting options"): the fast build takes
    the template's other options and -Ofc=max in place of its level."""
    t = nx.CudaTemplate(FIT, entry="fit", cache=False, link_options=["-O3", "-lineinfo"])
    fast = t.pack("f", progs[:8], select="cand", build="fast")
    full = t.pack("f", progs[:8], select="cand")
    assert fast.cubin == nx.ptx_to_cubin(fast.ptx, t.arch, options=["-lineinfo", "-Ofc=max"])
    assert fast.cubin != full.cubin
