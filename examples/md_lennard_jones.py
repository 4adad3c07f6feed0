"""Molecular dynamics with the force from ``nx.value_and_grad``: a numba kernel (``@nx.kernel``,
``nx.site``) computes each atom's Lennard-Jones force and energy; the site gets the potential
U(r) and its derivative dU/dr from one formula, derived by numptx (docs/dsl.md, "Derivatives").
A small cluster runs velocity Verlet for a few hundred steps; the total energy must stay
constant, and its curve over the steps goes to a PNG (matplotlib or Pillow; skipped without).

    python examples/md_lennard_jones.py [steps [out.png]]   # on a GPU; else numba-cuda's simulator

numba-cuda picks its simulator when it is imported, from NUMBA_ENABLE_CUDASIM: without a GPU
this script sets it before numba is imported, or, where numba was already imported without it
(inside a test session), runs itself again in a fresh interpreter with it set.
"""
import math
import os
import subprocess
import sys
import tempfile
import time


def _gpu_present() -> bool:
    """A CUDA driver with a device, asked without importing numba."""
    import ctypes
    try:
        lib = ctypes.CDLL("libcuda.so.1" if os.name != "nt" else "nvcuda.dll")
        count = ctypes.c_int(0)
        return lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    except OSError:
        return False


if not _gpu_present() and "numba" not in sys.modules:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")     # before numba is imported

import numpy as np                  # noqa: E402
from numba import cuda              # noqa: E402  a module global: the simulator swaps it

import numptx as nx                 # noqa: E402
from numptx.jit.numba.numba_site import SIMULATOR   # noqa: E402

#: the relative drift of the total energy this run must stay under (f32 forces, dt = 0.004)
MAX_DRIFT = 1e-3


@nx.ptx_expr
def lj(r: nx.f32, eps: nx.f32, sigma: nx.f32) -> nx.f32:
    """The Lennard-Jones potential U(r) = 4 eps ((sigma/r)^12 - (sigma/r)^6)."""
    s6 = (sigma / r) ** 6
    return 4 * eps * (s6 * s6 - s6)


lj_and_force = nx.value_and_grad(lj, wrt="r")       # (U, dU/dr): one formula, shared work


@nx.kernel
def forces(pos, frc, pot, eps, sigma):
    """F_i = sum_j -dU/dr(r_ij) (p_i - p_j) / r_ij and half of each pair's energy U(r_ij)."""
    i = cuda.grid(1)
    if i < pos.shape[0]:
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        fx = fy = fz = e = np.float32(0.0)
        for j in range(pos.shape[0]):
            if j != i:
                dx, dy, dz = xi - pos[j, 0], yi - pos[j, 1], zi - pos[j, 2]
                r = np.float32(math.sqrt(dx * dx + dy * dy + dz * dz))
                u, du = nx.site("lj", r=r, eps=eps, sigma=sigma,
                                out={"u": nx.f32, "du": nx.f32})
                s = -du / r
                fx += s * dx
                fy += s * dy
                fz += s * dz
                e += np.float32(0.5) * u
        frc[i, 0], frc[i, 1], frc[i, 2] = fx, fy, fz
        pot[i] = e


def cluster(seed: int = 27) -> tuple:
    """Eight atoms on a slightly perturbed cube near the pair minimum (2^(1/6) sigma), with
    small random velocities and no net momentum (mass 1, sigma = eps = 1)."""
    rng = np.random.default_rng(seed)
    corners = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], float)
    pos = corners * 2 ** (1 / 6) + rng.normal(0, 0.03, corners.shape)
    vel = rng.normal(0, 0.15, corners.shape)
    return pos, vel - vel.mean(axis=0)


def run(steps: int = 300, dt: float = 0.004, seed: int = 27) -> np.ndarray:
    """Velocity Verlet for ``steps`` steps; the total energy after each step (and before)."""
    k = forces.inject(lj=lj_and_force)
    pos, vel = cluster(seed)
    n = len(pos)
    eps, sigma = np.float32(1.0), np.float32(1.0)
    frc, pot = np.zeros((n, 3), np.float32), np.zeros(n, np.float32)

    def evaluate(p):
        k[1, 32](p.astype(np.float32), frc, pot, eps, sigma)
        return frc.astype(np.float64), float(pot.sum())

    f, u = evaluate(pos)
    energy = [u + 0.5 * float((vel * vel).sum())]
    for _ in range(steps):
        vel += 0.5 * dt * f
        pos += dt * vel
        f, u = evaluate(pos)
        vel += 0.5 * dt * f
        energy.append(u + 0.5 * float((vel * vel).sum()))
    return np.array(energy)


def plot(energy: np.ndarray, path: str) -> str | None:
    """Energy over steps as a PNG with matplotlib, else Pillow; the writer's name, or None."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(energy, lw=1)
        ax.set(xlabel="step", ylabel="total energy", title="Lennard-Jones cluster, velocity Verlet")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return "matplotlib"
    except ImportError:
        pass
    try:
        from PIL import Image
    except ImportError:
        return None
    Image.fromarray(raster(energy), "L").save(path)
    return "Pillow"


def raster(y: np.ndarray, width: int = 600, height: int = 300) -> np.ndarray:
    """A line plot of ``y`` as a grey image (white background, black curve, 8-pixel margins)."""
    img = np.full((height, width), 255, np.uint8)
    m = 8
    lo, hi = float(y.min()), float(y.max())
    span = hi - lo or 1.0
    xs = np.linspace(m, width - 1 - m, len(y)).round().astype(int)
    ys = (height - 1 - m - (y - lo) / span * (height - 1 - 2 * m)).round().astype(int)
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        t = np.linspace(0, 1, steps + 1)
        img[(y0 + t * (y1 - y0)).round().astype(int), (x0 + t * (x1 - x0)).round().astype(int)] = 0
    img[m:height - m, m - 1] = img[height - m, m - 1:width - m] = 128        # axes
    return img


def main(steps: int = 300, out: str = "md_lennard_jones.png") -> dict:
    if not SIMULATOR and not cuda.is_available():
        # numba was imported before this script could choose the simulator: run it fresh
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        res = subprocess.run([sys.executable, os.path.abspath(__file__), str(steps), out],
                             env=env, capture_output=True, text=True, timeout=300)
        print(res.stdout, end="")
        if res.returncode:
            raise SystemExit(res.stderr)
        return {}
    where = "in numba-cuda's simulator (CPU)" if SIMULATOR else "on the GPU"
    t = time.perf_counter()
    energy = run(steps)
    drift = float(np.abs(energy - energy[0]).max() / abs(energy[0]))
    print(f"8 Lennard-Jones atoms, {steps} velocity-Verlet steps {where} in "
          f"{time.perf_counter() - t:.1f} s; force from nx.value_and_grad(lj, wrt='r')")
    print(f"total energy {energy[0]:.6f} -> {energy[-1]:.6f}: max relative drift {drift:.2e}")
    assert drift < MAX_DRIFT, drift
    writer = plot(energy, out)
    print(f"wrote {out} with {writer}" if writer else
          "no PNG written: install matplotlib or Pillow (pip install numptx[plots]); the "
          "energies were computed")
    return {"energy": energy, "drift": drift, "writer": writer}


if __name__ == "__main__":
    # [steps [out.png]]: main() passes its own to a fresh run. Under pytest (runpy in
    # tests/test_examples.py) argv holds pytest's flags: the defaults, drawn in the temporary
    # folder, not the caller's working directory
    is_script = "pytest" not in sys.modules
    args = sys.argv[1:] if is_script else []
    default = "md_lennard_jones.png" if is_script else os.path.join(tempfile.gettempdir(),
                                                                    "md_lennard_jones.png")
    main(int(args[0]) if args else 300, args[1] if len(args) > 1 else default)
