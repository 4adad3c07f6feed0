"""Equations of the AI-Feynman set recovered with numptx's scikit-learn estimator, and their
Pareto fronts (accuracy against complexity) drawn as a PNG.

    python examples/feynman_discovery.py                 # PNG in the temp folder
    python examples/feynman_discovery.py --out fronts.png --generations 40

Each equation's variables are sampled as in the AI-Feynman benchmark (Udrescu & Tegmark,
2020), split into training and test rows; ``SymbolicRegressor.fit`` searches on the training
rows (on the CPU), ``score`` is R² on the test rows (solved: R² > 0.999999, SRBench's
threshold), ``equations_`` is the front: the best formula of each complexity. With pandas the
columns carry the variables' names, so the formulas do too; with sympy the picked formula is
printed simplified (``Candidate.sympy()``): II.3.24's 1/(4 pi) shows as 0.0795775, I.6.2a's
1/sqrt(2 pi) as 0.398942. Needs scikit-learn
(``pip install "numptx[sklearn]"``); the PNG is drawn with matplotlib when it is installed,
else with NumPy and zlib (points and lines, no text: the legend is printed).
"""
from __future__ import annotations

import argparse
import math
import os
import struct
import tempfile
import time
import zlib

import numpy as np

#: name, variables (name, low, high), the law, the ops searched with
EQUATIONS = [
    ("I.12.1", [("mu", 1, 5), ("Nn", 1, 5)], lambda mu, Nn: mu * Nn, ("add", "mul")),
    ("I.14.3", [("m", 1, 5), ("g", 1, 5), ("z", 1, 5)], lambda m, g, z: m * g * z,
     ("add", "mul")),
    ("II.3.24", [("Pwr", 1, 5), ("r", 1, 5)], lambda Pwr, r: Pwr / (4 * math.pi * r ** 2),
     ("add", "mul", "div")),
    ("I.6.2a", [("theta", 1, 3)],
     lambda theta: np.exp(-theta ** 2 / 2) / math.sqrt(2 * math.pi),
     ("add", "mul", "exp")),
]
#: the colours of the fronts in the drawn PNG (RGB), in EQUATIONS' order
COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40)]


def sample(variables, law, n: int, seed: int):
    """``n`` rows of the variables (uniform in their ranges) and the law's values."""
    rng = np.random.default_rng(seed)
    cols = {v: rng.uniform(lo, hi, n) for v, lo, hi in variables}
    X = np.column_stack(list(cols.values()))
    try:
        import pandas as pd
        X = pd.DataFrame(X, columns=list(cols))
    except ImportError:
        pass
    return X, law(**cols)


def readable(candidate) -> str:
    """The candidate's formula through sympy when it is installed (``Candidate.sympy()``:
    terms gathered, constants to 6 digits, those under 1e-8 dropped), else its text."""
    try:
        import sympy
    except ImportError:
        return candidate.formula
    e = candidate.sympy()
    return str(e.xreplace({f: 0 if abs(f) < 1e-8 else sympy.Float(f, 6)
                           for f in e.atoms(sympy.Float)}))


def discover(generations: int, population: int, seed: int) -> list[dict]:
    from numptx.search import SymbolicRegressor
    found = []
    for name, variables, law, ops in EQUATIONS:
        X, y = sample(variables, law, 600, seed)
        train, test = slice(0, 400), slice(400, None)
        Xtr, Xte = (X.iloc[train], X.iloc[test]) if hasattr(X, "iloc") else (X[train], X[test])
        model = SymbolicRegressor(ops, population=population, generations=generations,
                                  random_state=seed, device="cpu", target=1e-12)
        t = time.perf_counter()
        model.fit(Xtr, y[train])
        r2 = model.score(Xte, y[test])
        seconds = time.perf_counter() - t
        print(f"{name:8s} R² {r2:.9f} ({'solved' if r2 > 0.999999 else 'not solved'}) in "
              f"{seconds:.1f} s: {readable(model.best_)}")
        for c in model.equations_:
            print(f"           complexity {c.complexity:3d}  loss {c.loss:10.3g}  {c.formula}")
        found.append({"name": name, "model": model, "r2": r2,
                      "front": [(c.complexity, c.loss) for c in model.equations_]})
    return found


# ---- the picture ----------------------------------------------------------------------------
def _axes(found):
    cx = [c for f in found for c, _ in f["front"]]
    ly = [math.log10(max(loss, 1e-16)) for f in found for _, loss in f["front"]]
    return (min(cx), max(cx) + 1), (min(ly) - 0.5, max(ly) + 0.5)


def draw_numpy(found, width: int = 640, height: int = 400) -> np.ndarray:
    """The fronts as an RGB array: x complexity, y log10(loss), one colour per equation."""
    img = np.full((height, width, 3), 255, np.uint8)
    (x0, x1), (y0, y1) = _axes(found)
    m = 40

    def px(c, loss):
        u = m + (c - x0) / max(x1 - x0, 1e-9) * (width - 2 * m)
        v = height - m - (math.log10(max(loss, 1e-16)) - y0) / (y1 - y0) * (height - 2 * m)
        return int(round(u)), int(round(v))

    img[height - m, m:width - m] = img[m:height - m, m] = 0                 # the axes
    for f, colour in zip(found, COLOURS):
        pts = [px(c, loss) for c, loss in f["front"]]
        for (a, b), (c, d) in zip(pts, pts[1:]):                            # steps
            img[b, min(a, c):max(a, c) + 1] = colour
            img[min(b, d):max(b, d) + 1, c] = colour
        for a, b in pts:
            img[max(b - 3, 0):b + 4, max(a - 3, 0):a + 4] = colour
    return img


def write_png(path: str, rgb: np.ndarray) -> None:
    """An RGB array as a PNG file (zlib and the PNG chunk layout: no imaging library)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[r].tobytes() for r in range(h))        # filter 0 per row
    with open(path, "wb") as fh:
        fh.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                 + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def plot(found, out: str) -> str:
    """Draw the fronts into ``out``; returns the writer's name."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        write_png(out, draw_numpy(found))
        for f, colour in zip(found, COLOURS):
            print(f"  {f['name']}: RGB {colour}")
        return "numpy+zlib (x: complexity, y: log10 loss)"
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for f in found:
        c, loss = zip(*f["front"])
        ax.step(c, np.maximum(loss, 1e-16), where="post", marker="o", label=f["name"])
    ax.set(yscale="log", xlabel="complexity (nodes)", ylabel="loss (MSE)",
           title="Pareto fronts of AI-Feynman equations")
    ax.legend()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return "matplotlib"


def main(out: str, generations: int = 20, population: int = 300, seed: int = 0) -> list[dict]:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        print('needs scikit-learn: pip install "numptx[sklearn]"')
        return []
    found = discover(generations, population, seed)
    solved = sum(f["r2"] > 0.999999 for f in found)
    print(f"solved {solved} of {len(found)} (test R² > 0.999999)")
    writer = plot(found, out)
    print(f"wrote {out} with {writer}")
    return found


def _cli() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None,
                    help="the PNG to write (default: numptx_feynman_fronts.png in the temp dir)")
    ap.add_argument("--generations", type=int, default=20)
    ap.add_argument("--population", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    a, _ = ap.parse_known_args()      # known only: tests/test_examples.py runs this under pytest
    out = a.out or os.path.join(tempfile.gettempdir(), "numptx_feynman_fronts.png")
    main(out, a.generations, a.population, a.seed)


if __name__ == "__main__":
    _cli()
