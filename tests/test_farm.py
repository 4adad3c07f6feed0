"""The compile farm (numptx/jit/compile/farm.py) on real Dask worker processes
(``LocalCluster(processes=True, n_workers=2)``) and the real nvJitLink: cubins byte for byte the
local ones, the template sent once per worker, small tasks, a killed worker's tasks retried,
and each bad case a FarmError naming the worker or the versions. ~20 s in all (the cluster
starts once)."""
from __future__ import annotations

import dataclasses
import os
import pickle
import random
import signal
import threading

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx.jit.compile import farm as F

distributed = pytest.importorskip("distributed")

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
_UN = ["abs.f32", "neg.f32", "ex2.approx.ftz.f32", "sin.approx.ftz.f32"]


def program(seed: int, n_instr: int = 32) -> list:
    """A random mm-ptx-style program of ``n_instr`` instructions (bench_populations')."""
    r = random.Random(seed)
    p, depth, n = [], 0, 0
    rows = [(b, 2) for b in _BIN] + [(u, 1) for u in _UN] + [("fma.rn.f32", 3)]
    while n < n_instr:
        name, arity = r.choice(rows)
        while depth < arity or r.random() < 0.3:
            p.append(sp.input("x") if r.random() < 0.5 else sp.const(r.uniform(-2, 2), "f32"))
            depth += 1
        p.append(sp.instr(name))
        depth -= arity - 1
        n += 1
    return p


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  dashboard_address=None) as c:
        with distributed.Client(c) as client:
            yield c, client


@pytest.fixture(scope="module")
def tmpl():
    return nx.CudaTemplate(FIT, entry="fit", cache=False)


@pytest.fixture(scope="module")
def population():
    words = [sp.encode(program(s), ["x"]) for s in range(48)]
    return words + [program(100), "mov.f32 %v_y, %v_x;", "add.s32 %v_y, %v_x, 1;"]


def test_packs_on_workers_are_the_local_cubins(cluster, tmpl, population):
    _, client = cluster
    remote = tmpl.pack_many("f", population, select="cand", per_module=20, executor=client)
    local = tmpl.pack_many("f", population, select="cand", per_module=20, max_workers=1)
    assert [p.cubin for p in remote] == [p.cubin for p in local]
    assert sorted(i for p in remote for i in p.errors) == [50]     # ptxas refused it there
    assert "Arguments mismatch" in str(remote[2].errors[50])


def test_layouts_and_fast_build_on_workers(cluster, tmpl, population):
    _, client = cluster
    kw = dict(select="cand", per_module=30, layout="kernels", per_kernel=8, build="fast")
    remote = tmpl.pack_many("f", population, executor=client.get_executor(), **kw)
    local = tmpl.pack_many("f", population, max_workers=1, **kw)
    assert [p.cubin for p in remote] == [p.cubin for p in local]
    assert [len(p.kernels) for p in remote] == [4, 3]


def test_variants_and_patched_shapes_on_workers(cluster, population):
    """build_many's variants (text, words) and a constant-patch proof's trials go to the
    workers; the patched variant is the local one."""
    _, client = cluster
    batch = [{"f": "mov.f32 %v_y, %v_x;"}, {"f": population[0]},
             {"f": "mul.f32 %v_y, %v_x, 0f40000000;"}, {"f": "mul.f32 %v_y, %v_x, 0f40400000;"}]
    remote = nx.CudaTemplate(FIT, entry="fit", cache=False).build_many(batch, executor=client)
    local = nx.CudaTemplate(FIT, entry="fit", cache=False).build_many(batch, max_workers=1)
    assert [v.cubin for v in remote] == [v.cubin for v in local]
    assert [v.build_info.how for v in remote] == ["assembled", "assembled", "proof", "patched"]


def test_template_once_per_worker_and_small_tasks(cluster, tmpl, population):
    _, client = cluster
    tmpl.pack_many("f", population[:8], select="cand", per_module=4, executor=client)
    key = F.template_spec(tmpl).key
    kept = client.run(F.worker_templates)
    assert len(kept) == 2 and all(key in keys for keys in kept.values())
    # a task carries the candidates' words, never the template
    words = population[:32]
    pack = tmpl.pack("f", words, select="cand")
    _, task = F.task_of(tmpl, {"f": pack.population}, pack.variant)
    sent = len(pickle.dumps(task))
    assert tmpl.ptx[-2000:] not in pickle.dumps(task).decode("latin-1")
    assert sent / len(words) <= 1024, sent / len(words)
    assert sent < len(pickle.dumps(pack.ptx)) / 2


def test_another_numptx_version_is_named(cluster, tmpl):
    _, client = cluster
    spec = dataclasses.replace(F.template_spec(tmpl), version="0.0.0-other", key="other")
    fut = client.submit(F.run_task, spec, F.texts_task(["mov.f32 %v_y, %v_x;"]), pure=False)
    with pytest.raises(F.FarmError) as e:
        fut.result()
    msg = str(e.value)
    assert f"runs numptx {nx.__version__}" in msg and "the client runs numptx 0.0.0-other" in msg
    assert "worker tcp://" in msg and "pip install numptx==0.0.0-other" in msg


def test_a_template_the_worker_cannot_rebuild(cluster, tmpl):
    _, client = cluster
    spec = dataclasses.replace(F.template_spec(tmpl), ptx="not ptx {", key="broken")
    fut = client.submit(F.run_task, spec, F.texts_task([""]), pure=False)
    with pytest.raises(F.FarmError, match=r"worker tcp://\S+ cannot rebuild template 'fit'"):
        fut.result()


def test_unreachable_scheduler():
    with pytest.raises(F.FarmError, match=r"cannot reach the Dask scheduler at 'tcp://127.0.0.1:9'"):
        F.connect("tcp://127.0.0.1:9", timeout=1)


def test_a_killed_worker_loses_nothing(cluster, tmpl):
    """One worker process is killed (SIGKILL) once the first module is back: its tasks are
    retried on the other worker (the nanny restarts it), every module comes back once and
    is the local cubin."""
    _, client = cluster
    progs = [sp.encode(program(s), ["x"]) for s in range(1000, 1192)]
    pids = client.run(os.getpid)
    killed = threading.Event()

    def progress(done, total):
        if done >= 1 and not killed.is_set():
            killed.set()
            os.kill(next(iter(pids.values())), signal.SIGKILL)
    t = nx.CudaTemplate(FIT, entry="fit", cache=False)
    remote = t.pack_many("f", progs, select="cand", per_module=16, executor=client,
                         progress=progress)
    assert killed.is_set()
    local = t.pack_many("f", progs, select="cand", per_module=16, max_workers=1)
    assert len(remote) == 12 and [p.offset for p in remote] == [16 * m for m in range(12)]
    assert [p.cubin for p in remote] == [p.cubin for p in local]
    assert not any(p.errors for p in remote)


def test_words_compile_alike_on_either_side(tmpl):
    """What a worker compiles from words is the client's stub, byte for byte."""
    site = tmpl.sites["f"]
    for s in range(20):
        words = sp.encode(program(s), ["x"])
        got = F._resolved(("w", F.words_of(words)), site, False)
        assert got == str(sp.compile(words, site=site))
    assert F.words_of(np.zeros(3, np.int64)) is None


def test_a_client_without_its_scheduler(tmpl):
    """A client whose scheduler is gone: each variant's error is a FarmError saying so, and
    nothing is built (a BuildError naming both)."""
    cluster = distributed.LocalCluster(processes=False, n_workers=1, dashboard_address=":0")
    client = distributed.Client(cluster, timeout=3)
    cluster.close()
    try:
        t = nx.CudaTemplate(FIT, entry="fit", cache=False)
        with pytest.raises(nx.BuildError) as e:
            t.build_many([{"f": "mov.f32 %v_y, %v_x;"}, {"f": "neg.f32 %v_y, %v_x;"}],
                         executor=client)
        assert sorted(e.value.errors) == [0, 1]
        for err in e.value.errors.values():
            assert isinstance(err, F.FarmError)
            assert "not connected to its scheduler" in str(err)
        assert all(v is None for v in e.value.variants)
    finally:
        client.close()


def test_fitness_builds_on_the_farm(cluster):
    """nx.fitness with a Client: its packs (raw PTX is packed even on the CPU, so that ptxas's
    refusals score +inf as on a GPU) build on the workers; the scores are the local ones."""
    _, client = cluster
    X = np.linspace(-1, 1, 32, dtype=np.float32)[:, None]
    y = 2 * X[:, 0]
    cands = ["add.f32 %v_p, %v_x0, %v_x0;", "add.s32 %v_p, %v_x0, 1;"] * 20
    for layout in ("function", "kernels"):
        got = nx.fitness(cands, X, y, device="cpu", executor=client, layout=layout)
        np.testing.assert_array_equal(got, nx.fitness(cands, X, y, device="cpu",
                                                      layout=layout))
        assert np.isinf(got[1::2]).all() and (got[0::2] == 0).all()


def test_a_lost_template_is_sent_again(cluster, tmpl, population):
    """The scattered template lost (its workers gone, a restart: Dask cancels the data): the
    next build sends it again."""
    _, client = cluster
    farm = F.as_farm(client)
    tmpl.pack_many("f", population[:8], select="cand", per_module=4, executor=client)
    sent = farm.template(tmpl)
    client.cancel(sent)
    remote = tmpl.pack_many("f", population[:8], select="cand", per_module=4, executor=client)
    assert farm.template(tmpl) is not sent
    local = tmpl.pack_many("f", population[:8], select="cand", per_module=4, max_workers=1)
    assert [p.cubin for p in remote] == [p.cubin for p in local]
