"""Accuracy of the DSL math library (numptx/dsl/mathlib/): max ulp error of every function,
dtype and mode over random inputs, written to docs/dsl_accuracy.md.

    python benchmarks/accuracy_dsl.py                 # ~10^6 inputs per row, writes the doc
    python benchmarks/accuracy_dsl.py -n 100000 --no-write
    python benchmarks/accuracy_dsl.py --only exp,pow --dtype f32

Results are eager evaluations (mathlib.EagerBuilder: the table semantics, i.e. the emulated
stub). References: float64 NumPy for f32 (error far below 1/1000 f32 ulp), x87 long double
NumPy (64-bit significand, ~1/1000 f64 ulp) for f64. The error is measured against the exact
reference (mathlib.ulp_error), so a correctly rounded result scores at most 0.5.
In fast mode the approximate instructions are emulated correctly rounded (numptx's model);
the GPU may deviate by the bound the PTX ISA documents, given in the note column.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import sys
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from numptx.dsl import mathlib as M  # noqa: E402

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "dsl_accuracy.md")
F32_MAX = float(np.finfo(np.float32).max)
F64_MAX = float(np.finfo(np.float64).max)

# documented bounds of the approx rows behind each fast form (PTX ISA 9.7.3)
FAST_NOTE = {
    "exp": "ex2.approx.ftz (2 ulp) of x*log2(e); the rounded product adds ~|x| * 2^-24 relative",
    "exp2": "ex2.approx.ftz: 2 ulp",
    "log": "lg2.approx.ftz: abs 2^-22 in (0.5, 2), rel 2^-22 elsewhere; times ln2",
    "log2": "lg2.approx.ftz: abs 2^-22 in (0.5, 2), rel 2^-22 elsewhere",
    "log10": "lg2.approx.ftz: abs 2^-22 in (0.5, 2), rel 2^-22 elsewhere; times log10(2)",
    "sin": "sin.approx.ftz: abs 2^-20.5 in [-2pi, 2pi] (2^-14.7 to 100pi); ulp error is "
           "unbounded near zeros",
    "cos": "cos.approx.ftz: abs 2^-20.5 in [-2pi, 2pi] (2^-14.7 to 100pi); ulp error is "
           "unbounded near zeros",
    "tan": "sin/cos.approx (abs 2^-20.5) and div.approx (2 ulp)",
    "tanh": "tanh.approx: rel 2^-11 (~2^12 ulp)",
    "sinh": "|x| >= 1: ex2.approx (2 ulp) + rcp.approx (1 ulp); |x| < 1 the accurate polynomial",
    "cosh": "ex2.approx (2 ulp) + rcp.approx (1 ulp)",
    "pow": "ex2.approx(y * lg2.approx(x)): lg2's 2^-22 times |y log2 x|; x < 0 gives NaN",
    "sigmoid": "ex2.approx (2 ulp) + rcp.approx (1 ulp)",
    "rsqrt": "rsqrt.approx.ftz: rel 2^-22.9",
    "rcp": "rcp.approx.ftz: 1 ulp",
}


# ------------------------------------------------------------------------------------ inputs
def _logu(rng, n, lo, hi, signed=False):
    """n magnitudes log-uniform in [lo, hi] (random signs if signed)."""
    v = np.exp2(rng.uniform(math.log2(lo), math.log2(hi), n))
    if signed:
        v *= rng.choice([-1.0, 1.0], n)
    return v


def _unif(rng, n, lo, hi):
    return rng.uniform(lo, hi, n)


def domain(name: str, dtype: str, fast: bool, n: int, rng):
    """(inputs tuple of float arrays of ``dtype``, description of the range)."""
    f64 = dtype == "f64"
    tiny = 2.0 ** (-1074 if f64 else -149)
    big = F64_MAX if f64 else F32_MAX
    if fast:                         # ftz: subnormal inputs and results are flushed
        tiny = 2.0 ** (-1022 if f64 else -126)
    q = n // 4
    exp_hi = 709.7 if f64 else 88.7
    exp_lo = -745.1 if f64 else -103.9
    if fast:
        exp_lo = -708.3 if f64 else -87.3
    trig = 2.0 ** (48 if f64 else 20)
    if fast:
        trig = 100 * math.pi
    parts, desc = [], ""
    if name in ("exp", "sigmoid"):
        lo = exp_lo if name == "exp" else -exp_hi
        hi = exp_hi if name == "exp" else 50.0
        if fast and name == "sigmoid":
            lo = -exp_hi + 1.5
        parts = [_unif(rng, n - q, lo, hi), _logu(rng, q, tiny, 1.0, True)]
        desc = f"[{lo:g}, {hi:g}] uniform + |x| in [{tiny:.3g}, 1] log-uniform"
    elif name == "exp2":
        lo, hi = (-1074.0 if f64 else -149.0), (1023.99 if f64 else 127.99)
        if fast:
            lo = -1022.0 if f64 else -126.0
        parts = [_unif(rng, n - q, lo, hi), _logu(rng, q, tiny, 1.0, True)]
        desc = f"[{lo:g}, {hi:g}] uniform + |x| in [{tiny:.3g}, 1] log-uniform"
    elif name == "expm1":
        parts = [_unif(rng, n - q, -40.0, exp_hi), _logu(rng, q, tiny, 1.0, True)]
        desc = f"[-40, {exp_hi:g}] uniform + |x| in [{tiny:.3g}, 1] log-uniform"
    elif name in ("log", "log2", "log10"):
        parts = [_logu(rng, n - q, tiny, big), _unif(rng, q, 0.5, 2.0)]
        desc = f"[{tiny:.3g}, max] log-uniform + [0.5, 2] uniform"
    elif name == "log1p":
        parts = [_logu(rng, n // 2, tiny, big), -_logu(rng, n // 4, tiny, 1.0),
                 _unif(rng, n - n // 2 - n // 4, -1.0, 1.0)]
        desc = f"[{tiny:.3g}, max] and [-1, -{tiny:.3g}] log-uniform, [-1, 1] uniform"
    elif name in ("sin", "cos", "tan"):
        k = rng.integers(-int(trig / 1.6), int(trig / 1.6), q).astype(np.float64)
        near = k * (math.pi / 2) * (1 + rng.uniform(-1e-7, 1e-7, q))   # near multiples of pi/2
        parts = [_logu(rng, n // 2, tiny, trig, True), _unif(rng, n - n // 2 - q, -7.0, 7.0), near]
        desc = (f"|x| in [{tiny:.3g}, {trig:.4g}] log-uniform + [-7, 7] uniform + near "
                f"multiples of pi/2")
    elif name == "tanh":
        parts = [_logu(rng, n // 2, tiny, 25.0, True), _unif(rng, n - n // 2, -10.0, 10.0)]
        desc = f"|x| in [{tiny:.3g}, 25] log-uniform + [-10, 10] uniform"
    elif name in ("sinh", "cosh"):
        hi = 710.5 if f64 else 89.4
        if fast:
            hi = 708.0 if f64 else 88.0
        parts = [_unif(rng, n - q, -hi, hi), _logu(rng, q, tiny, 2.0, True)]
        desc = f"[-{hi:g}, {hi:g}] uniform + |x| in [{tiny:.3g}, 2] log-uniform"
    elif name == "arctan":
        parts = [_logu(rng, n // 2, tiny, big, True), _unif(rng, n - n // 2, -4.0, 4.0)]
        desc = f"|x| in [{tiny:.3g}, max] log-uniform + [-4, 4] uniform"
    elif name == "cbrt":
        parts = [_logu(rng, n, tiny, big, True)]
        desc = f"|x| in [{tiny:.3g}, max] log-uniform"
    elif name == "rsqrt":
        parts = [_logu(rng, n, tiny, big)]
        desc = f"[{tiny:.3g}, max] log-uniform"
    elif name == "rcp":
        lo = 2.0 ** (-1021 if f64 else -125) if fast else tiny
        hi = 2.0 ** (1021 if f64 else 125) if fast else big
        parts = [_logu(rng, n, lo, hi, True)]
        desc = f"|x| in [{lo:.3g}, {hi:.3g}] log-uniform"
    elif name in ("hypot", "arctan2"):
        a = _logu(rng, n, tiny, big, True)
        b1 = _logu(rng, n // 2, tiny, big, True)
        with np.errstate(over="ignore"):
            b2 = np.clip(a[n // 2:] * _logu(rng, n - n // 2, 2.0 ** -30, 2.0 ** 30, True),
                         -big, big)
        return (a, np.concatenate([b1, b2])), (f"x, y in [{tiny:.3g}, max] log-uniform, half "
                                               f"with |y/x| in [2^-30, 2^30]")
    elif name == "pow":
        lim = 1070.0 if f64 else 148.0
        if fast:
            lim = 1000.0 if f64 else 100.0
        x = _logu(rng, n, tiny, big)
        l2 = np.abs(np.log2(x))
        y = rng.uniform(-1, 1, n) * np.minimum(lim / np.maximum(l2, 1e-30), 1e6)
        if not fast:                                     # negative bases with integer exponents
            y = np.where(rng.random(n) < 0.1, np.round(y), y)
            m = rng.random(n) < 0.2
            y = np.where(m, np.round(y), y)
            x = np.where(m, -x, x)
        neg = "" if fast else " (20% negated, with integer y)"
        return (x, y), (f"x in [{tiny:.3g}, max] log-uniform{neg}, "
                        f"y uniform with |y log2 x| <= {lim:g}")
    else:
        raise KeyError(name)
    return (np.concatenate(parts),), desc


def reference(name: str, args, dtype: str):
    wide = np.longdouble if dtype == "f64" else np.float64
    ref = M.FUNCTIONS[name][2]
    with np.errstate(all="ignore"):
        return ref(*(np.asarray(a, wide) for a in args))


def instr_count(name: str, dtype: str, mode: str) -> tuple[int, int, int]:
    """(builder instr calls, distinct after hash-consing, bit casts among the distinct)."""
    arity = M.FUNCTIONS[name][1]
    c = M.InstrCounter()
    M.implementation(name, dtype, mode)(c, *(c.input(dtype) for _ in range(arity)))
    bitcasts = sum(1 for key in c._seen if key[0].startswith("bitcast."))
    return c.calls, c.unique, bitcasts


def measure(name: str, dtype: str, mode: str, n: int, seed: int = 1, chunk: int = 1 << 17):
    fast = mode == "fast"
    rng = np.random.default_rng([seed, zlib.crc32(name.encode()), dtype == "f64", fast])
    args, desc = domain(name, dtype, fast, n, rng)
    if mode == "cuda" and name == "sigmoid":     # 1/(1+expf(-x)) is 0 below -88.72, as CUDA's
        keep = args[0] >= -88.7
        args, desc = (args[0][keep],), desc + " (x >= -88.7)"
    dt = np.float32 if dtype == "f32" else np.float64
    args = tuple(np.asarray(a, dt) for a in args)
    worst, where, worst_cr = 0.0, None, 0.0
    fn = M.implementation(name, dtype, mode)
    for i in range(0, len(args[0]), chunk):
        part = tuple(a[i:i + chunk] for a in args)
        with np.errstate(all="ignore"):
            got = fn(M.EagerBuilder(), *part)
        ref = reference(name, part, dtype)
        err = M.ulp_error(got, ref, dtype)
        with np.errstate(all="ignore"):         # CUDA's measure: from the rounded result
            cr = M.ulp_steps(got, np.asarray(ref).astype(dt), dtype)
        worst_cr = max(worst_cr, float(cr.max()))
        j = int(np.argmax(err))
        if err[j] > worst or where is None:
            worst, where = float(err[j]), tuple(float(a[j]) for a in part)
    return worst, where, desc, len(args[0]), worst_cr


# ------------------------------------------------------------------------------------ report
def _fmt_where(where) -> str:
    return ", ".join(f"{v:.9g}" for v in where)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-n", type=int, default=1_000_000, help="inputs per row (default 10^6)")
    ap.add_argument("--n64", type=int, default=None, help="inputs per f64 row (default: n)")
    ap.add_argument("--only", default="", help="comma-separated function names")
    ap.add_argument("--dtype", default="f32,f64")
    ap.add_argument("--mode", default="cuda,accurate,fast")
    ap.add_argument("--no-write", action="store_true", help="print only; keep the doc")
    a = ap.parse_args(argv)
    names = [s for s in a.only.split(",") if s] or list(M.FUNCTIONS)
    rows = []
    t0 = time.time()
    for name in names:
        for dtype in a.dtype.split(","):
            for mode in a.mode.split(","):
                if mode == "fast" and (dtype == "f64" or name not in M.FAST_FORMS):
                    continue           # no fast form: an error (f64) or the cuda form (f32)
                if mode == "cuda" and (name, dtype) not in M.CUDA_FORMS:
                    continue           # same sequence as accurate mode
                n = a.n64 if (dtype == "f64" and a.n64) else a.n
                t = time.time()
                worst, where, desc, count, cr = measure(name, dtype, mode, n)
                counts = instr_count(name, dtype, mode)
                rows.append((name, dtype, mode, worst, where, desc, count, counts, cr))
                print(f"{name:8s} {dtype} {mode:8s} max {worst:10.3f} ulp at "
                      f"({_fmt_where(where)})  {counts[0]}/{counts[1]}/{counts[2]} instr  "
                      f"[{time.time() - t:.1f}s]", flush=True)
    print(f"total {time.time() - t0:.0f}s")
    if not a.no_write:
        write_doc(rows)
    return 0


def write_doc(rows) -> None:
    acc_fallback = sorted(set(M.FUNCTIONS) - M.FAST_FORMS)
    no_cuda = sorted(n for n in M.FUNCTIONS if (n, "f32") not in M.CUDA_FORMS)
    lines = [
        "# DSL math library: accuracy",
        "",
        "Generated by `python benchmarks/accuracy_dsl.py` "
        f"({datetime.date.today().isoformat()}) from `numptx/dsl/mathlib/`.",
        "",
        "Max error in ulp of the result type over random inputs (the count and ranges are in the "
        "table), measured on the eager evaluation, which is the emulation of the stub bit for bit. "
        "References: float64 NumPy for f32, x87 long double NumPy (64-bit significand) for f64; "
        "the error is taken against the unrounded reference, so a correctly rounded result "
        "scores at most 0.5 ulp, and subnormal results are measured in subnormal ulps "
        "(2^-149 / 2^-1074). Special values (0, inf, NaN, negative arguments of log, ...) are "
        "checked separately in tests/test_mathlib.py to equal NumPy's float32/float64 results "
        "exactly.",
        "",
        "* accurate: only exact table rows (`.rn` arithmetic, `fma.rn`, `div.rn`, `rcp.rn`, "
        "`sqrt.rn`, integer/bit ops, bit casts, `cvt`, `setp`/`selp`), so the GPU computes "
        "exactly the emulated value and the error below is the GPU error.",
        "* cuda (the default, f32): CUDA's own algorithms (what NVRTC emits for `expf`, `logf`, "
        "...) as table rows; branches become `selp`. Approximate rows (`ex2.approx`, "
        "`rcp.approx`, ...) are emulated correctly rounded, so a GPU may differ by their "
        "documented bound; the other forms use exact rows only and the GPU computes the "
        "emulated value. Column `vs rounded` counts ulps from the correctly rounded result, as "
        "CUDA's documentation does; `CUDA bound` is that documented maximum. f64 (and "
        + (", ".join(no_cuda) if no_cuda else "no function") + " in f32) run the accurate "
        "sequence in cuda mode (no separate row).",
        "* fast (f32 only): the raw `.approx` forms. The emulator evaluates approximate "
        "instructions correctly rounded, so the number is the error of the algorithm around "
        "them; a GPU may add the documented bound of the instruction (note column). `.ftz` "
        "flushes subnormal inputs/results, so fast rows are measured on normal values. f64 "
        "fast mode, and " + ", ".join(acc_fallback) + " in f32 fast mode, run the accurate "
        "sequence (no separate row).",
        "* instructions: `calls / unique / bit casts` for one evaluation: builder `instr` calls, "
        "the distinct ones after the graph's hash-consing (what the stub holds; constants are "
        "immediates), and how many of those are bit casts (`mov.b32/b64` register "
        "reinterpretations that ptxas removes). `div.rn`, `rcp.rn` and `sqrt.rn` count one "
        "each but expand to short instruction sequences in SASS.",
        "",
        "| function | dtype | mode | max ulp error | vs rounded | CUDA bound | at input | "
        "inputs tested | instructions | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, dtype, mode, worst, where, desc, count, (calls, unique, bitcasts), cr in rows:
        note = FAST_NOTE.get(name, "") if mode == "fast" else \
            CUDA_NOTE.get(name, "") if mode == "cuda" else NOTES.get(name, "")
        bound = (M.CUDA_ULP if dtype == "f32" else M.CUDA_ULP_F64).get(name, "") \
            if mode == "cuda" else ""
        lines.append(f"| {name} | {dtype} | {mode} | {worst:.3f} | {cr:.0f} | {bound} | "
                     f"{_fmt_where(where)} | {count:,} in {desc} | {calls} / {unique} / "
                     f"{bitcasts} | {note} |")
    lines += ["", LIMITS]
    with open(DOC, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {os.path.relpath(DOC)}")


CUDA_NOTE = {
    "exp": "ex2.approx.ftz (2 ulp on a GPU) of the reduced argument, times 2^k",
    "exp2": "ex2.approx (2 ulp on a GPU)",
    "sinh": "|x| >= 1: ex2.approx + div.approx; below, a polynomial (exact rows)",
    "cosh": "ex2.approx + div.approx",
    "tanh": "|x| >= 0.6: ex2.approx + rcp.approx; below, a polynomial (exact rows)",
    "sigmoid": "1 / (1 + expf(-x)) as CUDA C++: expf's ex2.approx, IEEE division; 0 below "
               "-88.72 (not measured there)",
}

NOTES = {
    "exp": "max at subnormal results (p rounded, then scaled: two roundings); normal results "
           "<= 0.51",
    "exp2": "max at subnormal results (two roundings); normal results <= 0.51",
    "expm1": "2^k (1 + r + tail) - 1 summed with Fast2Sum",
    "log": "f32: polynomial in f = m - 1; f64: in s = f / (2 + f) (one div.rn)",
    "log2": "as log, then times log2(e) in two parts",
    "log10": "as log, then times log10(e) and e log10(2) in two parts",
    "log1p": "1 + x split as 2^e m, the rounding error of 1 + x added back",
    "tanh": "odd polynomial below 0.55 (f32) / 0.3 (f64), else t / (t + 2), t = expm1(2|x|), "
            "with a remainder correction",
    "sinh": "odd polynomial below 1, else h - 1/(4h), h = e^|x|/2 as a double word",
    "cosh": "h + 1/(4h), h = e^|x|/2 as a double word",
    "arctan": "one div.rn; polynomial on [-1, 1]",
    "hypot": "power-of-two scaling, sqrt.rn(fma(a, a, b*b))",
    "cbrt": "exponent / 3 via mul.hi, Newton on m^(-1/3), one exact-residual correction",
    "pow": "log2 in double-word arithmetic, exp2 of a double-word exponent; C99 special cases",
    "sin": "3-part Cody-Waite by pi/2; documented range (see below)",
    "cos": "3-part Cody-Waite by pi/2; documented range (see below)",
    "tan": "sin/cos polynomials, one div.rn; documented range (see below)",
    "rsqrt": "div.rn(1, sqrt.rn(x)): two roundings",
    "rcp": "rcp.rn: correctly rounded",
    "arctan2": "arctan2(b, y, x) as np.arctan2; C99 zeros/infinities; one rcp.rn",
    "sigmoid": "e^-|x| / (1 + e^-|x|) for x < 0: no overflow, subnormal results kept",
}

LIMITS = """## Ranges and limits

* sin, cos, tan reduce by pi/2 with a three-part Cody-Waite constant (exact first step, the
  second split exactly and added with 2Sum): the accuracy above holds for |x| < 2^20 (f32,
  about 10^6) and |x| < 2^48 (f64, about 2.8e14). Beyond, k = rint(x 2/pi) is misrounded by
  more than the polynomials' margin (|r| <= 0.9) and there is no Payne-Hanek reduction: the
  result is meaningless but finite (sin and cos stay in [-1, 1]). sin/cos/tan of +-inf or NaN
  is NaN.
* pow follows C99 Annex F (as np.power): x^0 = 1 and 1^y = 1 even for NaN, (-1)^+-inf = 1,
  negative finite x with non-integer y gives NaN, signed zeros and infinities by the parity of
  y. |y log2 x| beyond ~150 (f32) / ~1075 (f64) gives inf or 0.
* Subnormal results (exp, exp2, pow, sigmoid, arctan2 of tiny ratios, ...) are rounded twice
  (the core value, then the scaling into the subnormal range): up to ~1 subnormal ulp.
* rsqrt is `div.rn(1, sqrt.rn(x))` as specified: two roundings, up to ~1.5 ulp.
* arctan2(b, y, x) takes its arguments in np.arctan2's order.
* Fast forms: `.ftz` flushes subnormals (exp of large negative x, log of subnormal x, ...
  give 0 / -inf); sin/cos.approx lose accuracy beyond |x| ~ 100 pi; tanh.approx has ~11 bits;
  fast pow is `ex2(y * lg2(x))` with no special-case handling (like CUDA's `__powf`), and its
  error grows with |y log2 x|; the `x * log2(e)` product in fast exp/sinh/cosh/sigmoid adds
  about |x log2 e| * 2^-24 absolute error before ex2 (the ~64 ulp measured near |x| = 88).
* No GPU was available for this measurement: accurate-mode numbers rest on the table
  semantics being bit-exact (tests/test_mathlib.py checks eager == emulated stub); fast-mode
  numbers exclude the hardware approximation error.
"""


if __name__ == "__main__":
    sys.exit(main())
