"""numptx.dsl: ``@ptx_expr`` tracing of Python formulas into Stack PTX / AST PTX stubs, reference
evaluation on the CPU with NumPy, and the stub emulator.

    import numpy as np, numptx as nx

    @nx.ptx_expr
    def dist(x: nx.f32, y: nx.f32) -> nx.f32:
        return nx.sqrt(x * x + y * y)

    assert dist(np.float32(3), np.float32(4)) == np.float32(5)
    stub = dist.stub(inj.sites["combine"])

The guide is docs/dsl.md; the design docs/design/dsl.md.
"""
from __future__ import annotations

from .emulator import EmulationError, emulate
from .expr import BindError, PtxExpr, ptx_expr
from .graph import Graph, GraphError, Node
from .ops import (PUBLIC, absolute, arctan, bitcast, cbrt, ceil, clip, copysign, cos, cosh, exp,
                  exp2, expm1, floor, floor_divide, fma, fmax, fmin, fmod, hypot, isfinite, isinf,
                  isnan, log, log1p, log2, log10, logical_and, logical_not, logical_or,
                  logical_xor, maximum, minimum, pow, power, rcp, remainder, rint, round, rsqrt,
                  sigmoid, sign, sin, sinh, sqrt, square, tan, tanh, trunc, where)
from .ops import abs  # noqa: A004 - nx.abs like np.abs
from .trace import Proxy, TraceError
from .types import DType, bf16, f16, f32, f64, pred, s32, s64, u32, u64

TYPES = ("f16", "bf16", "f32", "f64", "s32", "u32", "s64", "u64", "pred")

__all__ = ["ptx_expr", "PtxExpr", "TraceError", "BindError", "Graph", "GraphError", "Node",
           "Proxy", "DType", "emulate", "EmulationError", *TYPES, *PUBLIC]
