"""Scoring Stack PTX programs on a data set for the search loop (:mod:`numptx.search.loop`).

::

    from numptx.search.evaluate import Evaluator
    ev = Evaluator(X, y, loss="mse", device="auto")    # checks X, y once
    losses = ev.score(programs)                         # one float64 per program, +inf on failure
    batch = ev.constant_batch(programs)                 # the same programs, constants swapped in
    losses = batch([theta_0, theta_1, ...])             # a vector per program (constants_of)

``evaluate`` picks how programs are scored (:func:`resolve_evaluate`):

- ``"interpret"``: the batch becomes tapes at the site of
  :func:`numptx.jit.populations.fitness.fitness_template` and runs in the batch interpreter
  (:func:`numptx.jit.populations.fitness_interpret.interpret_losses`: no stub, no emulator, no assembly):
  on the CPU the C core, the losses reduced in NumPy for the whole batch at once; on a GPU the
  generated interpreter kernel (``numptx.jit.populations.interpret_gpu``). A program the interpreter
  refuses (a row without C semantics) is scored by the compiled path; when one of those reads
  ``cand`` (its index in its module), the whole batch is, so each candidate keeps the index it
  has there. On the CPU the losses equal the compiled path's bit for bit.
- ``"compile"``: the programs are compiled in one batch (:func:`numptx.stack_ptx.compile_many`)
  and scored by :func:`numptx.fitness`: on a CPU each stub runs in the emulator; on a GPU the
  batch is packed into modules (one launch per module).
- ``"auto"`` (the default): ``"interpret"`` on the CPU; on a GPU :func:`gpu_auto` (the
  interpreter up to ``GPU_INTERPRET_MAX_ROWS`` rows, as :func:`numptx.fitness` decides).

**Build modes and layouts** (the compiled path's GPU modules, :mod:`numptx.jit.populations.pack_kernels`):
``build="fast"`` assembles the modules that score a generation with ``-Ofc=max`` (a screening
build; what a run returns is then re-scored by the full build, :mod:`numptx.search.rescore`);
``"full"`` at the template's -O3; ``"auto"`` (the default) is what
:data:`~numptx.search.config.AUTO_BUILD` measured best on the device: ``"full"`` on both
today (on the search's own modules -Ofc=max saved little or no assembly time and gave 3-7x
the SASS). On the CPU the compiled path emulates the stubs and assembles nothing for them.
A module of more than ``PER_KERNEL`` (128) candidates is built as kernels of 128
(``layout="kernels"``, :func:`layout_for`); ``cand`` then reads a candidate's index in its
kernel, on the CPU too.
:meth:`Evaluator.packs` builds the modules the GPU path launches (on any machine: nvJitLink
needs no GPU).

**Linear scaling** (``linear_scaling=True``, for mse and rmse): a program f scores as its best
a + b·f. The fitness kernel and the interpreter compute pearson's loss L = 1 - r, and
:meth:`Evaluator.scaled` reads the MSE of the best fit, var(y)·(1 - r²) = var(y)·L·(2 - L)
(rmse: its root); :meth:`Evaluator.plain` scores programs as they are.

:meth:`Evaluator.constant_batch` is what the local optimizer (:mod:`numptx.search.constants`)
calls many times for one set of programs. On the CPU (and whenever ``evaluate`` resolves to
``"interpret"``) it re-scores the programs with the new constants written in, through
:meth:`Evaluator.score`. On the GPU the programs are packed once with
``constants="runtime"``; each call writes the new constants into the module's table
(:meth:`numptx.jit.populations.pack.Pack.set_constants`) and launches again, with no new assembly.
"""
from __future__ import annotations

import copy
import logging
import math
import numbers
from collections.abc import Iterable, Iterator, Sequence, Set
from concurrent.futures import Executor, ThreadPoolExecutor
from decimal import Decimal
from typing import Any, Literal

import numpy as np

from .._cores import usable_cores
from ..data import check_xy, finite, to_float
from .. import stack_ptx as sp
from ..jit.populations import fitness as F
from ..jit.populations.fitness_interpret import GPU_INTERPRET_MAX_ROWS, interpret_losses
from ..jit.populations.pack import DEFAULT_PER_MODULE, MAX_CANDIDATES, PER_KERNEL, Pack, PerKernel
from ..jit.populations.pack_kernels import BuildMode, Layout
from .._program.interpret import reads_input, tapes
from .._program.ops import ProgramError
from .config import BUILDS, POPULATION_MAX, Build, check_build, resolve_build
from .genes import SearchError, shown
from .pipeline import PackPipeline

__all__ = ["Evaluator", "check_data", "check_executor", "check_per_module", "check_scores",
           "PER_MODULE_MAX", "resolve_device", "LOSSES", "EVALUATE", "Evaluate",
           "check_evaluate", "resolve_evaluate", "gpu_auto", "check_scaling", "SCALED_LOSSES",
           "Build", "BUILDS", "check_build", "resolve_build", "layout_for"]

log = logging.getLogger(__name__)

LOSSES = F.LOSSES
_CPU_CHUNK = 128         # stubs per task when a CPU evaluation is spread over an executor


def check_executor(executor: Any, where: str) -> Any:
    """``executor`` when it is None or a ``concurrent.futures.Executor`` (or has a callable
    ``submit``); else a :class:`SearchError` naming it."""
    if executor is None or isinstance(executor, Executor) or callable(getattr(executor, "submit",
                                                                              None)):
        return executor
    raise SearchError(f"{where}: executor={executor!r} is not a concurrent.futures.Executor "
                      f"(give e.g. ThreadPoolExecutor(4), or None)")


#: the most candidates per module: a pack's candidates are the targets of one indirect branch,
#: and ptxas encodes at most ``jit.pack.MAX_CANDIDATES`` (16,380) of them
PER_MODULE_MAX = min(POPULATION_MAX, MAX_CANDIDATES)


def check_scores(got: Any, n: int, where: str) -> np.ndarray:
    """The ``n`` scores a user's ``fitness`` returned, as float64 (NaN as +inf; a number past
    the float range as +-inf). Refused with a :class:`SearchError` naming the candidate: what
    NumPy would turn into a number without a word (text parsed, ``None`` as NaN, a bool as 1.0,
    a complex's real part) and an array of another shape (a 2-D array is not flattened)::

        check_scores([0.5, float("nan")], 2, "evolve")     # array([0.5, inf])
    """
    kind = type(got).__name__
    if isinstance(got, (str, bytes, dict)) or isinstance(got, (Iterator, Set)):
        raise SearchError(f"{where}: fitness= returned {kind}; it must return one number per "
                          f"candidate ({n}), in order")
    if not isinstance(got, (Sequence, np.ndarray)):     # a tensor, a Series: through NumPy
        try:
            got = np.asarray(got)
        except Exception:  # noqa: BLE001 - whatever the object's conversion raises
            raise SearchError(f"{where}: fitness= returned {kind}; it must return one number "
                              f"per candidate ({n})") from None
    if isinstance(got, np.ndarray) and got.shape != (n,):
        raise SearchError(f"{where}: fitness= returned an array of shape {got.shape} for {n} "
                          f"candidates; it must return one score per candidate")
    if isinstance(got, np.ndarray) and got.dtype.kind in "fiu":
        arr = got.astype(np.float64)
    else:
        if len(got) != n:
            raise SearchError(f"{where}: fitness= returned {len(got)} scores for {n} "
                              f"candidates; it must return one per candidate")
        arr = np.empty(n, np.float64)
        for i, v in enumerate(got):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, Decimal)):
                raise SearchError(f"{where}: fitness= returned {shown(v)} "
                                  f"({type(v).__name__}) for candidate {i}; give a number "
                                  f"(NaN counts as +inf)")
            try:
                arr[i] = float(v)
            except OverflowError:            # an int past the float range
                arr[i] = math.inf if v > 0 else -math.inf
            except ValueError:               # Decimal("sNaN"): a NaN
                arr[i] = math.nan
    return np.where(np.isnan(arr), math.inf, arr)


def check_per_module(per_module: Any, where: str) -> int | None:
    """``per_module`` when None or an int in [1, PER_MODULE_MAX] (a pack's candidates are the
    targets of one indirect branch: ptxas's limit); else a :class:`SearchError` naming it."""
    if per_module is None:
        return None
    if isinstance(per_module, bool) or not isinstance(per_module, (int, np.integer)) \
            or not 1 <= per_module <= PER_MODULE_MAX:
        raise SearchError(f"{where}: per_module={shown(per_module)}: give an int in [1, "
                          f"{PER_MODULE_MAX:,}] (candidates per module: the targets of one "
                          f"indirect branch, ptxas's limit) or None")
    return int(per_module)


def check_data(X: Any, y: Any, *, where: str = "regress",
               dtype: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``X`` as a C-contiguous (n, d) float array and ``y`` as (n,) of the same dtype: the
    search's dtype, which follows ``X`` (float64 only when ``X`` is float64, else float32; ``y``
    is cast to it) or ``dtype`` (``"f32"``/``"f64"``) when given. A :class:`SearchError` names
    the argument at fault (shape, non-numeric or non-finite values, values that overflow the
    dtype); the checks are :mod:`numptx.data`'s, shared with :func:`numptx.fitness`."""
    X, y = check_xy(X, y, where=where, error=SearchError)
    if dtype is None:
        dt = np.float64 if X.dtype == np.float64 else np.float32
    elif isinstance(dtype, str) and dtype.lower() in ("f32", "f64"):
        dt = np.float64 if dtype.lower() == "f64" else np.float32
    else:
        raise SearchError(f"{where}: dtype={dtype!r}: search programs use 'f32' or 'f64' (or "
                          f"None: the dtype of X)")
    for what, a in (("X", X), ("y", y)):       # before the cast: a NaN is not an overflow
        finite(what, a, where=where, error=SearchError)
    hint = "rescale the data" + (" or use float64 X" if dt == np.float32 else "")
    return (to_float("X", X, dt, where=where, error=SearchError, hint=hint),
            to_float("y", y, dt, where=where, error=SearchError, hint=hint))


#: how an Evaluator scores programs: the values of ``evaluate=``
Evaluate = Literal["auto", "interpret", "compile"]
EVALUATE: tuple[str, ...] = ("auto", "interpret", "compile")


#: the losses linear scaling applies to (the MSE of a + b * program has a closed form)
SCALED_LOSSES = ("mse", "rmse")


def check_scaling(linear_scaling: Any, loss: str, where: str) -> bool:
    """``linear_scaling`` as a bool: True only for a loss of :data:`SCALED_LOSSES`; else a
    :class:`SearchError` naming the argument::

        check_scaling(True, "mse", "regress")       # True
    """
    if not isinstance(linear_scaling, (bool, np.bool_)):
        raise SearchError(f"{where}: linear_scaling={shown(linear_scaling)}: give True, False "
                          f"or None (on for loss='mse' or 'rmse')")
    if linear_scaling and loss not in SCALED_LOSSES:
        raise SearchError(f"{where}: linear_scaling=True with loss={loss!r}: the best a + b * "
                          f"program has a closed form for {' and '.join(SCALED_LOSSES)} only"
                          + (" (pearson is scale-free already)" if loss == "pearson" else "")
                          + "; use linear_scaling=False")
    return bool(linear_scaling)


def check_evaluate(evaluate: Any, where: str) -> str:
    """``evaluate`` when it is one of :data:`EVALUATE`; else a :class:`SearchError` naming the
    argument and ``where`` (the API function)::

        check_evaluate("interpret", "regress")      # 'interpret'
    """
    if not (isinstance(evaluate, str) and evaluate in EVALUATE):
        raise SearchError(f"{where}: evaluate={shown(evaluate)}: use 'auto' (the interpreter "
                          f"on the CPU; on a GPU up to {GPU_INTERPRET_MAX_ROWS:,} rows of data), "
                          f"'interpret' or 'compile'")
    return evaluate


def gpu_auto(n_rows: int) -> Literal["interpret", "compile"]:
    """What ``evaluate="auto"`` scores with on a GPU, for ``n_rows`` rows of data: the GPU
    interpreter (``numptx.jit.populations.interpret_gpu``) up to ``GPU_INTERPRET_MAX_ROWS`` rows, as
    :func:`numptx.fitness` decides (an estimate until a GPU measures the crossover:
    docs/interpret.md), the compiled path (packed modules) above."""
    return "interpret" if n_rows <= GPU_INTERPRET_MAX_ROWS else "compile"


def resolve_evaluate(evaluate: str, device: str, n_rows: int) -> Literal["interpret", "compile"]:
    """``evaluate`` (checked) on the resolved ``device`` (``"cpu"``/``"gpu"``): ``"auto"`` is
    ``"interpret"`` on the CPU and :func:`gpu_auto` on a GPU. ``"interpret"`` runs the
    device's interpreter: the C core on the CPU, the generated kernel on a GPU (what it does
    not run, or all of a batch when none is registered, goes to the compiled path)."""
    if evaluate == "auto":
        return "interpret" if device == "cpu" else gpu_auto(n_rows)
    return "interpret" if evaluate == "interpret" else "compile"


def layout_for(per_module: int) -> Layout:
    """The layout of a module of ``per_module`` candidates: ``"kernels"`` (entry functions of
    ``PER_KERNEL`` candidates) above ``PER_KERNEL``, where one jump-table function costs
    ptxas more per candidate (benchmarks/README.md, "Compile farm"); else one function.

    >>> layout_for(256), layout_for(128)
    ('kernels', 'function')
    """
    return "kernels" if per_module > PER_KERNEL else "function"


def resolve_device(device: str) -> str:
    """``device`` (``auto``, ``cpu``, ``gpu``) resolved to ``cpu`` or ``gpu``; a bad name, or
    ``gpu`` without one, is a :class:`SearchError`."""
    if device not in ("auto", "cpu", "gpu"):
        raise SearchError(f"device={device!r}: use 'auto', 'cpu' or 'gpu'")
    if device == "auto":
        return "gpu" if F.gpu_available() else "cpu"
    if device == "gpu" and not F.gpu_available():
        raise SearchError("device='gpu': no CUDA GPU found (use device='auto' or 'cpu')")
    return device


class Evaluator:
    """Scores programs over inputs ``names`` (the columns of ``X``) against ``y``.

    ``evaluated`` counts the programs scored so far (what dedup saves shows there);
    ``device`` is the resolved one, ``"cpu"`` or ``"gpu"``; ``evaluate`` the requested way of
    scoring and ``mode`` the resolved one (``"interpret"`` or ``"compile"``, see the module
    documentation). ``pipeline``: on the GPU, :meth:`score_chunks` assembles modules while
    the next chunk is made (see the module documentation; False: it scores all the programs
    in one batch at the end). ``build`` the requested build mode of the compiled path's
    modules and ``scoring_build`` the resolved one (:func:`resolve_build`).
    """

    def __init__(self, X: Any, y: Any, *, loss: str = "mse", names: Sequence[str] | None = None,
                 device: str = "auto", executor: Executor | None = None,
                 per_module: int | None = None, where: str = "regress", pipeline: bool = True,
                 evaluate: Evaluate = "auto", rows: Sequence[str] | None = None,
                 linear_scaling: bool = False, build: Build = "auto"):
        self.evaluate = check_evaluate(evaluate, where)
        self.build = check_build(build, where)
        #: the table rows the programs use (the genes'): one GPU interpreter kernel for a search
        self.rows = tuple(rows) if rows is not None else None
        self.X, self.y = check_data(X, y, where=where)
        if not (isinstance(loss, str) and loss in LOSSES):
            raise SearchError(f"{where}: loss={loss!r}: use one of {', '.join(LOSSES)}")
        #: whether a program's loss is that of its best linear scaling a + b * program
        #: (module documentation, "Linear scaling")
        self.linear_scaling = check_scaling(linear_scaling, loss, where)
        #: the loss the fitness kernel and the interpreter compute (pearson under scaling)
        self.kernel_loss = "pearson" if self.linear_scaling else loss
        if self.kernel_loss == "pearson" and (self.y.min() == self.y.max()
                                              or not float(self.y.astype(np.float64).var()) > 0):
            raise SearchError(f"{where}: y is constant ({float(self.y[0])!r} in all "
                              f"{len(self.y)} samples): with zero variance the pearson loss "
                              f"(1 - correlation) is undefined for every candidate"
                              + (" and so is linear scaling; use linear_scaling=False"
                                 if self.linear_scaling else
                                 "; use loss='mse' (or another loss) for a constant target"))
        self._var_y = float(self.y.astype(np.float64).var())
        executor = check_executor(executor, where)
        per_module = check_per_module(per_module, where)
        d = self.X.shape[1]
        self.names = tuple(names) if names is not None else tuple(f"x{j}" for j in range(d))
        if len(self.names) != d:
            raise SearchError(f"{where}: names= gives {len(self.names)} names for the {d} "
                              f"columns of X")
        self.loss, self.executor, self.per_module = loss, executor, per_module
        self.device = resolve_device(device)
        self.mode = resolve_evaluate(self.evaluate, self.device, self.X.shape[0])
        #: the build the compiled path scores with: "fast" (re-scored at "full" when returned)
        self.scoring_build: BuildMode = resolve_build(self.build, self.device)
        self.dtype = "f64" if self.X.dtype == np.float64 else "f32"
        arch = F.device_arch() if self.device == "gpu" else "sm_90"
        try:     # the generated kernel checks the names (C++ keywords, its own variables)
            self.template = F.fitness_template(d, self.names, self.dtype, self.kernel_loss,
                                               arch)
        except Exception as e:  # noqa: BLE001 - a bad column name fails to compile: say which
            raise SearchError(f"{where}: names={self.names!r} cannot name the columns: "
                              f"{e}") from None
        self.site = self.template.sites["f"]
        self.evaluated = 0
        self.pipeline = bool(pipeline)
        self._gpu_arrays: tuple | None = None
        self._pack_template: Any = None
        self._plain: Evaluator | None = None
        self._where = where

    def plain(self) -> "Evaluator":
        """This evaluator without linear scaling (itself when it has none): the losses of
        programs as they are, for what a run returns (its scaling written into the program)."""
        if not self.linear_scaling:
            return self
        if self._plain is None:
            self._plain = Evaluator(self.X, self.y, loss=self.loss, names=self.names,
                                    device=self.device, executor=self.executor,
                                    per_module=self.per_module, where=self._where,
                                    pipeline=self.pipeline, evaluate=self.evaluate,
                                    rows=self.rows, build=self.build)
        return self._plain

    def scaled(self, losses: np.ndarray) -> np.ndarray:
        """Kernel losses (pearson's 1 - r under linear scaling) as this evaluator's losses:
        the MSE of the best a + b * program is var(y) * (1 - r**2) = var(y) * L * (2 - L) for
        L = 1 - r (exact near a perfect fit, where 1 - r**2 would cancel); rmse its root.
        Without scaling, ``losses`` as they are."""
        if not self.linear_scaling:
            return losses
        L = np.asarray(losses, np.float64)
        with np.errstate(all="ignore"):
            mse = np.where(np.isfinite(L), self._var_y * L * (2.0 - L), np.inf)
        return np.sqrt(mse) if self.loss == "rmse" else mse

    # -- scoring ----------------------------------------------------------------------------
    def stubs(self, programs: Sequence[Any]) -> list:
        """The programs compiled for the fitness kernel's site, in one C batch."""
        return sp.compile_many(programs, site=self.site)

    def score(self, programs: Sequence[Any]) -> np.ndarray:
        """One loss per program (float64; +inf where it gives NaN/inf or fails to build), by
        :attr:`mode`: the interpreter or the compiled path (see the module documentation)."""
        if not len(programs):
            return np.empty(0)
        self.evaluated += len(programs)
        if self.mode == "interpret":
            return self.score_interpreted(programs)
        return self.score_compiled(programs)

    def score_interpreted(self, programs: Sequence[Any]) -> np.ndarray:
        """:meth:`score` through the batch interpreter (what it refuses: the compiled path);
        ``evaluated`` is not counted here."""
        losses, rest = interpret_losses(programs, self.X, self.y, self.names, self.kernel_loss,
                                        self.site, device=self.device, rows=self.rows)
        if rest:
            ks = sorted(rest)
            if self._read_cand([programs[k] for k in ks]):
                # cand is the index in a module of the whole batch: score the batch as compiled
                log.debug("numptx.search: a refused program reads cand: the batch is compiled")
                return self.score_compiled(programs)
            log.debug("numptx.search: %d program(s) to the compiled path, e.g. %d: %s",
                      len(ks), ks[0], rest[ks[0]])
            losses[ks] = self._compiled_kernel_losses([programs[k] for k in ks])
        return self.scaled(losses)

    def _read_cand(self, programs: list) -> bool:
        try:
            tp = tapes(programs, site=self.site)
        except ProgramError:          # no tapes: the compiled path says what it makes of them
            return True
        return bool(reads_input(tp, list(tp.inputs).index("cand")).any())

    def score_compiled(self, programs: Sequence[Any], *,
                       build: BuildMode | None = None) -> np.ndarray:
        """:meth:`score` through the compiled path (stubs: emulated on the CPU, packed on a
        GPU), whatever :attr:`mode` is; ``evaluated`` is not counted here. ``build``: the
        modules' build mode (default :attr:`scoring_build`). What a user deploys is this
        path's full build: :mod:`numptx.search.rescore` re-scores a run's results with it."""
        return self.scaled(self._compiled_kernel_losses(programs, build))

    def _compiled_kernel_losses(self, programs: Sequence[Any],
                                build: BuildMode | None = None) -> np.ndarray:
        if not len(programs):
            return np.empty(0)
        build = self.scoring_build if build is None else build
        if self.device == "gpu":
            return self._launch(self.packs(programs, build=build), len(programs), scaled=False)
        stubs = self.stubs(programs)
        per = self.module_size(len(stubs))
        layout = layout_for(per)
        if self.executor is not None and len(stubs) > _CPU_CHUNK:
            # the emulator is the cost on a CPU: whole modules of stubs (picklable text) to
            # the workers, so each candidate's cand is its index in its GPU module (kernel)
            step = per * max(1, _CPU_CHUNK // per)
            futs = [self.executor.submit(F.fitness, stubs[i:i + step], self.X, self.y,
                                         self.kernel_loss, names=self.names, device="cpu",
                                         per_module=per, evaluate="compile", layout=layout,
                                         build=build)
                    for i in range(0, len(stubs), step)]
            return np.concatenate([f.result() for f in futs])
        return F.fitness(stubs, self.X, self.y, self.kernel_loss, names=self.names,
                         device="cpu", executor=self.executor, per_module=per,
                         evaluate="compile", layout=layout, build=build)

    def packs(self, programs: Sequence[Any], *, build: BuildMode | None = None) -> list[Pack]:
        """The GPU modules of ``programs`` (their global indices in order), built: what the
        compiled path launches on a GPU. ``module_size`` candidates a module, in
        :func:`layout_for`'s layout; ``build`` (default :attr:`scoring_build`). nvJitLink
        needs no GPU, so this runs anywhere::

            ev = Evaluator(X, y, device="cpu", build="fast")
            ev.packs(programs)[0].key        # a -Ofc=max module's cache key
        """
        stubs = self.stubs(programs)
        per = self.module_size(len(stubs))
        return self._packing_template().pack_many(
            "f", stubs, select="cand", per_module=per, executor=self.executor,
            layout=layout_for(per), build=self.scoring_build if build is None else build)

    @property
    def pipelined(self) -> bool:
        """Whether :meth:`score_chunks` pipelines: on the GPU with ``pipeline=True`` and no
        executor or a thread pool (the pipeline's jobs hold packs: no process pool)."""
        return self.device == "gpu" and self.mode == "compile" and self.pipeline and (
            self.executor is None or isinstance(self.executor, ThreadPoolExecutor))

    def score_chunks(self, chunks: Iterable[Sequence[Any]], total: int | None = None,
                     expected: int | None = None) -> np.ndarray:
        """One loss per program of ``chunks`` (an iterable of program lists, consumed here),
        in order: what :meth:`score` of all of them gives. ``total`` (an upper bound on the
        programs to come) sizes the modules as :meth:`module_size` does; default 4096.
        ``expected`` (an estimate of the programs to come: the loop's last generation's
        share of new children) tapers the modules of the last two modules' worth to a
        quarter size (:class:`~numptx.search.pipeline.PackPipeline`), so a generation ends
        waiting for a small module."""
        if not self.pipelined:
            return self.score([p for chunk in chunks for p in chunk])
        per = self.module_size(4096 if total is None else max(1, total))
        # no taper on a poor estimate's behalf (a share of 0, a small batch): small modules
        # throughout would double the assembly time
        taper = None if expected is None or per < 64 or expected < 4 * per \
            else expected - 2 * per
        launches = _Launches(self)
        with PackPipeline(self._packing_template(), "f", select="cand", per_module=per,
                          executor=self.executor, taper_at=taper,
                          taper_size=max(16, per // 4), layout=layout_for(per),
                          build=self.scoring_build) as pipe:
            for chunk in chunks:
                if len(chunk):
                    pipe.add(self.stubs(chunk))
                for p in pipe.ready():       # launched while later modules assemble
                    launches.launch(p)
            for p in pipe.finish():
                launches.launch(p)
            n = pipe.total
        self.evaluated += n
        return launches.losses(n)

    def _packing_template(self) -> Any:
        """The fitness template without constant patching, for the pipeline: each module of a
        generation is a new shape (patching never applies), and finding a module's shape costs
        ~20 µs of Python per candidate (benchmarks/bench_search.py --stages), under the GIL
        the thread that feeds the pipeline needs. Its cubins are the same (a first of its
        shape is assembled as written)."""
        if self._pack_template is None:
            t = copy.copy(self.template)          # shares the PTX, sites and cache
            t.patch_constants = False
            self._pack_template = t
        return self._pack_template

    def module_size(self, n: int) -> int:
        """Candidates per module for a batch of ``n``: ``per_module`` when given, else enough
        modules to keep every core assembling (ptxas's time grows with a module's size, and
        the modules of one batch build in parallel), 16 to 256 a module."""
        if self.per_module is not None:
            return self.per_module
        cores = usable_cores()
        return int(min(DEFAULT_PER_MODULE, max(16, -(-n // (2 * cores)))))

    def predict(self, program: Any, X: Any | None = None) -> np.ndarray:
        """The program's output on ``X`` (default: the training inputs), run by the emulator."""
        from ..dsl.emulator import emulate
        from ..site_layout import reg_name
        X = self.X if X is None else np.ascontiguousarray(np.asarray(X, self.X.dtype))
        if X.ndim == 1:
            X = X[:, None]
        stub = sp.compile(program, site=self.site)
        cols = {reg_name(n): X[:, j] for j, n in enumerate(self.names)}
        with np.errstate(all="ignore"):
            got = emulate(stub, cols | {reg_name("cand"): np.uint32(0)},
                          {reg_name("p"): self.dtype})
        return np.broadcast_to(np.asarray(got[reg_name("p")]), (X.shape[0],)).copy()

    def constant_batch(self, programs: Sequence[Any]) -> "ConstantBatch":
        """A callable scoring ``programs`` with new constants: see the module documentation."""
        if self.device == "gpu" and self.mode == "compile":
            return _GpuConstants(self, programs)
        return ConstantBatch(self, programs)

    # -- GPU launches ------------------------------------------------------------------------
    def _device_data(self):
        if self._gpu_arrays is None:
            from numba import cuda
            self._gpu_arrays = (cuda.to_device(self.X), cuda.to_device(self.y),
                                float(self.y.astype(np.float64).mean()),
                                float(self.y.astype(np.float64).var()))
        return self._gpu_arrays

    def _launch(self, packs: list, total: int, block: int = 256, *,
                scaled: bool = True) -> np.ndarray:
        """Launch each pack of the fitness kernel once; the losses of its ``total`` candidates
        (the same reduction as :func:`numptx.fitness`; ``scaled=False``: the kernel's)."""
        from numba import cuda
        dX, dy, c, _ = self._device_data()
        n = self.X.shape[0]
        acc = cuda.to_device(np.zeros((total, 4)))
        for p in packs:
            if p.empty:
                continue
            at = p.offset        # a PerKernel value per kernel of layout="kernels"
            p[PerKernel(lambda k: (((n + block - 1) // block, len(k)), block))](
                PerKernel(lambda k, at=at: acc[at + k.start:at + k.stop]), dX, dy, n, c)
        bad = {i for p in packs for i in p.errors}
        if not scaled:
            return F.losses_from_sums(acc.copy_to_host(), self.y, self.kernel_loss, bad)
        return self.losses_of(acc.copy_to_host(), bad)

    def losses_of(self, sums: np.ndarray, bad: Iterable[int]) -> np.ndarray:
        """The losses from the fitness kernel's sums (``sums[k]``: candidate k's s0, s1, s2
        and count of non-finite samples) over this evaluator's data; candidates in ``bad``
        (failed to build) and non-finite ones score +inf: the reduction of
        :func:`numptx.fitness` (:func:`numptx.jit.populations.fitness.losses_from_sums`, one home)."""
        return self.scaled(F.losses_from_sums(sums, self.y, self.kernel_loss, bad))


class _Launches:
    """The pipelined path's launches: each pack of the fitness kernel launched once, as it
    comes, into sums of its own (the packs' total is known only at the end)."""

    def __init__(self, ev: Evaluator, block: int = 256):
        self.ev, self.block = ev, block
        self.parts: list[tuple[Any, Any]] = []      # (pack, its device sums or None)

    def launch(self, p: Any) -> None:
        if p.empty:                 # no candidate of the module works: all +inf
            self.parts.append((p, None))
            return
        from numba import cuda
        dX, dy, c, _ = self.ev._device_data()
        n, b = self.ev.X.shape[0], self.block
        acc = cuda.to_device(np.zeros((len(p), 4)))
        p[PerKernel(lambda k: (((n + b - 1) // b, len(k)), b))](
            PerKernel(lambda k: acc[k.start:k.stop]), dX, dy, n, c)
        self.parts.append((p, acc))

    def losses(self, total: int) -> np.ndarray:
        sums = np.zeros((total, 4))
        for p, acc in self.parts:
            if acc is not None:
                sums[p.offset:p.offset + len(p)] = acc.copy_to_host()
        return self.ev.losses_of(sums, {i for p, _ in self.parts for i in p.errors})


class ConstantBatch:
    """``batch(thetas)``: the losses of ``programs`` with ``thetas[i]`` written into program i's
    constants (``operators.with_constants``), re-evaluated; ``batch.counts[i]`` is the number of
    constants program i has (``operators.constants_of``)."""

    def __init__(self, evaluator: Evaluator, programs: Sequence[Any]):
        from .operators import ConstantSlots, constants_of
        self.ev, self.programs = evaluator, [list(p) for p in programs]
        self.initial = [np.asarray(constants_of(p), np.float64) for p in self.programs]
        self.counts = [len(t) for t in self.initial]
        self._slots = [ConstantSlots(p) for p in self.programs]    # found once, set per call

    def with_values(self, thetas: Sequence[np.ndarray]) -> list:
        """The programs with ``thetas[i]`` as program i's constants (``with_constants``)."""
        return [s.program(t) if len(t) else p
                for s, p, t in zip(self._slots, self.programs, thetas)]

    def __call__(self, thetas: Sequence[np.ndarray]) -> np.ndarray:
        return self.ev.score(self.with_values(thetas))


class _GpuConstants(ConstantBatch):
    """The GPU form: one build with run-time constants, then a table copy and a launch a call.

    The stub of a program shares equal literals and drops constants its output does not need,
    so its table slots are matched to the program's constants by building it with distinct
    marker values (``_MARK + j`` for constant j); a slot that is no marker (a literal the
    compiler made) keeps its value."""

    _MARK = 4096.0     # markers 4096 + j are exact in f32 and f64 for j < 2**11

    def __init__(self, evaluator: Evaluator, programs: Sequence[Any]):
        super().__init__(evaluator, programs)
        from .operators import with_constants
        marked = [with_constants(p, self._MARK + np.arange(n)) if n else p
                  for p, n in zip(self.programs, self.counts)]
        ev = evaluator
        self.packs = ev.template.pack_many("f", ev.stubs(marked), select="cand",
                                           per_module=ev.module_size(len(marked)),
                                           executor=ev.executor,
                                           constants="runtime")
        self._slots: list[tuple[np.ndarray, np.ndarray] | None] = []
        for p in self.packs:
            if p.empty:
                self._slots += [None] * len(p)
                continue
            p.cubin                                    # noqa: B018 - build: errors known after
            for k, vals in enumerate(p.constants):
                if vals is None:
                    self._slots.append(None)
                    continue
                j = vals - self._MARK
                is_mark = (j == np.round(j)) & (j >= 0) & (j < self.counts[p.offset + k])
                self._slots.append((vals.copy(), np.where(is_mark, j, -1).astype(np.int64)))

    def __call__(self, thetas: Sequence[np.ndarray]) -> np.ndarray:
        for p in self.packs:
            if p.empty:
                continue
            new = {}
            for k in range(p.offset, p.offset + len(p)):
                s = self._slots[k]
                if s is None or not len(s[0]):
                    continue
                base, idx = s
                theta = np.asarray(thetas[k], np.float64)
                new[k] = np.where(idx >= 0, theta[np.maximum(idx, 0)] if len(theta) else 0.0, base)
            if new:
                p.set_constants(new)
        self.ev.evaluated += len(self.programs)
        return self.ev._launch(self.packs, len(self.programs))
