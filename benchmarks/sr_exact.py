"""Exact recoveries, SRBench style, of the runs of ``bench_search.py --compare`` (issue 26, item 0).

A *solved* run (test R² > 0.999999, :mod:`sr_compare`) fits the data; an *exact recovery* is
a solved run whose model is the problem's true formula up to a constant. The criterion is
SRBench's "symbolic solution" (La Cava et al. 2021, "Contemporary Symbolic Regression Methods
and their Relative Performance", NeurIPS Datasets and Benchmarks; the code:
``experiment/assess_symbolic_model.py`` and ``experiment/symbolic_utils.py`` of
github.com/cavalab/srbench, and the notebook's ``symbolic_solution`` column), followed here
step by step:

1. the model text is parsed to sympy, ``sympy.simplify(model, ratio=1)``, and then every float
   of it is rounded to 6 decimal places (``round_floats``: ``round(f, 6)``, so 1.25823e-07
   becomes 0 and 0.999999616 becomes 1.0);
2. ``diff = round_floats(true - model)`` and ``frac = round_floats(model / true)``;
3. the diff is simplified (``sympy.simplify(diff, ratio=1)``) where it is not already a
   constant;
4. the model is a symbolic solution when the diff is 0, or the diff is a constant, or the
   ratio is a constant (sympy's ``is_constant()``), and the simplified model is not ``0`` or
   ``nan`` (the notebook's clean-up of constant models).

So ``1.00008*(x0*x1) + 3e-9`` recovers ``x0*x1`` (a factor and an offset), and so does
``x0*x1*1.5`` (a factor); ``x0**0.499984`` does not recover ``sqrt(x0)``, nor
does a polynomial whose fitted coefficients miss the true ones past the 6th decimal place.
SRBench assesses runs with test R² > 0.5; this script assesses the *solved* runs (the
table's "exact recoveries" are counted among them) and reports the others as unsolved.

What differs from SRBench's code, and why:

- **Parsing**. numptx's text is read by :func:`numptx.search.export.sympy_of` (the formula
  grammar: ``fmax``, ``fma``, ``sat``, ``copysign``, ``:=`` ...), Operon's infix text (and the
  true formulas) by :func:`parse_infix`, a syntax-tree walk over a fixed set of functions
  (SRBench's ``parse_expr`` evaluates the text as Python). A float that is an integer is a sympy
  ``Integer`` in both (``1.000000*x0`` is ``x0``), so sympy's powers and cancellations see
  integers; a non-integer float keeps its decimal digits.
- **True formulas** (:data:`TRUE`) are exact: ``pi`` is sympy's, and 3/2 a Rational (SRBench
  writes ``pi`` as 3.1415926535, which a constant ratio or difference absorbs anyway).
- **Time box**. SRBench lets sympy's ``simplify`` run as long as it takes; on a model of a
  few dozen ops that is often more than 10 s here. Each run is checked in a worker process
  that stops the check after ``timeout`` seconds of *CPU time* (:data:`TIMEOUT`; a profiling
  timer, so a busy machine does not turn checks into timeouts; a worker that stays silent
  for :data:`WALL_FACTOR` times as long in wall time is killed); a check that times out counts
  as *not exact* and is reported as a timeout. sympy's random test points (``is_constant``)
  are seeded, so a check that finishes gives the same verdict every time; one that ends near
  the limit may finish on a faster machine (say the timeout with the counts).
- **A constant that is not finite** (``zoo``, ``nan``) does not count as a constant
  difference or ratio.

Each solved run gets one verdict: ``exact`` (with the rule that decided: ``difference is 0``,
``difference is constant``, ``ratio is constant``), ``not exact``, ``timeout`` or ``error``
(the text did not parse, or sympy raised; counted as not exact, as SRBench counts an exception).

::

    python benchmarks/sr_exact.py benchmarks/results_sr_compare_2026-11-29c.json
    python benchmarks/sr_exact.py runs.json more.json --timeout 20 --json verdicts.json

prints, per problem and engine, the solved runs, the exact recoveries and the timeouts, and the
totals; ``--json`` writes one verdict per run (the run's engine, problem, seed, solved, test R²
and model, then ``verdict``, ``rule``, ``simplified``, ``seconds``, ``note``).
"""
from __future__ import annotations

import argparse
import ast
import json
import math
import multiprocessing
import signal
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sr_compare import PROBLEMS  # noqa: E402

TIMEOUT = 10.0     #: CPU seconds a check may take (sympy's simplify) before it counts as a timeout
DECIMALS = 6       #: SRBench's round_floats: every float of the model rounded to this many places
START_LIMIT = 120.0   #: seconds a worker process may take to start (import sympy and numptx)
WALL_FACTOR = 30      #: a check's wall-time limit, past its CPU time box: this x timeout + START_LIMIT

#: problem -> its true formula over x0, x1, ... (both engines' input names), in the infix
#: syntax :func:`parse_infix` reads; each is checked against sr_compare's NumPy function
#: (tests/test_sr_exact.py)
TRUE: dict[str, str] = {
    "Nguyen-1": "x0**3 + x0**2 + x0",
    "Nguyen-2": "x0**4 + x0**3 + x0**2 + x0",
    "Nguyen-3": "x0**5 + x0**4 + x0**3 + x0**2 + x0",
    "Nguyen-4": "x0**6 + x0**5 + x0**4 + x0**3 + x0**2 + x0",
    "Nguyen-5": "sin(x0**2)*cos(x0) - 1",
    "Nguyen-6": "sin(x0) + sin(x0 + x0**2)",
    "Nguyen-7": "log(x0 + 1) + log(x0**2 + 1)",
    "Nguyen-8": "sqrt(x0)",
    "Keijzer-4": "x0**3*exp(-x0)*cos(x0)*sin(x0)*(sin(x0)**2*cos(x0) - 1)",
    "Keijzer-11": "x0*x1 + sin((x0 - 1)*(x1 - 1))",
    "Keijzer-12": "x0**4 - x0**3 + x1**2/2 - x1",
    "Feynman-I.12.1": "x0*x1",
    "Feynman-I.14.3": "x0*x1*x2",
    "Feynman-I.18.4": "(x0*x2 + x1*x3)/(x0 + x1)",
    "Feynman-I.25.13": "x0/x1",
    "Feynman-I.39.1": "3/2*x0*x1",
    "Feynman-II.3.24": "x0/(4*pi*x1**2)",
}

# the functions of Operon's infix text and of the true formulas -> sympy's name. pyoperon's
# InfixFormatter writes ``^`` for a power, and (pyoperon 0.6.2) "max" for an Fmin node and
# "min" for an Fmax node: the text is read as written (these runs' operators have neither)
_FUNCS = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh",
          "sinh": "sinh", "cosh": "cosh", "asin": "asin", "acos": "acos", "atan": "atan",
          "sqrt": "sqrt", "cbrt": "cbrt", "abs": "Abs", "max": "Max", "min": "Min",
          "floor": "floor", "ceil": "ceiling"}


def _sympy():
    try:
        import sympy
    except ImportError as e:
        raise SystemExit(f"sr_exact needs sympy ({e}): pip install \"numptx[sympy]\"") from e
    return sympy


def names_of(problem: str) -> list[str]:
    """The input names of ``problem``: x0 .. x{d-1}, as both engines name them."""
    return [f"x{j}" for j in range(len(PROBLEMS[problem].lo))]


def parse_infix(text: str, names: Sequence[str]) -> Any:
    """The sympy expression of infix ``text`` (Operon's ``InfixFormatter`` output, or a true
    formula): numbers, the inputs ``names``, ``pi``, ``+ - * / **`` (``^`` read as ``**``) and
    the functions of ``_FUNCS``; anything else raises ValueError naming it::

        parse_infix("1.5 * ((x0 * (-2.0)) ^ 2) + 3", ["x0"])      # 6*x0**2 + 3
    """
    sp = _sympy()
    try:
        tree = ast.parse(text.replace("^", "**"), mode="eval")
    except SyntaxError as e:
        raise ValueError(f"not infix text ({e.msg} at column {e.offset}): {text[:80]!r}") from e
    env = {n: sp.Symbol(n) for n in names}
    funcs = {k: getattr(sp, v) for k, v in _FUNCS.items()}
    ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
           ast.Pow: lambda a, b: a ** b}

    def number(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"unsupported literal {v!r}")
        if isinstance(v, int) or (math.isfinite(v) and v.is_integer()):
            return sp.Integer(int(v))
        return sp.Float(repr(v), 15)

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant):
            return number(node.value)
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id == "pi":
                return sp.pi
            raise ValueError(f"unknown name {node.id!r} (the inputs are {', '.join(names)})")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            a = walk(node.operand)
            return -a if isinstance(node.op, ast.USub) else a
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            if node.func.id not in funcs:
                raise ValueError(f"unknown function {node.func.id!r} (known: {', '.join(funcs)})")
            return funcs[node.func.id](*[walk(a) for a in node.args])
        raise ValueError(f"unsupported syntax {ast.dump(node)[:60]!r}")
    try:
        return walk(tree)
    except RecursionError as e:
        raise ValueError(f"text nested too deeply: {text[:80]!r}") from e


def parse_model(engine: str, text: str, names: Sequence[str]) -> Any:
    """The sympy expression of an engine's model text: numptx's through
    :func:`numptx.search.export.sympy_of` (the formula grammar, f32 numbers), any other
    engine's (Operon's) through :func:`parse_infix`."""
    if engine == "numptx":
        from numptx.search.export import sympy_of
        return sympy_of(text, list(names), dtype="f32")
    return parse_infix(text, names)


def true_model(problem: str) -> Any:
    """The true formula of ``problem`` as a sympy expression over x0, x1, ...::

        true_model("Feynman-I.39.1")                  # 3*x0*x1/2
    """
    if problem not in TRUE:
        raise ValueError(f"no true formula for problem {problem!r} (known: {', '.join(TRUE)})")
    return parse_infix(TRUE[problem], names_of(problem))


def round_floats(expr: Any, decimals: int = DECIMALS) -> Any:
    """``expr`` with every sympy Float rounded to ``decimals`` places (SRBench's round_floats;
    the expression is rebuilt, so a float that rounds to 0 drops out of a sum)."""
    sp = _sympy()
    floats = expr.atoms(sp.Float)
    return expr.xreplace({f: round(f, decimals) for f in floats}) if floats else expr


def _is_constant(expr: Any) -> bool:
    """sympy's ``is_constant()``, True only where it says so and the constant is finite."""
    sp = _sympy()
    try:
        if expr.is_constant() is not True:
            return False
    except (TypeError, ValueError, NotImplementedError, ZeroDivisionError):
        return False
    return not expr.has(sp.nan, sp.zoo, sp.oo, -sp.oo)


def assess(true: Any, model: Any) -> dict[str, Any]:
    """SRBench's symbolic-solution check of sympy ``model`` against sympy ``true`` (steps 1-4
    of the module docstring): ``{"exact": bool, "rule": str, "simplified": str}``, the rule
    being the one that decided (``difference is 0``, ``difference is constant``, ``ratio is
    constant``; for a model that is not exact, why: ``model is constant 0``/``nan``, ``neither
    difference nor ratio is constant``)."""
    sp = _sympy()
    cleaned = round_floats(sp.simplify(model, ratio=1))
    out = {"exact": False, "simplified": str(cleaned)}
    if cleaned == 0 or cleaned.has(sp.nan):
        return {**out, "rule": f"model is constant {cleaned}"}
    diff = round_floats(true - cleaned)
    frac = round_floats(cleaned / true)
    if diff == 0:
        return {**out, "exact": True, "rule": "difference is 0"}
    if _is_constant(frac):
        return {**out, "exact": True, "rule": "ratio is constant"}
    if not _is_constant(diff):
        diff = sp.simplify(diff, ratio=1)
    if diff == 0:
        return {**out, "exact": True, "rule": "difference is 0"}
    if _is_constant(diff):
        return {**out, "exact": True, "rule": "difference is constant"}
    return {**out, "rule": "neither difference nor ratio is constant"}


def check(engine: str, problem: str, text: str) -> dict[str, Any]:
    """Parse an engine's model text for ``problem`` and :func:`assess` it against the true
    formula: assess's dict, or ``{"exact": False, "error": message}`` where the text does not
    parse or sympy raises (SRBench counts an exception as no solution)::

        check("numptx", "Feynman-I.25.13", "x0/x1")["exact"]          # True
    """
    _sympy()
    try:
        import sympy.core.random as sprandom
        sprandom.seed(0)                 # is_constant's random test points: same each run
    except (ImportError, AttributeError):
        pass
    try:
        return assess(true_model(problem), parse_model(engine, text, names_of(problem)))
    except Exception as e:  # noqa: BLE001 - SRBench: any exception is "no solution"
        return {"exact": False, "error": f"{type(e).__name__}: {str(e)[:200]}"}


class _OverTime(BaseException):
    """A check's CPU time ran out (SIGPROF); a BaseException, so check's handler lets it by."""


def _over_time(signum: int, frame: Any) -> None:
    raise _OverTime


def _serve(conn, limit: float) -> None:
    """A worker process's loop: ``(engine, problem, text)`` in, :func:`check`'s dict out (with
    ``seconds``, the CPU time it took), ``{"exact": False, "timeout": True}`` once the check has
    used ``limit`` seconds of CPU (a profiling timer: the box does not shrink when other
    processes share the core); None ends it."""
    _sympy()
    signal.signal(signal.SIGPROF, _over_time)
    conn.send("ready")
    while True:
        job = conn.recv()
        if job is None:
            return
        t0 = time.process_time()
        try:
            signal.setitimer(signal.ITIMER_PROF, limit)
            out = check(*job)
        except _OverTime:
            out = {"exact": False, "timeout": True}
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        out["seconds"] = round(time.process_time() - t0, 3)
        conn.send(out)


class Checker:
    """Runs :func:`check` in a worker process that stops a check after ``timeout`` seconds of
    CPU time (a new worker takes the next check); a worker that does not answer within
    :data:`WALL_FACTOR` times that in wall time (stuck outside Python) is killed::

        with Checker(timeout=10) as c:
            c.check("Operon", "Nguyen-8", "1 * (exp((0.5 * log(x0))))")   # {'exact': True, ...}
    """

    def __init__(self, timeout: float = TIMEOUT) -> None:
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout={timeout!r}: give seconds > 0, e.g. {TIMEOUT}")
        self.timeout = float(timeout)
        self._ctx = multiprocessing.get_context()
        self._proc: Any = None
        self._conn: Any = None

    def _start(self) -> None:
        _sympy()                                   # imported once here: a forked worker has them
        import numptx.search.export                # noqa: F401
        self._conn, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_serve, args=(child, self.timeout), daemon=True)
        self._proc.start()
        child.close()
        if not self._conn.poll(START_LIMIT) or self._conn.recv() != "ready":
            self.close()
            raise RuntimeError(f"the sympy worker did not start in {START_LIMIT:.0f} s")

    def check(self, engine: str, problem: str, text: str) -> dict[str, Any]:
        """:func:`check` in the worker: its dict with ``seconds`` (CPU time); past the timeout
        ``{"exact": False, "timeout": True, "seconds": ...}``, and the worker is replaced."""
        if self._proc is None:
            self._start()
        t0 = time.perf_counter()
        self._conn.send((engine, problem, text))
        try:
            wall = WALL_FACTOR * self.timeout + START_LIMIT
            out = self._conn.recv() if self._conn.poll(wall) else None
        except (EOFError, OSError):                # the worker died (the timer between checks)
            out = {"exact": False, "error": "the sympy worker died"}
        if out is None:
            out = {"exact": False, "timeout": True,
                   "seconds": round(time.perf_counter() - t0, 3)}
        if out.get("timeout") or "seconds" not in out:
            out.setdefault("seconds", round(time.perf_counter() - t0, 3))
            self.close()
        return out

    def close(self) -> None:
        """End the worker (killed if it is still busy)."""
        if self._proc is None:
            return
        if self._proc.is_alive():
            try:
                self._conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            self._proc.join(0.5)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join()
        self._conn.close()
        self._proc = self._conn = None

    def __enter__(self) -> Checker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def verdicts(runs: Iterable[dict], timeout: float = TIMEOUT, *,
             progress: bool = False) -> list[dict]:
    """One verdict per run (a dict of ``bench_search.py --compare --json``): the run's engine,
    problem, seed, solved, test_r2 and model, and ``verdict`` (``unsolved``, ``exact``,
    ``not exact``, ``timeout``, ``error``), ``rule``, ``simplified``, ``seconds`` (the check's
    CPU time), ``note``."""
    out = []
    with Checker(timeout) as checker:
        for run in runs:
            v = {k: run.get(k) for k in ("engine", "problem", "seed", "solved", "test_r2",
                                         "model")}
            v.update(verdict="unsolved", rule="", simplified="", seconds=0.0, note="")
            if run.get("solved"):
                r = checker.check(str(run["engine"]), str(run["problem"]), str(run["model"]))
                v["seconds"] = r["seconds"]
                if r.get("timeout"):
                    v.update(verdict="timeout", note=f"sympy took over {timeout:g} s of CPU")
                elif "error" in r:
                    v.update(verdict="error", note=r["error"])
                else:
                    v.update(verdict="exact" if r["exact"] else "not exact", rule=r["rule"],
                             simplified=r["simplified"][:2000])
                if progress:
                    print(f"  {v['problem']} seed {v['seed']} {v['engine']}: {v['verdict']}"
                          f" ({v['rule'] or v['note']}) in {v['seconds']:.2f} s",
                          file=sys.stderr, flush=True)
            out.append(v)
    return out


def _cells(vs: list[dict], engines: Sequence[str]) -> list[str]:
    cells = []
    for e in engines:
        mine = [v for v in vs if v["engine"] == e]
        n = sum(v["verdict"] == "exact" for v in mine)
        solved = sum(v["verdict"] != "unsolved" for v in mine)
        late = sum(v["verdict"] == "timeout" for v in mine)
        bad = sum(v["verdict"] == "error" for v in mine)
        cells += [f"{solved}/{len(mine)}" if mine else "-", str(n) if mine else "-",
                  (str(late) + (f" (+{bad} errors)" if bad else "")) if mine else "-"]
    return cells


def table(vs: list[dict]) -> str:
    """The markdown table: per problem, then all runs, for each engine: solved runs (of all
    its runs), exact recoveries, and checks that timed out (errors beside them)."""
    engines = list(dict.fromkeys(v["engine"] for v in vs))
    problems = list(dict.fromkeys(v["problem"] for v in vs))
    head = [f"{e} {c}" for e in engines for c in ("solved", "exact", "timeouts")]
    lines = ["| problem | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for p in problems:
        lines.append(f"| {p} | " + " | ".join(_cells([v for v in vs if v["problem"] == p],
                                                       engines)) + " |")
    lines.append("| **all** | " + " | ".join(_cells(vs, engines)) + " |")
    return "\n".join(lines)


def load(paths: Sequence[str]) -> list[dict]:
    """The runs of ``--compare --json`` files, in order (each a list of dicts)."""
    runs: list[dict] = []
    for path in paths:
        with open(path) as fh:
            data = json.load(fh)
        if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
            raise SystemExit(f"{path}: not a list of runs (bench_search.py --compare --json)")
        for i, d in enumerate(data):
            missing = [k for k in ("engine", "problem", "seed", "solved", "model") if k not in d]
            if missing:
                raise SystemExit(f"{path}: run {i} has no {', '.join(missing)}")
        runs += data
    return runs


def main(argv: Sequence[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="bench_search.py --compare --json files")
    ap.add_argument("--timeout", type=float, default=TIMEOUT,
                    help=f"CPU seconds a check may take (default {TIMEOUT:g}); past it: not exact")
    ap.add_argument("--json", metavar="OUT", help="write the per-run verdicts here")
    ap.add_argument("--quiet", action="store_true", help="no line per check on stderr")
    args = ap.parse_args(argv)
    if not args.timeout > 0:
        ap.error(f"--timeout {args.timeout:g}: give seconds > 0")
    runs = load(args.runs)
    t0 = time.perf_counter()
    vs = verdicts(runs, args.timeout, progress=not args.quiet)
    dt = time.perf_counter() - t0
    print(f"\n### exact recoveries (SRBench's symbolic solution): {', '.join(args.runs)}\n")
    print(table(vs))
    checked = [v for v in vs if v["verdict"] != "unsolved"]
    cpu = sum(v["seconds"] for v in checked)
    print(f"\n{len(checked)} solved runs checked in {dt:.1f} s of wall time, {cpu:.1f} s of the "
          f"worker's CPU (timeout {args.timeout:g} CPU s a check)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(vs, fh, indent=1)
    return vs


if __name__ == "__main__":
    main()
