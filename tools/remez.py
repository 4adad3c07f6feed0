"""The offline Remez fitter behind numptx/dsl/mathlib/coeffs.py (the polynomial coefficients of
the DSL math sequences). It regenerates that module, or checks it::

    python tools/remez.py              # rewrite numptx/dsl/mathlib/coeffs.py (~10 s on 2 cores)
    python tools/remez.py --check      # exit 1 if the committed module differs from a re-fit
    python tools/remez.py --print sin  # print the entries of some fits only

Each target is P(z) ~ g(z) minimizing max |w(z) (P(z) - g(z))|, w chosen so that the error is
relative to the function (e.g. e^r = 1 + r + r^2 P(r): g = (e^r - 1 - r) / r^2, w = r^2 / e^r).
g comes from the Taylor series (or the function) in 70-digit decimals; the fit is a discrete
Remez exchange on a Chebyshev-spaced grid in the same arithmetic; coefficients are then rounded
to the working precision. ``atanh52`` (pow's tail in log2 units) is derived from ``atanh5``.
The fits are deterministic, so a re-fit reproduces the committed module exactly
(tests/test_mathlib.py re-fits a few of them on every run).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from decimal import Decimal, localcontext

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COEFFS_PATH = os.path.join(ROOT, "numptx", "dsl", "mathlib", "coeffs.py")

_FIT_PREC = 70


def _pw(z, k):
    return z ** k if k else Decimal(1)


def _series(terms, eps):
    s = Decimal(0)
    for t in terms:
        s += t
        if abs(t) <= eps * (abs(s) + 1):
            return s
    raise ArithmeticError("series did not converge")


def _dsin(r, eps):
    return _series(((-1) ** n * _pw(r, 2 * n + 1) / math.factorial(2 * n + 1)
                    for n in range(400)), eps)


def _dcos(r, eps):
    return _series(((-1) ** n * _pw(r, 2 * n) / math.factorial(2 * n) for n in range(400)), eps)


def _datan(u, eps):
    # two argument halvings: atan(u) = 2 atan(u / (1 + sqrt(1 + u^2))), then the Taylor series
    for _ in range(2):
        u = u / (1 + (1 + u * u).sqrt())
    return 4 * _series(((-1) ** n * _pw(u, 2 * n + 1) / (2 * n + 1) for n in range(4000)), eps)


def _fit_targets():
    """name -> (g(z), weight(z), lo, hi): fit P ~ g minimizing max |weight * (P - g)|."""
    with localcontext() as ctx:
        ctx.prec = _FIT_PREC
        eps = Decimal(10) ** -(_FIT_PREC - 5)
        ln2 = Decimal(2).ln()
    zero = Decimal(0)

    def series(term, start):                    # sum_{n >= start} term(n)
        return lambda z: _series((term(n, z) for n in range(start, 20000)), eps)

    def rel_odd(F, k=3):                        # weight z^(k/2) / F(sqrt z): error relative to F
        return lambda z: (z.sqrt() ** k / F(z.sqrt(), eps)) if z else zero

    def tail_odd(F, z0):                        # (F(r) - r) / r^3 at z = r^2 (F odd, F(r) ~ r)
        return lambda z: ((F(z.sqrt(), eps) - z.sqrt()) / z.sqrt() ** 3
                          if z > Decimal("1e-30") else z0)

    def tanh(r, e):
        t = (2 * r).exp()
        return (t - 1) / (t + 1)

    def sinh(r, e):
        return (r.exp() - (-r).exp()) / 2

    def atanh2(s, e):                           # log((1 + s) / (1 - s))
        return ((1 + s) / (1 - s)).ln()

    fact = math.factorial
    T = {}
    # e^r = 1 + r + r^2 P(r), |r| <= ln2/2 (+ margin for the rounded reduction); expm1 fits the
    # same P with the weight relative to e^r - 1
    g_exp = series(lambda n, r: _pw(r, n - 2) / fact(n), 2)
    T["exp"] = (g_exp, lambda r: r * r / r.exp(), -0.3503, 0.3503)
    T["expm1"] = (g_exp, lambda r: (r * r / (r.exp() - 1)) if r else zero, -0.3503, 0.3503)
    # 2^r = 1 + r ln2 + r^2 P(r), |r| <= 1/2
    T["exp2"] = (series(lambda n, r: ln2 ** n * _pw(r, n - 2) / fact(n), 2),
                 lambda r: r * r / (ln2 * r).exp(), -0.5002, 0.5002)
    # log(1 + f) = f - f^2/2 + f^3 P(f), f in [sqrt(1/2) - 1, sqrt(2) - 1]
    T["log1p"] = (series(lambda n, f: (-1) ** (n + 1) * _pw(f, n - 3) / n, 3),
                  lambda f: (f ** 3 / (1 + f).ln()) if f else zero, -0.29293, 0.41422)
    # log((1+s)/(1-s)) = 2 s + s^3 P(s^2), |s| <= 3 - 2 sqrt(2); and its s^5 tail:
    # log((1+s)/(1-s)) = 2 s + 2/3 s^3 + s^5 P(s^2)
    s_max2 = 0.17158 ** 2
    T["atanh"] = (series(lambda n, z: 2 * _pw(z, n - 1) / (2 * n + 1), 1), rel_odd(atanh2),
                  0, s_max2)
    T["atanh5"] = (series(lambda n, z: 2 * _pw(z, n - 2) / (2 * n + 1), 2), rel_odd(atanh2, 5),
                   0, s_max2)
    # sin r = r + r^3 P(r^2), cos r = 1 - r^2/2 + r^4 P(r^2), |r| <= 0.9 (pi/4 plus the
    # misrounding of k at large |x|)
    T["sin"] = (series(lambda n, z: (-1) ** n * _pw(z, n - 1) / fact(2 * n + 1), 1),
                rel_odd(_dsin), 0, 0.81)
    T["cos"] = (series(lambda n, z: (-1) ** n * _pw(z, n - 2) / fact(2 * n), 2),
                lambda z: z * z / _dcos(z.sqrt(), eps), 0, 0.81)
    # atan u = u + u^3 P(u^2), |u| <= 1
    T["atan"] = (tail_odd(_datan, Decimal(-1) / 3), rel_odd(_datan), 0, 1.0)
    # tanh x = x + x^3 P(x^2) on [0, 0.55] (f32) / [0, 0.3] (f64)
    T["tanh_f32"] = (tail_odd(tanh, Decimal(-1) / 3), rel_odd(tanh), 0, 0.55 ** 2)
    T["tanh_f64"] = (tail_odd(tanh, Decimal(-1) / 3), rel_odd(tanh), 0, 0.3 ** 2)
    # sinh x = x + x^3 P(x^2) on [0, 1]
    T["sinh"] = (series(lambda n, z: _pw(z, n - 1) / fact(2 * n + 1), 1), rel_odd(sinh), 0, 1.0)
    # m^(-1/3) on [1, 2]: a rough seed for Newton's iteration
    T["rcbrt"] = (lambda m: 1 / m ** (Decimal(1) / 3), lambda m: m ** (Decimal(1) / 3), 1, 2)
    return T


def _solve(A, b):
    n = len(A)
    M = [row[:] + [bb] for row, bb in zip(A, b)]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(M[r][i]))
        M[i], M[p] = M[p], M[i]
        for r in range(i + 1, n):
            f = M[r][i] / M[i][i]
            for k in range(i, n + 1):
                M[r][k] -= f * M[i][k]
    x = [Decimal(0)] * n
    for i in reversed(range(n)):
        x[i] = (M[i][n] - sum(M[i][k] * x[k] for k in range(i + 1, n))) / M[i][i]
    return x


def _remez(g, w, lo, hi, n, *, grid=3000, iters=30):
    """Weighted minimax polynomial sum_{j<n} c_j z^j ~ g(z) on [lo, hi] (discrete Remez exchange
    on a Chebyshev-spaced grid, Decimal arithmetic). Returns (coefficients, max weighted error)."""
    with localcontext() as ctx:
        ctx.prec = _FIT_PREC
        lo, hi = Decimal(lo), Decimal(hi)
        if w(lo) == 0:
            lo += (hi - lo) * Decimal("1e-12")
        zs = [(lo + hi) / 2 - (hi - lo) / 2 * Decimal(math.cos(math.pi * i / (grid - 1)))
              for i in range(grid)]
        G = [g(z) for z in zs]
        W = [abs(w(z)) for z in zs]
        m = n + 1
        ref = [round((grid - 1) * (1 - math.cos(math.pi * i / (m - 1))) / 2) for i in range(m)]
        best = None
        for _ in range(iters):
            A = [[_pw(zs[i], j) for j in range(n)] + [Decimal((-1) ** k) / W[i]]
                 for k, i in enumerate(ref)]
            sol = _solve(A, [G[i] for i in ref])
            c, E = sol[:n], sol[n]
            err = []
            for i in range(grid):
                acc = Decimal(0)
                for a in reversed(c):
                    acc = acc * zs[i] + a
                err.append(W[i] * (acc - G[i]))
            emax = max(abs(e) for e in err)
            if best is None or emax < best[1]:
                best = (c, emax)
            if emax <= abs(E) * Decimal("1.0001"):
                break
            cand, i = [], 0
            while i < grid:
                j, s = i, err[i] >= 0
                while j < grid and (err[j] >= 0) == s:
                    j += 1
                cand.append(max(range(i, j), key=lambda t: abs(err[t])))
                i = j
            while len(cand) > m:
                v = [abs(err[k]) for k in cand]
                s = min(range(len(cand)), key=v.__getitem__)
                if s in (0, len(cand) - 1) or len(cand) - m == 1:
                    cand.pop(0 if v[0] < v[-1] else -1)
                elif v[s - 1] < v[s + 1]:
                    del cand[s - 1:s + 1]
                else:
                    del cand[s:s + 2]
            if len(cand) < m:
                break
            ref = cand
        return best[0], float(best[1])


FITS = {  # name -> {dtype: number of coefficients}
    "exp": {"f32": 5, "f64": 10}, "expm1": {"f32": 6, "f64": 11}, "exp2": {"f32": 5, "f64": 10},
    "log1p": {"f32": 8}, "atanh": {"f64": 7}, "atanh5": {"f32": 3, "f64": 7},
    "sin": {"f32": 3, "f64": 7}, "cos": {"f32": 3, "f64": 6}, "atan": {"f32": 9, "f64": 20},
    "tanh_f32": {"f32": 5}, "tanh_f64": {"f64": 8}, "sinh": {"f32": 4, "f64": 7},
    "rcbrt": {"f32": 3, "f64": 3},
}


def fit(names=None) -> dict:
    """Re-run the fits of :data:`FITS` (optionally only ``names``): {(name, dtype): (coefficients
    rounded to dtype, max weighted error before rounding)}, plus the derived ``atanh52`` entries
    when ``atanh5`` is fitted."""
    targets = _fit_targets()
    out = {}
    for name, per in FITS.items():
        if names and name not in names:
            continue
        g, w, lo, hi = targets[name]
        for dt, n in per.items():
            c, err = _remez(g, w, lo, hi, n)
            cast = float if dt == "f64" else (lambda v: float(np.float32(float(v))))
            out[(name, dt)] = (tuple(cast(v) for v in c), err)
    for dt in ("f32", "f64"):
        if ("atanh5", dt) in out:
            cs, err = out[("atanh5", dt)]
            with localcontext() as ctx:         # ln 2 correctly rounded (no numptx import:
                ctx.prec = 80                     # the tool runs even on a broken coeffs.py)
                ln2 = float(Decimal(2).ln())
            div = (lambda c: float(np.float32(c / ln2))) if dt == "f32" else (lambda c: c / ln2)
            out[("atanh52", dt)] = (tuple(div(c) for c in cs), None)
    return out


HEADER = '''\
"""Polynomial coefficients of the DSL math sequences: GENERATED by ``python tools/remez.py``
(do not edit; ``python tools/remez.py --check`` compares a re-fit with this file).

``COEFFS[(name, dtype)]`` is c_0, c_1, ... of a weighted minimax fit of the relative error, rounded
to ``dtype``; the comment is the fit's max weighted error before rounding. ``atanh52`` is
``atanh5`` divided by ln 2 (pow's tail in log2 units).
"""
from __future__ import annotations


def _hx(*s: str) -> tuple[float, ...]:
    return tuple(float.fromhex(v) for v in s)


COEFFS: dict[tuple[str, str], tuple[float, ...]] = {
'''


def entry(name: str, dt: str, cs: tuple, err: float | None) -> str:
    """The source lines of one COEFFS entry."""
    note = f"  # 2^{math.log2(err):.1f}" if err is not None else "  # atanh5 / ln 2"
    lines = [f'    ("{name}", "{dt}"): _hx({note}']
    line = "       "
    for v in cs:
        item = f' "{v.hex()}",'
        if len(line) + len(item) > 98:
            lines.append(line)
            line = "       "
        line += item
    lines.append(line + "),")
    return "\n".join(lines) + "\n"


def render(fits: dict) -> str:
    """The text of numptx/dsl/mathlib/coeffs.py for ``fit()``'s result."""
    return HEADER + "".join(entry(n, dt, cs, err) for (n, dt), (cs, err) in fits.items()) + "}\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed module")
    ap.add_argument("--print", nargs="+", metavar="NAME", help="print these fits only")
    ap.add_argument("--out", default=COEFFS_PATH, help="the module to write or check")
    a = ap.parse_args(argv)
    if a.print:
        fits = fit(a.print)
        sys.stdout.write("".join(entry(n, dt, cs, err) for (n, dt), (cs, err) in fits.items()))
        return 0
    text = render(fit())
    if a.check:
        with open(a.out, encoding="utf-8") as fh:
            same = fh.read() == text
        print(f"{a.out}: {'reproduced' if same else 'DIFFERS from a re-fit'}")
        return 0 if same else 1
    with open(a.out, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
