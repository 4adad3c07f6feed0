"""Issue 22, item 12, review: the simulator's waves (numptx.jit.numba.sim_waves) compute what the
threads compute alone and what the GPU build computes: warp-level stubs see each warp's lanes
in a block of more than one dimension, lane masks follow each thread's own lane where only
some threads reach a site, and threads that wait for each other in a loop without a site
(a flag, a spin lock, across blocks of one wave) end instead of waiting for ever.

Real components: simulator scripts run in a fresh process under ``NUMBA_ENABLE_CUDASIM=1``;
the reference values come from the stub emulator on the lanes of the PTX ISA."""
from __future__ import annotations

from conftest import run_script

LANES = r'''
import numpy as np, numptx as nx
import numptx.jit.numba.launch as L
from numptx.dsl.emulator import emulate
from numba import cuda

# warps are made of consecutive linear thread ids (x fastest): a block of (16, 4) threads holds
# two warps, rows 0-1 and rows 2-3
@nx.kernel
def kmma(out, a):
    tx, ty, tz = cuda.threadIdx.x, cuda.threadIdx.y, cuda.threadIdx.z
    i = cuda.blockIdx.x * 64 + (tz * cuda.blockDim.y + ty) * 16 + tx
    d0, d1, d2, d3 = nx.site("m", a0=(a[i], "b32"), a1=(a[i + 1], "b32"),
                             a2=(a[i + 2], "b32"), a3=(a[i + 3], "b32"),
                             b0=(a[i + 4], "b32"), b1=(a[i + 5], "b32"),
                             c0=np.float32(1), c1=np.float32(2), c2=np.float32(3),
                             c3=np.float32(4),
                             out={"d0": nx.f32, "d1": nx.f32, "d2": nx.f32, "d3": nx.f32})
    out[i] = d0 + d1 * np.float32(3) + d2 * np.float32(5) + d3 * np.float32(7)

MMA = ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%v_d0, %v_d1, %v_d2, %v_d3}, "
       "{%v_a0, %v_a1, %v_a2, %v_a3}, {%v_b0, %v_b1}, {%v_c0, %v_c1, %v_c2, %v_c3};")
a = np.sin(np.arange(2 * 64 + 8, dtype=np.float32)).astype(np.float32).view(np.uint32)
idx = np.arange(128)
ins = {f"v_a{k}": a[idx + k] for k in range(4)}
ins.update({"v_b0": a[idx + 4], "v_b1": a[idx + 5], "v_c0": np.float32(1),
            "v_c1": np.float32(2), "v_c2": np.float32(3), "v_c3": np.float32(4)})
r = emulate(MMA, ins, {f"v_d{k}": "f32" for k in range(4)})
want = (r["v_d0"] + r["v_d1"] * np.float32(3) + r["v_d2"] * np.float32(5)
        + r["v_d3"] * np.float32(7)).astype(np.float32)
for block in ((16, 4), (16, 2, 2)):
    out = np.zeros(128, np.float32)
    kmma.inject(m=MMA)[2, block](out, a)
    assert np.array_equal(out, want), (block, out - want)

# a lane mask is the thread's own lane's, also where only some threads reach the site
@nx.kernel
def kmask(out):
    i = cuda.grid(1)
    if i % 3:
        out[i] = nx.site("l", x=np.float32(i), out={"z": nx.u32})

for batch in (True, False):
    L.SIM_BATCH = batch
    for stub, f in (("mov.u32 %v_z, %lanemask_lt;", lambda l: (1 << l) - 1),
                    ("mov.u32 %v_z, %lanemask_eq;", lambda l: 1 << l),
                    ("mov.u32 %v_z, %lanemask_ge;", lambda l: (0xFFFFFFFF << l) & 0xFFFFFFFF)):
        out = np.zeros(2 * 48, np.uint32)
        kmask.inject(l=stub)[2, 48](out)
        lanes = [(i % 48) % 32 for i in range(96)]
        want = np.array([f(lanes[i]) if i % 3 else 0 for i in range(96)], np.uint32)
        assert np.array_equal(out, want), (batch, stub, out, want)
L.SIM_BATCH = True
print("LANES OK")
'''


def test_warps_and_lane_masks_follow_linear_thread_ids(tmp_path):
    """An mma stub in blocks of (16, 4) and (16, 2, 2) threads reads the warps of consecutive
    linear thread ids (the waves ordered threads as numba's ndindex does, z fastest, and
    mixed the rows of two warps); ``%lanemask_*`` at a site only every third thread misses is
    each thread's own (it was derived from the thread's position in the batch)."""
    run_script(tmp_path, LANES, simulator=True, marker="LANES OK")


SPIN = r'''
import warnings
import numpy as np, numptx as nx
import numptx.jit.numba.launch as L
import numptx.jit.numba.sim_waves as W
from numba import cuda, int32

W.STALL_SECONDS = 0.3
TWICE = "add.rn.f32 %v_z, %v_x, %v_x;"

@nx.kernel
def flag_after_site(flag, out):
    # thread 1 passes a site, then sets the flag thread 0 waits for (no site in its loop)
    t = cuda.threadIdx.x
    v = np.float32(t)
    if t == 1:
        v = nx.site("twice", x=v, out={"z": nx.f32})
        cuda.atomic.add(flag, 0, 1)
    elif t == 0:
        while cuda.atomic.add(flag, 0, 0) == 0:
            pass
    out[t] = nx.site("twice", x=v, out={"z": nx.f32})

@nx.kernel
def across_blocks(flag, out):
    # block 1 waits for block 0's flag, set after block 0's barrier and site
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    v = np.float32(i)
    if cuda.blockIdx.x == 0:
        cuda.syncthreads()
        v = nx.site("twice", x=v, out={"z": nx.f32})
        if t == 0:
            cuda.atomic.add(flag, 0, 1)
    elif t == 0:
        while cuda.atomic.add(flag, 0, 0) == 0:
            pass
    cuda.syncthreads()
    out[i] = nx.site("twice", x=v, out={"z": nx.f32})

@nx.kernel
def spin_lock(lock, total, out):
    # a spin lock (atomic compare-and-swap) held across a site
    t = cuda.threadIdx.x
    v = np.float32(t)
    while cuda.atomic.compare_and_swap(lock, 0, 1) != 0:
        pass
    v = nx.site("twice", x=v, out={"z": nx.f32})
    total[0] += 1
    cuda.atomic.exch(lock, 0, 0)
    out[t] = v

for batch in (True, False):
    L.SIM_BATCH = batch
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flag, out = np.zeros(1, np.int32), np.zeros(4, np.float32)
        flag_after_site.inject(twice=TWICE)[1, 4](flag, out)
        assert np.array_equal(out, [0, 4, 4, 6]), out
        flag, out = np.zeros(1, np.int32), np.zeros(6, np.float32)
        across_blocks.inject(twice=TWICE)[2, 3](flag, out)
        assert np.array_equal(out, [0, 4, 8, 6, 8, 10]), out
        for n in (3, 40):
            lock, total, out = np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(n, np.float32)
            spin_lock.inject(twice=TWICE)[1, n](lock, total, out)
            assert total[0] == n and np.array_equal(out, 2 * np.arange(n)), (n, total, out)
    said = [w for w in caught if "run freely" in str(w.message)]
    assert bool(said) == batch, (batch, [str(w.message) for w in caught])
    assert all(w.filename == __file__ for w in said), [w.filename for w in said]  # the launch
L.SIM_BATCH = True

# a kernel that does not wait is not slowed: no warning, the waves keep taking turns
with warnings.catch_warnings():
    warnings.simplefilter("error")
    out = np.zeros(4, np.float32)
    flag_after_site.inject(twice=TWICE)[1, 4](np.ones(1, np.int32), out)
    assert np.array_equal(out, [0, 4, 4, 6]), out

# numptx's own work that takes long (an evaluation, a stub's first check) is no stall: the
# threads keep taking turns
import time
def slow(base):
    def slowly(*a, **k):
        time.sleep(4 * W.STALL_SECONDS)
        return base(*a, **k)
    return slowly
for name in ("emulate", "bind_stub"):
    base = getattr(L, name)
    setattr(L, name, slow(base))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = np.zeros(4, np.float32)
            flag_after_site.inject(twice=TWICE)[1, 4](np.ones(1, np.int32), out)
            assert np.array_equal(out, [0, 4, 4, 6]), out
    finally:
        setattr(L, name, base)
print("SPIN OK")
'''


def test_threads_that_wait_for_each_other_end(tmp_path):
    """A thread that waits in a loop without a site for a flag another thread sets after a
    site, a block that waits for a flag of an earlier block of its wave, and a spin lock held
    across a site: each launch ends with the results of threads run alone, and a warning
    says the wave's threads ran freely (with the turns, the waiting thread held the turn for
    ever); a slow evaluation is not taken for a waiting thread."""
    run_script(tmp_path, SPIN, simulator=True, marker="SPIN OK")
