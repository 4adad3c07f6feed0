"""numptx.dsl: ``@ptx_expr`` tracing of Python formulas into Stack PTX / AST PTX stubs, reference
evaluation on the CPU with NumPy, and the stub emulator.

    import numpy as np, numptx as nx

    @nx.ptx_expr
    def dist(x: nx.f32, y: nx.f32) -> nx.f32:
        return nx.sqrt(x * x + y * y)

    assert dist(np.float32(3), np.float32(4)) == np.float32(5)
    stub = dist.stub(inj.sites["combine"])

The ``nx.*`` functions come from numptx/dsl/functions.py, generated from the operation table
(numptx/dsl/ops.py); the type names from numptx/dsl/types.py. The guide is docs/dsl.md; the
design docs/design/dsl.md.
"""
from __future__ import annotations

from . import functions
from .emulator import EmulationError, emulate
from .expr import PRECISIONS, BindError, PrecisionError, PtxExpr, ptx_expr
from .functions import *  # noqa: F403 - every nx.* function (functions.__all__)
from .grad import GradError, grad, jacobian, value_and_grad
from .graph import Graph, GraphError, Node
from .trace import Proxy, TraceError
from .types import TYPE_NAMES, DType, bf16, f16, f32, f64, pred, s32, s64, u32, u64

__all__ = ["ptx_expr", "PtxExpr", "TraceError", "BindError", "PrecisionError", "PRECISIONS", "Graph", "GraphError", "Node",
           "Proxy", "DType", "emulate", "EmulationError", "grad", "value_and_grad", "jacobian",
           "GradError", *TYPE_NAMES]
__all__ += functions.__all__
