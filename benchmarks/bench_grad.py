"""Derivatives (issue 27): ``nx.value_and_grad`` injected at a site against the value and the
derivative written by hand in CUDA C++.

One CUDA C++ kernel per formula ``u = f(x; a, b)``: each thread reads ``x``, computes ``u`` and
``du = df/dx`` and stores both. It is built twice from one source: hand-written (the value and
the derivative as C++, NVRTC -> nvJitLink) and injected (a ``PTX_INJECT`` site in their place,
compiled once as a template; ``nx.value_and_grad(f, wrt="x")`` as its stub, precision "cuda").
The table gives the SASS instruction counts of both kernels (``sass_instructions``: no NOPs, no
closing self-branch; needs nvdisasm, numptx[tools]) and their ratio, and the same for the value
alone (the formula against its C++ expression), so the derivative's own cost shows.

With a GPU, torch and ``numptx.torch`` present (``--gpu``), it also times
``numptx.torch.pairwise`` forward, and forward + backward, against ``torch.cdist`` (L1, L2) and
against every other zoo formula written in torch ops (:func:`torch_ops`); without any of them
it says so and skips that part (targets: >= 1x cdist, >= 3x torch ops, on an H200).

    python benchmarks/bench_grad.py                 # the SASS table (CPU only)
    python benchmarks/bench_grad.py --only lj,morse # some rows
    python benchmarks/bench_grad.py --gpu           # and pairwise timings on a GPU
    python benchmarks/bench_grad.py --gpu-only      # only those (about a minute on an H200)
    python benchmarks/bench_grad.py --pairwise-cpu  # the pairwise table on a CPU, small (smoke)
    python benchmarks/bench_grad.py --pairwise-sass # the tiled kernels' hot loops (CPU proxy)
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

import numptx as nx

ARCH = "sm_90"


def kernel_source(body: str) -> str:
    """``uo[i], duo[i] = f(xs[i]; a, b), df/dx``: ``body`` reads ``x``, ``a``, ``b`` and sets
    ``u`` and ``du``.

    >>> src = kernel_source("u = x * a; du = a;")
    """
    return r'''
extern "C" __global__ void k(float* uo, float* duo, const float* xs, float a, float b, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float x = xs[i];
    float u, du = 0.0f;
    %s
    uo[i] = u; duo[i] = du;
}''' % body


SITE_BOTH = ('PTX_INJECT("f", PTX_IN(F32, x), PTX_IN(F32, a), PTX_IN(F32, b), '
             'PTX_OUT(F32, u), PTX_OUT(F32, du));')
SITE_VALUE = 'PTX_INJECT("f", PTX_IN(F32, x), PTX_IN(F32, a), PTX_IN(F32, b), PTX_OUT(F32, u));'


class Case(NamedTuple):
    """A formula ``f(x, a, b)`` (``x`` the variable, ``a`` and ``b`` kernel parameters), its value
    in C++ (statements setting ``u``) and value plus derivative in C++ (setting ``u``, ``du``)."""
    key: str
    name: str
    formula: Callable
    value_cpp: str
    both_cpp: str


def _lj(x, a, b):               # a = epsilon, b = sigma
    s6 = (b / x) ** 6
    return 4 * a * (s6 * s6 - s6)


def _gauss(x, a, b):            # a = centre, b = width
    d = x - a
    return nx.exp(-(d * d) / (2 * b * b))


def _laplace(x, a, b):          # a = centre, b = length scale
    return nx.exp(-nx.abs(x - a) / b)


def _morse(x, a, b):            # a = alpha, b = r_e; well depth 1.5
    return 1.5 * (1 - nx.exp(-a * (x - b))) ** 2


def _morse_product(x, a, b):    # the same, squared as a product
    e = nx.exp(-a * (x - b))
    return 1.5 * (1 - e) * (1 - e)


def _coulomb(x, a, b):          # a = q1 q2, b = softening^2
    return a * nx.rsqrt(x * x + b)


def _rational(x, a, b):
    return (x * x + a * x + 1) / (x * x + b * x + 2)


def _poly(x, a, b):             # degree 6, Horner, a and b in the coefficients
    return (((((0.5 * x - 1.25) * x + a) * x + 2.0) * x - b) * x + 0.75) * x + 3.0


CASES = [
    Case("lj", "Lennard-Jones `4a((b/x)^12 - (b/x)^6)`", _lj,
         "float s = b / x, s2 = s * s, s6 = s2 * s2 * s2; u = 4.0f * a * (s6 * s6 - s6);",
         "float s = b / x, s2 = s * s, s6 = s2 * s2 * s2; u = 4.0f * a * (s6 * s6 - s6);\n"
         "    du = 24.0f * a * (s6 - 2.0f * s6 * s6) / x;"),
    Case("gauss", "Gaussian `exp(-(x-a)^2 / 2b^2)`", _gauss,
         "float d = x - a; u = expf(-(d * d) / (2.0f * b * b));",
         "float d = x - a, v = 2.0f * b * b; u = expf(-(d * d) / v);\n"
         "    du = -2.0f * d * u / v;"),
    Case("laplace", "Laplace `exp(-|x-a| / b)`", _laplace,
         "u = expf(-fabsf(x - a) / b);",
         "float d = x - a; u = expf(-fabsf(d) / b);\n"
         "    du = d == 0.0f ? 0.0f : -copysignf(u, d) / b;"),
    Case("softplus", "softplus `log1p(exp(x))`", lambda x, a, b: nx.log1p(nx.exp(x)),
         "u = log1pf(expf(x));",
         "float e = expf(x); u = log1pf(e); du = e / (1.0f + e);"),
    Case("tanh", "`tanh(x)`", lambda x, a, b: nx.tanh(x),
         "u = tanhf(x);",
         "u = tanhf(x); du = 1.0f - u * u;"),
    Case("sigmoid", "sigmoid `1 / (1 + exp(-x))`", lambda x, a, b: nx.sigmoid(x),
         "u = 1.0f / (1.0f + expf(-x));",
         "u = 1.0f / (1.0f + expf(-x)); du = u * (1.0f - u);"),
    Case("morse", "Morse `1.5 (1 - exp(-a(x-b))) ** 2`", _morse,
         "float e = expf(-a * (x - b)); u = 1.5f * (1.0f - e) * (1.0f - e);",
         "float e = expf(-a * (x - b)); u = 1.5f * (1.0f - e) * (1.0f - e);\n"
         "    du = 3.0f * a * e * (1.0f - e);"),
    Case("morse*", "Morse, `1.5 (1 - e) * (1 - e)`", _morse_product,
         "float e = expf(-a * (x - b)); u = 1.5f * (1.0f - e) * (1.0f - e);",
         "float e = expf(-a * (x - b)); u = 1.5f * (1.0f - e) * (1.0f - e);\n"
         "    du = 3.0f * a * e * (1.0f - e);"),
    Case("coulomb", "Coulomb, softened `a / sqrt(x^2 + b)`", _coulomb,
         "u = a * rsqrtf(x * x + b);",
         "float s = rsqrtf(x * x + b); u = a * s; du = -u * x * s * s;"),
    Case("rational", "rational `(x^2+ax+1) / (x^2+bx+2)`", _rational,
         "u = (x * x + a * x + 1.0f) / (x * x + b * x + 2.0f);",
         "float p = x * x + a * x + 1.0f, q = x * x + b * x + 2.0f; u = p / q;\n"
         "    du = ((2.0f * x + a) - u * (2.0f * x + b)) / q;"),
    Case("poly", "polynomial, degree 6 (Horner)", _poly,
         "u = (((((0.5f * x - 1.25f) * x + a) * x + 2.0f) * x - b) * x + 0.75f) * x + 3.0f;",
         "u = (((((0.5f * x - 1.25f) * x + a) * x + 2.0f) * x - b) * x + 0.75f) * x + 3.0f;\n"
         "    du = ((((3.0f * x - 6.25f) * x + 4.0f * a) * x + 6.0f) * x - 2.0f * b) * x + 0.75f;"),
]


def dsl_formula(case: Case, precision: str = "cuda") -> nx.PtxExpr:
    """``case.formula`` as an ``@nx.ptx_expr`` over f32 ``(x, a, b)``.

    >>> u = dsl_formula(CASES[0])
    """
    def f(x, a, b):
        return case.formula(x, a, b)
    f.__name__ = case.key
    f.__annotations__ = {"x": nx.f32, "a": nx.f32, "b": nx.f32, "return": nx.f32}
    return nx.ptx_expr(f, precision=precision)


class Row(NamedTuple):
    """SASS instruction counts of one formula's four kernels."""
    case: Case
    hand_value: int
    dsl_value: int
    hand_both: int
    dsl_both: int


def _count(cubin: bytes) -> int:
    from numptx.jit.compile.resources import sass_instructions
    return len(sass_instructions(cubin, "k"))


def _hand(body: str, arch: str) -> int:
    return _count(nx.ptx_to_cubin(nx.cuda_to_ptx(kernel_source(body), arch=arch), arch))


def _injected(site: str, expr: nx.PtxExpr, arch: str) -> int:
    t = nx.CudaTemplate(kernel_source(site), entry="k", arch=arch, cache=False)
    return _count(t.inject(f=expr).cubin)


def measure(case: Case, arch: str = ARCH) -> Row:
    """The four kernels of ``case``: hand-written and injected, value alone and value + derivative.

    >>> row = measure(CASES[4])          # tanh; needs nvdisasm
    """
    f = dsl_formula(case)
    return Row(case, _hand(case.value_cpp, arch), _injected(SITE_VALUE, f, arch),
               _hand(case.both_cpp, arch),
               _injected(SITE_BOTH, nx.value_and_grad(f, wrt="x"), arch))


def print_table(rows: list[Row]) -> None:
    print("| formula (f32, precision cuda) | value: hand | value: DSL | value + d/dx: hand | "
          "value_and_grad | ratio | within 5 % |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r.dsl_both / r.hand_both
        print(f"| {r.case.name} | {r.hand_value} | {r.dsl_value} | {r.hand_both} | "
              f"{r.dsl_both} | {ratio:.3f} | {'yes' if ratio <= 1.05 else 'no'} |")


# ---- --gpu: numptx.torch.pairwise against torch.cdist and torch ops --------------------------
#: hyperparameters of the timed zoo formulas
HYPER = {"lp": {"p": 3.0}, "laplace": {"sigma": 2.0}, "laplace_l1": {"sigma": 8.0},
         "gaussian": {"sigma": 2.0}, "matern12": {"lengthscale": 2.0, "variance": 1.5}}


def torch_ops(name: str, A, B, torch):
    """Zoo formula ``name`` in torch ops (broadcast differences, then reductions), or
    ``torch.cdist`` for L1 and L2: what a torch user writes without numptx."""
    h = HYPER.get(name, {})
    if name == "l1":
        return torch.cdist(A, B, p=1)
    if name == "l2":
        return torch.cdist(A, B, p=2)
    if name == "cosine":
        na, nb = (A * A).sum(1).sqrt(), (B * B).sum(1).sqrt()
        return (A @ B.T) / torch.clamp(na[:, None] * nb[None, :], min=1e-8)
    d = A[:, None, :] - B[None, :, :]
    if name == "lp":
        return d.abs().pow(h["p"]).sum(-1).pow(1 / h["p"])
    if name == "laplace_l1":
        return torch.exp(-d.abs().sum(-1) / h["sigma"])
    sq = (d * d).sum(-1)
    if name == "sqeuclidean":
        return sq
    if name == "gaussian":
        return torch.exp(-sq / (2 * h["sigma"] ** 2))
    if name == "laplace":
        return torch.exp(-sq.sqrt() / h["sigma"])
    if name == "matern12":
        return h["variance"] * torch.exp(-sq.sqrt() / h["lengthscale"])
    raise KeyError(name)


def _time(fn: Callable, torch, repeats: int, cuda: bool) -> float:
    """Median milliseconds of ``fn()`` (CUDA events on the current stream; a clock on a CPU)."""
    fn()
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        else:
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def pairwise_table(repeats: int, n: int = 2048, d: int = 64, device: str = "cuda") -> int:
    """``numptx.torch.pairwise`` forward, and forward + backward (dA, dB), against torch.cdist
    (L1, L2) and the zoo formula in torch ops; ``device="cpu"`` runs the same on a CPU (a
    smoke run: numptx computes there through NumPy)."""
    try:
        import torch
    except ImportError:
        print("\n--gpu skipped: torch is not installed (pip install numptx[torch])")
        return 0
    if device == "cuda" and not torch.cuda.is_available():
        print("\n--gpu skipped: no CUDA GPU here (torch.cuda.is_available() is False)")
        return 0
    try:
        from numptx.torch import pairwise
        from numptx.torch.zoo import ZOO
    except ImportError as e:
        print(f"\n--gpu skipped: numptx.torch cannot be imported ({e})")
        return 0
    gen = torch.Generator(device=device).manual_seed(27)
    A = torch.randn(n, d, device=device, generator=gen).requires_grad_()
    B = torch.randn(n, d, device=device, generator=gen).requires_grad_()
    cuda = device == "cuda"

    def fwd_bwd(f):
        def run():
            A.grad = B.grad = None
            f().sum().backward()
        return run

    where = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"\npairwise on {where}: n = m = {n}, d = {d}, f32, median of {repeats} (ms); "
          f"speed-up = torch / numptx; diff: max |numptx - torch| / max |torch| of the output, "
          f"and of dA, dB (out.sum() backward)")
    print("| formula | numptx fwd | torch fwd | speed-up | numptx fwd+bwd | torch fwd+bwd | "
          "speed-up | diff out | diff dA, dB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, z in ZOO.items():
        ours = lambda z=z, name=name: pairwise(A, B, z, **HYPER.get(name, {}))   # noqa: E731
        ref = lambda name=name: torch_ops(name, A, B, torch)                      # noqa: E731
        diffs = _diffs(ours, ref, A, B, torch)
        t = [_time(ours, torch, repeats, cuda), _time(ref, torch, repeats, cuda),
             _time(fwd_bwd(ours), torch, repeats, cuda), _time(fwd_bwd(ref), torch, repeats, cuda)]
        label = f"{name} vs torch.cdist" if name in ("l1", "l2") else f"{name} vs torch ops"
        print(f"| {label} | {t[0]:.3f} | {t[1]:.3f} | {t[1] / t[0]:.2f}x | {t[2]:.3f} | "
              f"{t[3]:.3f} | {t[3] / t[2]:.2f}x | {diffs[0]:.1e} | {diffs[1]:.1e}, "
              f"{diffs[2]:.1e} |")
    return 0


def _diffs(ours: Callable, ref: Callable, A, B, torch) -> list[float]:
    """max |ours - ref| / max |ref| for the output and for the gradients of its sum w.r.t. A
    and B."""
    def rel(x, y):
        return float((x - y).abs().max() / y.abs().max().clamp(min=1e-30))
    got, want = ours(), ref()
    ga = torch.autograd.grad(got.sum(), (A, B))
    gb = torch.autograd.grad(want.sum(), (A, B))
    return [rel(got.detach(), want.detach())] + [rel(x, y) for x, y in zip(ga, gb)]


# ---- --pairwise-sass: the CPU proxy of the tiled pairwise kernels ------------------------------
_SASS_LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_SASS_LABEL = re.compile(r"^(\.L_x_\d+):")
_BRANCH = re.compile(r"BRA `\((\.L_x_\d+)\)")


class Loop(NamedTuple):
    """A loop of a kernel's SASS: its instructions (from the branch target to the backward
    branch), and among them the FFMAs and the shared (LDS) and global (LDG) loads."""
    instructions: int
    ffma: int
    lds: int
    ldg: int
    parent: int | None = None       # the index of the loop around it in sass_loops' list


def sass_loops(text: str) -> list[Loop]:
    """The loops of one function's ``nvdisasm -c`` text (a branch back to an earlier label),
    each counted without the loops nested in it (a k-tile loop without its partial-tile
    loop), innermost first.

    >>> loops = sass_loops(sass_text(v.cubin, v.entry))     # doctest: +SKIP
    """
    code: list[tuple[int, str]] = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    for line in text.splitlines():
        lm = _SASS_LABEL.match(line.strip())
        if lm:
            pending.append(lm.group(1))
            continue
        m = _SASS_LINE.match(line)
        if m and m.group(2).strip(" {}") not in ("", "NOP"):
            addr = int(m.group(1), 16)
            for name in pending:
                labels[name] = addr
            pending = []
            code.append((addr, m.group(2).strip(" {}")))
    spans = sorted({(labels[b.group(1)], addr) for addr, ins in code
                    if (b := _BRANCH.search(ins)) and labels.get(b.group(1), addr + 1) <= addr},
                   key=lambda se: se[1] - se[0])
    loops = []
    for k, (start, end) in enumerate(spans):
        inner = [(s, e) for s, e in spans[:k] if start <= s and e <= end]
        body = [i for a, i in code if start <= a <= end and not any(s <= a <= e for s, e in inner)]
        ops = [i.split()[1] if i.startswith("@") else i.split()[0] for i in body]
        parent = next((j for j, (s, e) in enumerate(spans) if j > k and s <= start and end <= e),
                      None)
        loops.append(Loop(len(body), sum(o.startswith("FFMA") for o in ops),
                          sum(o.startswith("LDS") for o in ops),
                          sum(o.startswith("LDG") for o in ops), parent))
    return loops


def hot_loop(cubin: bytes, kernel: str) -> tuple[Loop, Loop | None]:
    """The loop of ``kernel`` with the most FFMAs of its own (the k or q loop of a pairwise
    kernel), and the loop around it (None: none)."""
    from numptx.jit.compile.sass import sass_text
    loops = sass_loops(sass_text(cubin, kernel))
    hot = max(loops, key=lambda lp: (lp.ffma, -lp.instructions))
    return hot, None if hot.parent is None else loops[hot.parent]


#: zoo formulas for the SASS proxy, and the FFMAs one application of each kernel's site takes
#: (l2: (a - b)^2 + acc, one FFMA forward, one in back; cosine: three forward, two back)
PROXY = {"l2": (1, 1), "cosine": (3, 2)}


def pairwise_sass_table(kernels_of: Callable | None = None, label: str = "tiled") -> None:
    """Per zoo formula and kernel, the hot loop's SASS instructions per application of the
    formula (one output element, one k), shared + global loads per FFMA, and registers::

        python benchmarks/bench_grad.py --pairwise-sass
    """
    from numptx.torch import zoo
    if kernels_of is None:
        from numptx.torch.cuda import kernels as kernels_of
    print(f"\npairwise kernels ({label}), {ARCH}, f32: the hot loop's SASS instructions per "
          "output element per k | loads (LDS + LDG) per FFMA | registers")
    print("| formula | forward | back_a | back_b |")
    print("|---|---|---|---|")
    for name, (fwd, bwd) in PROXY.items():
        f = zoo.ZOO[name].typed("f32")
        k = kernels_of(f, ARCH)
        cells = []
        for what, per in (("forward", fwd), ("back_a", bwd), ("back_b", bwd)):
            v = getattr(k, what)
            (ins, ffma, loads), apps = _per_tile(v, per, what, f, label == "tiled")
            cells.append(f"{ins / apps:.2f} | {loads / ffma:.2f} | {v.resources.registers}")
        print(f"| {name} | " + " | ".join(cells) + " |")


def _per_tile(v, per: int, what: str, f, tiled: bool) -> tuple[tuple[float, float, float], float]:
    """(instructions, FFMAs, loads) of the hot loop and the applications of the formula they
    make; a rolled tiled loop (16 applications: one k for a 4 x 4 block) takes its share of the
    loop around it (the tile loads and barriers), one k-tile (q-tile) per pass of that loop."""
    from numptx.torch import cuda as C
    hot, around = hot_loop(v.cubin, v.entry)
    apps = hot.ffma / per
    counts = (hot.instructions, hot.ffma, hot.lds + hot.ldg)
    if tiled and apps == 16 and around is not None:
        trips = C.BK if what == "forward" else C.back_tile(f.t, f.n_acc)
        counts = (hot.instructions * trips + around.instructions, hot.ffma * trips + around.ffma,
                  (hot.lds + hot.ldg) * trips + around.lds + around.ldg)
        apps *= trips
    return counts, apps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated case keys "
                    f"({', '.join(c.key for c in CASES)})")
    ap.add_argument("--gpu", action="store_true", help="also time numptx.torch.pairwise")
    ap.add_argument("--repeats", type=int, default=20, help="timed runs per case (--gpu)")
    ap.add_argument("--gpu-only", action="store_true",
                    help="only the pairwise timings on a GPU (no SASS table)")
    ap.add_argument("--pairwise-sass", action="store_true",
                    help="only the tiled pairwise kernels' hot loops in SASS (CPU)")
    ap.add_argument("--pairwise-cpu", action="store_true",
                    help="only the pairwise table, on the CPU at a small size (a smoke run)")
    args = ap.parse_args(argv)
    try:
        from numptx.jit.compile.sass import find_tool
        find_tool("nvdisasm")
    except nx.NumptxError as e:
        print(f"the SASS table needs nvdisasm: {e}", file=sys.stderr)
        return 1
    if args.pairwise_cpu:
        return pairwise_table(3, n=96, d=8, device="cpu")
    if args.pairwise_sass:
        pairwise_sass_table()
        return 0
    if args.gpu_only:
        return pairwise_table(args.repeats)
    keys = [k for k in args.only.split(",") if k]
    cases = [c for c in CASES if not keys or c.key in keys]
    t = time.perf_counter()
    rows = [measure(c) for c in cases]
    print(f"SASS instructions, {ARCH}, whole kernel (load x, compute, store u and du); "
          f"ratio = value_and_grad / hand-written value + derivative ({time.perf_counter() - t:.0f} s)")
    print_table(rows)
    return pairwise_table(args.repeats) if args.gpu else 0


if __name__ == "__main__":
    sys.exit(main())
