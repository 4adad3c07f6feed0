"""An n-body step with the force law as a site: a numba kernel (``@nx.kernel``, ``nx.site``)
sums the pair forces on each body, and two ``@nx.ptx_expr`` formulas fill the site: softened
gravity and a Lennard-Jones-like law (docs/templates.md, "numba templates").

    python examples/nbody_force_law.py      # on a GPU; without one, in numba-cuda's simulator

numba-cuda picks its simulator when it is imported, from NUMBA_ENABLE_CUDASIM. So without a GPU
this script sets it before numba is imported, or, where numba was already imported without it
(inside a test session), runs itself again in a fresh interpreter with it set.
"""
import os
import subprocess
import sys
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

N, DT, SOFT = 48, np.float32(1e-3), np.float32(1e-2)


@nx.kernel
def step(pos, vel, mass, new_pos, new_vel, dt, soft):
    """Semi-implicit Euler: a_i = sum_j law(r2_ij, m_j) * (p_j - p_i)."""
    i = cuda.grid(1)
    if i < pos.shape[0]:
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        ax = ay = az = np.float32(0.0)
        for j in range(pos.shape[0]):               # j == i adds law(soft, m) * 0
            dx, dy, dz = pos[j, 0] - xi, pos[j, 1] - yi, pos[j, 2] - zi
            r2 = dx * dx + dy * dy + dz * dz + soft
            s = nx.site("law", r2=r2, m=mass[j], out={"s": nx.f32})
            ax += s * dx
            ay += s * dy
            az += s * dz
        vx, vy, vz = vel[i, 0] + dt * ax, vel[i, 1] + dt * ay, vel[i, 2] + dt * az
        new_vel[i, 0], new_vel[i, 1], new_vel[i, 2] = vx, vy, vz
        new_pos[i, 0], new_pos[i, 1], new_pos[i, 2] = xi + dt * vx, yi + dt * vy, zi + dt * vz


@nx.ptx_expr
def gravity(r2: nx.f32, m: nx.f32) -> nx.f32:
    """Softened gravity (G = 1): m / r^3, with r2 already softened."""
    inv_r = nx.rsqrt(r2)
    return m * inv_r * inv_r * inv_r


@nx.ptx_expr
def lennard_jones(r2: nx.f32, m: nx.f32) -> nx.f32:
    """A Lennard-Jones-like law (sigma = 0.2, epsilon = m): 24 (s^6/r^8 - 2 s^12/r^14)."""
    s2 = 0.04 / r2
    s6 = s2 * s2 * s2
    return m * 24.0 * s6 * (1.0 - 2.0 * s6) / r2


def numpy_step(pos, vel, mass, law):
    """The same step in NumPy (float64), law(r2, m) as a Python function."""
    d = pos[None, :, :].astype(np.float64) - pos[:, None, :]           # d[i, j] = p_j - p_i
    r2 = (d * d).sum(axis=2) + float(SOFT)
    acc = (law(r2, mass[None, :].astype(np.float64))[:, :, None] * d).sum(axis=1)
    new_vel = vel + float(DT) * acc
    return pos + float(DT) * new_vel, new_vel


LAWS = {
    "gravity": (gravity, lambda r2, m: m / r2 ** 1.5),
    "lennard-jones": (lennard_jones,
                      lambda r2, m: m * 24 * (0.04 / r2) ** 3 * (1 - 2 * (0.04 / r2) ** 3) / r2),
}


def main() -> None:
    if not SIMULATOR and not cuda.is_available():
        # numba was imported before this script could choose the simulator: run it fresh
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        res = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env,
                             capture_output=True, text=True, timeout=300)
        print(res.stdout, end="")
        if res.returncode:
            raise SystemExit(res.stderr)
        return

    rng = np.random.default_rng(5)
    pos = rng.uniform(-1, 1, (N, 3)).astype(np.float32)
    vel = rng.normal(0, 0.1, (N, 3)).astype(np.float32)
    mass = rng.uniform(0.5, 1.5, N).astype(np.float32)
    where = "in numba-cuda's simulator (CPU)" if SIMULATOR else "on the GPU"
    for name, (formula, law) in LAWS.items():
        k = step.inject(law=formula)
        new_pos, new_vel = np.zeros_like(pos), np.zeros_like(vel)
        t = time.perf_counter()
        k[(N + 63) // 64, 64](pos, vel, mass, new_pos, new_vel, DT, SOFT)
        dt = time.perf_counter() - t
        ref_pos, ref_vel = numpy_step(pos, vel, mass, law)
        err = max(np.abs(new_vel - ref_vel).max() / np.abs(ref_vel).max(),
                  np.abs(new_pos - ref_pos).max())
        print(f"{name:<14} {N} bodies, one step {where} in {dt:.2f} s; "
              f"max error vs NumPy {err:.1e}")
        assert err < 1e-4, err

if __name__ == "__main__":
    main()
