"""nx.autotune: ranking candidates by a static cost on the CPU (real NVRTC, nvJitLink and
nvdisasm), the ranking cache, the checks of its input; timing and result checks on a GPU
(marked ``gpu``, skipped without one)."""
from __future__ import annotations

import glob
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import numptx as nx
from numptx.jit.tune import autotune as at
from numptx.jit.tune.autotune import AutotuneError, Tuned, autotune
from numptx.jit.tune.autotune_decorator import Autotuned, autotuned
from numptx.jit.templates.template import Variant
from numptx.jit.tune.tune_cache import SCHEMA

from conftest import SPINE_SRC, gpu_available

ADD = "add.f32 %v_z, %v_x, %v_y;"
SUB = "sub.f32 %v_z, %v_x, %v_y;"
FMA_ADD = "fma.rn.f32 %v_z, %v_x, 0f3F800000, %v_y;"      # x * 1 + y: the same sum as ADD


PAIRWISE = r'''
extern "C" __global__ void pairwise(float* out, const float* X, const float* Y, int n, int d) {
    const int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || j >= n) return;
    float acc = 0;
    #pragma unroll 4
    for (int k = 0; k < d; ++k) {
        const float x = X[i * d + k], y = Y[j * d + k];
        PTX_INJECT("f", PTX_IN(F32, x), PTX_IN(F32, y), PTX_MOD(F32, acc));
    }
    out[i * n + j] = acc;
}'''


def chain(k: int) -> str:
    """A stub whose cost grows with ``k``: ``k`` dependent fmas (ptxas can fold none)."""
    return "mov.f32 %v_z, %v_x;\n" + "fma.rn.f32 %v_z, %v_z, 0f3F7FF000, %v_y;\n" * k


@pytest.fixture(scope="module")
def tmpl(tmp_path_factory):
    cubins = nx.CubinCache(str(tmp_path_factory.mktemp("cubins")))
    return nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=cubins)


class CountMeasured:
    """Counts candidates measured by a static cost (the real measurement runs)."""

    def __init__(self, monkeypatch):
        self.calls = 0
        real = at._static_cost

        def counting(v, cost):
            self.calls += 1
            return real(v, cost)
        monkeypatch.setattr(at, "_static_cost", counting)


# ---------------------------------------------------------------------------------------------
# static costs
# ---------------------------------------------------------------------------------------------
def test_sass_cost_ranks_the_cheapest_first(tmpl, tmp_path):
    cands = [{"combine": chain(64)}, {"combine": ADD}, {"combine": chain(8)}]
    best = autotune(tmpl, cands, cost="sass", cache_dir=tmp_path)
    assert isinstance(best, Tuned) and best.index == 1 and best.candidate is cands[1]
    assert best.ranking == (1, 2, 0)
    assert best.costs[1] < best.costs[2] < best.costs[0]
    # 56 more fmas, 56 more instructions: the count is the kernel's SASS, NOPs left out
    assert best.costs[0] - best.costs[2] == 56
    assert best.costs[1] == len(nx.jit.sass.sass_instructions(best.variant.cubin, "kernel"))
    assert best.unit == "instructions" and best.times == best.costs
    assert best.variant.stubs == (ADD,) and best.failed == {} and best.measured == (0, 1, 2)
    assert "| 1 | 1 |" in best.table()


def test_registers_cost(tmpl, tmp_path):
    cands = [{"combine": ADD}, {"combine": chain(16)}]
    best = autotune(tmpl, cands, cost="registers", cache_dir=tmp_path)
    assert best.unit == "registers"
    regs = [tmpl.inject(c).resources.registers for c in cands]
    assert list(best.costs) == regs
    assert best.ranking == tuple(sorted(range(2), key=lambda i: (regs[i], i)))


def test_formulas_are_candidates(tmp_path):
    """@nx.ptx_expr formulas in a pairwise loop (several site instances)."""
    tmpl = nx.CudaTemplate(PAIRWISE, entry="pairwise", arch="sm_90", cache=False)

    @nx.ptx_expr
    def sq(acc: nx.f32, x: nx.f32, y: nx.f32) -> nx.f32:
        return acc + (x - y) * (x - y)

    @nx.ptx_expr
    def expanded(acc: nx.f32, x: nx.f32, y: nx.f32) -> nx.f32:
        return acc + x * x - 2 * x * y + y * y

    @nx.ptx_expr
    def slow(acc: nx.f32, x: nx.f32, y: nx.f32) -> nx.f32:
        return acc + nx.exp(2 * nx.log(nx.abs(x - y)))

    best = autotune(tmpl, [{"f": slow}, {"f": expanded}, {"f": sq}], cost="sass",
                    cache_dir=tmp_path)
    assert best.index == 2 and best.ranking[-1] == 0


# ---------------------------------------------------------------------------------------------
# the ranking cache
# ---------------------------------------------------------------------------------------------
def test_a_changed_candidate_list_measures_only_new_candidates(tmpl, tmp_path, monkeypatch):
    count = CountMeasured(monkeypatch)
    a, b, c = {"combine": ADD}, {"combine": chain(4)}, {"combine": chain(12)}
    first = autotune(tmpl, [a, b], cost="sass", cache_dir=tmp_path)
    assert count.calls == 2 and first.measured == (0, 1) and first.from_cache == (False, False)
    second = autotune(tmpl, [a, b, c], cost="sass", cache_dir=tmp_path)
    assert count.calls == 3 and second.measured == (2,)
    assert second.from_cache == (True, True, False)
    assert second.costs[:2] == first.costs and second.ranking == (0, 1, 2)
    third = autotune(tmpl, [c, a], cost="sass", cache_dir=tmp_path)     # reordered, a subset
    assert count.calls == 3 and third.measured == () and third.index == 1
    assert third.from_cache == (True, True) and third.costs == (second.costs[2], first.costs[0])
    assert len(glob.glob(str(tmp_path / f"autotune-v{SCHEMA}" / "*" / "*.json"))) == 3
    # the key tells costs and architectures apart
    autotune(tmpl, [a], cost="registers", cache_dir=tmp_path)
    autotune(tmpl.for_arch("sm_100"), [a], cost="sass", cache_dir=tmp_path)
    assert count.calls == 5
    # refresh measures again; False neither reads nor writes
    autotune(tmpl, [a, b], cost="sass", cache_dir=tmp_path, cache="refresh")
    assert count.calls == 7
    off = autotune(tmpl, [a, b], cost="sass", cache_dir=tmp_path / "off", cache=False)
    assert count.calls == 9 and off.from_cache == (False, False)
    assert not (tmp_path / "off").exists()


def test_entries_are_whole_json_files(tmpl, tmp_path):
    best = autotune(tmpl, [{"combine": ADD}], cost="sass", cache_dir=tmp_path)
    path = at.TuneCache(tmp_path).path(best.keys[0])
    entry = json.loads(open(path).read())
    assert entry["key"] == best.keys[0] and entry["value"] == best.costs[0]
    assert entry["context"]["cost"] == "sass" and entry["context"]["entry"] == "kernel"
    assert not glob.glob(str(tmp_path / "**" / "*.tmp"), recursive=True)


@pytest.mark.parametrize("content", [b"{not json", b"", b"\xff\xfe", b'{"schema": 1}',
                                     b'[1, 2]', "other key"])
def test_a_corrupt_entry_is_ignored_and_measured_again(tmpl, tmp_path, monkeypatch, caplog,
                                                       content):
    cands = [{"combine": ADD}, {"combine": chain(3)}]
    first = autotune(tmpl, cands, cost="sass", cache_dir=tmp_path)
    cache = at.TuneCache(tmp_path)
    path = cache.path(first.keys[1])
    if content == "other key":                  # a valid entry copied to another key's file
        content = open(cache.path(first.keys[0]), "rb").read()
    with open(path, "wb") as f:
        f.write(content)
    count = CountMeasured(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="numptx.jit.tune.autotune"):
        again = autotune(tmpl, cands, cost="sass", cache_dir=tmp_path)
    assert count.calls == 1 and again.measured == (1,) and again.costs == first.costs
    assert any("corrupt" in r.getMessage() and path in r.getMessage() for r in caplog.records)
    assert cache.get(first.keys[1]) == first.costs[1]          # rewritten whole


def test_an_entry_that_is_a_folder_is_a_miss(tmpl, tmp_path, caplog):
    cands = [{"combine": ADD}]
    first = autotune(tmpl, cands, cost="sass", cache_dir=tmp_path)
    path = at.TuneCache(tmp_path).path(first.keys[0])
    os.remove(path)
    os.mkdir(path)
    with caplog.at_level(logging.WARNING, logger="numptx.jit.tune.autotune"):
        again = autotune(tmpl, cands, cost="sass", cache_dir=tmp_path)
    assert again.measured == (0,) and again.costs == first.costs


def test_numptx_cache_off_keeps_rankings_off_the_disk(tmpl, tmp_path, monkeypatch):
    monkeypatch.setenv("NUMPTX_CACHE", "0")
    monkeypatch.setenv("NUMPTX_CACHE_DIR", str(tmp_path))
    best = autotune(tmpl, [{"combine": ADD}], cost="sass")
    assert best.measured == (0,) and not (tmp_path / f"autotune-v{SCHEMA}").exists()


# ---------------------------------------------------------------------------------------------
# building: in parallel, failures excluded by index
# ---------------------------------------------------------------------------------------------
def test_candidates_build_on_the_executor(tmp_path):
    class Counting(ThreadPoolExecutor):
        jobs = 0

        def submit(self, fn, *a, **k):
            Counting.jobs += 1
            return super().submit(fn, *a, **k)

    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=False, patch_constants=False)
    cands = [{"combine": chain(k)} for k in (1, 2, 3, 5)]
    with Counting(4) as pool:
        best = autotune(tmpl, cands, cost="registers", cache_dir=tmp_path, executor=pool)
    assert Counting.jobs == 4 and best.measured == (0, 1, 2, 3)


def test_failing_candidates_are_excluded_and_named(tmpl, tmp_path, caplog):
    cands = [{"combine": chain(2)}, {"combine": "bogus.f32 %v_z;"}, {"nosite": ADD},
             {"combine": ADD}]
    with caplog.at_level(logging.WARNING, logger="numptx.jit.tune.autotune"):
        best = autotune(tmpl, cands, cost="sass", cache_dir=tmp_path)
    assert best.index == 3 and best.ranking == (3, 0)
    assert sorted(best.failed) == [1, 2]
    assert best.failed[1].startswith("candidate 1: LinkError") and "bogus" in best.failed[1]
    assert best.failed[2].startswith("candidate 2: RenderError") and "nosite" in best.failed[2]
    assert best.costs[1] == best.costs[2] == float("inf")
    assert "candidate 1" in caplog.text and "candidate 2" in caplog.text


def test_no_candidate_left_is_an_error(tmpl, tmp_path):
    with pytest.raises(AutotuneError, match="no candidate left") as e:
        autotune(tmpl, [{"combine": "bogus.f32 %v_z;"}, {"x": ADD}], cost="sass",
                 cache_dir=tmp_path)
    assert sorted(e.value.failed) == [0, 1] and "candidate 0" in str(e.value)


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, match", [
    ({"candidates": []}, "at least one candidate"),
    ({"candidates": {"combine": ADD}}, "not one mapping"),
    ({"candidates": "add"}, "list of stub mappings"),
    ({"candidates": [{"combine": ADD}, [ADD]]}, "candidate 1: a mapping"),
    ({"candidates": [{1: ADD}]}, "candidate 0: site names"),
    ({"cost": "fast"}, "cost='fast'"),
    ({"repeats": 0}, "repeats=0"),
    ({"warmup": -1}, "warmup=-1"),
    ({"rtol": -1}, "rtol=-1"),
    ({"atol": "x"}, "atol='x'"),
    ({"args": "abc"}, "args="),
    ({"args": (1, 2)}, r"args=\): 2 value\(s\), but kernel 'kernel' takes 4 \(out, a, b, n\)"),
    ({"cache": "maybe"}, "cache='maybe'"),
    ({"cache_dir": 3}, "cache_dir="),
    ({"check": object()}, "check="),
    ({"template": 42}, "template="),
    pytest.param({"cost": "time", "grid": None}, "grid= and block=",
                 marks=pytest.mark.gpu),  # without a GPU, that comes first (test_autotune_trust)
    ({"max_workers": 0}, "max_workers=0"),
    ({"max_workers": "x"}, "max_workers='x'"),
    ({"executor": 3}, "executor="),
    ({"grid": (1, 1, 1, 1)}, r"grid=\(1, 1, 1, 1\)"),
    ({"block": 0}, "block=0"),
])
def test_bad_input_names_the_argument(tmpl, tmp_path, kw, match):
    kw = dict(kw)
    target = kw.pop("template", tmpl)
    cands = kw.pop("candidates", [{"combine": ADD}])
    kw.setdefault("cost", "sass")
    kw.setdefault("cache_dir", tmp_path)
    with pytest.raises(AutotuneError, match=match) as e:
        autotune(target, cands, **kw)
    assert isinstance(e.value, nx.NumptxError)


def test_bad_launch_dimensions_and_outputs(tmpl):
    args = (np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32), 4)
    with pytest.raises(AutotuneError, match=r"grid=0"):
        autotune(tmpl, [{"combine": ADD}], args=args, grid=0, block=32)
    with pytest.raises(AutotuneError, match="argument 3 is a int"):
        autotune(tmpl, [{"combine": ADD}], args=args, grid=1, block=32, check=np.zeros(4),
                 output=3)
    with pytest.raises(AutotuneError, match="no index"):
        autotune(tmpl, [{"combine": ADD}], args=args, grid=1, block=32, check=np.zeros(4),
                 output=7)


@pytest.mark.skipif(gpu_available(), reason="checks the message given without a GPU")
def test_timing_without_a_gpu_says_to_use_a_static_cost(tmpl):
    args = (np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32), 4)
    with pytest.raises(nx.LaunchError, match="cost='sass'"):
        autotune(tmpl, [{"combine": ADD}], args=args, grid=1, block=32)
    with pytest.raises(nx.LaunchError, match="check=None"):
        autotune(tmpl, [{"combine": ADD}], args=args, grid=1, block=32, cost="sass",
                 check=np.zeros(4))


# ---------------------------------------------------------------------------------------------
# @nx.kernel templates and the decorator form
# ---------------------------------------------------------------------------------------------
from numba import cuda  # noqa: E402 - a module global, as nx.kernel's simulator needs


def _combine(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})


def test_kernel_templates_rank_statically(tmp_path):
    kern = nx.kernel(_combine)
    args = tuple(np.zeros(8, np.float32) for _ in range(3))
    best = autotune(kern, [{"combine": chain(32)}, {"combine": ADD}], args=args, cost="sass",
                    cache_dir=tmp_path)
    assert best.index == 1 and isinstance(best.variant, nx.KernelVariant)
    assert best.variant.stubs == {"combine": ADD}
    assert best.variant.specialize(*args).stubs == (ADD,)


def test_the_decorator_form_tunes_once_per_signature(tmp_path, monkeypatch):
    count = CountMeasured(monkeypatch)

    @autotuned(candidates=[{"combine": chain(32)}, {"combine": ADD}], cost="sass",
               cache_dir=tmp_path)
    @nx.kernel
    def combine(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})

    assert isinstance(combine, Autotuned) and "2 candidate(s)" in repr(combine)
    args = tuple(np.zeros(8, np.float32) for _ in range(3))
    best = combine.tune(*args)
    assert best.index == 1 and combine.tune(*args) is best and count.calls == 2
    other = combine.tune(*(np.zeros(16, np.float32) for _ in range(3)))     # a new shape
    assert other is not best and len(combine.tunings) == 2 and count.calls == 2   # static key
    with pytest.raises(AutotuneError, match=r"combine\[grid, block\]"):
        combine(*args)
    with pytest.raises(AutotuneError, match="grid and a block only"):
        combine[1, 2, 0]


def test_the_decorator_refuses_what_it_cannot_tune():
    with pytest.raises(AutotuneError, match="above @nx.kernel"):
        autotuned(candidates=[{"combine": ADD}])(_combine)
    with pytest.raises(AutotuneError, match="unknown option"):
        autotuned(candidates=[{"combine": ADD}], grid=3)(nx.kernel(_combine))
    with pytest.raises(AutotuneError, match="at least one"):
        autotuned(candidates=[])


# ---------------------------------------------------------------------------------------------
# the launch path on the CPU: only the GPU layer (device, events, launches) is faked; the
# candidates are built for real, and autotune, _check, _time and Autotuned run as they are
# ---------------------------------------------------------------------------------------------
BAD = "// BAD\n" + ADD              # launches fail: too many resources, say
LATE = "// LATE\n" + ADD            # the third launch fails (a timed one)
INPLACE = "// INPLACE\n" + ADD      # writes its input a too: a += 1; out += a + b


class FakeGpu:
    """Each candidate's launch runs ``out += a + b`` on host arrays (non-idempotent on
    purpose); a stub marked BAD raises a LaunchError, LATE raises on its third launch."""

    def __init__(self, monkeypatch):
        from numba import cuda

        class Event:
            def record(self, stream=0):
                pass

            def synchronize(self):
                pass

        self.launches: list[str] = []
        counts: dict[str, int] = {}
        monkeypatch.setattr(at, "gpu_available", lambda: True)
        monkeypatch.setattr(at, "_device", lambda: {"device": "FakeGPU", "cc": "9.0",
                                                    "driver": "12.8"})
        monkeypatch.setattr(at, "device_args", tuple)     # host arrays launched as they are
        monkeypatch.setattr(at, "_spin", lambda arch: {(1, 1): lambda cycles: None})
        monkeypatch.setattr(cuda, "synchronize", lambda: None, raising=False)
        monkeypatch.setattr(cuda, "event", lambda *a, **k: Event(), raising=False)
        monkeypatch.setattr(cuda, "event_elapsed_time", lambda s, e: 1.0, raising=False)

        def getitem(variant, config):
            def launch(out, a, b, n):
                stub = variant.stubs[0]
                self.launches.append(stub)
                counts[stub] = counts.get(stub, 0) + 1
                if "BAD" in stub or "LATE" in stub and counts[stub] == 3:
                    raise nx.LaunchError("cuLaunchKernel: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
                if "INPLACE" in stub:
                    a[:n] += 1
                out[:n] += a[:n] + b[:n]
            return launch
        monkeypatch.setattr(Variant, "__getitem__", getitem)


@pytest.fixture
def fake_gpu(monkeypatch):
    return FakeGpu(monkeypatch)


def _host_args(n=4):
    return np.zeros(n, np.float32), np.ones(n, np.float32), np.ones(n, np.float32), n


def test_autotune_leaves_the_callers_arrays_as_they_were(tmpl, fake_gpu):
    args = _host_args()
    best = autotune(tmpl, [{"combine": ADD}, {"combine": FMA_ADD}], args=args, grid=1, block=4,
                    cache=False, check=lambda out, a, b, n: out + a + b)
    assert best.failed == {} and len(fake_gpu.launches) > 2
    assert np.array_equal(args[0], np.zeros(4)) and np.array_equal(args[1], np.ones(4))


def test_an_in_place_input_does_not_leak_into_the_next_candidate(tmpl, fake_gpu):
    args = _host_args()
    best = autotune(tmpl, [{"combine": INPLACE}, {"combine": "// 2\n" + INPLACE}], args=args,
                    grid=1, block=4, cost="registers", check=lambda out, a, b, n: a + 1 + b,
                    cache=False)
    assert best.failed == {}                  # both checked from a == 1
    assert np.array_equal(args[1], np.ones(4)) and np.array_equal(args[0], np.zeros(4))


def test_the_decorator_launches_the_winner_once_cached_or_not(tmpl, fake_gpu, tmp_path):
    outs = []
    for _ in range(2):                        # tuned and measured, then from the ranking cache
        k = autotuned(tmpl, candidates=[{"combine": ADD}, {"combine": FMA_ADD}],
                      cache_dir=tmp_path, check=lambda out, a, b, n: out + a + b)
        args = _host_args()
        k[1, 4](*args)
        outs.append(args[0].copy())
        k[1, 4](*args)                        # kept tuning: one more launch
        assert np.array_equal(args[0], np.full(4, 4.0))
    assert np.array_equal(outs[0], np.full(4, 2.0)) and np.array_equal(outs[1], outs[0])


@pytest.mark.parametrize("check", [None, lambda out, a, b, n: out + a + b])
def test_a_candidate_that_fails_to_launch_is_excluded(tmpl, fake_gpu, check, caplog):
    cands = [{"combine": BAD}, {"combine": LATE}, {"combine": ADD}]
    with caplog.at_level(logging.WARNING, logger="numptx.jit.tune.autotune"):
        best = autotune(tmpl, cands, args=_host_args(), grid=1, block=4, cache=False,
                        check=check)
    # LATE fails in the warmup after a check, in a timed round without one
    assert best.index == 2 and sorted(best.failed) == [0, 1] and best.ranking == (2,)
    assert best.failed[0].startswith("candidate 0: LaunchError")
    assert "OUT_OF_RESOURCES" in best.failed[0] and "candidate 0" in caplog.text
    with pytest.raises(AutotuneError, match="no candidate left") as e:
        autotune(tmpl, cands[:1], args=_host_args(), grid=1, block=4, cache=False, check=check)
    assert list(e.value.failed) == [0]


def test_the_time_key_covers_arguments_grid_and_block(tmpl, fake_gpu, tmp_path):
    cands = [{"combine": ADD}]
    first = autotune(tmpl, cands, args=_host_args(), grid=1, block=4, cache_dir=tmp_path)
    again = autotune(tmpl, cands, args=_host_args(), grid=1, block=4, cache_dir=tmp_path)
    assert first.measured == (0,) and again.from_cache == (True,)
    for kw in [dict(args=_host_args(8)), dict(args=_host_args(), grid=2),
               dict(args=_host_args(), block=(4, 2))]:
        kw = {"grid": 1, "block": 4, **kw}
        assert autotune(tmpl, cands, cache_dir=tmp_path, **kw).measured == (0,), kw
    ctx = {"args": at.arg_signature(_host_args())}
    other = {"args": at.arg_signature(_host_args(8))}
    assert at.entry_key("time", ctx, "v") != at.entry_key("time", other, "v")


def test_python_scalars_are_references(tmpl, fake_gpu):
    for ref in (2.0, 2, np.float32(2)):
        best = autotune(tmpl, [{"combine": ADD}], args=_host_args(), grid=1, block=4,
                        check=ref, cost="registers", cache=False)
        assert best.failed == {}


def test_warmup_zero_still_loads_each_candidate_untimed(tmpl, fake_gpu):
    autotune(tmpl, [{"combine": ADD}], args=_host_args(), grid=1, block=4, cache=False,
             warmup=0, repeats=3)
    assert len(fake_gpu.launches) == 4


def test_two_kernels_of_one_module_share_no_costs(tmp_path):
    """The entry is part of the key (one source, two kernels: the same variant keys)."""
    src = SPINE_SRC + r'''
extern "C" __global__ void cheap(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i];
}'''
    cands = [{"combine": chain(64)}, {"combine": ADD}]
    heavy = autotune(nx.CudaTemplate(src, entry="kernel", arch="sm_90", cache=False), cands,
                     cost="sass", cache_dir=tmp_path)
    cheap = autotune(nx.CudaTemplate(src, entry="cheap", arch="sm_90", cache=False), cands,
                     cost="sass", cache_dir=tmp_path)
    assert cheap.from_cache == (False, False) and cheap.costs[0] == cheap.costs[1]
    assert heavy.costs[0] > heavy.costs[1]
    assert not set(heavy.keys) & set(cheap.keys)


def test_sass_keys_name_nvdisasm(tmpl, tmp_path, monkeypatch):
    first = autotune(tmpl, [{"combine": ADD}], cost="sass", cache_dir=tmp_path)
    monkeypatch.setattr(at, "_nvdisasm_version", lambda: "another nvdisasm")
    again = autotune(tmpl, [{"combine": ADD}], cost="sass", cache_dir=tmp_path)
    assert again.keys != first.keys and again.measured == (0,)


def test_options_are_checked_even_when_every_cost_is_cached(tmpl, tmp_path):
    autotune(tmpl, [{"combine": ADD}], cost="registers", cache_dir=tmp_path)
    with pytest.raises(AutotuneError, match=r"max_workers=0"):
        autotune(tmpl, [{"combine": ADD}], cost="registers", cache_dir=tmp_path, max_workers=0)


def test_a_kernel_without_args_says_pass_args():
    with pytest.raises(AutotuneError, match="pass args="):
        autotune(nx.kernel(_combine), [{"combine": ADD}], cost="sass", cache=False)


def test_stale_temporary_files_are_swept(tmp_path):
    import time
    cache = at.TuneCache(tmp_path)
    key = "ab" + "0" * 62
    folder = os.path.dirname(cache.path(key))
    os.makedirs(folder)
    old, fresh = os.path.join(folder, ".ab.old.tmp"), os.path.join(folder, ".ab.new.tmp")
    for p in (old, fresh):
        open(p, "w").close()
    os.utime(old, (time.time() - 2 * 3600,) * 2)
    cache.put(key, 1.0, {})
    assert not os.path.exists(old) and os.path.exists(fresh) and cache.get(key) == 1.0


def test_tunings_are_made_once_under_concurrent_launches(tmpl, monkeypatch):
    import threading
    import time
    from numptx.jit.tune import autotune_decorator
    calls = []

    def slow(*a, **k):
        calls.append(1)
        time.sleep(0.2)                       # long enough for the other thread to arrive
        return "tuned"
    monkeypatch.setattr(autotune_decorator, "autotune", slow)
    k = autotuned(tmpl, candidates=[{"combine": ADD}], cost="sass")
    threads = [threading.Thread(target=k.tune, args=_host_args()) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and list(k.tunings.values()) == ["tuned"]


@pytest.mark.parametrize("opts, match", [
    ({"cost": "fast"}, "cost='fast'"), ({"rtol": -1}, "rtol=-1"), ({"repeats": 0}, "repeats=0"),
    ({"max_workers": 0}, "max_workers=0"), ({"executor": 3}, "executor="),
    ({"cache": "maybe"}, "cache='maybe'"), ({"output": "x"}, "output='x'"),
])
def test_decorator_options_are_checked_at_decoration(opts, match):
    kern = nx.kernel(_combine)
    for make in (lambda: autotuned(candidates=[{"combine": ADD}], **opts),
                 lambda: autotuned(kern, candidates=[{"combine": ADD}], **opts)):
        with pytest.raises(AutotuneError, match=match):
            make()


def test_bare_autotuned_says_candidates():
    with pytest.raises(AutotuneError, match="candidates="):
        autotuned(nx.kernel(_combine))
    with pytest.raises(AutotuneError, match="candidates="):
        autotuned(_combine)


# ---------------------------------------------------------------------------------------------
# on a GPU: timing with events, result checks, the decorator's launches
# ---------------------------------------------------------------------------------------------
N = 1 << 22


def _gpu_args():
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
    return a, b, (cuda.device_array(N, np.float32), cuda.to_device(a), cuda.to_device(b), N)


@pytest.mark.gpu
def test_time_picks_the_truly_fastest(tmp_path):
    tmpl = nx.CudaTemplate(SPINE_SRC)
    _, _, args = _gpu_args()
    cands = [{"combine": chain(2048)}, {"combine": ADD}, {"combine": chain(256)}]
    best = autotune(tmpl, cands, args=args, grid=N // 256, block=256, cache_dir=tmp_path)
    assert best.index == 1 and best.ranking == (1, 2, 0), best.table()
    assert best.unit == "s" and all(0 < t < 1 for t in best.times)
    assert best.measured == (0, 1, 2)


@pytest.mark.gpu
def test_time_cache_times_only_new_candidates(tmp_path):
    tmpl = nx.CudaTemplate(SPINE_SRC)
    _, _, args = _gpu_args()
    a, b, c = {"combine": ADD}, {"combine": chain(64)}, {"combine": chain(8)}
    first = autotune(tmpl, [a, b], args=args, grid=N // 256, block=256, cache_dir=tmp_path)
    second = autotune(tmpl, [a, b, c], args=args, grid=N // 256, block=256, cache_dir=tmp_path)
    assert first.measured == (0, 1) and second.measured == (2,)
    assert second.costs[:2] == first.costs
    # another grid is another launch: timed again
    third = autotune(tmpl, [a], args=args, grid=N // 128, block=128, cache_dir=tmp_path)
    assert third.measured == (0,)


@pytest.mark.gpu
def test_check_excludes_a_wrong_candidate(tmp_path):
    tmpl = nx.CudaTemplate(SPINE_SRC)
    a, b, args = _gpu_args()
    best = autotune(tmpl, [{"combine": SUB}, {"combine": ADD}, {"combine": FMA_ADD}], args=args,
                    grid=N // 256, block=256, check=a + b, cache_dir=tmp_path)
    assert list(best.failed) == [0] and best.failed[0].startswith("candidate 0: argument 0:")
    assert best.index in (1, 2) and set(best.ranking) == {1, 2}
    # a callable reference gets host copies of the arguments; host arrays work as arguments
    out = np.zeros(N, np.float32)
    best = autotune(tmpl, [{"combine": SUB}, {"combine": ADD}], args=(out, a, b, N),
                    grid=N // 256, block=256, check=lambda out, a, b, n: a - b, cache=False)
    assert list(best.failed) == [1] and best.index == 0


@pytest.mark.gpu
def test_the_decorator_launches_the_winner(tmp_path):
    @autotuned(candidates=[{"combine": SUB}, {"combine": FMA_ADD}, {"combine": ADD}],
               check=lambda out, a, b: a + b, cache_dir=tmp_path)
    @nx.kernel
    def combine(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})

    a, b, (out, da, db, _) = _gpu_args()
    combine[N // 256, 256](out, da, db)
    assert np.array_equal(out.copy_to_host(), a + b)
    (tuned,) = combine.tunings.values()
    assert tuned.index in (1, 2) and list(tuned.failed) == [0]
    combine[N // 256, 256](out, da, db)
    assert len(combine.tunings) == 1


ACC_SRC = SPINE_SRC.replace("out[i] = z;", "out[i] += z;")       # in place: out += a + b


@pytest.mark.gpu
def test_device_arrays_come_back_as_they_were(tmp_path):
    tmpl = nx.CudaTemplate(ACC_SRC)
    a, b, (out, _, _, _) = _gpu_args()
    s = cuda.stream()                          # arguments whose CAI names a stream
    da, db = cuda.to_device(a, stream=s), cuda.to_device(b, stream=s)
    s.synchronize()
    out.copy_to_device(np.zeros(N, np.float32))
    cands = [{"combine": ADD}, {"combine": FMA_ADD}]
    best = autotune(tmpl, cands, args=(out, da, db, N), grid=N // 256, block=256,
                    check=lambda out, a, b, n: out + a + b, cache_dir=tmp_path)
    assert best.failed == {} and not out.copy_to_host().any()
    assert np.array_equal(da.copy_to_host(), a)
    k = autotuned(tmpl, candidates=cands, cache_dir=tmp_path)      # timed from the cache
    k[N // 256, 256](out, da, db, N)
    assert np.array_equal(out.copy_to_host(), a + b)


@pytest.mark.gpu
def test_stream_views_and_strided_snapshots():
    s = cuda.stream()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = cuda.to_device(x, stream=s)
    s.synchronize()
    (v,) = at.device_args((d,))
    assert d.__cuda_array_interface__["stream"] is not None
    assert v.__cuda_array_interface__.get("stream") is None            # no sync per launch
    assert v.__cuda_array_interface__["data"][0] == d.__cuda_array_interface__["data"][0]
    snap = at.Snapshot((d[:, ::2],))          # strided: the bytes it spans are copied
    d.copy_to_device(np.zeros_like(x))
    snap.restore()
    assert np.array_equal(d.copy_to_host()[:, ::2], x[:, ::2])

