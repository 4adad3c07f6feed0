"""Issue 22, item 12: ``nx.site`` under numba-cuda's simulator runs its blocks in waves whose
threads take turns (numptx.jit.numba.sim_waves), each site evaluated once for the whole wave, and a
call's parse is kept per call shape (numptx.jit.numba.numba_site._parse_call). Behaviour only: the
same results as threads evaluating alone, bit for bit, with sites in divergent branches and
loops, barriers, early exits, shared memory per block, warp-level stubs evaluated per block's
warps, and the same errors. (Timings: benchmarks/bench_simulator.py.)

Real components: simulator scripts run in a fresh process under ``NUMBA_ENABLE_CUDASIM=1``."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numptx as nx
from conftest import run_script
from numptx.jit.numba import numba_site as ns

WAVES = r'''
import numpy as np, numptx as nx
import numptx.jit.numba.launch as L
import numptx.jit.numba.sim_waves as W
from numba import cuda

runs = []                                   # the size of each emulator run
base = L.emulate
def counting(text, ins, outs):
    runs.append(len(next(iter(ins.values()))))
    return base(text, ins, outs)
L.emulate = counting

@nx.kernel
def loops(out, a, cnt):
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    sh = cuda.shared.array(32, np.float32)
    acc = np.float32(0)
    if i % 5 != 3:                          # some threads never reach the site here
        for j in range(i % 4):              # the others reach it 0 to 3 times
            acc = nx.site("f", x=a[i] + np.float32(j), out={}, mod={"acc": acc})
    sh[t] = acc + np.float32(100 * cuda.blockIdx.x)
    cuda.syncthreads()                      # a barrier after divergent sites
    acc = sh[(t + 1) % 32]                  # shared memory is the block's own
    cnt[i] = cuda.syncthreads_count(t % 3 == 0)
    if t == 7:
        return                              # an early exit before a site the others reach
    acc = nx.site("f", x=acc, out={}, mod={"acc": acc})
    out[i] = acc

stub = "fma.rn.f32 %v_acc, %v_x, 0f3F000000, %v_acc;"          # acc + x / 2
n = 5 * 32
a = (np.arange(n, dtype=np.float32) * np.float32(0.37)).astype(np.float32)
got = {}
for how in ("one wave", "waves of two blocks", "alone"):
    L.SIM_BATCH = how != "alone"
    W.WAVE_THREADS = 64 if how == "waves of two blocks" else 1024
    out = np.full(n, -1, np.float32); cnt = np.zeros(n, np.int32)
    runs.clear()
    loops.inject(f=stub)[5, 32](out, a, cnt)
    got[how] = (out, cnt, list(runs))
L.SIM_BATCH, W.WAVE_THREADS = True, 1024

# what each thread computes, in float32 (x / 2 is exact, so the fma rounds once, like +)
want = np.full(n, -1, np.float32)
first = np.zeros(n, np.float32)
for i in range(n):
    acc = np.float32(0)
    if i % 5 != 3:
        for j in range(i % 4):
            acc = np.float32(acc + (a[i] + np.float32(j)) / np.float32(2))
    first[i] = acc + np.float32(100 * (i // 32))
for i in range(n):
    b, t = divmod(i, 32)
    if t != 7:
        acc = first[b * 32 + (t + 1) % 32]
        want[i] = np.float32(acc + acc / np.float32(2))
for how, (out, cnt, _) in got.items():
    assert np.array_equal(out, want), (how, out, want)
    assert np.all(cnt == 11), (how, cnt)
# one emulator run per round for the whole grid: 3 loop trips, then the last site
assert got["one wave"][2] == [sum(1 for i in range(n) if i % 5 != 3 and i % 4 > k)
                              for k in range(3)] + [n - 5], got["one wave"][2]
assert len(got["waves of two blocks"][2]) == 3 * 4, got["waves of two blocks"][2]
assert all(r == 1 for r in got["alone"][2])

# a 3-D grid of 3-D blocks: waves in numba's block order, each thread its own special registers
@nx.kernel
def k3(out):
    x, y, z = cuda.grid(3)
    out[z, y, x] = nx.site("s", x=np.float32(x + 10 * y + 100 * z), out={"z": nx.f32})

stub = ("{ .reg .u32 %a; .reg .u32 %b; .reg .f32 %f; mov.u32 %a, %ctaid.y; mov.u32 %b, %tid.z; "
        "mad.lo.u32 %a, %a, 1000, %b; cvt.rn.f32.u32 %f, %a; add.rn.f32 %v_z, %v_x, %f; }")
z, y, x = np.indices((4, 6, 8))
want = (x + 10 * y + 100 * z + 1000 * (y // 2) + z % 2).astype(np.float32)
for batch, wave in ((True, 1024), (True, 16), (False, 1024)):
    L.SIM_BATCH, W.WAVE_THREADS = batch, wave
    out = np.zeros((4, 6, 8), np.float32)
    k3.inject(s=stub)[(2, 3, 2), (4, 2, 2)](out)
    assert np.array_equal(out, want), (batch, wave, out)
L.SIM_BATCH, W.WAVE_THREADS = True, 1024
print("WAVES OK")
'''


def test_a_site_runs_once_per_round_for_the_whole_grid(tmp_path):
    """Divergent and looped sites, a barrier, syncthreads_count, shared memory and an early
    exit: one wave, waves of two blocks and threads alone give the same bits, and the wave
    evaluates each round of the site once (not once per block); a 3-D grid of 3-D blocks
    gives each thread its own special registers."""
    run_script(tmp_path, WAVES, simulator=True, marker="WAVES OK")


WARPS = r'''
import numpy as np, numptx as nx
import numptx.jit.numba.sim_waves as W
from numba import cuda, float32

@nx.kernel
def mk(out, a, lo):
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    if t >= lo[cuda.blockIdx.x]:
        d0, d1, d2, d3 = nx.site("m", a0=(a[i], "b32"), a1=(a[i + 1], "b32"),
                                 a2=(a[i + 2], "b32"), a3=(a[i + 3], "b32"),
                                 b0=(a[i + 4], "b32"), b1=(a[i + 5], "b32"),
                                 c0=np.float32(1), c1=np.float32(2), c2=np.float32(3),
                                 c3=np.float32(4),
                                 out={"d0": nx.f32, "d1": nx.f32, "d2": nx.f32, "d3": nx.f32})
        out[i] = d0 + d1 * np.float32(3) + d2 * np.float32(5) + d3 * np.float32(7)

mma = ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%v_d0, %v_d1, %v_d2, %v_d3}, "
       "{%v_a0, %v_a1, %v_a2, %v_a3}, {%v_b0, %v_b1}, {%v_c0, %v_c1, %v_c2, %v_c3};")
a = (np.arange(3 * 64 + 8, dtype=np.float32) / np.float32(7)).view(np.uint32)
k = mk.inject(m=mma)

def run(lo, wave):
    W.WAVE_THREADS = wave
    out = np.zeros(3 * 64, np.float32)
    try:
        k[3, 64](out, a, np.array(lo, np.int32))
    except nx.EmulationError as e:
        return str(e)
    finally:
        W.WAVE_THREADS = 1024
    return out

# warps are each block's own: a block of whole warps after one of half a warp reads its lanes
# as when blocks ran alone (waves of one block)
for lo in ([32, 0, 0], [0, 32, 32], [0, 0, 0]):
    alone, wave = run(lo, 64), run(lo, 1024)
    assert isinstance(alone, np.ndarray) and np.array_equal(alone, wave), (lo, alone, wave)
    assert np.all(wave[:lo[0]] == 0) and np.any(wave != 0)
# 48 threads of a block at a warp-level site: the emulator's error, as for the block alone
for lo in ([16, 16, 0], [0, 16, 16], [0, 0, 16]):
    alone, wave = run(lo, 64), run(lo, 1024)
    assert isinstance(wave, str) and "whole warps" in wave and wave == alone, (alone, wave)

# a thread fails while the threads of the other blocks of its wave wait at a site: its error
@nx.kernel
def fails(out, a):
    i = cuda.grid(1)
    if i == 37:
        out[i] = a[1000]
    out[i] = nx.site("twice", x=a[i], out={"z": nx.f32})

x = np.arange(96, dtype=np.float32)
try:
    fails.inject(twice="add.rn.f32 %v_z, %v_x, %v_x;")[3, 32](np.zeros(96, np.float32), x)
except IndexError as e:
    assert "tid=[5, 0, 0] ctaid=[1, 0, 0]" in str(e), e
else:
    raise SystemExit("no error")

# dynamic shared memory: each block its own
@nx.kernel
def dyn(out):
    t = cuda.threadIdx.x
    sh = cuda.shared.array(0, float32)
    sh[t] = np.float32(cuda.blockIdx.x * 10 + t)
    cuda.syncthreads()
    v = nx.site("twice", x=sh[(t + 3) % 16], out={"z": nx.f32})
    out[cuda.grid(1)] = v

o = np.zeros(48, np.float32)
dyn.inject(twice="add.rn.f32 %v_z, %v_x, %v_x;")[3, 16, 0, 64](o)
want = np.array([2 * (b * 10 + (t + 3) % 16) for b in range(3) for t in range(16)], np.float32)
assert np.array_equal(o, want), o
# a system that starts fewer threads than a wave has: one block at a time, the same results
import threading
start = threading.Thread.start
def limited(t):
    if getattr(t, "numptx_order", 0) >= 40:
        raise RuntimeError("can't start new thread")
    return start(t)
threading.Thread.start = limited
try:
    o2 = np.zeros(48, np.float32)
    dyn.inject(twice="add.rn.f32 %v_z, %v_x, %v_x;")[3, 16, 0, 64](o2)
finally:
    threading.Thread.start = start
assert np.array_equal(o2, want), o2

# a thread that waits for another thread of its block in a loop holds the turn: after
# STALL_SECONDS the wave's threads run freely (a warning says so), and the wait ends
import time, warnings
import numptx.jit.numba.launch as L

@nx.kernel
def waits(flag, gave_up):
    t = cuda.threadIdx.x
    if t == 1:
        flag[0] = 1
    elif t == 0:
        t0 = time.perf_counter()
        while flag[0] == 0 and time.perf_counter() - t0 < 20.0:
            pass
        gave_up[0] = flag[0] == 0
    gave_up[1] = nx.site("twice", x=np.float32(t), out={"z": nx.f32}) < 0

W.STALL_SECONDS = 0.4
for batch in (True, False):
    L.SIM_BATCH = batch
    flag, gave_up = np.zeros(1, np.int32), np.zeros(2, np.int32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        waits.inject(twice="add.rn.f32 %v_z, %v_x, %v_x;")[1, 2](flag, gave_up)
    said = [str(w.message) for w in caught if "without reaching an nx.site" in str(w.message)]
    assert not gave_up[0] and bool(said) == batch, (batch, gave_up, said)
    assert not batch or "run freely" in said[0]
L.SIM_BATCH = True
print("WARPS OK")
'''


def test_waves_keep_warps_errors_and_shared_memory_per_block(tmp_path):
    """A warp-level stub (mma) reads each block's warps as when the block ran alone, and
    refuses half a warp as then; a failing thread's error names it; dynamic shared memory is
    each block's own; where threads cannot be started, blocks run one at a time; a thread
    that waits for another in a loop without a site ends (the threads then run freely), and a
    warning says so."""
    run_script(tmp_path, WARPS, simulator=True, marker="WARPS OK")


# -- the parse of a call, kept per call shape --------------------------------------------------
_VALUES = st.sampled_from([np.float32(1.5), np.float64(2.0), np.int32(-3), np.uint32(7),
                           np.int64(9), np.float16(0.5), 1, 2.5, True, np.bool_(False),
                           np.array(3.0, np.float32), np.zeros(2, np.int32), "x", None,
                           (np.float32(1), "b32"), (np.float32(1), nx.f32), (1, 2, 3),
                           (np.float32(1), [1]), [1.0]])
_TYPES = st.sampled_from(["f32", nx.f32, "u32", "nope", np.float32, 3, "b16"])
_NAMES = st.sampled_from(["x", "y", "acc", "out", "mod", "2x", "z"])


def _outcome(fn, name, kwargs):
    try:
        spec, values, declared = fn(name, kwargs)[:3]
    except ns.SiteError as e:
        return ("error", str(e))
    return ("ok", spec, declared, {k: (type(v), v.tobytes() if hasattr(v, "tobytes") else v)
                                   for k, v in values.items()})


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(["s", "t", 5]),
       ins=st.lists(st.tuples(_NAMES, _VALUES), max_size=3),
       outs=st.one_of(st.none(), st.dictionaries(_NAMES, _TYPES, max_size=2)),
       mods=st.one_of(st.none(), st.dictionaries(_NAMES, _VALUES, max_size=2),
                      st.just([1])))
def test_a_kept_parse_answers_what_the_parse_answers(name, ins, outs, mods):
    """Any call, parsed twice through the kept parses (the second from the cache where the
    first succeeded), gives what ``_sim_spec`` gives: the same spec, values and error."""
    kwargs = dict(ins)
    if outs is not None:
        kwargs["out"] = outs
    if mods is not None:
        kwargs["mod"] = mods
    want = _outcome(ns._sim_spec, name, kwargs)
    for _ in range(2):
        assert _outcome(ns._parse_call, name, kwargs) == want


def test_a_kept_parse_tells_value_types_apart():
    """The same call with a value of another type parses to that type (f32, then f64, then
    the s64 of a Python int), from the cache or not."""
    for _ in range(2):
        for v, t in ((np.float32(1), "f32"), (np.float64(1), "f64"), (1, "s64"),
                     (np.array(1, np.uint32), "u32")):
            spec = ns._parse_call("s", {"x": v, "out": {"z": "f32"}})[0]
            assert spec.variables[0] == ("in", t, "x")
    with pytest.raises(ns.SiteError, match="booleans"):
        ns._parse_call("s", {"x": True, "out": {"z": "f32"}})
