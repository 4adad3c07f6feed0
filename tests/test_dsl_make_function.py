"""numptx.dsl.signature.make_function: a formula function built from names, not source."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx
from numptx.dsl.signature import make_function


def test_the_function_has_the_names_annotations_and_defaults():
    f = make_function("area", {"w": nx.f32, "h": nx.f32}, lambda w, h: w * h, defaults={"h": 2.0})
    assert f.__name__ == "area" and f.__code__.co_varnames[:2] == ("w", "h")
    assert f(3.0) == 6.0 and f(3.0, 4.0) == 12.0
    assert f.__annotations__ == {"w": nx.f32, "h": nx.f32}
    expr = nx.ptx_expr(f)
    w, h = np.float32([3, -1.5]), np.float32([5, 4])
    got = nx.emulate(expr.stub(), {"w": w, "h": h}, {"out": "f32"})["out"]
    np.testing.assert_array_equal(got, w * h)
    assert expr.signature().startswith("area(")


def test_a_parameter_named_like_the_inner_call_still_works():
    f = make_function("g", {"_impl": nx.f32, "_impl_": nx.f32}, lambda a, b: a - b)
    assert f(5.0, 2.0) == 3.0


@pytest.mark.parametrize("bad", ["x y", "class", "1a", "a-b", ""])
def test_names_other_than_identifiers_are_refused(bad):
    with pytest.raises(ValueError, match="identifier"):
        make_function("f", {bad: nx.f32}, lambda a: a)
    with pytest.raises(ValueError, match="identifier"):
        make_function(bad, {"a": nx.f32}, lambda a: a)
