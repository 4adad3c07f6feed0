"""nx.autotune with an injected benchmark (``bench=``, as Triton's autotuner takes a
``do_bench``): a deterministic benchmark decides the ranking; it is given only the candidates
that were built (real NVRTC and nvJitLink, no GPU), with the settings autotune was given; a
candidate it reports as failed is excluded; an answer that is not a cost for each candidate it
was given is an AutotuneError naming what is wrong; its costs stay out of the ranking cache.
The launch path (``cost="time"``) runs on the CPU with only the GPU layer faked, as in
test_autotune.py; under numba-cuda's simulator (a fresh process) ``bench=`` is refused."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

import numptx as nx
from numptx.jit.tune import autotune as at
from numptx.jit.tune.autotune import (AutotuneError, AutotuneOptions, AutotuneWarning, BenchRun,
                                 autotune, default_bench)
from numptx.jit.templates.template import Variant

from conftest import SPINE_SRC, run_script

ADD = "add.f32 %v_z, %v_x, %v_y;"
SUB = "sub.f32 %v_z, %v_x, %v_y;"
BOGUS = "bogus.f32 %v_z;"                       # nvJitLink refuses it: stage "build"


def chain(k: int) -> str:
    """A stub whose static cost grows with ``k``: ``k`` dependent fmas."""
    return "mov.f32 %v_z, %v_x;\n" + "fma.rn.f32 %v_z, %v_z, 0f3F7FF000, %v_y;\n" * k


@pytest.fixture(scope="module")
def tmpl(tmp_path_factory):
    cubins = nx.CubinCache(str(tmp_path_factory.mktemp("cubins")))
    return nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=cubins)


class Recorder:
    """A deterministic benchmark: the cost of a candidate is ``table[its stub text]``; every
    BenchRun it is given is kept."""

    def __init__(self, table):
        self.table, self.runs = table, []

    def __call__(self, run: BenchRun):
        self.runs.append(run)
        return {i: self.table[v.stubs[0]] for i, v in run.variants.items()}


def _files(folder) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs]


def test_an_injected_benchmark_decides_the_ranking(tmpl, tmp_path):
    # the opposite of the static ranking: the longest chain is the "fastest"
    cands = [{"combine": ADD}, {"combine": chain(8)}, {"combine": chain(32)}]
    bench = Recorder({ADD: 3.0, chain(8): 2.0, chain(32): 1.0})
    best = autotune(tmpl, cands, cost="registers", cache_dir=tmp_path, bench=bench, repeats=4,
                    warmup=1)
    assert best.ranking == (2, 1, 0) and best.index == 2 and best.costs == (3.0, 2.0, 1.0)
    assert best.measured == (0, 1, 2) and best.failed == {} and best.excluded == ()
    assert best.variant.stubs == (chain(32),)
    (run,) = bench.runs                           # one call, every candidate in it
    assert sorted(run.variants) == [0, 1, 2] and run.cost == "registers"
    assert all(v.cubin[:4] == b"\x7fELF" for v in run.variants.values())     # built
    assert (run.repeats, run.warmup, run.args, run.arch) == (4, 1, None, "sm_90")
    # its costs are not the cache's: nothing is read or written, no key is made
    assert best.keys == (None, None, None) and best.from_cache == (False,) * 3
    assert _files(tmp_path) == []
    again = autotune(tmpl, cands, cost="registers", cache_dir=tmp_path, bench=bench)
    assert len(bench.runs) == 2 and again.from_cache == (False,) * 3


def test_the_default_benchmark_is_what_autotune_measures_with(tmpl):
    cands = [{"combine": chain(16)}, {"combine": ADD}]
    plain = autotune(tmpl, cands, cost="registers", cache=False)
    injected = autotune(tmpl, cands, cost="registers", cache=False, bench=default_bench)
    assert injected.costs == plain.costs and injected.ranking == plain.ranking
    regs = [tmpl.inject(c).resources.registers for c in cands]
    assert list(injected.costs) == regs


def test_the_benchmark_gets_only_the_candidates_that_were_built(tmpl):
    cands = [{"combine": chain(4)}, {"nosuchsite": ADD}, {"combine": BOGUS}, {"combine": ADD}]
    bench = Recorder({chain(4): 1.0, ADD: 0.5})
    with pytest.warns(AutotuneWarning, match="2 of 4 candidate"):
        best = autotune(tmpl, cands, cost="registers", cache=False, bench=bench)
    assert sorted(bench.runs[0].variants) == [0, 3]
    assert [(e.index, e.stage) for e in best.excluded] == [(1, "stubs"), (2, "build")]
    assert best.ranking == (3, 0) and math.isinf(best.costs[1]) and math.isinf(best.costs[2])


def test_a_candidate_the_benchmark_reports_failed_is_excluded(tmpl):
    cands = [{"combine": ADD}, {"combine": SUB}]

    def bench(run):
        return {0: nx.NumptxError("counter overflow"), 1: 2.5}
    with pytest.warns(AutotuneWarning, match="1 of 2"):
        best = autotune(tmpl, cands, cost="sass", cache=False, bench=bench)
    assert best.ranking == (1,) and best.excluded[0].stage == "measure"
    assert best.failed[0] == "candidate 0: NumptxError: counter overflow"
    with pytest.raises(AutotuneError, match="no candidate left") as e:
        autotune(tmpl, cands, cost="sass", cache=False,
                 bench=lambda run: {i: nx.NumptxError("no") for i in run.variants})
    assert sorted(e.value.failed) == [0, 1]


@pytest.mark.parametrize("answer, match", [
    (lambda run: [1.0, 2.0], "returned a list, not a mapping"),
    (lambda run: {0: 1.0}, "no cost for candidate.s. 1 .it was given 0, 1"),
    (lambda run: {0: 1.0, 1: 1.0, 7: 1.0}, "costs for 7, which it was not given"),
    (lambda run: {0: 1.0, 1: float("nan")}, "candidate 1: nan is not a cost"),
    (lambda run: {0: -1.0, 1: 1.0}, "candidate 0: -1.0 is not a cost"),
    (lambda run: {0: True, 1: 1.0}, "candidate 0: True is not a cost"),
    (lambda run: {0: "fast", 1: 1.0}, "candidate 0: 'fast' is not a cost"),
])
def test_an_answer_that_is_not_a_cost_per_candidate_is_refused(tmpl, answer, match):
    with pytest.raises(AutotuneError, match=match):
        autotune(tmpl, [{"combine": ADD}, {"combine": SUB}], cost="registers", cache=False,
                 bench=answer)


def test_a_benchmark_that_raises_is_named(tmpl):
    def bench(run):
        raise ZeroDivisionError("division by zero")
    with pytest.raises(AutotuneError, match="the benchmark raised ZeroDivisionError") as e:
        autotune(tmpl, [{"combine": ADD}], cost="registers", cache=False, bench=bench)
    assert isinstance(e.value.__cause__, ZeroDivisionError)


def test_bench_is_checked_as_an_option(tmpl):
    with pytest.raises(AutotuneError, match=r"autotune\(bench=\): a callable taking a BenchRun"):
        autotune(tmpl, [{"combine": ADD}], cost="registers", bench=3)
    with pytest.raises(AutotuneError, match="bench="):
        AutotuneOptions(bench="do_bench")
    with pytest.raises(AutotuneError, match=r"unknown option\(s\) benchh; it takes .*bench"):
        AutotuneOptions.of({"benchh": default_bench})
    opts = AutotuneOptions.of({"cost": "registers", "bench": default_bench, "cache": True})
    assert opts.store is None and opts.read is False        # a benchmark's costs: not cached
    with pytest.raises(Exception):
        opts.cost = "time"                                  # frozen


# the launch path on the CPU: only the GPU layer (device, launches) is faked, as in
# test_autotune.py; the candidates are built for real
@pytest.fixture
def fake_gpu(monkeypatch):
    from numba import cuda
    launches: list[str] = []
    monkeypatch.setattr(cuda, "synchronize", lambda: None, raising=False)
    monkeypatch.setattr(at, "gpu_available", lambda: True)
    monkeypatch.setattr(at, "_device", lambda: {"device": "FakeGPU", "cc": "9.0",
                                                "driver": "12.8"})
    monkeypatch.setattr(at, "device_args", tuple)     # host arrays launched as they are

    def getitem(variant, config):
        def launch(out, a, b, n):
            launches.append(variant.stubs[0])
            a[:n] += 1                                # in place: autotune restores it
            out[:n] += a[:n] + b[:n]
        return launch
    monkeypatch.setattr(Variant, "__getitem__", getitem)
    return launches


def test_a_do_bench_style_benchmark_launches_on_the_callers_arguments(tmpl, fake_gpu):
    args = (np.zeros(4, np.float32), np.ones(4, np.float32), np.ones(4, np.float32), 4)
    seen = []

    def do_bench(run):
        out = {}
        for i, v in run.variants.items():
            launch = v[run.config]
            for _ in range(run.repeats):
                launch(*run.args)
            seen.append((i, run.config, run.args[0].copy()))
            out[i] = float(len(v.stubs[0]))           # deterministic: shorter text wins
        return out
    best = autotune(tmpl, [{"combine": chain(2)}, {"combine": ADD}], args=args, grid=2,
                    block=4, repeats=3, bench=do_bench, cache=False)
    assert best.ranking == (1, 0) and best.unit == "s"
    assert [s[1] for s in seen] == [((2, 1, 1), (4, 1, 1))] * 2
    assert len(fake_gpu) == 6                         # the benchmark's launches only
    # the arguments were the caller's (launched in place), and are restored afterwards
    assert seen[0][2].tolist() == [12.0] * 4       # out += a + b, a += 1: three times
    assert np.array_equal(args[0], np.zeros(4)) and np.array_equal(args[1], np.ones(4))


def test_the_simulator_refuses_bench(tmp_path):
    run_script(tmp_path, r'''
import numpy as np
import numptx as nx
from numba import cuda
from numptx.jit.tune.autotune import AutotuneError

@nx.kernel
def combine(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})

args = tuple(np.zeros(8, np.float32) for _ in range(3))
try:
    nx.autotune(combine, [{"combine": "add.f32 %v_z, %v_x, %v_y;"}], args=args,
                cost="registers", bench=lambda run: {0: 1.0})
except AutotuneError as e:
    assert "bench=" in str(e) and "simulator" in str(e), e
    print("REFUSED")
''', simulator=True, marker="REFUSED")


def test_the_decorator_takes_a_benchmark(tmpl):
    # nx.autotuned passes bench= through to autotune (it was refused as an unknown option)
    bench = Recorder({ADD: 2.0, chain(8): 1.0})
    k = nx.autotuned(tmpl, candidates=[{"combine": ADD}, {"combine": chain(8)}],
                     cost="registers", cache=False, bench=bench)
    tuned = k.tune(np.zeros(4, np.float32), np.ones(4, np.float32), np.ones(4, np.float32),
                   np.int32(4), grid=1, block=4)
    assert tuned.index == 1 and tuned.costs == (2.0, 1.0) and len(bench.runs) == 1
    with pytest.raises(AutotuneError, match="bench"):
        nx.autotuned(tmpl, candidates=[{"combine": ADD}], bench=3)
