"""Launch plans (issue 12, fast launches): the argument path a plan takes (``ArgPlan``) gives
marshal's values exactly or hands the arguments back to marshal, whose errors are the ones
raised; the wiring of ``CudaLaunch`` (plans, their invalidation, cached configurations) runs on
the CPU with a stand-in plan; numba's argument types come out as numba's typeof gives them.
Launches on a GPU, twice with different argument types, are marked ``gpu``."""
from __future__ import annotations

import ctypes
import random
from collections import OrderedDict
from types import SimpleNamespace

import numpy as np
import pytest

import numptx as nx
from numptx.jit.templates import cuda_launch as CL
from numptx.jit.numba import launch as L
from numptx.jit.numba import numba_site
from numptx.jit.templates import residency as R
from numptx.jit.templates.cuda_launch import ArgPlan, marshal
from numptx.jit.templates.params import Param

from conftest import SPINE_SRC, gpu_available

F32_LIMIT = 3.4028235677973366e38

# the spine template, its stubs and a device-array stand-in are test_cuda_launch's
from test_cuda_launch import ADD, MUL, Dev, _private_cache, spine  # noqa: E402, F401


class Dev2(Dev):
    """Another CAI class: a new type in a slot makes new converters."""


# ---- the argument path ---------------------------------------------------------------------
def P(name, ctype, is_pointer, dtype, size):
    return Param(name, ctype, is_pointer, dtype, size)


PARAMS = {
    "f32p": P("out", "float*", True, "float32", 8),
    "f64p": P("d", "double*", True, "float64", 8),
    "i32p": P("q", "int*", True, "int32", 8),
    "voidp": P("v", "void*", True, None, 8),
    "u8p": P("c", "unsigned char*", True, "uint8", 8),
    "bf16p": P("bh", "__nv_bfloat16*", True, "bfloat16", 8),
    "u64?": P("w", ".u64", None, None, 8),                # PTX only: pointer or integer
    "bool": P("f", "bool", False, "bool", 1),
    "i8": P("i8", "signed char", False, "int8", 1),
    "u8": P("uc", "unsigned char", False, "uint8", 1),
    "i16": P("s", "short", False, "int16", 2),
    "u16": P("us", "unsigned short", False, "uint16", 2),
    "i32": P("n", "int", False, "int32", 4),
    "u32": P("u", "unsigned", False, "uint32", 4),
    "i64": P("l", "long long", False, "int64", 8),
    "u64": P("ull", "unsigned long long", False, "uint64", 8),
    "b8": P("param_1", ".u8", False, None, 1),
    "b16": P("param_2", ".u16", False, None, 2),
    "b32": P("param_3", ".u32", False, None, 4),
    "f16": P("h", "__half", False, "float16", 2),
    "bf16": P("bf", "__nv_bfloat16", False, "bfloat16", 2),
    "f32": P("x", "float", False, "float32", 4),
    "f64": P("y", "double", False, "float64", 8),
    "struct": P("p", "P", False, "struct", 16),
}

INTS = [0, 1, -1, 7, 127, 128, -128, -129, 255, 256, 2**15, 2**16, 2**31 - 1, 2**31, -2**31,
        2**32 - 1, 2**32, 2**63 - 1, 2**63, -2**63, 2**64 - 1, 2**64, -2**64]
NP_INTS = [np.int8(-3), np.uint8(200), np.int16(-300), np.uint16(60000), np.int32(-7),
           np.uint32(4_000_000_000), np.int64(-(2**40)), np.uint64(2**64 - 1)]
FLOATS = [0.0, -0.0, 0.5, 1.5, -2.25, 1e-45, 1e-40, 65504.0, 65520.0, 70000.0, 3.0e38,
          F32_LIMIT, float(np.nextafter(F32_LIMIT, 0)), -F32_LIMIT, 1e39, 1e300, float("inf"),
          float("-inf"), float("nan"), 1.00390625]
NP_FLOATS = [np.float16(1.5), np.float32(2.5), np.float32("nan"), np.float64(-1e300),
             np.float32(np.inf)]
ODD = [True, False, np.bool_(True), np.bool_(False), None, 1j, np.complex64(1 + 2j), "3",
       b"x", [1.0], object(), np.zeros(4, np.float32), np.zeros(4, np.int32)]


def _arrays():
    out = []
    for ts in ("<f4", "<f8", "<i4", "<u4", "|u1", "|i1", "<f2", "|b1", "<i8", "<u2"):
        out.append(Dev(0x1000, typestr=ts))
    out += [Dev(0x2000, stream=7), Dev2(0x2100, stream=9), Dev(0x2200, shape=(3, 4)),
            Dev(0x2300, shape=(3, 4), strides=(16, 4)),          # C order, given
            Dev(0x2400, shape=(3, 4), strides=(4, 12)),          # Fortran order
            Dev(0x2500, shape=(4, 4), strides=(4, 32)),          # not contiguous
            Dev(0x2600, shape=(0, 4), strides=(4, 8)),           # empty: fine
            Dev(0x2700, mask=Dev(1)), Dev(None), Dev(0, typestr="<c8"), Dev2(0x2800),
            Dev2(0x2900, typestr="<f8"), Dev(2**64 - 8), Dev(0x3000, shape=None),
            Dev(0x3100, stream="7"), Dev(0x3200, typestr=["<f4"]), NoCai(), BadCai()]
    return out


class NoCai:
    __cuda_array_interface__ = None


class BadCai:
    """A CAI without a typestr, from a property."""

    @property
    def __cuda_array_interface__(self):
        return {"shape": (4,), "data": (0x10, False), "version": 3}


POOL = INTS + NP_INTS + FLOATS + NP_FLOATS + ODD + _arrays()


def _same(m, f) -> bool:
    """Same ctypes types and bytes (NaN payloads included), same streams."""
    return ([type(v) for v in m.values] == [type(v) for v in f.values]
            and [bytes(v) for v in m.values] == [bytes(v) for v in f.values]
            and m.streams == f.streams)


def _check(plan: ArgPlan, args) -> str:
    """'fast' (the plan's values are marshal's), 'slow' (the plan declined; marshal gave
    values) or 'error' (marshal raised, the plan declined). Anything else fails."""
    try:
        m = marshal(plan.entry, plan.params, args)
    except Exception as e:   # noqa: BLE001 - any error marshal raises, the plan must decline
        got = plan.convert(args)
        assert got is None, (args, e, got)
        return "error"
    got = plan.convert(args)
    if got is None:
        return "slow"
    assert _same(m, got), (args, m, got)
    return "fast"


# marshal's bf16 rounding of huge values warns (NumPy overflow), as it does outside tests
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_each_parameter_kind_against_every_value():
    """Every (parameter kind, value) pair from the pool, one argument at a time, twice (the
    second through the converters the first made)."""
    counts = {"fast": 0, "slow": 0, "error": 0}
    for name, p in PARAMS.items():
        plan = ArgPlan("k", [p])
        for _ in range(2):
            for a in POOL:
                counts[_check(plan, (a,))] += 1
    assert counts["fast"] > 400 and counts["error"] > 400, counts


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_random_argument_lists_against_marshal():
    """Random parameter lists of 1 to 8 and random arguments (mostly of the right kind), each
    list's plan reused across its calls, so converters made for one call meet other values."""
    rng = random.Random(12)
    names = list(PARAMS)
    typestr = {"float32": "<f4", "float64": "<f8", "int32": "<i4", "uint8": "|u1",
               "bfloat16": "<u2", None: "<f8"}
    ints = [0, 1, 7, 100, True, np.uint8(5), np.int32(3), np.bool_(True)]
    floats = [0.0, 1.5, -2.25, 3, np.float32(0.5), np.float16(2), float("nan"), float("inf")]
    counts = {"fast": 0, "slow": 0, "error": 0}
    for _ in range(40):
        params = [PARAMS[rng.choice(names)] for _ in range(rng.randint(1, 8))]
        plan = ArgPlan("k", params)
        for _ in range(60):
            args = []
            for p in params:
                if p.is_pointer or p.is_pointer is None:
                    pool = [None, 0, 4096, np.uint64(64), Dev(0x100, typestr=typestr[p.dtype]),
                            Dev2(0x200, typestr=typestr[p.dtype], stream=3)]
                elif p.dtype in ("float16", "bfloat16", "float32", "float64"):
                    pool = floats if rng.random() < 0.8 else FLOATS + NP_FLOATS
                else:
                    pool = ints if rng.random() < 0.8 else INTS + NP_INTS
                args.append(rng.choice(pool if rng.random() < 0.95 else POOL))
            if rng.random() < 0.05:                  # a wrong count now and then
                args = args[:-1] if rng.random() < 0.5 else args + [0]
            counts[_check(plan, tuple(args))] += 1
    assert counts["fast"] > 500 and counts["error"] > 100, counts


def test_the_common_cases_take_the_fast_path(spine):
    plan = ArgPlan("kernel", spine.params)
    args = (Dev(0x1000), Dev(0x2000, stream=5), None, 1000)
    m = plan.convert(args)
    assert m is not None and _same(marshal("kernel", spine.params, args), m)
    assert m.streams == [5]
    for args in [(Dev(1), Dev(2), Dev(3), np.int32(4)), (0x10, 0x20, 0x30, True),
                 (Dev2(1), Dev(2), 0, np.uint8(3))]:
        assert _check(plan, args) == "fast"
    scal = ArgPlan("k", [PARAMS[k] for k in ("f32", "f64", "f16", "bf16", "b32", "u64?")])
    assert _check(scal, (1.5, 2, 0.25, np.float32(1.0), -1, 7)) == "fast"
    assert _check(scal, (F32_LIMIT, 0.0, 0.0, 0.0, 0, 0)) == "error"       # overflows float32
    assert _check(scal, (np.nextafter(F32_LIMIT, 0), 0.0, 0.0, 0.0, 0, 0)) == "fast"


def test_host_arrays_and_hints_are_left_to_marshal(spine):
    """Host arrays are copied to the device by marshal's ``to_device``: never the plan's."""
    cuda = pytest.importorskip("numba.cuda")
    plan = ArgPlan("kernel", spine.params)
    a = np.zeros(4, np.float32)
    for args in [(a, Dev(1), Dev(2), 3), (cuda.In(a), Dev(1), Dev(2), 3), (Dev(1), a, a, 3)]:
        assert plan.convert(args) is None
        assert marshal("kernel", spine.params, args, to_device=lambda v: 0x77).values


@pytest.mark.parametrize("good,bad", [
    ((Dev(1), Dev(2), Dev(3), 4), (Dev(1), Dev(2), Dev(3), 4.0)),          # float for an int
    ((Dev(1), Dev(2), Dev(3), 4), (1.5, Dev(2), Dev(3), 4)),               # float for a pointer
    ((Dev(1), Dev(2), Dev(3), 4), (Dev(1, typestr="<f8"), Dev(2), Dev(3), 4)),    # wrong dtype
    ((Dev(1), Dev(2), Dev(3), 4), (Dev(1), Dev(2), Dev(3))),                # too few
    ((Dev(1), Dev(2), Dev(3), 4), (Dev(1), Dev(2), Dev(3), 4, 5)),          # too many
    ((Dev(1), Dev(2), Dev(3), 4), (Dev(1), Dev(2), Dev(3), 2**31)),         # out of range
    ((Dev(1), Dev(2), Dev(3), 4), (-1, Dev(2), Dev(3), 4)),                 # a bad address
    ((Dev(1), Dev(2), Dev(3), 4), (Dev(1, shape=(4, 4), strides=(4, 32)), Dev(2), Dev(3), 4)),
    ((Dev(1), Dev(2), Dev(3), 4), (Dev(1, mask=Dev(9)), Dev(2), Dev(3), 4)),
    ((Dev(1), Dev(2), Dev(3), 4), (True, Dev(2), Dev(3), 4)),
    ((Dev(1), Dev(2), Dev(3), 4), (Dev(1), Dev(2), Dev(3), "4")),
])
def test_a_changed_argument_falls_back_to_marshals_error(spine, good, bad):
    plan = ArgPlan("kernel", spine.params)
    assert plan.convert(good) is not None and plan.convert(good) is not None
    with pytest.raises(nx.LaunchError) as slow:
        marshal("kernel", spine.params, bad)
    assert plan.convert(bad) is None
    assert plan.convert(good) is not None                 # and back again
    with pytest.raises(type(slow.value)) as again:
        marshal("kernel", spine.params, bad)
    assert str(again.value) == str(slow.value)


def test_a_kernel_without_parameters():
    plan = ArgPlan("k", [])
    assert plan.convert(()) == marshal("k", [], ()) and plan.convert((1,)) is None


def test_type_tuples_are_bounded(spine):
    plan = ArgPlan("kernel", spine.params)
    for k in range(CL._MAX_TYPE_SETS * 2):
        cls = type(f"D{k}", (Dev,), {})
        assert plan.convert((cls(1), Dev(2), None, 3)) is not None
    assert len(plan._by_types) <= CL._MAX_TYPE_SETS


# ---- CudaLaunch's wiring, with a stand-in plan -----------------------------------------------
class FakeCtx:
    def __init__(self):
        self.synced = []

    def create_external_stream(self, handle):
        return SimpleNamespace(synchronize=lambda: self.synced.append(handle))


@pytest.fixture
def planned(spine, monkeypatch):
    """A variant with a stand-in plan for context 77, its module kept under ``key``; launches
    that take the plan are recorded in ``calls``."""
    v = spine.inject(combine=ADD)
    calls = []
    key, entry = ("k", 0), ("fn", None, None)
    monkeypatch.setattr(R, "_loaded", OrderedDict({key: entry}))
    monkeypatch.setattr(CL, "context_handle", lambda: 77)
    ctx = FakeCtx()
    CL._plans[v] = CL._Plan(
        hctx=77, ctx=ctx, key=key, entry=entry, kernel="KERNEL", stream0="S0",
        launch=lambda *a: calls.append(a), to_stream=lambda s: ("S", s),
        make_config=lambda **kw: kw, numba_config=SimpleNamespace(CUDA_ARRAY_INTERFACE_SYNC=1),
        args=ArgPlan("kernel", spine.params))
    return SimpleNamespace(v=v, calls=calls, ctx=ctx, key=key)


#: the full path of these launches would launch stand-in pointers on a GPU
cpu_only = pytest.mark.skipif(gpu_available(), reason="stand-in device pointers: CPU only")


def _error_without_plans(monkeypatch, launch, args):
    with monkeypatch.context() as m:
        m.setattr(R, "LAUNCH_PLANS", False)
        with pytest.raises(Exception) as info:
            launch(*args)
    return info.value


def test_a_planned_launch_launches_what_the_plan_says(planned):
    planned.v[(2, 3), 32](Dev(0x10), Dev(0x20, stream=4), None, 5)
    (stream, cfg, kernel, *values), = planned.calls
    assert (stream, kernel) == ("S0", "KERNEL")
    assert cfg == {"grid": (2, 3, 1), "block": (32, 1, 1), "shmem_size": 0}
    assert [bytes(v) for v in values] == [bytes(ctypes.c_uint64(0x10)),
                                          bytes(ctypes.c_uint64(0x20)), bytes(8),
                                          bytes(ctypes.c_int32(5))]
    assert planned.ctx.synced == [4]
    planned.v[1, 32, "my stream", 64](Dev(1), Dev(2), Dev(3), 1)
    assert planned.calls[1][0] == ("S", "my stream") and planned.calls[1][1]["shmem_size"] == 64


@cpu_only
@pytest.mark.parametrize("args", [
    (Dev(1), Dev(2), Dev(3), 4.0), (Dev(1), Dev(2)), (Dev(1, typestr="<i4"), Dev(2), None, 1),
    (np.zeros(4, np.float32), Dev(2), None, 1), (Dev(1), Dev(2), None, 2**40)])
def test_what_the_plan_does_not_cover_takes_the_full_path(planned, monkeypatch, args):
    launch = planned.v[1, 32]
    want = _error_without_plans(monkeypatch, launch, args)
    with pytest.raises(type(want)) as got:
        launch(*args)
    assert str(got.value) == str(want) and not planned.calls


@cpu_only
def test_plans_yield_to_another_context_an_unloaded_module_and_the_switches(planned,
                                                                            monkeypatch):
    args = (Dev(1), Dev(2), None, 3)
    launch = planned.v[1, 32]
    want = _error_without_plans(monkeypatch, launch, args)

    def full_path_error():
        with pytest.raises(type(want)) as got:
            launch(*args)
        assert str(got.value) == str(want)

    launch(*args)
    assert len(planned.calls) == 1
    monkeypatch.setattr(CL, "context_handle", lambda: 78)              # another context
    full_path_error()
    monkeypatch.setattr(CL, "context_handle", lambda: 77)
    R._loaded[planned.key] = ("fn", None, object())                      # unloaded, reloaded
    full_path_error()
    R._loaded.pop(planned.key)                                           # unloaded
    full_path_error()
    assert len(planned.calls) == 1


@cpu_only
def test_the_simulator_and_the_switch_win_over_a_plan(planned, monkeypatch):
    args = (Dev(1), Dev(2), None, 3)
    monkeypatch.setattr(R, "LAUNCH_PLANS", False)
    with pytest.raises(nx.LaunchError, match="no CUDA GPU is available"):
        planned.v[1, 32](*args)
    monkeypatch.setattr(R, "LAUNCH_PLANS", True)
    monkeypatch.setattr(numba_site, "SIMULATOR", True)
    with pytest.raises(nx.LaunchError, match=r"simulator \(NUMBA_ENABLE_CUDASIM=1\) cannot run"):
        planned.v[1, 32](*args)
    assert not planned.calls


def test_configurations_are_parsed_once_and_only_plain_ones_kept(spine):
    v = spine.inject(combine=ADD)
    a, b = v[7, (32, 2)], v[7, (32, 2)]
    assert a._shape is b._shape and (a.grid, a.block, a.stream, a.sharedmem) == (
        (7, 1, 1), (32, 2, 1), 0, 0)
    s = object()
    c = v[7, (32, 2), s, 0]
    assert c.stream is s and c.sharedmem == 0 and c.grid == (7, 1, 1)
    assert v[7, (32, 2), 0, 128]._shape is not a._shape
    for bad, match in [((7.0, (32, 2)), "grid is a positive int"),
                       ((True, (32, 2)), "grid is a positive int"),
                       ((7, (32.0, 2)), "block is a positive int"),
                       ((7, (32, 2), 0, -1), "sharedmem is a number"),
                       ((7, (32, 2), 0, 1.0), "sharedmem is a number"),
                       ((7,), r"\[grid, block\]")]:
        with pytest.raises(nx.LaunchError, match=match):
            v[bad]
    assert v[np.int64(7), [32, 2]].block == (32, 2, 1)       # not plain: parsed, not kept
    assert R.plain_config(((1, 2), 3, 0)) and not R.plain_config(([1], 3))


# ---- numba kernels: argument types as numba's typeof gives them --------------------------------
class Typed:
    """Something numba types through a ``_numba_type_`` property (as its device arrays)."""

    def __init__(self, ty):
        self.ty = ty

    @property
    def _numba_type_(self):
        return self.ty


def test_numba_argument_types_match_numbas_typeof():
    pytest.importorskip("numba.cuda")
    from numba.cuda import types as nbt

    @nx.kernel
    def k(out, a):
        pass
    disp = k.dispatcher
    values = ([0, 1, -1, 2**31 - 1, 2**31, -2**31, -2**31 + 1, 2**63 - 1, -2**63 + 1, 2**63,
               2**64 - 1, 2**64, -2**63, True, 1.5, 1j, None]
              + NP_INTS + NP_FLOATS + [np.bool_(True), np.complex64(1),
                                       np.timedelta64(3, "s"), np.zeros(3, np.float32),
                                       np.zeros((2, 2), np.int8)[:, :1],
                                       Typed(nbt.float32[::1]), Typed(None), Dev(1)])
    typers = L._typers(disp, values)
    for _ in range(2):
        for f, v in zip(typers, values):
            _same_type(disp, f, v)
    # a typer is made from one value of its type and used for the others
    int_typer, = L._typers(disp, [5])
    for v in values[:13]:
        _same_type(disp, int_typer, v)
    f32, = L._typers(disp, [np.float32(1)])
    _same_type(disp, f32, np.float32("nan"))
    typed, = L._typers(disp, [Typed(nbt.int8[:])])
    _same_type(disp, typed, Typed(nbt.float64[:, ::1]))
    _same_type(disp, typed, Typed(None))


def _same_type(disp, f, v):
    try:
        want = disp.typeof_pyval(v)
    except Exception as e:   # noqa: BLE001 - the typer must raise the same
        with pytest.raises(type(e)):
            f(v)
    else:
        assert f(v) == want, v


@cpu_only
def test_a_numba_variant_launches_as_its_plan_says(monkeypatch):
    """_launch_planned with a stand-in plan (context 77, a recording launchable): the types it
    recorded launch through the plan; other types, contexts, configurations or an unloaded
    module take the full path (here: no GPU, its error)."""
    pytest.importorskip("numba.cuda")

    @nx.kernel
    def k(out, n):
        pass
    kv = k.inject()
    disp = k.dispatcher
    launches = []
    fn = SimpleNamespace(launch=lambda *a: launches.append(a))
    args = (np.zeros(4, np.float32), 3)
    argtypes = tuple(disp.typeof_pyval(a) for a in args)
    key, entry = ("kv", 0), (fn, None, None)
    monkeypatch.setattr(R, "_loaded", OrderedDict({key: entry}))
    monkeypatch.setattr(L, "context_handle", lambda: 77)
    plan = object.__new__(L._GpuPlan)
    plan.hctx, plan.disp, plan.typers = 77, disp, {}
    plan.entries = {tuple(map(id, argtypes)): (argtypes, key, entry)}
    plan.dims = {(2, 32): ((2, 1, 1), (32, 1, 1))}
    plan.stream0, plan.to_stream = "S0", lambda s: ("S", s)
    L._gpu_plans[kv] = plan
    kv[2, 32](*args)
    kv[2, 32, "st", 16](np.ones(4, np.float32), -5)
    assert [(a[1:]) for a in launches] == [((2, 1, 1), (32, 1, 1), "S0", 0),
                                           ((2, 1, 1), (32, 1, 1), ("S", "st"), 16)]
    assert launches[0][0][0] is args[0] and launches[0][0][1] == 3
    for call in [lambda: kv[2, 32](np.zeros(4, np.float64), 3),            # other numba types
                 lambda: kv[2, 32](np.zeros(4, np.float32), 2**40 + 0.5),
                 lambda: kv[2.0, 32](*args),                               # not plain
                 lambda: kv[3, 32](*args)]:                                # dims not kept
        with pytest.raises(nx.LaunchError, match="no CUDA GPU is available"):
            call()
    monkeypatch.setattr(L, "context_handle", lambda: 78)
    with pytest.raises(nx.LaunchError, match="no CUDA GPU is available"):
        kv[2, 32](*args)
    monkeypatch.setattr(L, "context_handle", lambda: 77)
    R._loaded.pop(key)
    with pytest.raises(nx.LaunchError, match="no CUDA GPU is available"):
        kv[2, 32](*args)
    assert len(launches) == 2


# ---- on a GPU: launched twice with different argument types ----------------------------------
N = 1000


def _inputs():
    rng = np.random.default_rng(0)
    return rng.random(N, dtype=np.float32), rng.random(N, dtype=np.float32)


def _counting(monkeypatch, module, name):
    seen = []
    real = getattr(module, name)

    def wrapper(*a, **kw):
        seen.append(a)
        return real(*a, **kw)
    monkeypatch.setattr(module, name, wrapper)
    return seen


@pytest.mark.gpu
def test_gpu_cuda_variant_planned_then_other_argument_types(spine, monkeypatch):
    from numba import cuda
    full = _counting(monkeypatch, CL, "marshal")          # marshal runs on the full path only
    a, b = _inputs()
    v = spine.inject(combine=ADD)
    d_a, d_b, d_out = cuda.to_device(a), cuda.to_device(b), cuda.device_array(N, np.float32)
    launch = v[(N + 127) // 128, 128]
    launch(d_out, d_a, d_b, N)
    assert len(full) == 1 and v in CL._plans
    d_out2 = cuda.device_array(N, np.float32)
    v[(N + 127) // 128, 128](d_out2, d_a, d_b, N)                     # the plan's way
    assert len(full) == 1
    np.testing.assert_array_equal(d_out.copy_to_host(), a + b)
    np.testing.assert_array_equal(d_out2.copy_to_host(), a + b)
    out = np.zeros(N, np.float32)
    launch(out, a, b, np.int32(N // 2))                  # host arrays: the full path, copies
    assert len(full) == 2
    np.testing.assert_array_equal(out[:N // 2], (a + b)[:N // 2])
    assert not out[N // 2:].any()
    launch(d_out2, d_b, d_a, N - 1)                      # back to the plan's types
    assert len(full) == 2
    cuda.synchronize()
    bad = [(cuda.device_array(N, np.float64), d_a, d_b, N), (d_out, d_a, d_b, 1.5),
           (d_out, d_a, d_b), (d_out, d_a, d_b, 2**31), (d_out, "a", d_b, N)]
    for args in bad:
        want = _error_without_plans(monkeypatch, launch, args)
        assert isinstance(want, nx.LaunchError)
        with pytest.raises(type(want)) as got:
            launch(*args)
        assert str(got.value) == str(want)


@pytest.mark.gpu
def test_gpu_cuda_plan_after_the_module_was_unloaded(spine, monkeypatch):
    from numba import cuda
    monkeypatch.setattr(R, "MAX_LOADED", 1)
    a, b = _inputs()
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    v1, v2 = spine.inject(combine=ADD), spine.inject(combine=MUL)
    for v, want in [(v1, a + b), (v2, a * b), (v1, a + b), (v1, a + b), (v2, a * b)]:
        d_out = cuda.device_array(N, np.float32)
        v[(N + 127) // 128, 128](d_out, d_a, d_b, N)
        np.testing.assert_array_equal(d_out.copy_to_host(), want)


@pytest.mark.gpu
def test_gpu_numba_variant_planned_then_other_argument_types(monkeypatch):
    from numba import cuda
    full = _counting(monkeypatch, L, "_launch_gpu")

    @nx.kernel
    def apply(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": "f32"})
    kv = apply.inject(combine=MUL)
    a, b = _inputs()
    grid = (N + 127) // 128
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    for k in range(2):
        d_out = cuda.device_array(N, np.float32)
        kv[grid, 128](d_out, d_a, d_b)
        np.testing.assert_array_equal(d_out.copy_to_host(), a * b)
    assert len(full) == 1 and kv in L._gpu_plans
    out = np.zeros(N, np.float32)
    kv[grid, 128](out, a, b)                         # host arrays: numba copies them
    np.testing.assert_array_equal(out, a * b)
    s_a = cuda.to_device(np.repeat(a, 2))[::2]       # strided: another numba type ('A')
    calls = len(full)
    for k in range(2):
        d_out = cuda.device_array(N, np.float32)
        kv[grid, 128](d_out, s_a, d_b)
        np.testing.assert_array_equal(d_out.copy_to_host(), a * b)
    assert len(full) == calls + 1
    kv[grid, 128](d_out, d_b, d_a)                   # the first types again: planned
    assert len(full) == calls + 1
    np.testing.assert_array_equal(d_out.copy_to_host(), b * a)
    for args in [(d_out, d_a), (d_out, "a", d_b)]:
        want = _error_without_plans(monkeypatch, kv[grid, 128], args)
        with pytest.raises(type(want)) as got:
            kv[grid, 128](*args)
        assert str(got.value).splitlines()[:1] == str(want).splitlines()[:1]
