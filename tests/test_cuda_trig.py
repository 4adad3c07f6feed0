"""The CUDA-speed trigonometric and power forms (numptx/dsl/mathlib/cuda_trig.py): error against
float64 within CUDA's documented bounds, also with every approximate row pushed to its PTX
bound; C99 special values; the full-range reduction at its hardest arguments; the fast-path
forms; row counts. No GPU: the forms run in the EagerBuilder (the emulator's semantics)."""
from __future__ import annotations

import math
import zlib
from fractions import Fraction

import numpy as np
import pytest

from numptx.dsl.mathlib import EagerBuilder, InstrCounter, ulp_error
from numptx.dsl.mathlib import cuda_trig as T
from numptx.dsl.mathlib.core import PI
from numptx.dsl.mathlib.cuda_forms import CUDA_FORMS
from numptx.instructions import TABLE

F32 = np.float32
INF, NAN = math.inf, math.nan
RNG = np.random.default_rng(20240611)

# CUDA C++ Programming Guide, "Mathematical Functions", single precision: maximum error in ulps
# between the CUDA result and the correctly rounded one
BOUND = {"sin": 2, "cos": 2, "tan": 4, "arctan": 2, "arctan2": 3, "pow": 4, "rsqrt": 2,
         "cbrt": 1, "hypot": 3}
# what the emulator measures on the samples below (ulp_error against float64, approximate
# rows correctly rounded): a regression guard, not a promise
MEASURED = {"sin": 1.5, "cos": 1.5, "tan": 3.0, "arctan": 1.3, "arctan2": 1.8, "pow": 1.9,
            "rsqrt": 0.5, "cbrt": 1.0, "hypot": 0.95}
REF = {"sin": np.sin, "cos": np.cos, "tan": np.tan, "arctan": np.arctan,
       "arctan2": np.arctan2, "pow": np.power, "rsqrt": lambda x: 1 / np.sqrt(x),
       "cbrt": np.cbrt, "hypot": np.hypot}
FORM = {"sin": T.sin, "cos": T.cos, "tan": T.tan, "arctan": T.arctan, "arctan2": T.arctan2,
        "pow": T.pow, "rsqrt": T.rsqrt, "cbrt": T.cbrt, "hypot": T.hypot}


def run(fn, *xs, b=None):
    with np.errstate(all="ignore"):
        return np.asarray(fn(b or EagerBuilder(), *[np.asarray(x, F32) for x in xs],
                             dtype="f32"))


def ref(name, *xs):
    with np.errstate(all="ignore"):
        return REF[name](*[np.asarray(x, F32).astype(np.float64) for x in xs])


def _ordered(v):
    """f32 -> integers in the order of the values (adjacent floats differ by 1)."""
    i = np.asarray(v, F32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def cr_distance(y, r64):
    """CUDA's measure: ulps between y and the correctly rounded f32 of the float64 reference
    (0 for NaN against NaN; inf if only one is NaN)."""
    with np.errstate(all="ignore"):
        cr = np.asarray(r64, np.float64).astype(F32)
    y = np.asarray(y, F32)
    d = np.abs(_ordered(y) - _ordered(cr)).astype(np.float64)
    ny, nr = np.isnan(y), np.isnan(cr)
    return np.where(ny | nr, np.where(ny & nr, 0.0, np.inf), d)


def log_uniform(n, lo, hi, signed=True, rng=RNG):
    v = 2.0 ** rng.uniform(lo, hi, n)
    return v * rng.choice([-1.0, 1.0], n) if signed else v


def near_pio2_multiples(n, kmax, rng):
    k = rng.integers(1, kmax, n)
    x = (k * (math.pi / 2)).astype(F32)
    steps = rng.integers(-3, 4, n).astype(np.int32)
    return (x.view(np.int32) + steps).view(F32)


# the hardest f32 arguments of the reduction: closest to a multiple of pi/2 (2^-29.86
# quadrants for 16367173 * 2^72), found by scanning every f32 >= 2^16
HARD = [m * 2.0 ** e for m, e in ((0xF9BE45, 72), (0xF9BE45, 73), (0xF9BE45, 74),
                                    (0xA3E87F, 11), (0xA3E87F, 12), (0x9976F1, 62))]
EDGES = [0.0, 2.0 ** -149, 2.0 ** -126, 0.5, 1.0, math.pi / 4, math.pi / 2, 65535.996, 65536.0,
         105614.99, 105615.0, 2.0 ** 24, 2.0 ** 64, 2.0 ** 127, 3.4028235e38]


def unary_samples(name, rng):
    def lu(n, lo, hi, signed=True):
        return log_uniform(n, lo, hi, signed, rng)
    if name in ("sin", "cos", "tan"):
        xs = [rng.uniform(-8, 8, 60000), lu(60000, -149, 128),
              near_pio2_multiples(30000, 70000, rng), HARD, EDGES]
    elif name == "arctan":
        xs = [rng.uniform(-4, 4, 60000), lu(60000, -149, 128), rng.uniform(0.99, 1.01, 10000),
              EDGES]
    elif name == "rsqrt":
        return np.abs(np.concatenate([lu(100000, -149, 128), EDGES])).astype(F32)
    else:                                            # cbrt
        xs = [rng.uniform(-10, 10, 40000), lu(100000, -149, 128), EDGES]
    x = np.concatenate([np.asarray(v, np.float64) for v in xs])
    return np.concatenate([x, -x]).astype(F32)


def binary_samples(name, rng):
    def lu(n, lo, hi, signed=True):
        return log_uniform(n, lo, hi, signed, rng)
    if name == "pow":
        x = np.concatenate([lu(50000, -149, 128, False), rng.uniform(0.5, 2, 30000),
                            -lu(20000, -20, 20, False)])
        y = np.concatenate([rng.uniform(-1, 1, 50000) * 2.0 ** rng.uniform(-20, 6, 50000),
                            rng.uniform(-300, 300, 30000),
                            rng.integers(-40, 40, 20000).astype(np.float64)])
        # results near the overflow and underflow thresholds
        xb = lu(20000, -8, 8, False)
        yb = rng.choice([128.0, -126.0, -149.0, -150.0], 20000) / np.log2(xb)
        yb *= 1 + rng.uniform(-2e-3, 2e-3, 20000)
        return (np.concatenate([x, xb]).astype(F32), np.concatenate([y, yb]).astype(F32))
    a = np.concatenate([lu(80000, -149, 128), rng.uniform(-8, 8, 20000)])
    b = np.concatenate([lu(80000, -149, 128), rng.uniform(-8, 8, 20000)])
    eq = lu(5000, -149, 128)
    a, b = np.concatenate([a, eq]), np.concatenate([b, -eq])
    return a.astype(F32), b.astype(F32)


def samples(name):
    """Dense samples of the function's domain (the same ones in every test and run)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if name in ("pow", "arctan2", "hypot"):
        return binary_samples(name, rng)
    return (unary_samples(name, rng),)


@pytest.mark.parametrize("name", list(BOUND))
def test_within_cuda_documented_bound(name):
    xs = samples(name)
    y, r = run(FORM[name], *xs), ref(name, *xs)
    d = cr_distance(y, r)
    worst = int(np.argmax(d))
    assert d[worst] <= BOUND[name], (name, [float(x[worst]) for x in xs], y[worst], r[worst])
    assert ulp_error(y, r, "f32").max() <= MEASURED[name]


class PushedBuilder(EagerBuilder):
    """The EagerBuilder with every approximate row's result moved by its documented PTX bound
    (``sign`` +1 or -1): a GPU can be that far from the emulator."""

    def __init__(self, sign):
        self.sign = sign

    def instr(self, name, *args):
        out = super().instr(name, *args)
        acc = TABLE[name].accuracy
        if acc == "exact" or out.dtype != F32:
            return out
        y = out.astype(np.float64)
        with np.errstate(all="ignore"):
            if acc[0] == "ulp":
                _, e = np.frexp(y)
                step = acc[1] * np.ldexp(1.0, np.maximum(e - 1, -126) - 23)
            elif acc[0] == "rel":
                step = acc[1] * np.abs(y)
            elif acc[0] == "abs":
                step = np.full_like(y, acc[1])
            else:                                    # abs_or_rel: the larger
                step = np.maximum(acc[1], acc[2] * np.abs(y))
            moved = (y + self.sign * step).astype(F32)
        return np.where(np.isfinite(y) & (y != 0), moved, out)


# sin, cos, arctan2 and hypot use exact rows only
@pytest.mark.parametrize("name", ["tan", "arctan", "pow", "cbrt", "rsqrt"])
@pytest.mark.parametrize("sign", [1, -1])
def test_within_bound_with_approximate_rows_at_their_ptx_bound(name, sign):
    xs = samples(name)
    y = run(FORM[name], *xs, b=PushedBuilder(sign))
    assert cr_distance(y, ref(name, *xs)).max() <= BOUND[name]


def same(got, want):
    got, want = np.asarray(got, F32), np.asarray(want, np.float64).astype(F32)
    ok = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    return bool(ok.all()), got, want


SPECIAL = [0.0, -0.0, INF, -INF, NAN, 2.0 ** -149, -2.0 ** -149, 1.0, -1.0]


@pytest.mark.parametrize("name", ["sin", "cos", "tan", "arctan", "cbrt", "rsqrt"])
def test_unary_special_values(name):
    x = np.array(SPECIAL, F32)
    y, r = run(FORM[name], x), ref(name, x)
    exact = ~np.isfinite(r) | (r == 0)
    if name in ("sin", "cos", "tan", "arctan"):          # x (or 1) for tiny x
        exact |= np.abs(x) <= 2.0 ** -126
    ok, got, want = same(y[exact], r[exact])
    assert ok, (x[exact], got, want)
    assert cr_distance(y, r).max() <= BOUND[name]


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_full_range(name):
    """Beyond CUDA's fast path: every binade up to FLT_MAX (the hardest arguments in HARD are in
    the bound test); below 2^16 the form is CUDA's fast path bit for bit."""
    rng = np.random.default_rng(7)
    e = np.repeat(np.arange(16, 128), 400)
    x = np.ldexp(rng.uniform(1, 2, e.size), e).astype(F32)
    x = np.concatenate([x, -x, np.float32([3.4028235e38, -3.4028235e38])])
    assert cr_distance(run(FORM[name], x), ref(name, x)).max() <= BOUND[name]
    fast = getattr(T, f"{name}_fast_path")
    s = np.concatenate([rng.uniform(-65536, 65536, 50000), log_uniform(20000, -149, 16, rng=rng),
                        [0.0, -0.0, 65535.996, -65535.996]]).astype(F32)
    assert (run(FORM[name], s).view(np.uint32) == run(fast, s).view(np.uint32)).all()


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_fast_path_forms_are_nan_beyond_their_limit(name):
    fast = getattr(T, f"{name}_fast_path")
    lim = F32(T.FAST_PATH_LIMIT)
    below = np.nextafter(lim, F32(0))
    x = np.array([below, -below, lim, -lim, 1e6, 3.4e38, INF, -INF, NAN], F32)
    y = run(fast, x)
    assert np.isfinite(y[:2]).all() and np.isnan(y[2:]).all()
    assert cr_distance(y[:2], ref(name, x[:2])).max() <= BOUND[name]


def check_pairs(name, pairs):
    a = np.array([p[0] for p in pairs], F32)
    b = np.array([p[1] for p in pairs], F32)
    y, r = run(FORM[name], a, b), ref(name, a, b)
    special = ~np.isfinite(r) | (r == 0) | (r == 1)
    ok, got, want = same(y[special], r[special])
    assert ok, [(p, g, w) for p, g, w in zip(np.array(pairs)[special], got, want)]
    assert cr_distance(y, r).max() <= BOUND[name]


def test_pow_c99_special_cases():
    check_pairs("pow", [
        (-8.0, 1 / 3), (-8.0, 3.0), (-8.0, -3.0), (-2.0, 0.5), (-2.0, 2.0), (2.0, 0.5),
        (NAN, 0.0), (NAN, -0.0), (INF, 0.0), (0.0, 0.0), (1.0, NAN), (1.0, INF), (1.0, -INF),
        (-1.0, INF), (-1.0, -INF), (-1.0, 3.0), (-1.0, 2.0), (-1.0, 0.5),
        (0.0, -1.0), (-0.0, -1.0), (0.0, -2.0), (-0.0, -2.0), (-0.0, -INF), (0.0, -0.5),
        (0.0, 3.0), (-0.0, 3.0), (-0.0, 2.0), (-0.0, 0.5), (0.0, INF),
        (-INF, 3.0), (-INF, -3.0), (-INF, 2.0), (-INF, -2.0), (-INF, 0.5), (-INF, -0.5),
        (INF, -1.0), (INF, 0.5), (INF, -INF), (INF, INF),
        (0.5, INF), (0.5, -INF), (2.0, INF), (2.0, -INF), (-0.5, INF), (-2.0, -INF),
        (NAN, 1.0), (2.0, NAN), (-1.0, NAN), (NAN, NAN),
        (2.0, 127.99), (2.0, 128.0), (2.0, -126.0), (2.0, -149.0), (2.0, -150.0),
        (2.0, -149.5), (-2.0, 127.0), (-2.0, 129.0), (-2.0, -149.0), (10.0, 38.5),
        (3.4028235e38, 1.0), (3.4028235e38, -1.0), (2.0 ** -149, 1.0), (2.0 ** -149, 0.5),
        (2.0 ** -149, -0.25), (0.999999, 1e8), (1.000001, -1e8), (7.0, 2.0), (-3.0, 5.0)])


def test_arctan2_c99_special_cases():
    check_pairs("arctan2", [(y, x) for y in (0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 2.0 ** -149)
                            for x in (0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 2.0 ** -149)])


def test_hypot_special_cases():
    check_pairs("hypot", [(INF, NAN), (NAN, -INF), (NAN, 1.0), (1.0, NAN), (0.0, 0.0),
                          (-0.0, -0.0), (3.0, 4.0), (-3.0, 4.0), (3.4e38, 3.4e38),
                          (2.0 ** -149, 2.0 ** -149), (1e-30, 1e30), (0.0, -5.0), (INF, 0.0)])


def test_two_over_pi_words():
    """The table against 2/pi from an independent source (core.PI: Decimal arithmetic)."""
    t = Fraction(2) / PI
    for j, w in enumerate(T._W):
        assert w == math.floor(t * 2 ** (32 * j + 23)) % 2 ** 32, j


def test_funnel_shift_row():
    row = TABLE["shf.l.wrap.b32"]
    assert row.render("%d", "%a", "%b", "%c") == "shf.l.wrap.b32 %d, %a, %b, %c;"
    a = RNG.integers(0, 2 ** 32, 2000, dtype=np.uint64).astype(np.uint32)
    b = RNG.integers(0, 2 ** 32, 2000, dtype=np.uint64).astype(np.uint32)
    c = RNG.integers(0, 80, 2000).astype(np.uint32)
    got = row.apply(a, b, c)
    want = [((int(hi) << 32 | int(lo)) << (int(n) % 32) >> 32) & 0xFFFFFFFF
            for lo, hi, n in zip(a, b, c)]
    assert got.dtype == np.uint32 and got.tolist() == want


# table rows, bit casts left out (free in SASS); the counts the module docstring reports in
# SASS follow these (growth shows here first)
ROWS = {"sin": 68, "cos": 68, "tan": 70, "sin_fast_path": 26, "cos_fast_path": 27,
        "tan_fast_path": 26, "arctan": 20, "arctan2": 33, "pow": 99, "rsqrt": 1, "cbrt": 16,
        "hypot": 17}


@pytest.mark.parametrize("name", list(ROWS))
def test_row_counts_and_registry(name):
    fn = getattr(T, name)
    c = InstrCounter()
    fn(c, *[c.input("f32") for _ in range(2 if name in ("pow", "arctan2", "hypot") else 1)],
       dtype="f32")
    rows = [k[0] for k in c._seen if "bitcast" not in TABLE[k[0]].flags]
    assert len(rows) <= ROWS[name]
    assert c.const_only == 0
    if name in BOUND:
        assert CUDA_FORMS[(name, "f32")] is fn
