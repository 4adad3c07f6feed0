"""A corpus of @ptx_expr formulas (physics, distances, activations, polynomials, integer hashes,
predicates and where): each is traced, lowered by both backends, bound to its own site of ONE
CUDA template (macro form, variables typed from the formula), emulated against the NumPy
reference on random inputs (hypothesis) and the whole template is assembled once with
nvJitLink for sm_90."""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numptx as nx
from numptx import semantics as S

N = 16                              # values per hypothesis example
G, C_LIGHT, K_E, R_GAS = 6.674e-11, 299792458.0, 8.9875e9, 8.314


@dataclass
class Case:
    fn: Callable
    ranges: dict = field(default_factory=dict)   # parameter -> (lo, hi) for floats / ints
    rtol: float = 0.0                            # 0: bit-exact (NaN == NaN); else isclose
    atol: float = 0.0
    fastmath: bool = False

    @property
    def name(self) -> str:
        return self.fn.__name__


CASES: list[Case] = []


def case(**kw):
    def deco(fn):
        CASES.append(Case(fn, **kw))
        return fn
    return deco


F32_APPROX = dict(rtol=2e-6, atol=1e-30)
F64_APPROX = dict(rtol=1e-14, atol=1e-300)

# ---------------------------------------------------------------------------------- physics


@case(ranges={"m": (0, 100), "v": (-50, 50)})
def kinetic_energy(m: nx.f32, v: nx.f32) -> nx.f32:
    return 0.5 * m * v * v


@case(ranges={"m1": (1, 1e3), "m2": (1, 1e3), "r": (0.1, 100)})
def gravity(m1: nx.f64, m2: nx.f64, r: nx.f64) -> nx.f64:
    return G * m1 * m2 / (r * r)


@case()
def spring_damper(x: nx.f32, v: nx.f32, k: nx.f32 = 4.0, c: nx.f32 = 0.25):
    return -k * x - c * v


@case(ranges={"t": (0, 10), "theta": (0, 1.5)}, rtol=2e-6, atol=5e-3)   # cancellation
def projectile_height(v: nx.f32, t: nx.f32, theta: nx.f32):
    return v * t * nx.sin(theta) - 0.5 * 9.81 * t * t


@case(ranges={"v": (-2.9e8, 2.9e8)})
def lorentz_gamma(v: nx.f64) -> nx.f64:
    beta = v / C_LIGHT
    return 1.0 / nx.sqrt(1.0 - beta * beta)


@case(ranges={"length": (0.01, 100)})
def pendulum_period(length: nx.f32):
    return 2.0 * math.pi * nx.sqrt(length / 9.81)


@case(ranges={"n": (0, 10), "t": (1, 1000), "v": (0.1, 10)})
def ideal_gas(n: nx.f64, t: nx.f64, v: nx.f64):
    return n * R_GAS * t / v


@case(ranges={"m": (0, 10), "p": (-10, 10)})
def relativistic_energy(m: nx.f64, p: nx.f64):
    e = nx.sqrt(nx.fma(p, p, m * m))
    return {"energy": e, "speed": p / e}


@case(ranges={"t": (0, 20), "b": (0, 2), "w": (0, 10)}, **F32_APPROX)
def damped_oscillator(t: nx.f32, b: nx.f32, w: nx.f32):
    return nx.exp(-b * t) * nx.cos(w * t)


@case(ranges={"q1": (-1e-6, 1e-6), "q2": (-1e-6, 1e-6), "r": (0.01, 10)})
def coulomb(q1: nx.f32, q2: nx.f32, r: nx.f32):
    return K_E * q1 * q2 * nx.rcp(r * r)


@case(ranges={"x": (-10, 10), "v": (-10, 10), "acc": (-1e3, 1e3)})
def verlet_accumulate(x: nx.f32, v: nx.f32, acc: nx.f32):
    dt = 0.01
    x2 = x + v * dt
    return {"acc": acc + x2 * x2, "x_new": x2}

# ---------------------------------------------------------------------------------- distances


@case()
def dist2d(x: nx.f32, y: nx.f32) -> nx.f32:
    return nx.sqrt(x * x + y * y)


@case()
def dist3d_fma(x: nx.f64, y: nx.f64, z: nx.f64):
    return nx.sqrt(nx.fma(x, x, nx.fma(y, y, z * z)))


@case()
def manhattan(x0: nx.f32, y0: nx.f32, x1: nx.f32, y1: nx.f32):
    return abs(x0 - x1) + abs(y0 - y1)


@case()
def chebyshev(x0: nx.f32, y0: nx.f32, x1: nx.f32, y1: nx.f32):
    return nx.maximum(abs(x0 - x1), abs(y0 - y1))


@case(**F32_APPROX)
def hypot_dist(x: nx.f32, y: nx.f32):
    return nx.hypot(x, y)


@case(ranges={"ax": (0.1, 10), "ay": (0.1, 10), "bx": (0.1, 10), "by": (0.1, 10)})
def cosine_similarity(ax: nx.f32, ay: nx.f32, bx: nx.f32, by: nx.f32):
    return (ax * bx + ay * by) * nx.rsqrt((ax * ax + ay * ay) * (bx * bx + by * by))


@case(ranges={"lat1": (-1.5, 1.5), "lat2": (-1.5, 1.5), "dlon": (-3, 3)}, **F64_APPROX)
def haversine(lat1: nx.f64, lat2: nx.f64, dlon: nx.f64):
    s1 = nx.sin((lat2 - lat1) * 0.5)
    s2 = nx.sin(dlon * 0.5)
    return s1 * s1 + nx.cos(lat1) * nx.cos(lat2) * s2 * s2


@case(ranges={"x": (-100, 100), "y": (-100, 100)})
def squared_distance_s32(x: nx.s32, y: nx.s32):
    d = x - y
    return d * d

# ---------------------------------------------------------------------------------- activations


@case()
def relu(x: nx.f32):
    return nx.maximum(x, 0.0)


@case()
def leaky_relu(x: nx.f32):
    return nx.where(x > 0, x, 0.01 * x)


@case(**F32_APPROX)
def sigmoid(x: nx.f32):
    return nx.sigmoid(x)


@case(**F64_APPROX)
def tanh64(x: nx.f64):
    return nx.tanh(x)


@case(ranges={"x": (-8, 8)}, rtol=4e-6, atol=1e-6)
def gelu_tanh(x: nx.f32):
    return 0.5 * x * (1.0 + nx.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


@case(ranges={"x": (-30, 30)}, **F32_APPROX)
def softplus(x: nx.f32):
    return nx.log1p(nx.exp(-abs(x))) + nx.maximum(x, 0.0)


@case(ranges={"x": (-30, 30)}, **F32_APPROX)
def silu(x: nx.f32):
    return x * nx.sigmoid(x)


@case(ranges={"x": (-10, 10)}, **F32_APPROX)
def elu(x: nx.f32):
    return nx.where(x > 0, x, nx.expm1(x))


@case()
def hard_sigmoid(x: nx.f32):
    return nx.clip(x / 6.0 + 0.5, 0.0, 1.0)


@case(ranges={"x": (-20, 20)}, rtol=1e-3, atol=1e-5, fastmath=True)
def fast_swish(x: nx.f32):
    return x / (1.0 + nx.exp(-x))

# ---------------------------------------------------------------------------------- polynomials


@case(ranges={"x": (-2, 2)})
def horner6(x: nx.f32):
    acc = 0.0
    for c in (0.5, -1.25, 2.0, 0.75, -0.3, 0.1, 1.0):
        acc = acc * x + c
    return acc


@case(ranges={"x": (-1, 1)})
def chebyshev_t5(x: nx.f64):
    t0, t1 = 1.0, x
    for _ in range(4):
        t0, t1 = t1, 2.0 * x * t1 - t0
    return t1


@case(ranges={"x": (-4, 4)})
def poly_f16(x: nx.f16):
    return (x * 0.5 + 1.0) * x - 0.25


@case(ranges={"a": (-8, 8), "b": (-8, 8), "c": (-8, 8)})
def fma_bf16(a: nx.bf16, b: nx.bf16, c: nx.bf16):
    return nx.fma(a, b, c), a * b + c


@case(ranges={"x": (-100, 100)})
def int_poly(x: nx.s64):
    return 3 * x ** 3 - 2 * x ** 2 + x - 7


@case(ranges={"t": (0, 1), "a": (-10, 10), "b": (-10, 10)})
def lerp_smoothstep(t: nx.f32, a: nx.f32, b: nx.f32):
    s = nx.clip(t, 0.0, 1.0)
    s = s * s * (3.0 - 2.0 * s)
    return a + (b - a) * s

# ---------------------------------------------------------------------------------- integer hashes


@case()
def murmur_fmix32(h: nx.u32):
    h = h ^ (h >> 16)
    h = h * 0x85EBCA6B
    h = h ^ (h >> 13)
    h = h * 0xC2B2AE35
    return h ^ (h >> 16)


@case()
def xorshift32(x: nx.u32):
    x = x ^ (x << 13)
    x = x ^ (x >> 17)
    return x ^ (x << 5)


@case()
def pcg_output(state: nx.u64):
    new = state * 6364136223846793005 + 1442695040888963407
    xorshifted = nx.u32(((state >> 18) ^ state) >> 27)
    rot = nx.u32(state >> 59)
    return new, (xorshifted >> rot) | (xorshifted << ((32 - rot) & 31))


@case()
def splitmix64(x: nx.u64):
    z = x + 0x9E3779B97F4A7C15
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB
    return z ^ (z >> 31)


@case()
def fnv1a_bytes(x: nx.u32):
    h = nx.u32(2166136261)
    for k in range(4):
        h = (h ^ ((x >> (8 * k)) & 0xFF)) * 16777619
    return h


@case()
def int_divmod(i: nx.s32, j: nx.s32):
    return i // j, i % j, -i // 3, nx.fmod(i, j)


@case()
def bit_fields(x: nx.s32):
    lo = x & 0xFF
    mid = (x >> 8) & 0xFF
    return (lo << 8) | mid, ~x ^ (x >> 3)

# ---------------------------------------------------------------------------------- predicates


@case()
def in_range(x: nx.f32, lo: nx.f32, hi: nx.f32):
    return nx.s32((x >= lo) & (x <= hi))


@case()
def sign_class(x: nx.f32):
    return nx.where(x < 0, nx.s32(-1), nx.where(x > 0, nx.s32(1), nx.s32(0)))


@case()
def finite_or_zero(x: nx.f32):
    return nx.where(nx.isfinite(x), x, 0.0), nx.s32(nx.isnan(x)) + 2 * nx.s32(nx.isinf(x))


@case(ranges={"x": (-3, 3)})
def piecewise_cubic(x: nx.f32):
    return nx.where(x < -1.0, -1.0 + 0 * x, nx.where(x > 1.0, x * 0 + 1.0, x * x * x))


@case()
def logical_mix(x: nx.s32, y: nx.s32):
    p = (x > y) ^ (x % 2 == 0)
    q = nx.logical_or(~p, y == 0)
    return nx.where(q & (x != y), x, y), nx.s32(nx.logical_not(p))


@case(ranges={"x": (-1e9, 1e9)})
def casts_chain(x: nx.f32):
    i = nx.s64(x)
    return nx.f64(i) * 0.5, nx.s32(i >> 2), nx.u32(nx.f32(i & 0xFFFF))


@case(ranges={"x": (-1e3, 1e3), "y": (0.5, 50)})
def float_floor_mod(x: nx.f32, y: nx.f32):
    return x // y, x % y, nx.floor(x / y), nx.round(x * 0.1)


@case(ranges={"x": (0.5, 4), "y": (-4, 4)}, **F32_APPROX)
def power_variable(x: nx.f32, y: nx.f32):
    return x ** y, x ** 3


@case(ranges={"a": (-50, 50), "b": (-50, 50)}, **F64_APPROX)
def logsumexp2(a: nx.f64, b: nx.f64):
    return nx.maximum(a, b) + nx.log1p(nx.exp(-abs(a - b)))


@case(ranges={"x": (0.1, 1e4)}, **F32_APPROX)
def log_exp_mix(x: nx.f32):
    return {"l2": nx.log2(x), "l10": nx.log10(x), "cb": nx.cbrt(x), "at": nx.arctan(x)}


@case(rtol=1e-3, atol=1e-4, fastmath=True, ranges={"x": (-3, 3), "y": (0.5, 4)})
def fast_mix(x: nx.f32, y: nx.f32):
    return nx.sin(x) * nx.sqrt(y) / (1.0 + nx.exp2(x)) + nx.log(y) * nx.rsqrt(y)


# ---------------------------------------------------------------------------------- machinery
BACKENDS = ("stack", "ast")
_CTYPE = {"f16": "unsigned short", "bf16": "unsigned short", "f32": "float", "f64": "double",
          "s32": "int", "u32": "unsigned int", "s64": "long long", "u64": "unsigned long long"}


def expr_of(c: Case, backend: str):
    """The case's formula; "accurate" unless it asks for fastmath: the reference rounds every
    operation once, as the accurate stub does (tests/test_cuda_math.py covers "cuda")."""
    return nx.ptx_expr(c.fn, precision="fast" if c.fastmath else "accurate", backend=backend)


def site_source(cases) -> str:
    """One kernel with a PTX_INJECT site per case and backend (macro form)."""
    lines = ['extern "C" __global__ void corpus(const void* in, void* out, int n) {',
             "    int i = blockIdx.x * blockDim.x + threadIdx.x;",
             "    if (i >= n) return;"]
    for c in cases:
        f = expr_of(c, "stack")
        outs = {k: n.dtype for k, n in f.graph.outputs}
        for backend in BACKENDS:
            parts, k = [], 0
            for p, t in f.params.items():
                kind = "PTX_MOD" if p in outs else "PTX_IN"
                parts.append(f"{kind}({t.name.upper()}, {p}, "
                             f"(({'const ' if kind == 'PTX_IN' else ''}{_CTYPE[t.name]}*)"
                             f"{'in' if kind == 'PTX_IN' else 'out'})[i + {k}])")
                k += 1
            for o, t in outs.items():
                if o not in f.params:
                    parts.append(f"PTX_OUT({t.upper()}, {o}, (({_CTYPE[t]}*)out)[i + {k}])")
                    k += 1
            lines.append(f'    PTX_INJECT("{c.name}_{backend}", {", ".join(parts)});')
    lines.append("}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def corpus():
    """(sites, stubs): the template's sites and each case's stub per backend."""
    inj = nx.PtxInject(nx.cuda_to_ptx(site_source(CASES), arch="sm_90"))
    stubs = {}
    for c in CASES:
        for backend in BACKENDS:
            stubs[c.name, backend] = expr_of(c, backend).stub(inj.sites[f"{c.name}_{backend}"])
    return inj, stubs


def test_corpus_size_and_categories():
    assert len(CASES) >= 40
    assert len({c.name for c in CASES}) == len(CASES)


def test_corpus_assembles_in_one_template(corpus):
    inj, stubs = corpus
    assert len(inj.sites) == 2 * len(CASES)
    ptx = inj.render({f"{name}_{backend}": s for (name, backend), s in stubs.items()})
    cubin = nx.ptx_to_cubin(ptx, arch="sm_90")
    assert isinstance(cubin, bytes) and len(cubin) > 1000


def _values(c: Case, f, draw_float, draw_int, n: int) -> dict:
    vals = {}
    for p, t in f.params.items():
        lo, hi = c.ranges.get(p, (-1e3, 1e3) if t.kind == "f" else (None, None))
        if t.kind == "f":
            x = draw_float(lo, hi, n)
            vals[p] = nx.bf16(x.astype(np.float32)) if t.name == "bf16" else x.astype(t.np)
        else:
            info = np.iinfo(t.np)
            vals[p] = draw_int(info.min if lo is None else lo, info.max if hi is None else hi,
                               n).astype(t.np)
    return vals


def _check(c: Case, f, stub, site, vals):
    ref = f(**vals)
    g = f.graph
    refs = [ref] if g.output_form == "single" else list(ref.values() if isinstance(ref, dict) else ref)
    got = nx.emulate(stub, {site[p].reg: v for p, v in vals.items()},
                     {site[k].reg: n.dtype for k, n in g.outputs})
    for (k, n), r in zip(g.outputs, refs):
        a, b = np.asarray(r), got[site[k].reg]
        assert a.dtype == b.dtype, (k, a.dtype, b.dtype)
        if n.dtype == "bf16":
            a, b = S.bf16_to_f32(a), S.bf16_to_f32(b)
        if c.rtol == 0:
            if a.dtype.kind == "f":
                ok = ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))
            else:
                ok = a == b
        else:
            ok = np.isclose(b, a, rtol=c.rtol, atol=c.atol, equal_nan=True)
        if not ok.all():
            bad = np.flatnonzero(~ok)[:4]
            pytest.fail(f"{c.name} output {k!r}: inputs {[(p, v[bad]) for p, v in vals.items()]}"
                        f" reference {a[bad]} emulated {b[bad]}")


def _rng_draws(rng):
    return (lambda lo, hi, n: rng.uniform(lo, hi, n),
            lambda lo, hi, n: rng.integers(lo, hi, n, endpoint=True, dtype=np.int64 if lo < 0
                                           or hi < 2 ** 63 else np.uint64))


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_formula_matches_reference_both_backends(c, corpus):
    inj, stubs = corpus
    f = expr_of(c, "stack")
    df, di = _rng_draws(np.random.default_rng(zlib.crc32(c.name.encode())))
    vals = _values(c, f, df, di, 512)
    for backend in BACKENDS:
        _check(c, f, stubs[c.name, backend], inj.sites[f"{c.name}_{backend}"], vals)

    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck),
              derandomize=True)
    @given(st.data())
    def run(data):
        def draw_float(lo, hi, n):
            return np.array(data.draw(st.lists(st.floats(lo, hi, allow_nan=False),
                                               min_size=n, max_size=n)), np.float64)

        def draw_int(lo, hi, n):
            return np.array(data.draw(st.lists(st.integers(int(lo), int(hi)), min_size=n,
                                               max_size=n)), dtype=object)
        v = _values(c, f, draw_float, draw_int, N)
        for backend in BACKENDS:
            _check(c, f, stubs[c.name, backend], inj.sites[f"{c.name}_{backend}"], v)
    run()


@pytest.mark.parametrize("mode", nx.PRECISIONS)
def test_c_lowering_matches_python_lowering(mode):
    """native/dag_lower.h writes, word for word, what lower.to_stack_py writes: every corpus
    formula, every output order, and a pass-through input root."""
    from numptx.dsl.lower import to_stack, to_stack_py
    for c in CASES:
        try:
            g = expr_of(c, "stack").trace(precision=mode)
        except nx.PrecisionError:               # f64 transcendentals have no fast form
            assert mode == "fast"
            continue
        n = len(g.outputs)
        orders = [tuple(range(n)), tuple(reversed(range(n))), (0, "passed", 0)]
        for order in orders:
            a, b = to_stack(g, order), to_stack_py(g, order)
            assert a.words == b.words, (c.name, order, a.ops, b.ops)
            assert (a.input_names, a.limits, a.n_instructions) == \
                (b.input_names, b.limits, b.n_instructions), (c.name, order)
