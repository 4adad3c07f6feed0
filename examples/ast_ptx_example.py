"""AST PTX: a typed expression tree in postorder, checked strictly, compiled to a stub.

    python examples/ast_ptx_example.py
"""
import numpy as np

import numptx as nx
from numptx import ast_ptx as ap


def main() -> None:
    x, y = ap.leaf(ap.input("x")), ap.leaf(ap.input("y"))
    # hypot(x, y) = sqrt(fma(x, x, y * y))
    tree = ap.node("sqrt.rn.f32", ap.node("fma.rn.f32", x, x, ap.node("mul.rn.f32", y, y)))
    prog = ap.postorder(tree)
    stub = ap.compile(prog, inputs={"x": "f32", "y": "f32"}, outputs={"z": "f32"})
    print(stub)
    got = nx.emulate(stub, {"x": np.float32([3, 5]), "y": np.float32([4, 12])}, outputs=["z"])
    assert got["z"].tolist() == [5.0, 13.0]

    # strict: a wrong program names the op at fault
    try:
        ap.compile([ap.input("x"), ap.const(1, "s32"), ap.instr("add.rn.f32")],
                   inputs={"x": "f32"}, outputs={"z": "f32"})
    except ap.ASTError as e:
        print(f"ASTError at op {e.index}: {e}")


if __name__ == "__main__":
    main()
