"""Pack candidates are isolated (issue 22 items 8, 21, 3, 19): a candidate cannot forge the
marks that attribute ptxas errors, name the pack's reserved labels or registers, branch out of
its own code, return or exit; each such candidate lands in ``pack.errors`` (its index, the line)
while the others still build with real nvJitLink. One program given as a population, and bad
constant tables, are refused with a NumptxError naming the fix."""
from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx.errors import LinkError, NumptxError
from numptx.jit.populations.pack import PackError
from numptx.jit.populations.runtime_constants import ConstantsError
from numptx.jit.templates.stub_checks import StubRuleError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bench_populations import FIT  # noqa: E402  cand (u32 selector), x in, y out


@pytest.fixture(scope="module")
def fit():
    return nx.CudaTemplate(FIT, entry="fit", cache=False)


SQUARE = "mul.rn.f32 %v_y, %v_x, %v_x;"
DOUBLE = "add.rn.f32 %v_y, %v_x, %v_x;"


# -- item 8: forged marks ----------------------------------------------------------------------
@pytest.mark.parametrize("forged", ["// numptx candidate 0", "$__nx_pk_end:",
                                    "/* numptx candidate 0 */", "// PTX_INJECT_STUB_END"])
def test_a_forged_mark_does_not_blame_another_candidate(fit, forged):
    """Before: ptxas's error in candidate 1 was blamed on candidate 0 (the mark it forged), so
    the innocent 0 was dropped and the pack then failed with a LinkError."""
    cands = [SQUARE, f"{forged}\nbogus.f32 %v_y;", DOUBLE]
    pack = fit.pack("f", cands, select="cand")
    assert len(pack.cubin) > 0
    assert pack.ok == [0, 2] and list(pack.errors) == [1]
    e = pack.errors[1]
    assert isinstance(e, StubRuleError) and e.candidate == 1 and e.line == 1
    assert str(e).startswith("candidate 1: invalid stub for site 'f': stub line 1")


# -- item 21: what breaks the pack's contract --------------------------------------------------
BREAKS = {
    "bra.uni $__nx_pk_0;": "reserved",          # into another candidate's code
    "bra $__nx_pk_end;": "reserved",
    ".reg .u32 %__nx_pk_i;": "reserved",        # the pack's own registers
    "ret;": "control", "exit;": "control", "@%p bra.uni Lout;": "branch",
    ".global .u32 g;": "directive", ".extern .global .u32 e;": "directive",
    '.pragma "nounroll";': "directive",
    "$tab: .branchtargets Lown;": "directive", "brx.idx %r, $tab;": "branch",
}


@pytest.mark.parametrize("line, rule", sorted(BREAKS.items()))
def test_a_candidate_that_breaks_the_contract_is_left_out(fit, line, rule):
    bad = (f".reg .pred %p;\n.reg .u32 %r;\nsetp.gt.f32 %p, %v_x, 0f00000000;\n{SQUARE}\n"
           f"{line}\nLown:")
    pack = fit.pack("f", [SQUARE, bad, DOUBLE], select="cand")
    assert len(pack.cubin) > 0 and pack.ok == [0, 2] and list(pack.errors) == [1]
    e = pack.errors[1]
    assert isinstance(e, StubRuleError) and e.rule == rule and e.line == 5
    assert e.stub_line == line and e.candidate == 1 and "candidate 1:" in str(e)


def test_the_same_candidate_alone_may_return(fit):
    """ret/exit are refused in packs (and so in nx.fitness on a GPU), not in a single stub."""
    assert len(fit.inject(f=f"{SQUARE}\nret;").cubin) > 0
    with pytest.raises(NumptxError):
        fit.pack("f", [f"{SQUARE}\nret;"], select="cand", errors="raise").cubin


def test_candidates_may_use_the_same_labels_of_their_own(fit):
    own = ".reg .pred %p;\nsetp.gt.f32 %p, %v_x, 0f00000000;\n" + SQUARE + \
          "\n@%p bra Ldone;\nneg.f32 %v_y, %v_y;\nLdone:"
    pack = fit.pack("f", [own, own, DOUBLE], select="cand")
    assert len(pack.cubin) > 0 and pack.errors == {}


def test_a_module_line_in_a_runtime_pack_candidate_is_not_hoisted(fit):
    cands = ["fma.rn.f32 %v_y, %v_x, 0f40000000, 0f3F000000;",
             "// numptx module: .visible .global .u32 evil;\n" + SQUARE]
    pack = fit.pack("f", cands, select="cand", constants="runtime")
    assert len(pack.cubin) > 0 and list(pack.errors) == [1]
    assert "evil" not in pack.ptx.replace(cands[1], "")
    assert ".visible .global .align 8 .b8 __nx_kc_f[16];" in pack.ptx    # its own table: hoisted
    assert pack.ptx.index("__nx_kc_f[16];") < pack.ptx.index(".entry")


# -- fuzz: random candidate text holding marks and labels, built for real --------------------
GOOD_LINES = [SQUARE, DOUBLE, "sub.rn.f32 %v_y, %v_x, 0f3F800000;", "// a comment",
              "neg.f32 %v_y, %v_x;", "/* block */", "// \u2028\x85\r\x1c separators",
              "{ .reg .f32 %u; neg.f32 %u, %v_x; }", "@ ! %q bra Lmine;"]


def _hostile(rng: random.Random, n: int) -> str:
    j = rng.randrange(n)
    return rng.choice([f"// numptx candidate {j}", f"$__nx_pk_{j}:", "$__nx_pk_end:",
                       f"bra.uni $__nx_pk_{j};", "@%q bra $__nx_pk_end;", "$__nx_pk_tab:",
                       ".reg .u32 %__nx_pk_i;", "ret;", "exit;", "trap;", "bra.uni Lnone;",
                       ".global .u32 g;", ".shared .u32 s;", f"/* numptx candidate {j} */",
                       "// PTX_INJECT_STUB f", ".visible .entry e() { }",
                       "mov.f32 %__nx_c0, %v_x;", "@ %q ret;", "@ ! %q bra.uni $L__BB0_2;",
                       "bra.uni $L__BB0_2; { $L__BB0_2: }", "mov.u32 %r1, 0;",
                       "/* left open", "mov.f32 %v_y, %f1;"])


def _candidate(rng: random.Random, n: int) -> tuple[str, str, int]:
    """(text, what it is: good, hostile or ptxas, the line at fault)."""
    lines = [".reg .pred %q;", "setp.gt.f32 %q, %v_x, 0f00000000;"] + \
        [rng.choice(GOOD_LINES) for _ in range(rng.randint(1, 4))] + ["@%q bra Lmine;", "Lmine:"]
    kind = rng.choice(["good", "good", "hostile", "hostile", "ptxas"])
    at = 0
    if kind != "good":
        at = rng.randint(2, len(lines) - 1)
        lines.insert(at, _hostile(rng, n) if kind == "hostile" else
                     rng.choice(["bogus.f32 %v_y;", "add.rn.f32 %v_y, %v_x;"]))
        at += 1
    return "\n".join(lines), kind, at


def test_random_candidates_with_marks_and_labels():
    fit = nx.CudaTemplate(FIT, entry="fit", cache=False)
    rng = random.Random(2221)
    for _ in range(6):
        n = rng.randint(3, 8)
        made = [_candidate(rng, n) for _ in range(n)]
        made[rng.randrange(n)] = (SQUARE, "good", 0)           # at least one builds
        pack = fit.pack("f", [t for t, _, _ in made], select="cand")
        assert len(pack.cubin) > 0
        assert pack.ok == [k for k, (_, kind, _) in enumerate(made) if kind == "good"]
        for k, (text, kind, at) in enumerate(made):
            if kind == "good":
                continue
            e = pack.errors[k]
            assert e.candidate == k and str(e).startswith(f"candidate {k}:"), (text, e)
            assert f"stub line {at}" in str(e), (text, str(e))
            if kind == "hostile":
                assert isinstance(e, StubRuleError) and e.line == at, (text, e)
            else:
                assert isinstance(e, LinkError) and not isinstance(e, StubRuleError), (text, e)


# -- item 3: one program where a population is expected ----------------------------------------
def test_one_program_as_a_population_is_refused(fit):
    prog = [sp.input("x"), sp.input("x"), sp.instr("mul.rn.f32")]
    with pytest.raises(PackError,
                       match=r"one Stack PTX program \(a list of ops, 3 ops\).*\[prog\]"):
        fit.pack("f", prog, select="cand")
    words = sp.encode(prog, inputs=["cand", "x"])
    with pytest.raises(PackError, match=r"uint64 encoding.*\[prog\]"):
        fit.pack("f", words, select="cand")
    for given in (prog, words):
        with pytest.raises(PackError, match=r"\[prog\]"):
            fit.pack_many("f", given, select="cand")
    pack = fit.pack("f", [prog], select="cand")                  # the fix
    assert len(pack) == 1 and len(pack.cubin) > 0 and pack.errors == {}


# -- item 19: set_constants --------------------------------------------------------------------
@pytest.mark.parametrize("values, match", [
    ({0: [10 ** 400, 1.0]}, "candidate 0: a constant is too large for f64"),
    ({True: [1.0, 2.0]}, "candidate indices are ints, not True"),
    ({np.True_: [1.0, 2.0]}, "candidate indices are ints"),
    ({0: np.ones((2, 1))}, r"candidate 0: .*shape \(2, 1\)"),
    ({0: [[1.0, 2.0]]}, r"candidate 0: .*shape \(1, 2\)"),
    ([[10 ** 400, 1.0], None], "candidate 0: a constant is too large"),
])
def test_set_constants_refuses_what_it_took_silently(fit, values, match):
    cands = ["fma.rn.f32 %v_y, %v_x, 0f40000000, 0f3F000000;", SQUARE]
    pack = fit.pack("f", cands, select="cand", constants="runtime")
    pack.cubin
    before = pack.table()
    with pytest.raises(ConstantsError, match=match):
        pack.set_constants(values)
    assert pack.table() == before                    # nothing half-set
    pack.set_constants({1: []})
    pack.set_constants({0: np.array([3.0, 4.0])})
    assert pack.constants[0].tolist() == [3.0, 4.0]


def test_ptxas_errors_in_a_runtime_pack_name_the_candidates_own_line(fit):
    """With run-time constants each candidate's code starts with a load per literal; the line
    ptxas blames is still counted in the candidate's own text."""
    bad = "fma.rn.f32 %v_y, %v_x, 0f40000000, 0f3F000000;\n// two constants above\nbogus.f32 %v_y;"
    pack = fit.pack("f", [SQUARE, bad], select="cand", constants="runtime")
    assert len(pack.cubin) > 0 and list(pack.errors) == [1]
    e = pack.errors[1]
    assert "stub line 3: 'bogus.f32 %v_y;'" in str(e) and e.stub_line == "bogus.f32 %v_y;"


def test_no_candidate_type_carries_a_mark(fit):
    """Compiled types skip the raw-text rules, but not the marks: a hand-made ``sp.Stub`` or a
    packed stub given as a candidate cannot forge one either."""
    from numptx.site_layout import GeneratedStub
    forged = sp.Stub("// numptx candidate 0\nbogus.f32 %v_y;", {}, {})
    inner = fit.pack("f", [SQUARE], select="cand")
    nested = inner.population.stub(fit.sites["f"])
    assert type(nested) is GeneratedStub
    pack = fit.pack("f", [SQUARE, forged, nested, DOUBLE], select="cand")
    assert len(pack.cubin) > 0 and pack.ok == [0, 3] and sorted(pack.errors) == [1, 2]
    assert all(isinstance(e, StubRuleError) and e.rule == "reserved" for e in pack.errors.values())


# -- review: lines as ptxas counts them, scoped labels, guards with white space -----------------
SEPARATORS = ["\u2028", "\u2029", "\x85", "\x1c", "\x1d", "\x1e", "\r"]


@pytest.mark.parametrize("sep", SEPARATORS)
def test_line_separators_in_a_comment_do_not_shift_the_blame(fit, sep):
    """ptxas ends a line only at "\\n"; Python's splitlines also at "\\r", "\\x85", "\\u2028"...
    Before, a comment holding such characters in candidate 1 moved the blame for candidate 5's
    ptxas error onto the innocent candidates between them."""
    hostile = "// " + sep * 8 + "\n" + SQUARE          # assembles: the comment is one line
    cands = [SQUARE, hostile, SQUARE, DOUBLE, SQUARE, "bogus.f32 %v_y;"]
    pack = fit.pack("f", cands, select="cand")
    assert len(pack.cubin) > 0
    assert pack.ok == [0, 1, 2, 3, 4] and list(pack.errors) == [5]
    assert "stub line 1: 'bogus.f32 %v_y;'" in str(pack.errors[5])


def test_line_separators_cannot_fail_the_whole_pack(fit):
    """Before: the blame moved above candidate 0's mark, onto the pack's own dispatch lines, so
    no candidate was blamed and the whole pack failed with a LinkError."""
    hostile = "// " + "\u2028" * 40 + "\n" + SQUARE
    pack = fit.pack("f", [hostile, "bogus.f32 %v_y;", DOUBLE], select="cand")
    assert len(pack.cubin) > 0 and pack.ok == [0, 2] and list(pack.errors) == [1]


@pytest.mark.parametrize("guard", ["@ %p", "@ ! %p", "@!  %p", "@\t%p", "@\n%p", "@/* */%p"])
@pytest.mark.parametrize("op", ["ret;", "exit;", "bra.uni Lout;", "bra $L__BB0_2;"])
def test_a_guard_written_with_white_space_hides_nothing(fit, guard, op):
    """ptxas takes white space after '@' and around '!' (each of these assembles); the check
    read such a statement as the instruction '@' and let the branch or the return through."""
    bad = f".reg .pred %p;\nsetp.gt.f32 %p, %v_x, 0f00000000;\n{SQUARE}\n{guard} {op}\nLown:"
    pack = fit.pack("f", [SQUARE, bad, DOUBLE], select="cand")
    assert len(pack.cubin) > 0 and pack.ok == [0, 2] and list(pack.errors) == [1]
    e = pack.errors[1]
    assert isinstance(e, StubRuleError) and e.rule in ("control", "branch") and e.line == 4


def test_a_label_in_an_inner_block_is_not_the_branchs(fit):
    """PTX scopes labels by { } blocks: a branch does not see a label of an inner or sibling
    block, and ptxas resolves the name outside the candidate (the kernel's own label). Before,
    the check took any label of the text as the candidate's own."""
    for bad in (f"{SQUARE}\nbra.uni $L__BB0_2;\n{{ $L__BB0_2: }}",
                f"{SQUARE}\n{{ bra.uni $L__BB0_2; }}\n{{ $L__BB0_2: }}"):
        pack = fit.pack("f", [SQUARE, bad], select="cand")
        assert len(pack.cubin) > 0 and pack.ok == [0] and list(pack.errors) == [1]
        e = pack.errors[1]
        assert isinstance(e, StubRuleError) and e.rule == "branch", bad
        assert "not inside" in str(e)
    nested = (".reg .pred %p;\nsetp.gt.f32 %p, %v_x, 0f00000000;\n{ " + SQUARE +
              "\n{ @%p bra Lout; }\nneg.f32 %v_y, %v_y;\nLout: }")  # outward: its own
    pack = fit.pack("f", [nested, nested], select="cand")
    assert len(pack.cubin) > 0 and pack.errors == {}


def test_a_comment_left_open_cannot_swallow_the_next_candidates_start(fit):
    """Before: candidate 1 opened '/*' and candidate 2 closed it, so ptxas skipped the pack's
    own lines between them (candidate 2's label); the whole pack failed with a LinkError."""
    cands = [SQUARE, SQUARE + "\n/* open", "*/ " + SQUARE, DOUBLE]
    pack = fit.pack("f", cands, select="cand")
    assert len(pack.cubin) > 0 and pack.ok == [0, 3] and sorted(pack.errors) == [1, 2]
    e = pack.errors[1]
    assert isinstance(e, StubRuleError) and e.rule == "comment" and e.line == 2


@pytest.mark.parametrize("values, match", [
    ({0: [None, 1.0]}, r"candidate 0: .*constant 0 is None"),                 # was NaN
    ({0: [True, 1.0]}, r"candidate 0: .*constant 0 is a bool"),               # was 1.0
    ({0: np.array([True, False])}, r"candidate 0: .*bool"),
    ({0: np.array([1 + 2j, 1.0])}, r"candidate 0: .*complex"),              # was 1.0
    ({0: np.array(["1.5", "2"])}, r"candidate 0: .*numbers"),               # was parsed
    ({0: np.array([1.0, "2"], dtype=object)}, r"candidate 0: .*constant 1 is a str"),
    ({0: np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[D]")}, r"candidate 0: .*numbers"),
    ({0: np.array([np.longdouble("1e400"), 1.0])}, r"candidate 0: .*too large for f64"),
    ({0: np.ma.masked_array([1.0, 2.0], mask=[True, False])}, r"candidate 0: .*masked"),
    (5, r"set_constants: .*mapping .* or a sequence"),                      # was TypeError
    (None, r"set_constants: .*mapping .* or a sequence"),
    ({1.0, 2.0, 3.0}, r"set_constants: .*set has no order"),               # taken in any order
])
def test_set_constants_refuses_values_numpy_would_convert(fit, values, match):
    """np.asarray(..., float64) turned these into numbers without a word (None into NaN, a bool
    into 1.0, a complex array into its real part, strings and dates into numbers) or let a raw
    TypeError out; each is a ConstantsError now, and the table is as it was."""
    cands = ["fma.rn.f32 %v_y, %v_x, 0f40000000, 0f3F000000;", SQUARE,
             ".reg .f64 %d;\nadd.f64 %d, 0d4000000000000000, 0d4000000000000000;\n" + SQUARE]
    pack = fit.pack("f", cands, select="cand", constants="runtime")
    pack.cubin
    before = pack.table()
    with pytest.raises(ConstantsError, match=match):
        pack.set_constants(values)
    assert pack.table() == before
    from decimal import Decimal
    from fractions import Fraction
    pack.set_constants([[Decimal("1.5"), Fraction(1, 4)], (), np.array([np.nan, -np.inf])])
    assert pack.constants[0].tolist() == [1.5, 0.25]
    assert np.isnan(pack.constants[2][0]) and pack.constants[2][1] == -np.inf
    pack.set_constants({0: (np.float32(3), np.int64(4))})
    assert pack.constants[0].tolist() == [3.0, 4.0]


@pytest.mark.parametrize("line", [
    "mov.u32 %r1, 0;",                       # the kernel's 'cand': the error lands in slot 0
    "cvta.to.global.u64 %rd9, %rd1;",        # the kernel's err pointer
    "@%p7 bra Lown;",                        # the kernel's predicate
    "{ .reg .f32 %t; }\nmov.f32 %v_y, %t;",  # declared in an inner block only: not seen here
])
def test_a_candidate_may_not_use_the_kernels_registers(fit, line):
    """Before: a raw candidate could write the fitness kernel's own registers (PTX blocks see
    the registers around them), e.g. %r1, the candidate index the error is added at: its error
    went to another candidate's slot and it scored 0."""
    bad = f"{SQUARE}\n{line}\nLown:"
    pack = fit.pack("f", [SQUARE, bad, DOUBLE], select="cand")
    assert len(pack.cubin) > 0 and pack.ok == [0, 2] and list(pack.errors) == [1]
    e = pack.errors[1]
    assert isinstance(e, StubRuleError) and e.rule == "register" and e.line >= 2, str(e)
    assert "is not a register of the stub" in str(e)


def test_registers_a_candidate_may_use(fit):
    own = (".reg .f32 %t<3>;\n.reg .u32 %i, %j;\n.reg .pred %q;\nmov.u32 %i, %tid.x;\n"
           "mov.u32 %j, %laneid;\nsetp.lt.u32 %q, %i, %j;\nmul.rn.f32 %t2, %v_x, %v_x;\n"
           "{ .reg .f32 %u; add.rn.f32 %u, %t2, %t2; mov.f32 %t1, %u; }\n"
           "selp.f32 %v_y, %t1, %t2, %q;")
    pack = fit.pack("f", [own, SQUARE], select="cand")
    assert len(pack.cubin) > 0 and pack.errors == {}
    with pytest.raises(StubRuleError, match="%t3 is not a register"):     # %t<3>: %t0..%t2
        fit.inject(f=own.replace("%t2, %v_x", "%t3, %v_x"))
