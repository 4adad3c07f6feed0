"""Symbolic regression with numptx.search: Pagie-1 and two Feynman equations.

    python examples/symbolic_regression.py             # small sizes on a CPU (< 1 min)
    python examples/symbolic_regression.py --full      # full sizes (meant for a GPU)
    python examples/symbolic_regression.py --out plots # where the PNGs go (default: a temp dir)

Each problem prints the loss per generation and the formula found; with matplotlib installed it
writes a PNG per problem (loss per generation and the fitted curve or surface against the
data); without it the example still runs and says so. On a GPU (found automatically) the
populations are packed into modules and scored one launch per module; on a CPU each program
runs in the stub emulator, so the sizes are small there. See docs/search.md.
"""
from __future__ import annotations

import argparse
import math
import os
import tempfile
import time

import numpy as np

from numptx import search
from numptx.jit.populations.fitness import gpu_available

OPS = ["add", "sub", "mul", "div", "exp", "log", "sin", "cos"]


def problems(n: int, rng: np.random.Generator) -> list[tuple[str, np.ndarray, np.ndarray, list]]:
    """(name, X, y, ops) of each problem, ``n`` samples."""
    X = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    with np.errstate(divide="ignore"):
        pagie = (1 / (1 + X[:, 0] ** -4) + 1 / (1 + X[:, 1] ** -4)).astype(np.float32)
    # Feynman I.6.2a: the standard normal density, theta in [1, 3]
    th = rng.uniform(1, 3, (n, 1)).astype(np.float32)
    t = th[:, 0].astype(np.float64)
    gauss = (np.exp(-t ** 2 / 2) / math.sqrt(2 * math.pi)).astype(np.float32)
    # Feynman I.39.1: the energy of an ideal gas, E = 3/2 p V, p and V in [1, 5]
    pv = rng.uniform(1, 5, (n, 2)).astype(np.float32)
    gas = (1.5 * pv[:, 0] * pv[:, 1]).astype(np.float32)
    return [("Pagie-1", X, pagie, OPS),
            ("Feynman I.6.2a", th, gauss, ["add", "sub", "mul", "div", "exp"]),
            ("Feynman I.39.1", pv, gas, ["add", "sub", "mul", "div"])]


def plot(name: str, r: search.Result, X: np.ndarray, y: np.ndarray, out: str) -> str | None:
    """A PNG of the loss per generation and the fit; None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig = plt.figure(figsize=(10, 4))
    ax = fig.add_subplot(1, 2, 1)
    ax.semilogy([g.best for g in r.history], label="best")
    ax.semilogy([g.median if math.isfinite(g.median) else np.nan for g in r.history],
                label="median")
    ax.set_xlabel("generation")
    ax.set_ylabel("loss (mse)")
    ax.legend()
    pred = r.best.predict(X)
    if X.shape[1] == 1:
        ax = fig.add_subplot(1, 2, 2)
        o = np.argsort(X[:, 0])
        ax.plot(X[o, 0], y[o], ".", ms=2, label="data")
        ax.plot(X[o, 0], pred[o], "-", label="found")
        ax.legend()
    else:
        ax = fig.add_subplot(1, 2, 2, projection="3d")
        ax.scatter(X[:, 0], X[:, 1], y, s=1, label="data")
        ax.plot_trisurf(X[:, 0], X[:, 1], pred, alpha=0.5)
    fig.suptitle(f"{name}: {r.best.formula[:70]}", fontsize=8)
    path = os.path.join(out, name.replace(" ", "_").replace(".", "_") + ".png")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--full", action="store_true", help="full sizes (default on a GPU)")
    ap.add_argument("--out", default=None, help="folder for the PNGs (default: a temp dir)")
    args, _ = ap.parse_known_args()
    gpu = gpu_available()
    full = args.full or gpu
    n, population, generations = (20000, 4096, 60) if full else (300, 300, 40)
    out = args.out or os.path.join(tempfile.gettempdir(), "numptx_symbolic_regression")
    os.makedirs(out, exist_ok=True)
    print(f"device: {'GPU' if gpu else 'CPU (emulator)'}; {n} samples, population {population}, "
          f"{generations} generations")
    rng = np.random.default_rng(0)
    for name, X, y, ops in problems(n, rng):
        t0 = time.perf_counter()
        r = search.regress(X, y, ops, population=population, generations=generations, seed=0,
                           target=1e-10, parsimony=1e-6, restart=15)
        dt = time.perf_counter() - t0
        print(f"\n{name}: {r.generations} generations in {dt:.1f} s "
              f"({r.candidates_per_second:,.0f} candidates evaluated/s), stopped: {r.stopped}")
        for g in r.history[:: max(1, len(r.history) // 6)] + r.history[-1:]:
            print(f"  gen {g.generation:3d}  best {g.best:.4g}  median {g.median:.4g}  "
                  f"scored {g.evaluated}")
        print(f"  best: {r.best.formula}  (mse {r.best.loss:.3g}, {r.best.length} ops)")
        png = plot(name, r, X, y, out)
        print(f"  plot: {png}" if png else "  plot: matplotlib is not installed; no PNG written")
        check = float(np.mean((r.best.predict(X).astype(np.float64) - y) ** 2))
        assert math.isclose(check, r.best.loss, rel_tol=1e-4, abs_tol=1e-9), (check, r.best.loss)


if __name__ == "__main__":
    main()
