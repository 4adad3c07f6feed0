"""The ``nx.*`` DSL functions: GENERATED from the operation table of
numptx/dsl/ops.py (its ``public`` column) by ``python tools/dsl_ops.py``; do not edit
(tests check that it is current). ``numptx`` and ``numptx.dsl`` export every name of
``__all__`` (``from numptx import *`` all but abs, pow and round).
"""
# ruff: noqa: A001 - nx.abs, nx.pow and nx.round shadow builtins, like np.abs
from __future__ import annotations

from .ops import bitcast as bitcast, public_function as _fn

__all__ = ["floor_divide", "remainder", "fmod", "pow", "power", "abs", "absolute", "square",
           "fma", "minimum", "maximum", "fmin", "fmax", "clip", "sqrt", "rsqrt", "rcp", "exp",
           "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "tanh", "sinh",
           "cosh", "arctan", "cbrt", "sigmoid", "hypot", "copysign", "floor", "ceil", "trunc",
           "round", "rint", "sign", "logical_and", "logical_or", "logical_xor", "logical_not",
           "isnan", "isinf", "isfinite", "where", "bitcast"]

floor_divide = _fn("floordiv")
remainder = _fn("mod")
fmod = _fn("fmod")
pow = _fn("pow")
power = pow
abs = _fn("abs")
absolute = abs
square = _fn("square")
fma = _fn("fma")
minimum = _fn("minimum")
maximum = _fn("maximum")
fmin = _fn("fmin")
fmax = _fn("fmax")
clip = _fn("clip")
sqrt = _fn("sqrt")
rsqrt = _fn("rsqrt")
rcp = _fn("rcp")
exp = _fn("exp")
exp2 = _fn("exp2")
expm1 = _fn("expm1")
log = _fn("log")
log2 = _fn("log2")
log10 = _fn("log10")
log1p = _fn("log1p")
sin = _fn("sin")
cos = _fn("cos")
tan = _fn("tan")
tanh = _fn("tanh")
sinh = _fn("sinh")
cosh = _fn("cosh")
arctan = _fn("arctan")
cbrt = _fn("cbrt")
sigmoid = _fn("sigmoid")
hypot = _fn("hypot")
copysign = _fn("copysign")
floor = _fn("floor")
ceil = _fn("ceil")
trunc = _fn("trunc")
round = _fn("round")
rint = round
sign = _fn("sign")
logical_and = _fn("logical_and")
logical_or = _fn("logical_or")
logical_xor = _fn("logical_xor")
logical_not = _fn("logical_not")
isnan = _fn("isnan")
isinf = _fn("isinf")
isfinite = _fn("isfinite")
where = _fn("where")
