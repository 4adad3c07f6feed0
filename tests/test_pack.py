"""Packed populations (numptx/jit/populations/pack.py): many candidates at one site, one module, picked by
a selector. Builds run for real on the CPU (NVRTC, NVVM, nvJitLink); the selector's behaviour
runs under numba-cuda's simulator (a subprocess) and, on a GPU, against each candidate built
alone."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx.jit.populations.pack import PackError

import sys
from pathlib import Path

from conftest import run_script

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bench_populations import FIT  # noqa: E402  the fitting kernel of issue 12


# every output per candidate, one thread per (candidate, x): for exact comparisons on a GPU
EVAL = r'''
extern "C" __global__ void evalk(float* out, const float* X, int n, int sel0) {
    int cand = sel0 + (int)blockIdx.y;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = X[i], y = -7.0f, m = X[i];
        PTX_INJECT("f", PTX_IN(S32, cand), PTX_IN(F32, x), PTX_OUT(F32, y), PTX_MOD(F32, m));
        out[blockIdx.y * n + i] = y + 1000.0f * (m - X[i]);
    }
}'''


@nx.ptx_expr
def cube(x: nx.f32) -> nx.f32:
    return x * x * x


def candidates():
    """One of each stub kind, each computing a different function of x."""
    square = [sp.input("x"), sp.input("x"), sp.instr("mul.rn.f32")]
    return [square,                                                        # Stack PTX program
            sp.encode([sp.input("x"), sp.const(2.0, "f32"), sp.instr("add.rn.f32")],
                      inputs=["cand", "x"]),                               # encoded program
            cube,                                                          # @ptx_expr formula
            "sub.rn.f32 %v_y, %v_x, 0f3F800000;"]                          # PTX text


@pytest.fixture(scope="module")
def fit():
    return nx.CudaTemplate(FIT, entry="fit", cache=False)


def test_pack_of_every_stub_kind_is_one_module(fit):
    pack = fit.pack("f", candidates(), select="cand")
    assert len(pack) == 4 and pack.errors == {} and pack.ok == [0, 1, 2, 3]
    ptx = pack.ptx
    assert ptx.count("brx.idx") == 1 and ptx.count(".branchtargets") == 1
    for k in range(4):
        assert f"// numptx candidate {k}" in ptx
    assert "sub.rn.f32" in ptx
    assert pack.cubin[:4] == b"\x7fELF"


def test_candidates_are_the_stubs_they_are_alone(fit):
    site = fit.sites["f"]
    pack = fit.pack("f", candidates(), select="cand")
    texts = pack.population.texts(site)
    for c, text in zip(candidates(), texts):
        assert text == nx.jit.stubs.resolve_stub(c, site)


def test_pack_matches_issue_example(fit):
    programs = [[sp.input("x"), sp.input("x"), sp.instr("mul.rn.f32")],
                [sp.input("x"), sp.const(2.0, "f32"), sp.instr("add.rn.f32")]]
    pack = fit.pack("f", programs, select="cand")
    assert len(pack) == 2 and len(pack.cubin) > 0 and isinstance(pack.ptx, str)


def test_failing_candidates_are_reported_by_index_and_the_rest_build(fit):
    cands = candidates() + ["add.f32 %v_y, %v_x, %v_nope;",        # ptxas refuses it
                            [sp.input("zz")],                      # no such input
                            "bogus.f32 %v_y;",                     # ptxas refuses it
                            "mul.rn.f32 %v_y, %v_x, 0f40000000;"]
    pack = fit.pack("f", cands, select="cand")
    cubin = pack.cubin
    assert cubin[:4] == b"\x7fELF"
    assert sorted(pack.errors) == [4, 5, 6]
    assert pack.ok == [0, 1, 2, 3, 7]
    assert "%v_nope" in str(pack.errors[4]) and str(pack.errors[4]).startswith("candidate 4:")
    assert "'zz'" in str(pack.errors[5])
    assert "bogus" in str(pack.errors[6]) and "bogus" not in str(pack.errors[4])
    assert all(getattr(e, "candidate", None) == i for i, e in pack.errors.items())
    ptx = pack.ptx
    assert "// numptx candidate 7" in ptx and "// numptx candidate 4" not in ptx
    with pytest.raises(nx.BuildError) as ei:
        fit.pack("f", cands, select="cand", errors="raise").cubin
    assert sorted(ei.value.errors) == [4, 5, 6] and "candidate 4" in str(ei.value)


def test_all_candidates_failing_is_an_error(fit):
    with pytest.raises(nx.BuildError, match="none of the 2 candidates"):
        fit.pack("f", ["bogus;", [sp.input("q")]], select="cand").cubin


@pytest.mark.parametrize("bad, match", [
    (dict(candidates=[]), "empty population"),
    (dict(candidates="mov.f32 %v_y, %v_x;"), "list of candidates"),
    (dict(select="x"), "selector 'x' is in f32"),
    (dict(select="nope"), "no input 'nope'"),
    (dict(select=3), "select= names"),
    (dict(errors="ignore"), "errors='ignore'"),
    (dict(candidates=["mov.f32 %v_y, %v_x;"] * 16381), "at most 16380 candidates"),
])
def test_bad_input(fit, bad, match):
    kw = dict(candidates=candidates(), select="cand")
    kw.update(bad)
    with pytest.raises(PackError, match=match):
        fit.pack("f", kw.pop("candidates"), **kw).cubin


def test_output_selector_is_refused():
    t = nx.CudaTemplate(EVAL.replace("PTX_IN(S32, cand)", "PTX_OUT(S32, cand)"), entry="evalk",
                        cache=False)
    with pytest.raises(PackError, match="out s32"):
        t.pack("f", ["mov.f32 %v_y, %v_x;"], select="cand").ptx


def test_s32_selector_and_mod_variables_assemble():
    t = nx.CudaTemplate(EVAL, entry="evalk", cache=False)
    pack = t.pack("f", ["mov.f32 %v_y, %v_x;", "add.rn.f32 %v_m, %v_m, 0f3F800000;"],
                  select="cand")
    assert pack.cubin[:4] == b"\x7fELF" and pack.errors == {}


def test_a_whole_pack_comes_from_the_cache(tmp_path):
    cache = nx.CubinCache(tmp_path)
    t1 = nx.CudaTemplate(FIT, entry="fit", cache=cache)
    p1 = t1.pack("f", candidates(), select="cand")
    cubin = p1.cubin
    t2 = nx.CudaTemplate(FIT, entry="fit", cache=nx.CubinCache(tmp_path))
    p2 = t2.pack("f", candidates(), select="cand")
    assert p2.variant.lookup() == cubin          # found, not assembled


def test_pack_many_splits_offsets_and_global_error_indices(fit):
    cands = [[sp.input("x"), sp.const(float(i), "f32"), sp.instr("add.rn.f32")]
             for i in range(10)]
    cands[7] = "bogus.f32 %v_y;"
    cands[2] = [sp.input("nope")]
    packs = fit.pack_many("f", cands, select="cand", per_module=4)
    assert [len(p) for p in packs] == [4, 4, 2] and [p.offset for p in packs] == [0, 4, 8]
    assert list(packs[0].errors) == [2] and list(packs[1].errors) == [7]
    assert packs[1].ok == [4, 5, 6] and packs[2].ok == [8, 9]
    assert all(p.cubin[:4] == b"\x7fELF" for p in packs)
    assert "// numptx candidate 2" in packs[1].ptx           # local 2 = global 6: built
    assert "// numptx candidate 3" not in packs[1].ptx       # local 3 = global 7: left out
    assert "bogus" not in packs[1].ptx
    with pytest.raises(nx.BuildError) as ei:
        fit.pack_many("f", cands, select="cand", per_module=4, errors="raise")
    assert sorted(ei.value.errors) == [2, 7]


def test_pack_many_takes_any_executor(fit):
    from concurrent.futures import ThreadPoolExecutor
    cands = [[sp.input("x"), sp.const(float(i), "f32"), sp.instr("mul.rn.f32")] for i in range(6)]
    with ThreadPoolExecutor(2) as ex:
        packs = fit.pack_many("f", cands, select="cand", per_module=3, executor=ex)
    assert [p.offset for p in packs] == [0, 3] and all(len(p.cubin) for p in packs)
    with pytest.raises(PackError, match="per_module"):
        fit.pack_many("f", cands, select="cand", per_module=0)
    with pytest.raises(PackError, match="from 1 to 16380"):
        fit.pack_many("f", cands, select="cand", per_module=20000)


def test_numba_template_pack_builds_on_the_cpu():
    from numba import cuda

    @nx.kernel
    def fitk(out, X, ncand):
        i = cuda.grid(1)
        if i < X.shape[0]:
            for c in range(ncand):
                out[c, i] = nx.site("f", cand=np.uint32(c), x=X[i], out={"y": nx.f32})

    fitk.template(np.zeros((2, 4), np.float32), np.zeros(4, np.float32), 2)
    pack = fitk.pack("f", candidates() + ["bogus.f32 %v_y;"], select="cand")
    assert pack.cubin[:4] == b"\x7fELF" and list(pack.errors) == [4]
    packs = fitk.pack_many("f", candidates(), select="cand", per_module=2)
    assert [p.offset for p in packs] == [0, 2] and all(p.cubin[:4] == b"\x7fELF" for p in packs)


SIM = r'''
import numpy as np, numptx as nx
from numba import cuda
from numptx import stack_ptx as sp

@nx.kernel
def fitk(out, X, S):
    i = cuda.grid(1)
    if i < X.shape[0]:
        for j in range(S.shape[0]):
            m = X[i]
            y, m = nx.site("f", cand=S[j], x=X[i], out={"y": nx.f32}, mod={"m": m})
            out[j, i] = y + 1000.0 * (m - X[i])

@nx.ptx_expr
def cube(x: nx.f32) -> nx.f32:
    return x * x * x

cands = [[sp.input("x"), sp.input("x"), sp.instr("mul.rn.f32")], cube,
         "add.f32 %v_y, %v_x, %v_nope;",                    # refused: runs nothing
         "sub.rn.f32 %v_y, %v_x, 0f3F800000;\nadd.rn.f32 %v_m, %v_m, 0f3F800000;"]
X = np.linspace(-2, 2, 8).astype(np.float32)
S = np.array([0, 3, 1, 2, 4, -1, 2**31 - 1], np.int32)         # edges: 0, last, out of range
out = np.zeros((len(S), 8), np.float32)
pack = fitk.pack("f", cands, select="cand")
pack[1, 32](out, X, S)
alone = {}
for k in (0, 1, 3):                       # each candidate as a variant of its own
    one = np.zeros((1, 8), np.float32)
    fitk.inject(f=cands[k])[1, 32](one, X, np.array([k], np.int32))
    alone[k] = one[0]
assert np.array_equal(alone[1], X * X * X) and np.array_equal(alone[3], (X - 1) + 1000)
zero = np.zeros(8, np.float32)
want = np.stack([alone[0], alone[3], alone[1], zero, zero, zero, zero])
assert np.array_equal(out, want), (out, want)
assert list(pack.errors) == [2] and "%v_nope" in str(pack.errors[2])
print("PACK-SIM-OK")
'''


def test_selector_edges_under_the_simulator(tmp_path):
    run_script(tmp_path, SIM, simulator=True, marker="PACK-SIM-OK")


@pytest.mark.gpu
def test_each_packed_candidate_computes_what_it_computes_alone():
    from numba import cuda
    t = nx.CudaTemplate(EVAL, entry="evalk", cache=False)
    rng = np.random.default_rng(5)
    cands = [[sp.input("x"), sp.const(float(c), "f32"), sp.instr(op)]
             for c, op in zip(rng.uniform(-3, 3, 40), ["add.rn.f32", "mul.rn.f32"] * 20)]
    cands += candidates()[2:] + ["add.rn.f32 %v_m, %v_m, 0f3F800000;\nmov.f32 %v_y, %v_m;"]
    X = rng.uniform(-2, 2, 200).astype(np.float32)
    n = len(X)
    pack = t.pack("f", cands, select="cand")
    got = cuda.device_array((len(cands) + 2, n), np.float32)
    pack[((n + 127) // 128, len(cands) + 2), 128](got, cuda.to_device(X), n, 0)
    got = got.copy_to_host()
    for k, c in enumerate(cands):
        alone = t.inject(f=c if not isinstance(c, list) else c)
        one = cuda.device_array((1, n), np.float32)
        alone[((n + 127) // 128, 1), 128](one, cuda.to_device(X), n, k)
        assert np.array_equal(got[k], one.copy_to_host()[0]), k
    assert np.array_equal(got[len(cands):], np.zeros((2, n), np.float32))   # out of range: 0


# -- run-time constants ------------------------------------------------------------------------
def test_runtime_constants_lift_literals_into_one_table(fit):
    from numptx.jit.populations.runtime_constants import table_symbols
    cands = [[sp.input("x"), sp.const(2.5, "f32"), sp.instr("mul.rn.f32"), sp.const(-1.0, "f32"),
              sp.instr("add.rn.f32")],
             "mov.f32 %v_y, %v_x;",                                  # no constant
             "bogus.f32 %v_y;",                                      # left out
             "fma.rn.f32 %v_y, %v_x, 0f40000000, 0f3F000000;"]
    pack = fit.pack("f", cands, select="cand", constants="runtime")
    cubin = pack.cubin
    assert list(pack.errors) == [2]
    body = pack.ptx[pack.ptx.index("brx.idx"):]
    assert "0f40000000" not in body and "0f3F000000" not in body        # loads, not literals
    assert ".visible .global .align 8 .b8 __nx_kc_f[32];\n" in pack.ptx     # 2 + 0 + 2 slots
    assert pack.ptx.index("__nx_kc_f[32];") < pack.ptx.index(".entry")         # module scope
    assert table_symbols(cubin) == ["__nx_kc_f"]
    consts = pack.constants
    assert consts[0].tolist() == [2.5, -1.0] and consts[1].tolist() == [] and consts[2] is None
    assert consts[3].tolist() == [2.0, 0.5]
    import struct
    assert struct.unpack_from("<f", pack.table(), 8 * 2)[0] == 2.0     # candidate 3's first slot

    key = pack.key
    pack.set_constants({0: [3.0, 4.0], 3: np.array([1.5, 0.25])})
    assert pack.constants[0].tolist() == [3.0, 4.0] and pack.key == key   # no new assembly
    assert struct.unpack_from("<f", pack.table(), 8 * 2)[0] == 1.5
    pack.set_constants([None, [], None, [7.0, 8.0]])
    assert pack.constants[3].tolist() == [7.0, 8.0] and pack.constants[0].tolist() == [3.0, 4.0]


@pytest.mark.parametrize("values, match", [
    ({0: [1.0]}, r"candidate 0: it has 2 constant\(s\) \(f32 f32\), got 1"),
    ({2: [1.0]}, "candidate 2: it failed to build"),
    ({9: [1.0]}, "candidate 9: not in this pack"),
    ([[1.0, 2.0]], "1 entries for a pack of 4"),
    ({3: ["a", "b"]}, "candidate 3: constants are numbers"),
])
def test_constant_tables_of_the_wrong_shape_name_the_candidate(fit, values, match):
    from numptx.jit.populations.runtime_constants import ConstantsError
    cands = [[sp.input("x"), sp.const(2.5, "f32"), sp.instr("mul.rn.f32"), sp.const(-1.0, "f32"),
              sp.instr("add.rn.f32")], "mov.f32 %v_y, %v_x;", "bogus.f32 %v_y;",
             "fma.rn.f32 %v_y, %v_x, 0f40000000, 0f3F000000;"]
    pack = fit.pack("f", cands, select="cand", constants="runtime")
    pack.cubin
    with pytest.raises(ConstantsError, match=match):
        pack.set_constants(values)


def test_constants_table_needs_runtime_mode(fit):
    pack = fit.pack("f", candidates(), select="cand")
    with pytest.raises(PackError, match="constants='runtime'"):
        pack.set_constants({0: []})
    with pytest.raises(PackError, match="constants='fast'"):
        fit.pack("f", candidates(), select="cand", constants="fast")


SIM_CONSTANTS = r'''
import numpy as np, numptx as nx
from numba import cuda

@nx.kernel
def fitk(out, X, S):
    i = cuda.grid(1)
    if i < X.shape[0]:
        for j in range(S.shape[0]):
            out[j, i] = nx.site("f", cand=S[j], x=X[i], out={"y": nx.f32})

@nx.ptx_expr
def lin(x: nx.f32) -> nx.f32:
    return x * 3.0 + 1.0

X = np.linspace(-2, 2, 8).astype(np.float32)
S = np.array([0, 1], np.uint32)
pack = fitk.pack("f", [lin, "mul.rn.f32 %v_y, %v_x, 0f40000000;"], select="cand",
                 constants="runtime")
out = np.zeros((2, 8), np.float32)
pack[1, 32](out, X, S)
fma = nx.semantics.fma_f32              # precision="cuda": the stub's x * c0 + c1 is one fma
assert np.array_equal(out[0], fma(X, 3, 1)) and np.array_equal(out[1], X * 2)
pack.set_constants([[0.5, -2.0], [10.0]])
pack[1, 32](out, X, S)
assert np.array_equal(out[0], fma(X, 0.5, -2)), out
assert np.array_equal(out[1], X * np.float32(10)), out
print("CONST-SIM-OK")
'''


def test_runtime_constants_under_the_simulator(tmp_path):
    run_script(tmp_path, SIM_CONSTANTS, simulator=True, marker="CONST-SIM-OK")


@pytest.mark.gpu
def test_runtime_constants_on_the_gpu():
    from numba import cuda
    t = nx.CudaTemplate(EVAL, entry="evalk", cache=False)
    cands = ["fma.rn.f32 %v_y, %v_x, 0f40000000, 0f3F000000;",
             # m pushed first: it stays the output under y (an empty stack would make m zero)
             [sp.input("m"), sp.input("x"), sp.const(1.5, "f32"), sp.instr("mul.rn.f32")]]
    pack = t.pack("f", cands, select="cand", constants="runtime")
    X = np.linspace(-1, 1, 256).astype(np.float32)
    dX = cuda.to_device(X)
    got = cuda.device_array((2, 256), np.float32)
    pack[(1, 2), 256](got, dX, 256, 0)
    h = got.copy_to_host()
    assert np.array_equal(h[0], X * 2 + np.float32(0.5)) and np.array_equal(h[1], X * np.float32(1.5))
    pack.set_constants([[3.0, -1.0], [0.25]])
    pack[(1, 2), 256](got, dX, 256, 0)
    h = got.copy_to_host()
    fma = nx.semantics.fma_f32                   # the candidate's fma.rn rounds once
    assert np.array_equal(h[0], fma(X, 3, -1)) and np.array_equal(h[1], X * np.float32(0.25))


# -- review fixes --------------------------------------------------------------------------------
def test_pack_many_keeps_a_module_with_no_working_candidate(fit):
    good = [sp.input("x"), sp.input("x"), sp.instr("add.rn.f32")]
    packs = fit.pack_many("f", [good, good, "bogus;", [sp.input("q")], good], select="cand",
                          per_module=2)
    assert [p.empty for p in packs] == [False, True, False]
    assert sorted(i for p in packs for i in p.errors) == [2, 3]
    assert packs[2].cubin[:4] == b"\x7fELF"
    with pytest.raises(nx.BuildError, match="none of the 2 candidates"):
        packs[1].cubin
    # a module that only ptxas refuses, whole
    packs = fit.pack_many("f", [good, "bogus.f32 %v_y;", "bogus2.f32 %v_y;"], select="cand",
                          per_module=1)
    assert [p.empty for p in packs] == [False, True, True] and sorted(packs[1].errors) == [1]


def test_a_failing_other_site_is_an_error_not_a_loop():
    src = EVAL.replace('out[blockIdx.y * n + i] = y + 1000.0f * (m - X[i]);',
                       'float z; PTX_INJECT("g", PTX_IN(F32, x), PTX_OUT(F32, z)); '
                       'out[blockIdx.y * n + i] = y + z + 1000.0f * (m - X[i]);')
    t = nx.CudaTemplate(src, entry="evalk", cache=False)
    pack = t.pack("f", ["mov.f32 %v_y, %v_x;"], select="cand", g="bogus.f32 %v_z;")
    with pytest.raises(nx.LinkError, match="'g'"):
        pack.cubin


def test_errors_raise_raises_every_time(fit):
    pack = fit.pack("f", ["mov.f32 %v_y, %v_x;", "bogus;"], select="cand", errors="raise")
    for _ in range(2):
        with pytest.raises(nx.BuildError, match="candidate 1"):
            pack.cubin


def test_every_candidate_error_names_its_index(fit):
    @nx.ptx_expr
    def two(x: nx.f32, y: nx.f32, z: nx.f32) -> nx.f32:        # does not bind to f(cand, x)
        return x + y + z

    shared = nx.NumptxError("the same error object")

    class Raiser:
        def stub(self, site):
            raise shared

    pack = fit.pack("f", [two, Raiser(), Raiser(), "mov.f32 %v_y, %v_x;"], select="cand")
    pack.cubin
    for i in (0, 1, 2):
        assert str(pack.errors[i]).startswith(f"candidate {i}:")
        assert pack.errors[i].candidate == i


def test_literals_in_comments_are_no_constants(fit):
    pack = fit.pack("f", ["// was 0f3F800000\nmul.rn.f32 %v_y, %v_x, 0f40000000; /* 0d4000000000000000 */"],
                    select="cand", constants="runtime")
    pack.cubin
    assert pack.constants[0].tolist() == [2.0]


@pytest.mark.parametrize("values, match", [
    ({0: None}, "give its constants"),
    ({0.9: [1.0]}, "indices are ints"),
    ({0: ["1.5"]}, "constants are numbers"),
    ({0: [1e39]}, "overflows f32"),
])
def test_set_constants_refuses_bad_values(fit, values, match):
    from numptx.jit.populations.runtime_constants import ConstantsError
    pack = fit.pack("f", ["mul.rn.f32 %v_y, %v_x, 0f40000000;"], select="cand",
                    constants="runtime")
    pack.cubin
    with pytest.raises(ConstantsError, match=match):
        pack.set_constants(values)


SIM_CONSTANTS_FAIL = r'''
import numpy as np, numptx as nx
from numba import cuda
from numptx import stack_ptx as sp

@nx.kernel
def fitk(out, X, S):
    i = cuda.grid(1)
    if i < X.shape[0]:
        for j in range(S.shape[0]):
            out[j, i] = nx.site("f", cand=S[j], x=X[i], out={"y": nx.f32})

X = np.linspace(-2, 2, 8).astype(np.float32)
for mode in ("inline", "runtime"):
    pack = fitk.pack("f", [[sp.input("zz")], "add.rn.f32 %v_y, %v_x, 0f3F800000;"],
                     select="cand", constants=mode)
    out = np.full((2, 8), 5, np.float32)
    pack[1, 32](out, X, np.array([0, 1], np.uint32))
    assert np.array_equal(out[0], 0 * X) and np.array_equal(out[1], X + 1), (mode, out)
    assert list(pack.errors) == [0], pack.errors
scores = nx.fitness(["mov.f32 %v_p, %v_x0;"], X, X)        # device="auto" under the simulator
assert scores.tolist() == [0.0]
print("SIM-FAIL-OK")
'''


def test_a_failing_candidate_under_the_simulator_in_both_constant_modes(tmp_path):
    run_script(tmp_path, SIM_CONSTANTS_FAIL, simulator=True, marker="SIM-FAIL-OK")
