"""What a raw stub may contain (issue 22 item 7; docs/templates.md "What a stub may contain"):
module-scope lines come only from numptx's own packed stubs (a ``GeneratedStub``'s
``module_lines``), never from stub text; raw stub text holding a directive other than ``.reg``,
numptx's reserved names or marks, or a branch out of the stub is refused with a
``StubRuleError`` naming the site and the line. Builds run for real (NVRTC, nvJitLink)."""
from __future__ import annotations

import pickle
import random
import re

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx.errors import LinkError, NumptxError
from numptx.jit.templates.stub_checks import StubRuleError, check_stub_rules
from numptx.site_layout import MODULE_LINE, GeneratedStub, hoist_module_lines

SRC = r'''
extern "C" __global__ void two(float* out, const float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i], z, w;
        PTX_INJECT("combine", PTX_IN(F32, x), PTX_OUT(F32, z));
        PTX_INJECT("post", PTX_IN(F32, z), PTX_OUT(F32, w));
        out[i] = w;
    }
}'''

GOOD = "add.rn.f32 %v_z, %v_x, %v_x;"
POST = "mov.f32 %v_w, %v_z;"


@pytest.fixture(scope="module")
def tmpl():
    return nx.CudaTemplate(SRC, entry="two", cache=False)


def _module_scope(ptx: str) -> list[str]:
    """The lines of ``ptx`` outside every function body (braces counted, comments dropped)."""
    out, depth = [], 0
    for line in ptx.splitlines():
        code = line.split("//", 1)[0]
        if depth == 0 and code.strip():
            out.append(code.strip())
        depth += code.count("{") - code.count("}")
    return out


# -- item 7: the module-line comment -------------------------------------------------------------
EVIL = f"{MODULE_LINE}.visible .entry evil() {{ ret; }}\n{GOOD}"


def test_module_line_comment_in_a_raw_stub_is_refused(tmpl):
    with pytest.raises(StubRuleError) as info:
        tmpl.inject(combine=EVIL, post=POST)
    e = info.value
    assert isinstance(e, NumptxError) and e.site == "combine" and e.line == 1
    assert "numptx module" in str(e) and "stub line 1" in str(e)


def test_render_never_hoists_stub_text(tmpl):
    """Text reaching render directly (not through inject) places nothing at module scope."""
    ptx = tmpl.render([EVIL, POST])
    assert not any("evil" in line for line in _module_scope(ptx))
    assert hoist_module_lines(".address_size 64\nbody", [EVIL]) == ".address_size 64\nbody"


def test_only_a_generated_stub_declares_module_lines():
    decl = ".visible .global .align 8 .b8 __nx_kc_f[8];"
    gen = GeneratedStub.declaring("{\n}", [decl])
    assert gen.module_lines == (decl,) and gen.startswith(MODULE_LINE + decl)
    ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.entry k() { ret; }\n"
    hoisted = hoist_module_lines(ptx, [gen, gen])
    assert hoisted.count(decl) == 1 and hoisted.index(decl) < hoisted.index(".entry")
    for fake in (str(gen), type("S", (str,), {})(str(gen)), np.str_(str(gen))):
        assert hoist_module_lines(ptx, [fake]) == ptx       # the same text, not numptx's: nothing
    back = pickle.loads(pickle.dumps(gen))                  # process pools carry it whole
    assert type(back) is GeneratedStub and back.module_lines == (decl,) and back == gen


# -- every module-scope directive PTX has, in random stub text ---------------------------------
DIRECTIVES = [
    ".version 8.0", ".target sm_90", ".address_size 64", ".entry e2() { ret; }",
    ".visible .entry e3() { ret; }", ".func f2() { ret; }", ".visible .func f3() { ret; }",
    ".weak .func f4() { ret; }", ".extern .func f5()", ".global .u32 g1", ".global .f32 g2[4]",
    ".visible .global .align 8 .b8 tbl[16]", ".weak .global .u32 g3", ".common .global .u32 g4",
    ".extern .global .u32 g5", ".const .f32 c1 = 1.0", ".shared .u32 s1",
    ".extern .shared .b8 s2[]",
    ".local .u32 l1", ".param .u32 p1", '.file 1 "evil.cu"', ".loc 1 1 0", ".section .debug_str {}",
    '.pragma "nounroll"', ".maxnreg 16", ".maxntid 32, 1, 1", ".reqntid 32", ".minnctapersm 1",
    ".maxnctapersm 1", ".noreturn", ".alias f6, f2", "$t: .branchtargets $t",
    "$c: .calltargets f2", "$p: .callprototype _ (.param .u32 _)", ".tex .u64 t1",
    ".surfref s3", ".samplerref s4", ".texref t2",
]
HOSTILE_TEXT = ["__nx_pk_end", "%__nx_c0", "__nx_kc_combine", "PTX_INJECT_STUB post",
                "PTX_INJECT_STUB_END", "PTX_INJECT_BEGIN combine", "numptx candidate 0",
                "numptx module: .global .u32 g"]
HEADER = [".reg .pred %p0;", ".reg .f32 %t;"]
FILLER = ["add.rn.f32 %v_z, %v_x, 0f3F800000;", "mul.rn.f32 %t, %v_x, %v_x;", "// a comment",
          "@%p0 bra L1;", "setp.lt.f32 %p0, %v_x, 0f00000000;", "/* block */",
          "{ .reg .f32 %u; mov.f32 %u, %t; }", "@!%p0 bra.uni L1;"]


def _random_stub(rng: random.Random) -> tuple[str, int, str]:
    """(stub text, the line of the hostile part, what it is): good filler around one hostile
    line (a directive, a reserved name or mark, a branch out) in a random form."""
    lines = HEADER + [rng.choice(FILLER) for _ in range(rng.randint(0, 5))]
    kind = rng.choice(["directive", "reserved", "branch"])
    if kind == "directive":
        d = rng.choice(DIRECTIVES)
        form = rng.choice(["plain", "label", "block", "indent", "same-line"])
        hostile = {"plain": d + ";", "label": f"Lz{rng.randint(0, 9)}: {d};",
                   "block": "{ " + d + "; }",
                   "indent": "\t  " + d + " ;", "same-line": f"{GOOD} {d};"}[form]
    elif kind == "reserved":
        t = rng.choice(HOSTILE_TEXT)
        forms = [f"// {t}", f"/* {t} */", f"// {MODULE_LINE}{t}", f"{GOOD} // {t}"]
        name = t.split()[0].lstrip("%")
        if name.startswith(("__nx", "PTX_INJECT")):         # as a register, a label
            forms += [f"mov.f32 %{name}, %v_x;", f"{name}:", f".reg .f32 %{name};"]
        hostile = rng.choice(forms)
    else:
        target = rng.choice(["$L__BB0_2", "$__nx_pk_0", "$__nx_pk_end", "Lnowhere", "L2"])
        hostile = rng.choice([f"bra.uni {target};", f"@%p0 bra {target};", f"bra {target};"])
        if "__nx" in target:
            kind = "reserved"
    at = rng.randint(0, len(lines))
    lines.insert(at, hostile)
    lines += ["L1:", GOOD]
    return "\n".join(lines), at + 1, kind


def test_random_stub_text_with_module_scope_directives_is_refused(tmpl):
    rng = random.Random(22)
    seen = set()
    for _ in range(400):
        text, line, kind = _random_stub(rng)
        with pytest.raises(StubRuleError) as info:
            tmpl.inject(combine=text, post=POST)
        e = info.value
        assert e.site == "combine", text
        assert e.line == line, (text, e)                 # the line at fault, counted from 1
        assert e.stub_line == text.splitlines()[line - 1].strip()
        assert e.rule == kind or (kind == "branch" and e.rule == "reserved"), (text, e.rule)
        seen.add(e.rule)
    assert seen == {"directive", "reserved", "branch"}


def test_every_directive_is_refused_alone():
    for d in DIRECTIVES:
        with pytest.raises(StubRuleError) as info:
            check_stub_rules(f"{GOOD}\n{d};", "combine")
        assert info.value.rule == "directive" and info.value.line == 2, d
        named = re.search(r"\.\w+", d.split(":")[-1]).group()
        assert repr(named) in str(info.value), (d, str(info.value))


def test_good_random_stubs_still_build(tmpl):
    """Filler alone keeps the contract: it resolves and nvJitLink assembles it."""
    rng = random.Random(7)
    for _ in range(3):
        text = "\n".join(HEADER + [rng.choice(FILLER) for _ in range(6)] + ["L1:", GOOD])
        check_stub_rules(text, "combine", packed=True)
        assert len(tmpl.inject(combine=text, post=POST).cubin) > 0, text


# -- other ways raw text arrives ---------------------------------------------------------------
def test_str_subclasses_and_user_objects_are_raw_text(tmpl):
    bad = f".global .u32 g1;\n{GOOD}"
    for stub in (np.str_(bad), type("Mine", (str,), {})(bad)):
        with pytest.raises(StubRuleError, match="'.global'"):
            tmpl.inject(combine=stub, post=POST)

    class Formula:          # an object whose .stub(site) returns raw text
        def stub(self, site):
            return f"{GOOD}\nbra.uni $L__BB0_2;"
    with pytest.raises(StubRuleError, match="labels it defines") as info:
        tmpl.inject(combine=Formula(), post=POST)
    assert info.value.line == 2


def test_branch_out_of_a_stub_is_refused_own_labels_build(tmpl):
    with pytest.raises(StubRuleError, match=r"'\$L__BB0_2' is not defined"):
        tmpl.inject(combine=f"{GOOD}\nbra.uni $L__BB0_2;", post=POST)
    own = ".reg .pred %p;\nsetp.lt.f32 %p, %v_x, 0f00000000;\n" + GOOD + "\n@%p bra SKIP;\n" \
          "add.rn.f32 %v_z, %v_z, 0f3F800000;\nSKIP:"
    assert len(tmpl.inject(combine=own, post=POST).cubin) > 0
    # a single stub may return (its own kernel's choice); a pack candidate may not
    assert len(tmpl.inject(combine=GOOD + "\nret;", post=POST).cubin) > 0


def test_generated_stubs_keep_the_contract_as_raw_text():
    """Stubs numptx compiles (Stack PTX, @ptx_expr with the math library) pass the raw-text
    rules too: saving one as text and injecting it later works."""
    @nx.ptx_expr
    def f(x: nx.f32) -> nx.f32:
        return nx.sin(x) * nx.exp(x) + nx.sqrt(nx.abs(x))

    @nx.ptx_expr
    def g(x: nx.f64) -> nx.f64:
        return nx.log(x) / nx.tanh(x) + nx.pow(x, 1.5)

    stubs = [str(f.stub()), str(g.stub()),
             str(sp.compile([sp.input("x"), sp.input("x"), sp.instr("mul.rn.f32")],
                            inputs={"x": "f32"}, outputs={"y": "f32"}))]
    for text in stubs:
        check_stub_rules(text, "s", packed=True)


def test_simulator_checks_refuse_the_same():
    """The simulator's build checks resolve stubs as the build does: the same refusal."""
    from numptx.jit.numba.numba_site import SiteSpec
    from numptx.jit.numba.sim_checks import check_stub
    spec = SiteSpec("s22", (("in", "f32", "x"), ("out", "f32", "z")))
    with pytest.raises(StubRuleError, match="'.global'"):
        check_stub(spec, f"{GOOD}\n.global .u32 g;", "sm_90")
    with pytest.raises(StubRuleError, match="numptx module"):
        check_stub(spec, EVIL, "sm_90")
    for bad, rule in ((f"{GOOD}\nmov.f32 %f1, %v_x;", "register"),
                      (f"{GOOD}\n@ %p bra $L__BB0_2;", "branch"), (f"{GOOD}\n/* open", "comment")):
        with pytest.raises(StubRuleError) as info:
            check_stub(spec, bad, "sm_90")
        assert info.value.rule == rule and info.value.line == 2


def test_stub_rule_error_is_a_link_error_with_the_site():
    with pytest.raises(LinkError) as info:
        check_stub_rules("mov.f32 %v_z, %v_x;\n.extern .global .u32 e;", "combine")
    assert info.value.site == "combine" and info.value.stub_line == ".extern .global .u32 e;"


# -- review: lines as ptxas counts them, guards with white space, scoped labels ----------------
def test_errors_quote_the_line_ptxas_counts():
    """ptxas ends a line only at "\\n"; Python's splitlines also at "\\r", "\\x85", "\\u2028"...
    Before, an error quoted another line than the one it counted (or none)."""
    seps = "\u2028\x85\r\x1c"
    with pytest.raises(StubRuleError) as info:
        check_stub_rules(f"// {seps}\n{GOOD}\n.global .u32 g;", "combine")
    assert info.value.line == 3 and info.value.stub_line == ".global .u32 g;"
    with pytest.raises(LinkError, match=r"stub line 3 '\}'") as info:
        nx.jit.stubs.checked_text(f"// {seps}\n{GOOD}\n}}", "combine")
    assert info.value.stub_line == "}"


def test_a_separator_in_one_stub_does_not_move_anothers_error(tmpl):
    """An assembly error in site 'post' is still 'post''s when 'combine''s comment holds line
    separators Python splits at (before: no site named, another line quoted)."""
    with pytest.raises(LinkError) as info:
        tmpl.inject(combine="// " + "\u2028" * 6 + "\n" + GOOD, post="bogus.f32 %v_w;").cubin
    assert info.value.site == "post" and info.value.stub_line == "bogus.f32 %v_w;"


@pytest.mark.parametrize("guard", ["@ %p", "@ ! %p", "@\n%p", "@/* c */%p", "@\t!\t%p"])
def test_a_guarded_branch_out_with_white_space_is_refused(tmpl, guard):
    """ptxas assembles "@ %p bra L;" (white space after '@', around '!'): before, the check
    read it as the instruction '@' and the branch left the stub for the kernel's label."""
    bad = f".reg .pred %p;\nsetp.lt.f32 %p, %v_x, 0f00000000;\n{GOOD}\n{guard} bra $L__BB0_2;"
    with pytest.raises(StubRuleError, match=r"'\$L__BB0_2' is not defined") as info:
        tmpl.inject(combine=bad, post=POST)
    assert info.value.line == 4 and info.value.rule == "branch"
    own = bad.replace("$L__BB0_2;", "Lmine;") + "\nLmine:"
    assert len(tmpl.inject(combine=own, post=POST).cubin) > 0


def test_a_label_the_branch_cannot_see_is_refused(tmpl):
    """Labels are scoped by { } blocks: before, a label defined in an inner or sibling block
    counted as the stub's, and ptxas resolved the branch to the kernel's label of that name
    (the kernel then skipped its stores)."""
    for bad in (f"{GOOD}\nbra.uni $L__BB0_2;\n{{ $L__BB0_2: }}",
                f"{GOOD}\n{{ bra.uni $L__BB0_2; }}\n{{ $L__BB0_2: }}",
                f"{GOOD}\n{{ {{ bra L; }} }}\n{{ L: }}"):
        with pytest.raises(StubRuleError, match="not inside") as info:
            check_stub_rules(bad, "combine")
        assert info.value.rule == "branch" and info.value.line in (2, 3)
    ok = (".reg .pred %p;\nsetp.lt.f32 %p, %v_x, 0f00000000;\n{\n" + GOOD +
          "\n{ @%p bra Lout; }\nL2: { @!%p bra L2b; L2b: }\n}\nLout:\nbra.uni L2end;\nL2end:")
    check_stub_rules(ok, "combine", packed=True)
    assert len(tmpl.inject(combine=ok, post=POST).cubin) > 0


def test_a_comment_left_open_is_refused(tmpl):
    """Before: 'combine' opened '/*' and 'post' closed it, so the kernel's code between the two
    sites (the frame's copies) became a comment, and the build went on without a word."""
    with pytest.raises(StubRuleError, match="does not close") as info:
        tmpl.inject(combine=GOOD + "\n/*", post="*/\n.reg .f32 %v_w;\n" + POST)
    assert info.value.site == "combine" and info.value.line == 2 and info.value.rule == "comment"
    closed = f"/* a comment\nover lines */\n{GOOD} // /* inside a line comment"
    assert len(tmpl.inject(combine=closed, post=POST).cubin) > 0


def test_a_huge_register_range_is_refused(tmpl):
    """Before: '.reg .b32 %q<10000000>;' assembled, after half a minute and 1.4 GB of
    nvJitLink (10**8: ten times that), one line of stub text."""
    with pytest.raises(StubRuleError, match="register range over 65536") as info:
        tmpl.inject(combine=f"{GOOD}\n.reg .b32 %q<10000000>;", post=POST)
    assert info.value.line == 2 and info.value.rule == "register"
    assert len(tmpl.inject(combine=f".reg .b32 %q<65536>;\n{GOOD}", post=POST).cubin) > 0


def test_comments_are_blanked_in_one_pass_as_the_regex_did():
    """blank_comments agrees with the regex it replaces (comments to spaces, line breaks kept)
    on random text, and finds the '/*' left open where the regex left it in the code."""
    from numptx.jit.templates.stub_checks import blank_comments
    regex = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
    rng = random.Random(2222)
    for _ in range(3000):
        text = "".join(rng.choice(["/", "*", "\n", "a", " ", "{", "//", "/*", "*/"])
                       for _ in range(rng.randint(0, 40)))
        code, opened = blank_comments(text)
        want = regex.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
        assert len(code) == len(text) and code.count("\n") == text.count("\n"), text
        if opened < 0:
            assert code == want, text
        else:
            assert want.find("/*") == opened and code[:opened] == want[:opened], text


def test_a_long_run_of_open_comments_is_refused_at_once(tmpl):
    """Before: each unclosed '/*' made the comment regex scan to the end of the text, so 48 KB
    of '/* ' took 6 s of CPU and 1 MB would take most of an hour; one pass now."""
    bomb = f"{GOOD}\n" + "/* " * 100_000
    with pytest.raises(StubRuleError, match="does not close") as info:
        tmpl.inject(combine=bomb, post=POST)
    assert info.value.line == 2


def test_assembly_errors_are_located_in_one_pass_as_by_walking_back():
    """nvjitlink's one-pass index gives what the walk back from each error line gave (the walk
    per message was quadratic: 8,000 failing lines of one stub took 26 s)."""
    from numptx.jit.compile.nvjitlink import _locate, _stub_index
    from numptx.site_layout import STUB_END, STUB_TAG
    rng = random.Random(2223)
    kinds = [f"\t{STUB_TAG}a", f"{STUB_TAG}b c", f"\t{STUB_END}", ".visible .entry k(", ".func f(",
             "mov.f32 %f1, %f2;", "", "  // comment", "{", "}"]
    for _ in range(300):
        lines = [rng.choice(kinds) for _ in range(rng.randint(0, 30))]
        index = _stub_index(lines)
        for lineno in range(-1, len(lines) + 3):
            assert _locate(lines, lineno, index) == _locate(lines, lineno), (lines, lineno)


def test_many_failing_lines_in_one_candidate_are_blamed_once():
    """A pack whose candidate fails on each of its 3,000 lines: the candidate is left out and
    the others build (the blame is found in one pass over the PTX, not one walk per message)."""
    sys_path = __import__("sys").path
    from pathlib import Path
    sys_path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_populations import FIT
    fit = nx.CudaTemplate(FIT, entry="fit", cache=False)
    square = "mul.rn.f32 %v_y, %v_x, %v_x;"
    bad = square + "\n" + "add.rn.f32 %v_y, %v_x;\n" * 3000
    pack = fit.pack("f", [square, bad, square], select="cand")
    assert len(pack.cubin) > 0 and pack.ok == [0, 2] and list(pack.errors) == [1]
    assert "stub line 2: 'add.rn.f32 %v_y, %v_x;'" in str(pack.errors[1])
