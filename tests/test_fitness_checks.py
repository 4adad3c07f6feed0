"""numptx.jit.populations.fitness_checks: the cheap checks of nx.fitness decide exactly what the op-by-op
checks they replaced decided (issue 22 review: the preparation of 4096 candidates took up to
4 s). The reference below is the previous implementation (numptx/jit/populations/fitness.py at 999e215:
programs decoded op by op, PTX text parsed in full by the emulator's parser), kept here as the
contract; seeded random populations of op lists, encodings (numptx's own, plain copies,
corrupted words), PTX text (compiled stubs, hand-written, broken), formulas, compiled stubs
and mixes of them, on float32 and float64 data and with every dtype=, must give the same float
type or the same FitnessError (same candidate, same words). Real compiler and parser."""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

import numpy as np
import pytest

import numptx as nx
from numptx import site_layout, stack_ptx as sp
from numptx._program import Op, Stub, decode, input_tag
from numptx.dsl.expr import PtxExpr
from numptx.dsl.ptx_parse import parse
from numptx.errors import NumptxError
from numptx.instructions import TABLE, TYPES
from numptx.jit.populations import fitness as F
from numptx.jit.populations import fitness_checks as C
from numptx.jit.populations import fitness_facts as T
from numptx.jit.populations.fitness import FitnessError
from numptx.opkinds import CONST, CONST64, INPUT, INSTR
from numptx.valuetypes import BY_NAME


# ---- the reference: the previous implementation, op by op -------------------------------------
@dataclass(frozen=True)
class _Typed:
    dtype: str | None = None
    why: str = ""
    missing: tuple = ()
    positional: tuple = ()


def _float_of(t):
    vt = BY_NAME.get(t)
    base = (vt.base if vt is not None and vt.base else t)
    return base if base in ("f32", "f64") else None


def _row_floats(index):
    if index >= len(TABLE):
        return ()
    row = TABLE[index]
    return tuple(dict.fromkeys(f for t in (*row.operands, *row.results) if (f := _float_of(t))))


def _one_type(seen, missing):
    if len(seen) == 1:
        (t, why), = seen.items()
        return _Typed(t, why, tuple(missing))
    return _Typed(None, "", tuple(missing))


def _ref_program(prog, inputs):
    try:
        ops = decode(prog, getattr(prog, "inputs", None) or inputs) \
            if isinstance(prog, np.ndarray) else prog
    except NumptxError:
        return _Typed()
    seen, missing, positional = {}, [], []
    for op in ops:
        if op.__class__ is not Op:
            continue
        word = op.word
        kind = word & 0xFF
        if kind == INSTR:
            for f in _row_floats(word >> 16 & 0xFFFF):
                seen.setdefault(f, repr(op))
        elif kind == INPUT:
            if op.name is not None:
                if op.name not in inputs:
                    missing.append(repr(op.name))
            elif word >> 32:
                if word >> 32 not in {input_tag(n) for n in inputs}:
                    missing.append(f"an input with name tag 0x{word >> 32:08x}")
            else:
                positional.append(word >> 16 & 0xFFFF)
        elif kind in (CONST, CONST64):
            f = _float_of(TYPES[word >> 8 & 0xFF]) if word >> 8 & 0xFF < len(TYPES) else None
            if f:
                seen.setdefault(f, repr(op))
    if positional:
        return _Typed(positional=tuple(dict.fromkeys(positional)))
    if len(seen) == 2 and not missing:
        fit = {}
        for t in ("f32", "f64"):
            try:
                stub = sp.compile(prog, {n: "u32" if n == "cand" else t for n in inputs},
                                  {"p": t})
            except NumptxError:
                return _Typed()
            fit[t] = (not stub.unsatisfied, -stub.stats["noops"])
        if fit["f32"] == fit["f64"]:
            return _Typed()
        t = max(("f32", "f64"), key=fit.__getitem__)
        return _Typed(t, f"it converts ({seen['f32']}, {seen['f64']}); its value reaches %v_p "
                         f"in {t}")
    return _one_type(seen, missing)


def _ref_text(text, variables):
    reg = site_layout.reg_name
    try:
        prog = parse(text, TABLE.uid, TABLE.version)
    except NumptxError:
        return _Typed()
    seen, missing, prefix = {}, [], reg("")
    for step in prog.steps:
        for names, t in zip(step.dests, step.dest_types):
            f = _float_of(t) or {"b32": "f32", "b64": "f64"}.get(t)
            if f and reg("p") in names:
                seen.setdefault(f, step.text.strip())
        for slot in step.srcs:
            for o in slot:
                name = getattr(o, "name", None)
                if (isinstance(name, str) and not getattr(o, "special", False)
                        and name.startswith(prefix) and "#" not in name
                        and name not in prog.declared and name[len(prefix):] not in variables
                        and repr(name[len(prefix):]) not in missing):
                    missing.append(repr(name[len(prefix):]))
    return _one_type(seen, missing)


def _ref_facts(k, c, names):
    variables = frozenset(("cand", "p") + names)
    regs = frozenset(site_layout.reg_name(v) for v in variables)
    if isinstance(c, Stub):
        p = site_layout.reg_name("p")
        t = _float_of(c.outputs.get(p, ""))
        assert t and c.inputs.keys() <= regs      # the generator's stubs fit the site
        return _Typed(t, "a compiled stub")
    if isinstance(c, PtxExpr):                  # unchanged code: the module's own
        return _Typed(*[getattr(C._formula(k, c, names)[1], f) for f in ("dtype", "why")])
    facts = (_ref_text(c, variables) if isinstance(c, str) else
             _ref_program(c, ("cand",) + names))
    if facts.positional:
        i = facts.positional[0]
        what = "cand, the candidate's index" if i == 0 else \
            f"column {names[i - 1]!r}" if i <= len(names) else "no input"
        raise FitnessError(f"fitness: candidate {k} reads input {i} by position "
                           f"(sp.input({i})): the kernel's inputs are cand, "
                           f"{', '.join(names)}, so it reads {what}; name the input it means, "
                           f"sp.input({names[0]!r}) for the first column", candidate=k)
    if facts.missing:
        raise FitnessError(f"fitness: candidate {k} reads {', '.join(facts.missing)}, which "
                           f"the data lack (the columns: {', '.join(names)}; the kernel's "
                           f"input cand is the candidate's index): name the columns with "
                           f"names=, or fix the candidate", candidate=k)
    return facts


def _ref_decide(typed, dtype, X):
    index = (lambda who: int(who.split()[1]) if who.startswith("candidate ") else None)
    if dtype is None:
        kinds = {f.dtype for _, f in typed if f.dtype}
        if len(kinds) == 2:
            a, b = (next((w, f) for w, f in typed if f.dtype == t) for t in ("f32", "f64"))
            raise FitnessError(f"fitness: {a[0]} is f32 ({a[1].why}) and {b[0]} is f64 "
                               f"({b[1].why}): the kernel runs one float type; score them in "
                               f"two calls", candidate=index(b[0]))
        dtype = kinds.pop() if kinds else ("f64" if X.dtype == np.float64 else "f32")
    for who, f in typed:
        if f.dtype and f.dtype != dtype:
            raise FitnessError(f"fitness: {who} is written in {f.dtype} ({f.why}) but "
                               f"dtype={dtype!r}: it does not run in an {dtype} kernel (a "
                               f"program's {f.dtype} instructions find no operands there and "
                               f"do nothing); pass dtype={f.dtype!r} (the data are converted) "
                               f"or write it in {dtype}", candidate=index(who))
    return dtype


def _outcome(fn):
    try:
        return ("ok", fn())
    except FitnessError as e:
        return ("refused", e.candidate, str(e))


def _reference(cands, X, names, dtype, loss):
    def run():
        typed = [("the loss", _Typed(*[getattr(F._loss_facts(loss), f)
                                       for f in ("dtype", "why")]))]
        typed += [(f"candidate {k}", _ref_facts(k, c, names)) for k, c in enumerate(cands)]
        return _ref_decide(typed, dtype, X)
    return _outcome(run)


def _fast(cands, X, y, names, dtype, loss):
    C._program_cache.clear()
    T._text_cache.clear()
    return _outcome(lambda: F.prepare(cands, X, y, loss, names=names, dtype=dtype).dtype)


# ---- seeded random candidates ------------------------------------------------------------------
ROWS = {"f32": ["add.rn.f32", "sub.rn.f32", "mul.rn.f32", "min.f32", "neg.f32", "abs.f32"],
        "f64": ["add.rn.f64", "mul.rn.f64", "min.f64", "neg.f64"],
        "cvt": ["cvt.f64.f32", "cvt.rn.f32.f64"], "int": ["add.s32", "mul.lo.s32"]}
NAMES = ("x0", "x1")


def _op_list(r: random.Random) -> list:
    flavour = r.choice(["f32", "f64", "f32", "f64", "mix", "none"])
    rows = ROWS["f32"] + ROWS["f64"] + ROWS["cvt"] if flavour == "mix" else \
        ROWS["int"] if flavour == "none" else ROWS[flavour]
    ctype = {"none": "s32", "mix": r.choice(["f32", "f64"])}.get(flavour, flavour)
    prog = []
    for _ in range(r.randint(1, 6)):
        x = r.random()
        if x < 0.03:
            prog.append(sp.input(r.choice(["zz", "cand"])))          # the data lack zz
        elif x < 0.05:
            prog.append(sp.input(r.randint(0, 3)))                    # by position
        elif x < 0.07:
            prog.append(sp.input(r.randint(0, 3), tag=input_tag(r.choice(["x1", "zz"]))))
        elif x < 0.45:
            prog.append(sp.input(r.choice(NAMES)))
        elif x < 0.6:
            prog.append(sp.const(r.choice([1.5, -2.0, 3]), ctype) if ctype != "s32"
                        else sp.const(r.randint(-3, 3), "s32"))
        elif x < 0.63:
            prog.append(sp.dup(ctype))
        else:
            prog.append(sp.instr(r.choice(rows)))
    return prog


def _encoding(r: random.Random) -> np.ndarray:
    prog = _op_list(r)
    names = list(dict.fromkeys(o.name for o in prog if o.name is not None))
    r.shuffle(names)
    if r.random() < 0.3:
        names.insert(r.randint(0, len(names)), "zz")      # an input the data lack, unread
    if r.random() < 0.1:
        prog.append(sp.const(0.5, "f64"))                 # (cut short below: no data word)
    enc = sp.encode(prog, names, dialect="mm-ptx" if r.random() < 0.1 else None)
    x = r.random()
    if x < 0.2:
        enc = np.asarray(enc).copy()                                    # no names
    elif x < 0.3 and enc.size:
        enc = enc.copy()                                                # a corrupted word
        i, w = r.randrange(enc.size), int(enc[r.randrange(enc.size)])
        field, value = r.choice([(0, r.randint(11, 255)), (8, r.randint(len(TYPES), 255)),
                                 (8, r.randint(1, 9)), (16, r.randint(len(TABLE), 65535)),
                                 (16, r.randint(9, 12)), (32, r.randint(1, 9))])
        enc[i] = np.uint64(w & ~((0xFFFFFFFF if field == 32 else 0xFF if field < 16 else
                                  0xFFFF) << field) | value << field)
    elif x < 0.35 and enc.size:
        enc = enc[:-1]                                                  # cut short
    elif x < 0.4:
        enc = np.asarray(enc).astype(np.int64)                          # not uint64
    return enc


_FRAGMENTS = [
    "mov.f32 %v_p, %v_x0;", "mov.f64 %v_p, %v_x1;", "mov.b32 %v_p, %v_x0;",
    "mov.b64 %v_p, %v_x1;", "add.rn.f32 %v_p, %v_x0, %v_x1;", "mul.rn.f64 %v_p, %v_x0, %v_x1;",
    "add.rn.f32 %v_p, %v_x0, %v_zz;", "mov.f32 %v_p, %v_q; // %v_zz in a comment",
    "/* mov.f64 %v_p, %v_x0; */ mov.f32 %v_p, %v_x1;",
    ".reg .f32 %v_t;\nadd.rn.f32 %v_t, %v_x0, %v_x1;\nmov.f32 %v_p, %v_t;",
    "{\n.reg .f64 %v_p;\nmov.f64 %v_p, %v_x0;\n}", "{ .reg .f32 %v_zz; mov.f32 %v_zz, %v_x0; }",
    "mov.f32 %v_p, %v_zz;\n{ .reg .f32 %v_zz; }", ".reg .f32 %v_r<2>;\nmov.f32 %v_p, %v_r1;",
    "cvt.rn.f32.f64 %v_p, %v_x0;", "cvt.f64.f32 %v_p, %v_x1;",
    "mov.f32 %v_p, 1;", "mov.f32 %v_p %v_x0;", "frob.f32 %v_p, %v_x0;", "ret;", "}",
    "{ mov.f32 %v_p, %v_x0;", "mov.f32 %v_p, 0f3F800000;", "mov.b64 {%v_p, %v_q}, %v_x0;",
    ".reg .pred %v_g;\nsetp.lt.f32 %v_g, %v_x0, %v_x1;\n@%v_g mov.f32 %v_p, %v_x1;",
    "mov.u32 %v_p, %v_cand;", "add.rn.f32 %v_p, %v_x0, %v_x0.x;", "mov.f64 %v_p, %v_cand;",
    "mov.f32 %v_p, %tid.x;", "mov.v4.u32 {%v_a, %v_b, %v_c, %v_d}, %tid;",
]


def _text(r: random.Random, stubs: list[str]) -> str:
    if r.random() < 0.4:
        return r.choice(stubs)
    return "\n".join(r.choice(_FRAGMENTS) for _ in range(r.randint(1, 3)))


@nx.ptx_expr
def _f32_cols(x0: nx.f32, x1: nx.f32) -> nx.f32:
    return x0 * x1


@nx.ptx_expr
def _f64_cols(x0: nx.f64, x1: nx.f64) -> nx.f64:
    return x0 - x1


@nx.ptx_expr
def _f32_pos(a: nx.f32, b: nx.f32) -> nx.f32:
    return a + b


@nx.ptx_expr
def _f64_default(x1: nx.f64, k: nx.f64 = 2.0) -> nx.f64:
    return x1 * k


@nx.ptx_expr
def _loss64(p: nx.f64, t: nx.f64) -> nx.f64:
    return (p - t) * (p - t)


FORMULAS = [_f32_cols, _f64_cols, _f32_pos, _f64_default]


@pytest.fixture(scope="module")
def pools():
    r = random.Random(11)
    texts, stubs = [], []
    for t in ("f32", "f64"):
        site = F.fitness_template(2, NAMES, t).sites["f"]
        for _ in range(12):
            prog = [sp.input(r.choice(NAMES)), sp.input(r.choice(NAMES)),
                    sp.instr(r.choice(ROWS[t]))]
            s = sp.compile(prog, site=site)
            stubs.append(s)
            texts.append(str(s))
    return texts, stubs


RNG = np.random.default_rng(3)
X64 = RNG.uniform(-1, 1, (16, 2))
DATA = {"float64": (X64, X64[:, 0]), "float32": (X64.astype(np.float32),
                                                 X64[:, 0].astype(np.float32))}


@pytest.mark.parametrize("kind", ["op lists", "encodings", "texts", "formulas", "mixed"])
def test_the_fast_checks_decide_what_the_op_by_op_checks_decided(kind, pools):
    texts, stubs = pools
    r = random.Random(hash(kind) % 1000)
    make = {"op lists": _op_list, "encodings": _encoding,
            "texts": lambda r: _text(r, texts), "formulas": lambda r: r.choice(FORMULAS),
            "mixed": lambda r: r.choice([_op_list, _encoding, lambda r: _text(r, texts),
                                         lambda r: r.choice(FORMULAS + stubs)])(r)}[kind]
    seen = set()
    for trial in range(60):
        cands = [make(r) for _ in range(r.randint(1, 5))]
        X, y = DATA[r.choice(list(DATA))]
        dtype = r.choice([None, None, "f32", "f64"])
        loss = _loss64 if r.random() < 0.1 else "mse"
        want = _reference(cands, X, NAMES, dtype, loss)
        got = _fast(cands, X, y, NAMES, dtype, loss)
        assert got == want, (trial, cands, dtype)
        # the same again from the caches
        assert _outcome(lambda: F.prepare(cands, X, y, loss, names=NAMES,
                                          dtype=dtype).dtype) == want
        seen.add(want[0] if want[0] == "refused" else want[1])
    assert seen >= {"f32", "f64", "refused"}, seen     # the populations reach every outcome


def test_the_word_scan_gives_each_program_the_facts_of_the_op_by_op_path():
    """Program by program (not only the population's outcome): type, inputs the data lack,
    inputs by position, for op lists and encodings of every kind above."""
    r = random.Random(7)
    inputs = ("cand",) + NAMES
    progs = [(_op_list if k % 2 else _encoding)(r) for k in range(600)]
    C._program_cache.clear()
    got = C._program_batch(list(enumerate(progs)), inputs)
    for k, prog in enumerate(progs):
        want = _ref_program(prog, inputs)
        assert (got[k].dtype, got[k].missing, got[k].positional) == \
            (want.dtype, want.missing, want.positional), (k, prog)
    # names whose tags collide (s6l6mwll, ovbiasnc): decode's choice among them
    inputs = ("cand", "s6l6mwll", "x1")
    both = [["ovbiasnc", "s6l6mwll"], ["s6l6mwll", "ovbiasnc"], ["x1", "ovbiasnc"]]
    coll = [sp.encode([sp.input(r.choice(n)), sp.input("x1"), sp.instr("add.rn.f32")],
                      n + ["x1"] * ("x1" not in n)) for n in both for _ in range(3)]
    coll += [[sp.input(k, tag=input_tag("ovbiasnc")), sp.instr("neg.f32")] for k in range(3)]
    got2 = C._program_batch(list(enumerate(coll)), inputs)
    for k, prog in enumerate(coll):
        want = _ref_program(prog, inputs)
        assert (got2[k].dtype, got2[k].missing) == (want.dtype, want.missing), (k, prog)
    kinds = {(f.dtype, bool(f.missing), bool(f.positional)) for f in got.values()}
    assert {("f32", False, False), ("f64", False, False), (None, True, False),
            (None, False, True)} <= kinds, kinds


def test_every_word_decode_refuses_is_refused_by_the_word_scan():
    """Each field of each word of programs of every kind, set out of its range: the word
    scan refuses (no type, nothing read) exactly the encodings decode refuses."""
    base = [[sp.input("x0"), sp.const(1.5, "f32"), sp.instr("add.rn.f32")],
            [sp.input("x1"), sp.const(2.0, "f64"), sp.instr("mul.rn.f64")],
            [sp.input("x0"), sp.dup("f32"), sp.instr("mul.rn.f32"), sp.const(3, "s32")],
            [sp.const(0.25, "f64"), sp.const(0.5, "f64"), sp.instr("add.rn.f64")]]
    fields = [(0, 0xFF, [4, 11, 255]), (8, 0xFF, [0, 5, 9, len(TYPES), 255]),
              (16, 0xFFFF, [0, 9, len(TABLE), 65535]), (32, 0xFFFFFFFF, [0, 1])]
    progs = []
    for prog in base:
        for enc in (sp.encode(prog, ["x0", "x1"]), sp.encode(prog, ["x0", "x1"])[:-1]):
            for i in range(enc.size):
                for shift, mask, values in fields:
                    for v in values:
                        bad = enc.copy()
                        bad[i] = np.uint64(int(bad[i]) & ~(mask << shift) | v << shift)
                        progs.append(bad)
    inputs = ("cand",) + NAMES
    C._program_cache.clear()
    got = C._program_batch(list(enumerate(progs)), inputs)
    refused = 0
    for k, prog in enumerate(progs):
        want = _ref_program(prog, inputs)
        assert (got[k].dtype, got[k].missing, got[k].positional) == \
            (want.dtype, want.missing, want.positional), (k, [hex(int(w)) for w in prog])
        try:
            decode(prog, prog.inputs)
        except NumptxError:
            refused += 1
            assert got[k] == C.Facts()
    assert refused > len(progs) // 3


def test_the_text_scan_agrees_with_the_parser_on_every_text_it_takes(pools):
    """Tentative facts are what the parser says whenever it takes the text (and a text the
    scan refuses outright, the parser refuses too)."""
    texts, _ = pools
    r = random.Random(5)
    variables = frozenset(("cand", "p") + NAMES)
    for trial in range(300):
        text = _text(r, texts)
        scanned, parsed = T._scan(text, variables), _ref_text(text, variables)
        try:
            parse(text, TABLE.uid, TABLE.version)
            takes = True
        except NumptxError:
            takes = False
        if takes:
            assert scanned.tentative and (scanned.dtype, scanned.missing) == \
                (parsed.dtype, parsed.missing), text
        elif not scanned.tentative:
            assert scanned == C.Facts(), text


def test_a_text_the_parser_refuses_decides_nothing():
    """The scan sees f64 and a missing input; the parser refuses the text (an integer
    literal for f32): as before, it neither decides the kernel's type nor is refused for
    what it reads: it scores +inf."""
    bad = "mov.f32 %v_zz, 1;\nadd.rn.f64 %v_p, %v_x0, %v_zz;"
    good = "mov.f32 %v_p, %v_x0;"
    X, y = DATA["float64"]
    assert F.prepare([good, bad], X, y).dtype == "f32"
    assert F.prepare([bad], X, y).dtype == "f64"      # the data's
    scores = nx.fitness([good, bad], X, y, device="cpu")
    assert np.isfinite(scores[0]) and scores[1] == np.inf


def test_checks_are_cached_by_words_and_text():
    """A program's facts are computed once per distinct words (an encoding's copy hits), a
    text's once per text; a changed table starts afresh."""
    C._program_cache.clear()
    T._text_cache.clear()
    prog = [sp.input("x0"), sp.const(2.0, "f64"), sp.instr("mul.rn.f64")]
    enc = sp.encode(prog, ["x0"])
    X, y = DATA["float32"]
    pop = [prog, enc, np.asarray(enc).copy(), "mov.f64 %v_p, %v_x0;"]
    assert F.prepare(pop, X, y).dtype == "f64"
    (ctx, words), = C._program_cache.items()
    assert len(words) == 3                  # the op list, the encoding, the bare copy
    (_, texts), = T._text_cache.items()
    assert list(texts) == ["mov.f64 %v_p, %v_x0;"]
    assert F.prepare(pop[:1] * 50, X, y).dtype == "f64"
    assert len(C._program_cache[ctx]) == 3


def test_the_checks_module_declares_its_interface():
    assert F.FitnessError is C.FitnessError and F.prepare.__module__ == F.__name__
    fields = {f: C.Facts.__dataclass_fields__[f].type for f in C.Facts.__dataclass_fields__}
    assert fields["dtype"] == "Float | None" and C.Float.__args__ == ("f32", "f64")
    for mod in (C, T):
        assert not re.search(r"\bhasattr\(", open(mod.__file__).read())
