"""Random Stack PTX programs over the plane, drawn as a montage of domain-colouring images
(a port of mm-ptx-py's examples/fun/domain_coloring_random).

    python examples/domain_coloring.py              # 8 programs x 96x96, PNG in the temp folder
    python examples/domain_coloring.py --programs 16 --size 128 --out montage.png

Each program reads the site inputs t, x, y (f32; x and y span [-8, 8]) and leaves two values,
f and g: the pixel's hue is the angle atan2(g, f), its lightness grows with log|f + ig|. The
programs are evaluated with ``nx.emulate`` on the CPU; on a GPU they are injected into a CUDA
template, run there, and compared with the emulator. Writing the PNG needs matplotlib or Pillow
(``pip install pillow`` or ``pip install matplotlib``); without either the images are still
computed and the script says what to install.
"""
from __future__ import annotations

import argparse
import math
import os
import tempfile
import time

import numpy as np

import numptx as nx
from numptx import stack_ptx as sp
from numptx.errors import NumptxError

INPUTS = {"t": "f32", "x": "f32", "y": "f32"}
OUTPUTS = {"f": "f32", "g": "f32"}
ADD, MUL = sp.instr("add.ftz.f32"), sp.instr("mul.ftz.f32")
SIN, COS = sp.instr("sin.approx.ftz.f32"), sp.instr("cos.approx.ftz.f32")
SCALE = 8.0                      # the plane shown: [-8, 8] x [-8, 8]


class Generator:
    """Random programs, postfix Stack PTX: each output is a sum of 2-4 terms
    ``c * sin|cos(arg)``, an ``arg`` is a sum of 1-3 products ``c * u [* v]`` of factors x, y, t
    or a nested ``sin|cos(arg)``; a single factor may be squared with ``dup``. Constants are in
    [-1, 1] ([-1/4, 1/4] before a product of two factors), so every argument stays inside
    [-48, 48] (|x|, |y| <= 8, t < 6), where sin.approx keeps its documented accuracy (2^-14.7)
    and the GPU and the emulator agree closely."""

    def __init__(self, seed: int = 0, max_depth: int = 2):
        self.rng = np.random.default_rng(seed)
        self.max_depth = max_depth

    def _const(self, scale: float = 1.0) -> list[sp.Op]:
        return [sp.const(float(np.float32(self.rng.uniform(-scale, scale))), "f32")]

    def _factor(self, depth: int) -> list[sp.Op]:
        if depth > 0 and self.rng.random() < 0.3:
            return self._arg(depth - 1) + [SIN if self.rng.random() < 0.5 else COS]
        return [sp.input(str(self.rng.choice(["x", "y", "x", "y", "t"])))]

    def _product(self, depth: int) -> list[sp.Op]:
        r = self.rng.random()
        if r < 0.4:                                                 # c u v, |.| <= 16
            return self._const(0.25) + self._factor(depth) + [MUL] + self._factor(depth) + [MUL]
        if r < 0.55:                                                # c u^2 (dup), |.| <= 16
            return self._factor(depth) + [sp.dup("f32"), MUL] + self._const(0.25) + [MUL]
        return self._const() + self._factor(depth) + [MUL]         # c u, |.| <= 8

    def _arg(self, depth: int) -> list[sp.Op]:
        ops = self._product(depth)
        for _ in range(int(self.rng.integers(0, 3))):              # up to 3 products: |arg| <= 48
            ops += self._product(depth) + [ADD]
        return ops

    def _output(self) -> list[sp.Op]:
        ops: list[sp.Op] = []
        for i in range(int(self.rng.integers(2, 5))):
            trig = SIN if self.rng.random() < 0.5 else COS
            ops += self._const() + self._arg(self.max_depth) + [trig, MUL]
            if i:
                ops.append(ADD)
        return ops

    def program(self) -> list[sp.Op]:
        """Two expressions; the first output, f, takes the top of the f32 stack (the second),
        g the one below it."""
        return self._output() + self._output()


def compile_program(prog, *, site=None) -> sp.Stub:
    kw = {"site": site} if site is not None else {"inputs": INPUTS, "outputs": OUTPUTS}
    return sp.compile(prog, strict=True, **kw)


def plane(size: int) -> tuple[np.ndarray, np.ndarray]:
    """x (left to right) and y (bottom to top) of each pixel, row-major, float32."""
    c = np.arange(size, dtype=np.float32) * np.float32(2.0 / size) - np.float32(1.0)
    c = c * np.float32(SCALE)
    x, y = np.meshgrid(c, c[::-1])
    return x.ravel(), y.ravel()


def evaluate(stub, t: float, size: int) -> tuple[np.ndarray, np.ndarray]:
    """f and g on the size x size grid, through the emulator."""
    x, y = plane(size)
    got = nx.emulate(stub, {"t": np.full_like(x, t), "x": x, "y": y}, outputs=list(OUTPUTS))
    return got["f"].reshape(size, size), got["g"].reshape(size, size)


def colour(f, g, *, light=0.5, saturation=0.6, max_norm=2.0) -> np.ndarray:
    """Domain colouring (mm-ptx-py's kernel, in NumPy): hue from atan2(g, f), lightness from a
    log of the magnitude; HSL -> RGB bytes (h, w, 3)."""
    with np.errstate(invalid="ignore", over="ignore"):
        h = (np.arctan2(g, f) + np.pi) / (2 * np.pi)
        norm = np.hypot(f, g)
        lum = light * np.log(norm * 2.0 + 1.0) / math.log(max_norm * 2.0 + 1.0)
    h, lum = np.nan_to_num(h), np.nan_to_num(lum, posinf=1.0)
    chroma = (1.0 - np.abs(2.0 * lum - 1.0)) * saturation
    rgb = [np.clip(v, 0.0, 1.0)
           for v in (np.abs(h * 6 - 3) - 1, 2 - np.abs(h * 6 - 2), 2 - np.abs(h * 6 - 4))]
    out = np.stack([(c - 0.5) * chroma + lum for c in rgb], axis=-1)
    return (np.clip(out, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def montage(images: list[np.ndarray], cols: int, gap: int = 2) -> np.ndarray:
    rows = -(-len(images) // cols)
    h, w, _ = images[0].shape
    sheet = np.full((rows * (h + gap) + gap, cols * (w + gap) + gap, 3), 255, np.uint8)
    for i, img in enumerate(images):
        r, c = divmod(i, cols)
        top, left = gap + r * (h + gap), gap + c * (w + gap)
        sheet[top:top + h, left:left + w] = img
    return sheet


def write_png(path: str, rgb: np.ndarray) -> str | None:
    """Write with Pillow or matplotlib; returns the writer's name, or None when neither is there."""
    try:
        from PIL import Image
        Image.fromarray(rgb, "RGB").save(path)
        return "Pillow"
    except ImportError:
        pass
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        plt.imsave(path, rgb)
        return "matplotlib"
    except ImportError:
        return None


GPU_SRC = r'''
extern "C" __global__ void field(float* f_out, float* g_out, const float* xs, const float* ys,
                                 float t, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = xs[i], y = ys[i], f = 0.0f, g = 0.0f;
        PTX_INJECT("func", PTX_IN(F32, t), PTX_IN(F32, x), PTX_IN(F32, y),
                   PTX_OUT(F32, f), PTX_OUT(F32, g));
        f_out[i] = f; g_out[i] = g;
    }
}'''


def main(programs: int = 8, size: int = 96, out: str = "domain_coloring.png", seed: int = 0,
         gpu: bool | None = None, build: bool = True) -> dict:
    if not (isinstance(programs, int) and programs >= 1 and isinstance(size, int)
            and 2 <= size <= 4096):
        raise NumptxError(f"domain_coloring: programs must be >= 1 and size in [2, 4096] "
                          f"(got programs={programs!r}, size={size!r})")
    start = time.perf_counter()
    gen = Generator(seed)
    progs = [gen.program() for _ in range(programs)]
    times = [0.4 + 0.35 * (i % 16) for i in range(programs)]    # each program at its own t < 6
    stubs = [compile_program(p) for p in progs]
    fields = [evaluate(s, t, size) for s, t in zip(stubs, times)]
    images = [colour(f, g) for f, g in fields]
    print(f"{programs} random programs ({min(map(len, progs))}-{max(map(len, progs))} ops), "
          f"emulated on {size}x{size} grids in {time.perf_counter() - start:.2f} s")
    for i, (f, g) in enumerate(fields[:3]):
        mag = np.hypot(f, g)
        print(f"  program {i}: |f + ig| in [{mag.min():.3f}, {mag.max():.3f}]")

    result = {"programs": progs, "stubs": stubs, "fields": fields, "images": images,
              "montage": montage(images, cols=min(4, programs)), "gpu": False}
    if build or gpu:
        tmpl = nx.CudaTemplate(GPU_SRC, entry="field", arch="sm_90", cache=None)
        site = tmpl.sites["func"]
        variants = tmpl.build_many([{"func": compile_program(p, site=site)} for p in progs])
        print(f"  {len(variants)} kernel variants assembled (one template, one nvJitLink run each)")
        if gpu is None:              # the simulator runs no CUDA C++: a GPU only
            from numba import cuda
            gpu = bool(cuda.is_available()) and not nx.simulator_active()
        if gpu:
            x, y = plane(size)
            worst = 0.0
            for v, t, (f, g) in zip(variants, times, fields):
                fo, go = np.zeros_like(x), np.zeros_like(x)
                v[(x.size + 255) // 256, 256](fo, go, x, y, np.float32(t), x.size)
                diff = max(np.abs(fo - f.ravel()).max(), np.abs(go - g.ravel()).max())
                worst = max(worst, float(diff))
            # sin/cos.approx: 2^-14.7 absolute in [-100 pi, 100 pi], a little amplified by nesting
            assert worst < 1e-2, f"GPU and emulator differ by {worst}"
            print(f"  GPU == emulator on every pixel (max |difference| {worst:.2e})")
            result["gpu"] = True
        else:
            print("  no CUDA GPU: the variants were built, not launched")

    writer = write_png(out, result["montage"])
    if writer:
        h, w, _ = result["montage"].shape
        print(f"wrote {out} ({w}x{h}) with {writer}")
    else:
        print("no PNG written: install Pillow or matplotlib (pip install pillow, or pip install "
              "matplotlib); the images were computed")
    result["writer"] = writer
    return result


def _cli() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", type=int, default=8)
    ap.add_argument("--size", type=int, default=96, help="pixels per side of each image")
    ap.add_argument("--out", default=None,
                    help="the PNG to write (default: numptx_domain_coloring.png in the temp dir)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-gpu", action="store_true", help="do not launch on a GPU even if present")
    a, _ = ap.parse_known_args()      # known only: tests/test_examples.py runs this under pytest
    out = a.out or os.path.join(tempfile.gettempdir(), "numptx_domain_coloring.png")
    main(a.programs, a.size, out, a.seed, gpu=False if a.no_gpu else None)


if __name__ == "__main__":
    _cli()
