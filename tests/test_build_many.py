"""build_many with process pools and other executors: workers get rendered PTX text (stubs are
resolved in the parent) and return cubin bytes, byte-identical to a thread build; failures keep
their index and their LinkError details across the process boundary.

Real NVRTC and nvJitLink, no GPU. Pools are shared per start method to keep start-up (a spawned
worker imports numptx, ~0.5 s) to once per method."""
from __future__ import annotations

import multiprocessing
import pickle
from concurrent.futures import Executor, ProcessPoolExecutor

import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx.jit.compile import build as build_mod

from conftest import SPINE_SRC

METHODS = [m for m in ("spawn", "fork", "forkserver") if m in multiprocessing.get_all_start_methods()]
BOGUS = "bogus.f32 %v_z;"


def _stubs(n: int) -> list[dict]:
    return [{"combine": f"add.f32 %v_z, %v_x, 0f{0x3F800000 + i:08X};"} for i in range(n)]


@pytest.fixture(scope="module")
def spine():
    return nx.CudaTemplate(SPINE_SRC, entry="kernel", arch="sm_90", cache=False)


@pytest.fixture(scope="module")
def pools():
    """``pools(method)``: a 2-worker process pool for that start method, made on first use."""
    made: dict[str, ProcessPoolExecutor] = {}

    def get(method: str) -> ProcessPoolExecutor:
        if method not in made:
            made[method] = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method))
        return made[method]
    yield get
    for pool in made.values():
        pool.shutdown(wait=True, cancel_futures=True)


class Recording(Executor):
    """Any Executor: forwards to another one and records what is submitted."""

    def __init__(self, inner: Executor):
        self.inner, self.calls = inner, []

    def submit(self, fn, /, *args, **kwargs):
        self.calls.append((fn, args, kwargs))
        return self.inner.submit(fn, *args, **kwargs)


@pytest.mark.parametrize("method", METHODS)
def test_process_pool_cubins_equal_a_thread_build(spine, pools, method):
    batch = _stubs(3)
    threads = spine.build_many(batch)
    procs = spine.build_many(batch, executor=pools(method))
    assert [v.key for v in procs] == [v.key for v in threads]
    assert all(v.cubin[:4] == b"\x7fELF" for v in procs)
    assert [v.cubin for v in procs] == [v.cubin for v in threads]


def test_process_pool_failures_keep_their_index_and_details(spine, pools):
    batch = _stubs(4)
    batch.insert(2, {"combine": BOGUS})                   # fails in a worker (nvJitLink)
    batch.append({"nosuchsite": "mov.f32 %v_z, %v_x;"})   # fails in the parent (resolution)
    seen = []
    with pytest.raises(nx.BuildError) as info:
        spine.build_many(batch, executor=pools("spawn"),
                         progress=lambda done, total: seen.append((done, total)))
    err = info.value
    assert sorted(err.errors) == [2, 5]
    assert "variant 2: LinkError" in str(err) and "variant 5: RenderError" in str(err)
    link = err.errors[2]
    assert isinstance(link, nx.LinkError)                 # unpickled with its attributes
    assert link.site == "combine" and link.stub_line == BOGUS and "bogus" in link.log
    assert [v is None for v in err.variants] == [False, False, True, False, False, True]
    assert all(v.cubin[:4] == b"\x7fELF" for v in err.variants if v is not None)
    assert sorted(seen) == [(i, 6) for i in range(1, 7)]


def test_process_pool_return_mode(spine, pools):
    batch = _stubs(2) + [{"combine": BOGUS}]
    out = spine.build_many(batch, executor=pools("spawn"), errors="return")
    assert [type(r).__name__ for r in out] == ["Variant", "Variant", "LinkError"]
    assert out[2].site == "combine"


def test_stub_kinds_are_resolved_in_the_parent(spine, pools):
    @nx.ptx_expr                                   # a local function: not picklable
    def fma1(x: nx.f32, y: nx.f32) -> nx.f32:
        return x * y + 1

    class Opaque:                                  # neither is this (local class, a lambda)
        make = staticmethod(lambda site: "mul.rn.f32 %v_z, %v_x, %v_y;")

        def stub(self, site):
            return self.make(site)

    with pytest.raises(Exception):
        pickle.dumps(fma1)
    prog = [sp.input("x"), sp.input("y"), sp.instr("add.rn.f32")]
    batch = [{"combine": fma1}, {"combine": prog}, {"combine": Opaque()},
             {"combine": "sub.rn.f32 %v_z, %v_x, %v_y;"}]
    rec = Recording(pools("spawn"))
    procs = spine.build_many(batch, executor=rec)
    threads = spine.build_many(batch)
    assert [v.cubin for v in procs] == [v.cubin for v in threads]
    site = spine.sites["combine"]
    assert procs[0].stubs == (str(fma1.stub(site)),)
    assert procs[1].stubs == (str(sp.compile(prog, site=site)),)
    # what crosses to the workers: the module-level _link and (PTX text, arch, options)
    assert len(rec.calls) == 4
    for (fn, args, kwargs), v in zip(rec.calls, procs):
        assert fn is build_mod._link and not kwargs
        assert args == (v.ptx, "sm_90", ()) and type(args[0]) is str
        pickle.dumps((fn, args))


def test_numba_kernel_build_many_with_a_process_pool(pools):
    if nx.jit.numba_site.SIMULATOR:
        pytest.skip("needs the real numba-cuda")
    from numba import cuda

    @nx.kernel("void(float32[:], float32[:], float32[:])", cache=False)
    def apply(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})

    @nx.ptx_expr
    def hyp(x: nx.f32, y: nx.f32) -> nx.f32:
        return nx.sqrt(x * x + y * y)

    batch = [{"combine": hyp}, {"combine": [sp.input("x"), sp.input("y"), sp.instr("mul.rn.f32")]},
             {"combine": "max.f32 %v_z, %v_x, %v_y;"}, {"combine": BOGUS}]
    out = apply.build_many(batch, executor=pools("spawn"), errors="return")
    assert [type(r).__name__ for r in out] == ["Variant"] * 3 + ["LinkError"]
    threads = apply.build_many(batch[:3])
    assert [v.cubin for v in out[:3]] == [v.cubin for v in threads]
    assert all(v.cubin[:4] == b"\x7fELF" and v.entry == apply.template().entry for v in out[:3])


def test_dask_executor(spine):
    """A Dask cluster's executor (``client.get_executor()``) builds a batch like a pool does."""
    distributed = pytest.importorskip("distributed")
    batch = [{"combine": f"mul.rn.f32 %v_z, %v_x, 0f{0x40100000 + 7 * i:08X};"} for i in range(4)]
    batch.insert(2, {"combine": "bogus.f32 %v_z;"})
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2,
                            dashboard_address=None) as client:
        out = spine.build_many(batch, executor=client.get_executor(), errors="return")
    assert isinstance(out[2], nx.LinkError) and out[2].site == "combine"
    good = [v for i, v in enumerate(out) if i != 2]
    assert all(v.cubin[:4] == b"\x7fELF" for v in good) and len({v.key for v in good}) == 4
