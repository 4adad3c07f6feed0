"""Issue 11: one source of truth per fact. Each test pins a fact that used to exist in several
copies that disagreed (or could), and checks that every user now gives the same answer."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx
from numptx import semantics as S
from numptx import stack_ptx as sp

# 1 + half a bf16 ulp + a little: rounding through f32 first makes it a tie (-> 0x3f80);
# rounding once from the exact value gives 0x3f81.
X = 1 + 2**-8 + 2**-30
BF16_X = 0x3F81


def test_bf16_scalar_rounds_once():
    assert int(nx.bf16(np.float64(X))) == BF16_X
    assert int(nx.bf16(X)) == BF16_X
    assert S.bf16_bits(X) == BF16_X


def test_bf16_array_rounds_once():
    assert int(nx.bf16(np.array([X]))[0]) == BF16_X


def test_bf16_traced_rounds_once():
    @nx.ptx_expr
    def f(a: nx.f64) -> nx.bf16:
        return nx.bf16(a)

    assert int(f(np.float64(X))) == BF16_X


def test_bf16_traced_constant_rounds_once():
    @nx.ptx_expr
    def g(a: nx.bf16) -> nx.bf16:
        return a * X

    one = np.uint16(0x3F80)                      # bf16 1.0
    assert int(g(one)) == BF16_X


def test_bf16_stack_ptx_constant_rounds_once():
    stub = sp.compile([sp.const(X, "bf16")], outputs={"y": "bf16"})
    assert f"0x{BF16_X:04X}" in stub


def test_bf16_kernel_argument_rounds_once():
    from numptx.jit.templates.cuda_launch import _scalar
    from numptx.jit.templates.params import Param
    arg = _scalar("arg 0", Param("b", "__nv_bfloat16", False, "bfloat16", 2), X)
    assert arg.value == BF16_X


def test_bf16_argument_overflow_is_a_launch_error_without_warnings():
    import warnings
    from numptx.jit.templates.cuda_launch import _scalar
    from numptx.jit.templates.params import Param
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(nx.LaunchError, match="overflows bfloat16"):
            _scalar("arg 0", Param("b", "__nv_bfloat16", False, "bfloat16", 2), 1e39)


def test_binding_rename_is_a_copy():
    @nx.ptx_expr
    def f(x: nx.f32, y: nx.f32) -> nx.f32:
        return x - y

    @nx.ptx_expr
    def g(x: nx.f32, y: nx.f32) -> nx.f32:
        return x - y

    inj = nx.PtxInject(nx.cuda_to_ptx(r'''
    extern "C" __global__ void k(float* o, const float* a) {
        float x = a[0], y = a[1], z;
        PTX_INJECT("combine", PTX_IN(F32, x), PTX_IN(F32, y), PTX_OUT(F32, z));
        o[0] = z;
    }''', arch="sm_90"))
    site = inj.sites["combine"]
    before = g.stub(site)
    b = f.binding(site)
    b.rename["x"], b.rename["y"] = "y", "x"

    @nx.ptx_expr
    def h(x: nx.f32, y: nx.f32) -> nx.f32:      # a fresh formula of the same signature
        return x - y

    assert h.stub(site) == before
