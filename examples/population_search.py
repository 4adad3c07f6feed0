"""A tiny symbolic-regression generation: random Stack PTX programs over two columns, packed
into modules and scored on a data set with ``nx.fitness`` (docs/templates.md, "Populations").

    python examples/population_search.py       # scores on the GPU if there is one, else the CPU

On a GPU the whole population is packed into modules of 256 candidates, built in parallel and
scored in one launch per module; on a CPU each candidate runs through the emulator.
"""
import random
import time

import numpy as np

import numptx as nx
from numptx import stack_ptx as sp

ROWS = ["add.rn.f32", "sub.rn.f32", "mul.rn.f32", "min.f32", "max.f32"]


def random_program(r: random.Random, size: int = 6) -> list:
    """A random expression over x0, x1 and constants, as Stack PTX ops."""
    prog, depth = [], 0
    for _ in range(size):
        while depth < 2 or r.random() < 0.3:
            prog.append(sp.input(r.choice(["x0", "x1"])) if r.random() < 0.7
                        else sp.const(round(r.uniform(-2, 2), 2), "f32"))
            depth += 1
        prog.append(sp.instr(r.choice(ROWS)))
        depth -= 1
    return prog


def main() -> None:
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (2000, 2)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + X[:, 0]).astype(np.float32)           # the law to find

    r = random.Random(7)
    population = [random_program(r) for _ in range(300)]
    population.append([sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f32"), sp.input("x0"),
                       sp.instr("add.rn.f32")])                     # the answer, planted

    t = time.perf_counter()
    scores = nx.fitness(population, X, y, loss="mse")
    dt = time.perf_counter() - t
    best = int(np.argmin(scores))
    print(f"scored {len(population)} candidates in {dt:.2f} s; best #{best}: mse {scores[best]:.3g}")
    print(f"  {sp.compile(population[best], inputs={'x0': 'f32', 'x1': 'f32'}, outputs={'p': 'f32'}).count(';')} PTX statements")
    assert scores[best] == 0.0

    # the same population as packed modules of the fitting kernel (what the GPU path builds)
    tmpl = nx.jit.fitness.fitness_template(2, ("x0", "x1"))
    t = time.perf_counter()
    packs = tmpl.pack_many("f", population, select="cand")
    print(f"built {len(packs)} modules for {len(population)} candidates in "
          f"{time.perf_counter() - t:.2f} s (one nvJitLink run each)")


if __name__ == "__main__":
    main()
