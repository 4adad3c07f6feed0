"""A small symbolic-regression loop on the CPU: random Stack PTX programs over two columns,
mutated and selected for a few generations, each generation scored with
``nx.fitness(..., device="cpu")`` (docs/templates.md, "Scoring a population").

    python examples/symbolic_regression_cpu.py      # seeded; a few seconds on a CPU

Every Stack PTX program compiles (an instruction whose operands are missing does nothing), so
mutation never has to check what it made. ``device="gpu"`` (or the default on a GPU machine)
scores the same population in packed modules, one launch per module.
"""
import random
import time

import numpy as np

import numptx as nx
from numptx import stack_ptx as sp

ROWS = {"add.rn.f32": "+", "sub.rn.f32": "-", "mul.rn.f32": "*"}
INPUTS = ["x0", "x1"]


def random_leaf(r: random.Random):
    if r.random() < 0.75:
        return sp.input(r.choice(INPUTS))
    return sp.const(float(r.choice([0.5, 1.0, 2.0, 3.0])), "f32")


def random_program(r: random.Random, size: int) -> list:
    """Postfix ops: leaves pushed, then an instruction whenever two values are on the stack."""
    prog, depth = [], 0
    for _ in range(size):
        while depth < 2 or r.random() < 0.3:
            prog.append(random_leaf(r))
            depth += 1
        prog.append(sp.instr(r.choice(list(ROWS))))
        depth -= 1
    return prog


def mutate(prog: list, r: random.Random) -> list:
    """Replace, insert or delete one op, or graft a random subtree onto the end."""
    prog = list(prog)
    i = r.randrange(len(prog))
    move = r.random()
    if move < 0.4:
        prog[i] = sp.instr(r.choice(list(ROWS))) if r.random() < 0.5 else random_leaf(r)
    elif move < 0.6:
        prog.insert(i, random_leaf(r))
    elif move < 0.8 and len(prog) > 2:
        del prog[i]
    else:
        prog += random_program(r, r.randint(1, 2)) + [sp.instr(r.choice(list(ROWS)))]
    return prog[:40]


def infix(prog: list) -> str:
    """The formula a program computes, read as Stack PTX runs it (a short-handed op is skipped)."""
    stack = []
    for op in prog:
        if op in ROWS_OPS:
            if len(stack) >= 2:
                b, a = stack.pop(), stack.pop()
                stack.append(f"({a} {ROWS_OPS[op]} {b})")
        else:
            stack.append(LEAF_TEXT[op])
    return stack[-1] if stack else "0"


ROWS_OPS = {sp.instr(name): sym for name, sym in ROWS.items()}
LEAF_TEXT = {sp.input(x): x for x in INPUTS}
LEAF_TEXT.update({sp.const(c, "f32"): f"{c:g}" for c in (0.5, 1.0, 2.0, 3.0)})


def main() -> None:
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, (256, 2)).astype(np.float32)
    y = (X[:, 0] * X[:, 0] + 2 * X[:, 1] - X[:, 0]).astype(np.float32)    # the law to find

    r = random.Random(11)
    population = [random_program(r, r.randint(1, 4)) for _ in range(200)]
    t0 = time.perf_counter()
    for gen in range(40):
        scores = nx.fitness(population, X, y, loss="mse", device="cpu")
        order = np.argsort(scores, kind="stable")
        best = population[order[0]]
        print(f"gen {gen:2d}: best mse {scores[order[0]]:.4g}  {infix(best)}")
        if scores[order[0]] < 1e-9:                                     # found (up to rounding)
            break
        elite = [population[k] for k in order[:20]]                      # selection
        population = elite + [mutate(r.choice(elite), r) for _ in range(180)]
    dt = time.perf_counter() - t0
    print(f"best formula: {infix(best)}  (mse {scores[order[0]]:.3g}, {len(best)} ops; "
          f"{gen + 1} generations of {len(population)} in {dt:.1f} s on the CPU)")
    stub = sp.compile(best, inputs={"x0": "f32", "x1": "f32"}, outputs={"p": "f32"})
    check = nx.emulate(stub, {"x0": X[:, 0], "x1": X[:, 1]}, ["p"])["p"]
    assert np.isclose(np.mean((check - y) ** 2), scores[order[0]], rtol=1e-4, atol=1e-6)
    assert scores[order[0]] < 1e-6


if __name__ == "__main__":
    main()
