"""Issue 22, item 12: under numba-cuda's simulator a formula's site call runs on the formula's
tape in the batch interpreter, in the calling thread (no hand-over to the wave), where the
interpreter runs every row of the stub; elsewhere the stub emulator runs it, as before. The
results are the same bit for bit (the tape is the stub's DAG; each row's C semantics is its
NumPy semantics). Real components: scripts in a fresh process under NUMBA_ENABLE_CUDASIM=1."""
from __future__ import annotations

from conftest import run_script

TAPES = r'''
import numpy as np, numptx as nx, warnings
import numptx.jit.numba.launch as L
from numba import cuda

runs = []
base = L.emulate
def counting(text, ins, outs):
    runs.append(len(next(iter(ins.values()))))
    return base(text, ins, outs)
L.emulate = counting

@nx.ptx_expr
def law(r2: nx.f32, m: nx.f32) -> nx.f32:
    inv = nx.rsqrt(r2)
    s = m * inv * inv * inv
    return nx.where(r2 > 1.5, s / nx.sqrt(r2 + 1.0), s * 2.0 - m)

@nx.ptx_expr
def half(r2: nx.f32, m: nx.f32) -> nx.f32:
    return nx.f32(nx.f16(r2) * nx.f16(m))          # f16 rows: no C semantics

@nx.kernel
def body(out, a, b):
    i = cuda.grid(1)
    acc = np.float32(0)
    if i < a.shape[0]:
        for j in range(i % 5):
            s = nx.site("law", r2=a[i] + np.float32(j), m=b[i], out={"s": nx.f32})
            acc += s
        out[i] = acc

n = 3 * 64 + 5
rng = np.random.default_rng(0)
a = rng.uniform(0.01, 3, n).astype(np.float32)
a[:4] = [0.0, -1.0, np.inf, np.nan]
b = rng.uniform(-2, 2, n).astype(np.float32)
got = {}
for formula in (law, half):
    for tapes in (True, False):
        L.SIM_TAPES = tapes
        runs.clear()
        out = np.zeros(n, np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            body.inject(law=formula)[4, 64](out, a, b)
        got[formula.__name__, tapes] = out
        if formula is law:
            assert (len(runs) == 0) == tapes, (tapes, len(runs))   # the tape, not the emulator
        else:
            assert len(runs) > 0                                     # no tape: the emulator
for name in ("law", "half"):
    x, y = got[name, True], got[name, False]
    assert np.array_equal(x.view(np.uint32), y.view(np.uint32)), name
print("TAPES-OK")
'''


def test_formula_sites_run_on_tapes_bit_for_bit(tmp_path):
    run_script(tmp_path, TAPES, simulator=True, marker="TAPES-OK")
