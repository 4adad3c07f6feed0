"""Stack PTX compile speed.

- random 100-instruction programs: C time per program (the C batch loop alone), one
  ``sp.compile`` call from Python, a batch of 10 000 through ``sp.compile_many``;
- one 59-instruction program through ``sp.compile`` (the mm-ptx Python bindings take 237 us
  for such a call, measured on this machine when the issue was written).

    python benchmarks/bench_stack.py
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from numptx import stack_ptx as sp
from numptx._program import _io_for, _limits_c, _table

TARGETS = {"c_per_program": 4e-6, "batch_per_program": 6e-6, "single_59": 15e-6}

INPUTS = {"x": "f32", "y": "f32", "w": "f32"}
OUTPUTS = {"z": "f32"}
POOL = ([sp.input(n) for n in INPUTS] + [sp.const(c, "f32") for c in (0.5, 1.0, 2.0, 3.0)]
        + [sp.instr(n) for n in ("add.rn.f32", "sub.rn.f32", "mul.rn.f32", "fma.rn.f32",
                                 "min.f32", "max.f32", "sqrt.rn.f32", "abs.f32", "neg.f32",
                                 "setp.lt.f32", "selp.f32", "ex2.approx.f32")]
        + [sp.dup("f32"), sp.swap("f32"), sp.drop("f32"), sp.meta(1), sp.meta(2),
           sp.yank_dup("f32"), sp.rotate("f32")])


def random_programs(n: int, length: int, seed: int = 0) -> list[list]:
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(POOL), size=(n, length))
    return [[POOL[i] for i in row] for row in picks]


def program_59() -> list:
    """A 59-op formula: a degree-8 polynomial in x by Horner's rule plus a few extras."""
    prog = [sp.const(0.0, "f32")]
    for c in (0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7, -0.8, 0.9):
        prog += [sp.input("x"), sp.instr("mul.rn.f32"), sp.const(c, "f32"), sp.instr("add.rn.f32")]
    prog += [sp.input("y"), sp.dup("f32"), sp.instr("mul.rn.f32"), sp.instr("add.rn.f32"),
             sp.input("w"), sp.instr("max.f32"), sp.dup("f32"), sp.instr("sqrt.rn.f32"),
             sp.instr("mul.rn.f32"), sp.const(1.0, "f32"), sp.instr("add.rn.f32"),
             sp.input("x"), sp.input("y"), sp.instr("setp.lt.f32"), sp.input("w"), sp.swap("f32"),
             sp.meta(1), sp.yank_dup("f32"), sp.instr("min.f32"), sp.instr("abs.f32"),
             sp.instr("add.rn.f32"), sp.instr("neg.f32")]
    return prog


def best(fn, repeat: int) -> float:
    t_best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        t_best = min(t_best, time.perf_counter() - t)
    return t_best


def c_loop_time(encoded: list[np.ndarray], repeat: int) -> float:
    """Time of the C batch call alone (encoding and Python objects excluded)."""
    from numptx._native import ffi, lib
    io = _io_for(INPUTS, OUTPUTS, None)
    table, (_, lim) = _table(), _limits_c(None)
    words = np.concatenate(encoded)
    offsets = np.zeros(len(encoded) + 1, dtype=np.uint32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    n = len(encoded)
    ws = ffi.new("char[]", lib.stackptx_workspace_size(lim, io.c))
    cap = n * 4096
    out = ffi.new("char[]", cap)
    oo = np.zeros(n + 1, dtype=np.uint32)
    diags = ffi.new("stackptx_diag[]", n)
    done = ffi.new("uint32_t *")
    wp, op_, oop = (ffi.from_buffer("uint64_t[]", words), ffi.from_buffer("uint32_t[]", offsets),
                    ffi.from_buffer("uint32_t[]", oo))

    def run():
        st = lib.stackptx_compile_many(table, io.c, lim, wp, op_, n, ffi.NULL, 0, ws, len(ws), out,
                                       cap, oop, diags, done)
        assert st == 0 and done[0] == n, st
    return best(run, repeat) / n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=10_000)
    args = ap.parse_args(argv)
    progs = random_programs(args.batch, 100)
    encoded = [sp.encode(p, INPUTS) for p in progs]
    one = progs[0]
    p59 = program_59()
    assert len(p59) == 59, len(p59)

    t_c = c_loop_time(encoded, 5)
    t_single = best(lambda: sp.compile(one, INPUTS, OUTPUTS), 2000)
    t_batch = best(lambda: sp.compile_many(encoded, INPUTS, OUTPUTS), 3) / args.batch
    t_batch_ops = best(lambda: sp.compile_many(progs, INPUTS, OUTPUTS), 3) / args.batch
    t_59 = best(lambda: sp.compile(p59, INPUTS, OUTPUTS), 5000)

    rows = [
        ("random 100-op program, C loop alone", t_c, TARGETS["c_per_program"]),
        ("random 100-op program, sp.compile", t_single, None),
        (f"batch of {args.batch} encoded, compile_many", t_batch, TARGETS["batch_per_program"]),
        (f"batch of {args.batch} op lists, compile_many", t_batch_ops, None),
        ("59-op program, sp.compile", t_59, TARGETS["single_59"]),
    ]
    ok_all = True
    print(f"{'case':<46}{'per program':>14}{'target':>12}  ok")
    for name, t, target in rows:
        ok = "" if target is None else ("yes" if t <= target else "NO")
        ok_all &= ok != "NO"
        tgt = "" if target is None else f"{target * 1e6:.0f} us"
        print(f"{name:<46}{t * 1e6:>11.2f} us{tgt:>12}  {ok}")
    print(f"{'59-op call vs mm-ptx Python bindings (237 us)':<46}{237e-6 / t_59:>12.1f}x faster")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
