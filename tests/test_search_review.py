"""numptx.search on input from someone else, second pass (issue 22, items 10, 19 and 20,
adversarial review): checkpoint paths that are devices, FIFOs or no paths at all; numbers past
the float range in a checkpoint, at the API, in formula text and in evolve's scores; formulas
that bind without bound or print 4,096-op chains in small threads; bounds that did not hold
(per_module, max_bytes, seed, descriptor ranges); descriptors that do not match a run. Real
components only; subprocesses where the fault was a hang, a crash or exhausted memory."""
from __future__ import annotations

import copy
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import numptx as nx
from numptx import search
from numptx import stack_ptx as sp
from numptx.search import CheckpointError, SearchError
from numptx.search import checkpoint as ck
from numptx.search.formula import FormulaLimitError, evaluate
from numptx.search.genes import Genes

from test_search_loop import _EVOLVE_SRC
from test_search_trust import OPS, ROOT, _data, _regress, _resume


@pytest.fixture(scope="module")
def regress_state(tmp_path_factory):
    """A real regress checkpoint's state (with constant fits), as read."""
    path = tmp_path_factory.mktemp("ck") / "r.nxck"
    _regress().save(path)
    return ck.read(path)


# ---- review (issue 22, adversarial pass): paths, huge numbers, formula text, threads -----------
_READ_IN_A_BOX = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))       # 1 GiB: /dev/zero read whole
from numptx.search import checkpoint as ck
try:
    ck.read(sys.argv[1])
except ck.CheckpointError as e:
    print("CheckpointError", e)
except BaseException as e:
    print("RAW", type(e).__name__, e)
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX: FIFOs and /dev/zero")
@pytest.mark.parametrize("what", ["/dev/zero", "fifo", "folder"])
def test_a_path_that_is_not_a_regular_file_is_refused_unread(tmp_path, what):
    # /dev/zero was read whole (MemoryError after filling the address space); a FIFO blocked
    # open() for ever, waiting for a writer
    path = {"/dev/zero": "/dev/zero", "folder": str(tmp_path)}.get(what, str(tmp_path / "f"))
    if what == "fifo":
        os.mkfifo(path)
    try:
        out = subprocess.run([sys.executable, "-c", _READ_IN_A_BOX, path], capture_output=True,
                             text=True, timeout=60, cwd=ROOT).stdout
    except subprocess.TimeoutExpired:
        pytest.fail(f"checkpoint.read({path!r}) hangs")
    assert out.startswith("CheckpointError"), out
    assert path in out
    if what != "folder":
        assert "not a regular file" in out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX: FIFOs")
def test_saving_over_a_fifo_or_a_device_is_refused_and_leaves_it(tmp_path):
    # os.replace put a regular file in its place (as root, save("/dev/null") replaced /dev/null)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    r = _regress(generations=1)
    with pytest.raises(CheckpointError, match=r"is a device, a pipe or a socket"):
        r.save(fifo)
    assert stat_is_fifo(fifo)
    dev = tmp_path / "null"
    try:
        os.mknod(dev, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 3))
    except (OSError, AttributeError):
        return                                   # not root: a FIFO is the case that remains
    with pytest.raises(CheckpointError, match=r"is a device"):
        r.save(dev)
    assert __import__("stat").S_ISCHR(os.lstat(dev).st_mode)


def stat_is_fifo(path) -> bool:
    import stat
    return stat.S_ISFIFO(os.lstat(path).st_mode)


@pytest.mark.parametrize("edit, match", [
    # JSON reads a 401-digit number as an int; float() of it raised OverflowError
    (lambda s: s["history"][0].__setitem__(1, 10 ** 400), r"field history\[0\].best: .*float"),
    (lambda s: s["population"][0].__setitem__(1, 10 ** 400), r"field population\[0\].loss"),
    (lambda s: s["best"].__setitem__(1, -10 ** 400), r"field best.loss"),
    (lambda s: s["fits"][0].__setitem__(2, 10 ** 400), r"field fits\[0\].loss"),
    (lambda s: s["genes"].update(constants=[10 ** 400]), r"field genes: constants=: an int of"),
    (lambda s: s["config"].update(crossover=10 ** 400), r"field config: crossover=an int of"),
    (lambda s: s["config"].update(parsimony=10 ** 400), r"field config: parsimony=an int of"),
    (lambda s: s.update(seed=2 ** 256), r"field seed: seed=an int of 257 bits"),
])
def test_a_number_past_the_float_range_is_a_checkpoint_error(tmp_path, regress_state, edit,
                                                              match):
    state = copy.deepcopy(regress_state)
    assert state["fits"]
    edit(state)
    with pytest.raises(CheckpointError, match=match):
        _resume(tmp_path, state)


@pytest.mark.parametrize("kw, match", [
    (dict(crossover=10 ** 400), r"^crossover=an int of 1329 bits: give a number in \[0.0, 1.0\]"),
    (dict(parsimony=-10 ** 400), r"^parsimony=an int of"),
    (dict(constants=[10 ** 400]), r"constants=: an int of 1329 bits is not a finite number"),
    (dict(population=10 ** 5000), r"^population=an int of 16610 bits: give an int in \[2, "),
    (dict(tournament=-10 ** 5000), r"^tournament=an int of 16610 bits: give an int >= 1"),
    (dict(seed=10 ** 5000), r"^seed=an int of 16610 bits: give an int in \[0, 2\*\*256 - 1\]"),
])
def test_huge_ints_are_search_errors_at_the_api(kw, match):
    # OverflowError (float of the int) and ValueError (printing an int of > 4,300 digits) before;
    # a seed of 5,000 digits ran, and then save() failed with ValueError in json.dumps
    X, y = _data()
    with pytest.raises(SearchError, match=match):
        search.regress(X, y, OPS, **{"population": 20, "generations": 1, "device": "cpu", **kw})


def test_huge_but_finite_settings_still_run():
    X, y = _data()
    r = search.regress(X, y, OPS, population=20, generations=1, device="cpu",
                       target=-10 ** 400, time_limit=10 ** 400, seed=2 ** 256 - 1)
    assert r.generations == 1 and r.seed == 2 ** 256 - 1


@pytest.mark.parametrize("text, want", [
    ("1" + "0" * 400 + "*x0", math.inf),             # an int literal past the float range
    ("0x" + "f" * 300, math.inf),
    ("1e400*x0", math.inf),                          # as Python reads it
    ("-" + "1" * 4000, -math.inf),
    ("x0" + "**2" * 3, 1.0),
])
def test_formula_numbers_past_the_float_range_read_as_inf(text, want):
    # OverflowError (int too large to convert to float) before
    out = evaluate(text, np.ones((2, 1), np.float32), Genes(["add"], 1))
    assert out.tolist() == [want, want]


@pytest.mark.parametrize("text", ["x0\ud800", "\udfff"])
def test_a_formula_python_cannot_encode_is_a_search_error(text):
    # UnicodeEncodeError from ast.parse before
    with pytest.raises(SearchError, match=r"is not a formula \('utf-8' codec"):
        evaluate(text, np.ones((2, 1), np.float32), Genes(["add"], 1))


def test_evaluate_in_threads_leaves_the_recursion_limit_alone():
    # evaluate raised the process's recursion limit and restored the value it had read: two
    # threads interleaving left it raised for good (3000 after a run of this test), and a
    # thread deep in a formula could see another thread lower it under its feet
    import threading
    genes, X = Genes(["add"], 1), np.ones((2, 1), np.float32)
    before, errors = sys.getrecursionlimit(), []

    def work(k):
        for i in range(20):
            try:
                got = evaluate("-" * (990 + (k + i) % 9) + "x0", X, genes)
                assert got.tolist() == [(-1.0) ** (990 + (k + i) % 9)] * 2
            except BaseException as e:          # noqa: BLE001 - the property under test
                errors.append(repr(e))
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == [] and sys.getrecursionlimit() == before


def test_per_module_is_bounded_by_what_a_pack_holds(tmp_path):
    # per_module was allowed up to 1,000,000 at the API and in a checkpoint; a pack holds at
    # most jit.pack.MAX_CANDIDATES (ptxas's limit), so 20,000 failed later, at the first build
    from numptx.jit.populations.pack import MAX_CANDIDATES
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")

    def fitness(packs):
        return [0.0] * sum(len(p.candidates) for p in packs)
    with pytest.raises(SearchError, match=rf"evolve: per_module={MAX_CANDIDATES + 1}: give an "
                                          rf"int in \[1, 16,380\]"):
        search.evolve(tmpl, "f", fitness, population=8, generations=1, seed=0,
                      per_module=MAX_CANDIDATES + 1)
    r = search.evolve(tmpl, "f", fitness, population=8, generations=1, seed=0,
                      per_module=MAX_CANDIDATES)
    r.save(tmp_path / "e.nxck")
    state = ck.read(tmp_path / "e.nxck")
    state["evolve"]["per_module"] = MAX_CANDIDATES + 1
    ck.write(tmp_path / "e.nxck", state)
    with pytest.raises(CheckpointError, match=r"field evolve.per_module: 16381 is not an int in "
                                              r"\[1, 16,380\]"):
        search.resume(tmp_path / "e.nxck", generations=1, template=tmpl, fitness=fitness)
    with pytest.raises(SearchError, match=r"resume: per_module=16381"):
        search.resume(tmp_path / "e.nxck", generations=1, template=tmpl, fitness=fitness,
                      per_module=MAX_CANDIDATES + 1)
    text = (ROOT / "docs" / "search.md").read_text()
    assert "| `per_module` | 1 to 16,380 |" in text


def _bindings(n: int) -> str:
    """A balanced sum of ``n`` ``:=`` bindings (shallow: the depth limit does not stop it)."""
    terms = [f"(a{i}:=x0+1)" for i in range(n)]
    while len(terms) > 1:
        terms = [f"({a}+{b})" for a, b in zip(terms[::2], terms[1::2])] + \
            (terms[-1:] if len(terms) % 2 else [])
    return terms[0]


def test_a_formula_binds_at_most_max_names():
    # each := keeps an array of len(X) values to the end: 55,000 of them in 0.9 MB of text
    # took 4 GB on 20,000 rows and ended in a raw MemoryError
    from numptx.search.formula import MAX_NAMES
    genes, X = Genes(["add"], 1), np.ones((2, 1), np.float32)
    assert MAX_NAMES == sp.Limits().max_steps          # one binding per op of a program at most
    assert evaluate(_bindings(MAX_NAMES), X, genes).tolist() == [2.0 * MAX_NAMES] * 2
    with pytest.raises(FormulaLimitError, match=r"binds more than formula.MAX_NAMES = 4,096") as e:
        evaluate(_bindings(MAX_NAMES + 1), X, genes)
    assert e.value.limit == "MAX_NAMES"


_EVALUATE_IN_A_BOX = r"""
import resource, sys
import numpy as np
sys.path.insert(0, "tests")
from test_search_review import _bindings
from numptx.search.formula import evaluate, FormulaLimitError
from numptx.search.genes import Genes
X = np.ones((100_000, 1), np.float32)            # 4,096 bindings of 400 KB: 1.6 GB
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
try:
    evaluate(_bindings(4096), X, Genes(["add"], 1))
    print("evaluated")
except FormulaLimitError as e:
    print("FormulaLimitError", e.limit, e)
except BaseException as e:
    print("RAW", type(e).__name__, e)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS bounds numpy's allocations")
def test_a_formula_past_the_memory_there_is_names_the_limit():
    out = subprocess.run([sys.executable, "-c", _EVALUATE_IN_A_BOX], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.stdout.startswith("FormulaLimitError memory"), out.stdout + out.stderr[-2000:]
    assert "100,000 rows" in out.stdout


def test_a_long_printed_program_evaluates_or_names_the_limit():
    # max_length may be 4,096: a chain of 300 sin() prints past Python's 200 parentheses;
    # evaluate names that limit (never a raw error) and predict() runs the program
    genes = Genes(["sin", "add"], 1)
    X = np.linspace(-1, 1, 4, dtype=np.float32)[:, None]
    chain = [sp.input("x0")] + [w for _ in range(300) for w in genes.op_words("sin")]
    with pytest.raises(FormulaLimitError, match=r"200 parentheses") as e:
        evaluate(chain, X, genes)
    assert e.value.limit == "parentheses"
    from numptx.search.loop import Candidate
    got = Candidate(chain, 0.0, genes, False).predict(X)
    want = X[:, 0].astype(np.float64)
    for _ in range(300):
        want = np.sin(want)
    assert np.allclose(got, want, atol=1e-5)


def test_the_largest_parsimony_runs_without_a_numpy_warning():
    # parsimony is bounded by the float range: 1e308 x a program's length overflowed with
    # "RuntimeWarning: overflow encountered in multiply" from inside the loop
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = search.regress(X, y, OPS, population=20, generations=2, seed=0, device="cpu",
                           parsimony=1e308)
    assert r.generations == 2 and r.best is not None


@pytest.mark.parametrize("max_bytes", [2 ** 40 + 1, 2 ** 62, 2 ** 63, 10 ** 30])
def test_max_bytes_is_bounded(tmp_path, max_bytes):
    # OverflowError (zlib's bound is a C ssize_t) or MemoryError before
    _regress(generations=1).save(tmp_path / "r.nxck")
    with pytest.raises(SearchError, match=rf"max_bytes={max_bytes}: give an int in \[1, 2\*\*40\]"):
        search.resume(tmp_path / "r.nxck", generations=0, device="cpu", max_bytes=max_bytes)
    assert ck.read(tmp_path / "r.nxck", max_bytes=ck.MAX_BYTES_MAX)["kind"] == "regress"


_READ_SMALL_IN_A_BOX = r"""
import resource, sys
from numptx.search import checkpoint as ck
with open("/proc/self/status") as f:
    vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm + (96 << 20), vm + (96 << 20)))
try:
    print(ck.read(sys.argv[1])["kind"])                # MAX_BODY (256 MiB) is not reserved
except BaseException as e:
    print("RAW", type(e).__name__, e)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux: VmSize")
def test_reading_a_small_checkpoint_reserves_only_its_size(tmp_path):
    _regress(generations=1).save(tmp_path / "r.nxck")
    out = subprocess.run([sys.executable, "-c", _READ_SMALL_IN_A_BOX, str(tmp_path / "r.nxck")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.stdout.strip() == "regress", out.stdout + out.stderr[-2000:]


_FORMULA_IN_A_SMALL_THREAD = r"""
import sys, threading
from numptx import stack_ptx as sp
from numptx.search.formula import formula
from numptx.search.genes import Genes
genes = Genes(["sin", "add"], 1)
chain = [sp.input("x0")] + [w for _ in range(4095) for w in genes.op_words("sin")]
threading.stack_size(512 << 10)                  # macOS's default for a new thread
out = []
t = threading.Thread(target=lambda: out.append(formula(chain, genes)))
t.start()
t.join()
print(len(out[0]), out[0][:12], sys.getrecursionlimit())
"""


def test_a_4096_op_chain_prints_in_a_thread_with_a_small_stack():
    # the printer recursed once a level under a recursion limit raised to 4 x nodes + 1000:
    # a legitimate 4,096-op program (max_length=4096) crashed the process (SIGSEGV) in a
    # thread with a 512 KB or 1 MB stack, where Python's own limit would have stopped it
    out = subprocess.run([sys.executable, "-c", _FORMULA_IN_A_SMALL_THREAD], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout.split() == ["20477", "sin(sin(sin(", "1000"]


@pytest.mark.parametrize("value, at", [(-1e308, 0), (1e308, 3), (10 ** 400, 3), (-10 ** 400, 0),
                                       (math.inf, 3), (-math.inf, 0), (math.nan, 0),
                                       (0.3, 1), (1.0, 3)],
                         ids=["-1e308", "1e308", "10**400", "-10**400", "inf", "-inf", "nan",
                              "0.3", "1.0"])
def test_a_descriptor_value_of_any_size_is_binned(value, at):
    # floor(-1e308 x bins) and float(10**400) raised OverflowError in the run; +inf went to the
    # first cell, not the last ("values outside go to the end cells")
    X, y = _data()
    d = search.Descriptor("d", lambda p, g: value, 0.0, 1.0, 4)
    r = search.map_elites(X, y, OPS, descriptors=[d], batch=8, generations=2, seed=0,
                          device="cpu", fit_top=0)
    assert list(r.archive) == [(at,)]


def test_a_descriptor_range_must_not_be_empty_and_may_be_huge():
    X, y = _data()
    for low, high in [(1.0, 1.0), (2.0, 1.0)]:
        d = search.Descriptor("d", lambda p, g: 0.5, low, high, 4)
        with pytest.raises(SearchError, match=rf"descriptor 'd': low={low} is not below "
                                              rf"high={high}"):
            search.map_elites(X, y, OPS, descriptors=[d], batch=8, generations=1, device="cpu")
    d = search.Descriptor("d", lambda p, g: 0.0, -1e308, 1e308, 4)      # high - low overflows
    r = search.map_elites(X, y, OPS, descriptors=[d], batch=8, generations=1, seed=0,
                          device="cpu", fit_top=0)
    assert list(r.archive) == [(2,)]


def _evolve_scores(scores):
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")

    def fitness(packs):
        n = sum(len(p.candidates) for p in packs)
        return scores(n)
    return search.evolve(tmpl, "f", fitness, population=8, generations=2, seed=0)


@pytest.mark.parametrize("scores, match", [
    (lambda n: ["1"] * n, r"returned '1' \(str\) for candidate 0; give a number"),
    (lambda n: [0.0] * (n - 1) + [None], r"returned None \(NoneType\) for candidate \d+"),
    (lambda n: [True] * n, r"returned True \(bool\) for candidate 0"),
    (lambda n: [1j] * n, r"returned 1j \(complex\) for candidate 0"),
    (lambda n: np.ones(n, bool), r"returned np.True_ \(bool\) for candidate 0"),
    (lambda n: np.zeros((n, 1)), r"returned an array of shape \(\d+, 1\) for \d+ candidates"),
    (lambda n: set(range(n)), r"returned set; it must return one number per candidate"),
    (lambda n: "0" * n, r"returned str"),
], ids=["text", "None", "bool", "complex", "bool-array", "2-D", "set", "str"])
def test_evolve_refuses_scores_numpy_would_make_up(scores, match):
    # np.asarray(got, float64) parsed text, took None as NaN, True as 1.0, flattened a 2-D
    # array; an int past the float range raised OverflowError
    with pytest.raises(SearchError, match=r"evolve: fitness= " + match):
        _evolve_scores(scores)


def test_evolve_takes_any_real_number_as_a_score():
    from decimal import Decimal
    from fractions import Fraction
    r = _evolve_scores(lambda n: [10 ** 400, -10 ** 400, math.nan, Fraction(1, 3), Decimal(2),
                                  np.float16(1), np.int64(3), -1e308][:n] + [5.0] * (n - 8))
    assert r.best.loss == -math.inf                      # -10**400: past the float range
    r = _evolve_scores(lambda n: np.arange(n, dtype=np.int32))
    assert r.best.loss == 0.0


def test_resume_refuses_descriptors_other_than_the_runs(tmp_path):
    # the archive's cells are bins of the run's axes: other descriptors (another user axis, the
    # same ones in another order, a built-in swapped) resumed without a word and filed the
    # archive by axes it was not made with
    X, y = _data()
    d = search.Descriptor("nconst", lambda p, g: sum(op.kind == "const" for op in p), 0, 6, 6)
    e = search.Descriptor("other", lambda p, g: 0.5, 0, 1, 6)
    r = search.map_elites(X, y, OPS, descriptors=["length", d], batch=12, generations=2, seed=0,
                          device="cpu", fit_top=0)
    r.save(tmp_path / "m.nxck")
    for given in (["length", e], [d, "length"], ["op_mix", d]):
        with pytest.raises(SearchError, match=r"was run with descriptors \['length', 'nconst'\] "
                                              r"\(in that order\)") as err:
            search.resume(tmp_path / "m.nxck", generations=1, device="cpu", descriptors=given)
        assert not isinstance(err.value, CheckpointError)            # the argument's fault
    full = search.map_elites(X, y, OPS, descriptors=["length", d], batch=12, generations=3,
                             seed=0, device="cpu", fit_top=0)
    more = search.resume(tmp_path / "m.nxck", generations=1, device="cpu",
                         descriptors=["length", d])
    assert [g[:-1] for g in more.history] == [g[:-1] for g in full.history]


@pytest.mark.parametrize("path, match", [(3, r"path=3: give a file path"),
                                         (None, r"path=None: give a file path"),
                                         ("a\x00b", r"path='a\\x00b': a path holds no NUL")])
def test_a_path_that_is_no_path_is_a_search_error(tmp_path, path, match):
    # os.fspath's TypeError and os.open's ValueError ("embedded null byte") escaped
    with pytest.raises(SearchError, match=r"resume: " + match):
        search.resume(path, generations=0, device="cpu")
    r = _regress(generations=1)
    with pytest.raises(SearchError, match=r"save: " + match):
        r.save(path)
    r.save(os.fsencode(tmp_path / "b.nxck"))                     # bytes are a path
    assert search.resume(os.fsencode(tmp_path / "b.nxck"), generations=0,
                         device="cpu").generations == 1
