"""The CUDA C++ of the GPU interpreter of Stack PTX tapes, generated from the instruction table.

One kernel per instruction subset (the table rows a batch runs), slot width, slot bound and
mode. The loop over a program's records is one inline-asm block: each record jumps
(``brx.idx.uni``, one jump table) to its row's OWN PTX (``Instr.fmt``), so the GPU runs exactly
the instruction a compiled candidate runs; the rest (indices, outputs, the fitness sums) is
plain CUDA C++ compiled by NVRTC::

    from numptx.jit.populations.interpret_gpu_source import Subset, kernel_source, supported
    from numptx.instructions import TABLE
    s = Subset(rows=(TABLE.index("mul.rn.f32"), TABLE.index("sin.approx.f32")),
               slot_bits=32, max_slots=16)
    print(kernel_source(s))                 # targets NX_INPUT, NX_CONST, NX_R0 (mul), NX_R1
    supported(TABLE.index("%tid.x"))        # why the interpreter does not run a row, or None

(NVRTC compiles a C++ ``switch`` over 10-40 cases to a tree of compares with small ``BRX``
leaves; the asm loop has one ``BRX`` for any subset.)

**Device tape** (what :mod:`numptx.jit.populations.interpret_gpu` writes from the tapes of
``stackptx_tape_many``): per program, 32-byte aligned, 8 header words ``n_slots, n_records,
n_outputs, 0...``, the output slots (0xFFFFFFFF: not written, reads 0) padded to 8 words, then
8-word records ``case, dst, w2, w3, op0, op1, op2, op3``: ``case`` is :data:`CASE_INPUT`,
:data:`CASE_CONST` or ``FIRST_ROW_CASE + k`` for ``rows[k]``; ``dst`` and the operands are
byte offsets of slots; ``w2`` an input's index or a constant's low word, ``w3`` its high
word. A slot is ``slot_bits`` wide (32 when no value of the batch is wider); an instruction
reads and writes a slot at its own type's width (a pred as a u32, 0 or 1: it enters the row's
PTX through ``setp.ne.u32`` and leaves through ``selp.u32``).

Modes: ``"outputs"`` stores each output's slot to ``out[(k * n_programs + p) * n_rows +
row]``; a fitness mode (``"fitness-mse"``, ``-mae``, ``-rmse``, ``-pearson``, with the float
type ``dtype``) reduces output 0 against the target per program into the four sums of
:func:`numptx.jit.populations.fitness.fitness_template`'s kernel (s0, s1, s2, and the count of rows with a
non-finite prediction or term), per warp and with double ``atomicAdd``.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ... import valuetypes as VT
from ...instructions import TABLE, parse_type_spec
from .fitness import LOSSES

__all__ = ["Subset", "kernel_source", "supported", "row_asm", "CASE_INPUT", "CASE_CONST",
           "FIRST_ROW_CASE", "MODES", "LOSSES", "ENTRY", "SLOT_BITS", "RECORD_WORDS",
           "slot_bits_of", "sass_profile"]

CASE_INPUT, CASE_CONST, FIRST_ROW_CASE = 0, 1, 2
RECORD_WORDS = 8
MODES = ("outputs",) + tuple(f"fitness-{k}" for k in LOSSES)
ENTRY = {"outputs": "nx_interp"} | {f"fitness-{k}": "nx_interp_fitness" for k in LOSSES}
SLOT_BITS = (32, 64)
_SLOT_C = {32: "unsigned int", 64: "unsigned long long"}
_DOLLAR = re.compile(r"\$(\d+)")
#: opcodes whose result depends on other lanes: a lane of the interpreter is a data row
_COLLECTIVE = frozenset({"mma", "wmma", "shfl", "vote", "redux", "match", "activemask", "bar",
                         "barrier", "ldmatrix", "stmatrix"})


@dataclass(frozen=True)
class Subset:
    """What one interpreter kernel is generated for (and cached by): the table ``rows`` its
    jump table covers (in case order), the slot width, the per-thread slot bound, the mode
    and, for a fitness mode, the float type of the prediction and the target."""
    rows: tuple[int, ...]
    slot_bits: int = 64
    max_slots: int = 64
    mode: str = "outputs"
    dtype: str = "f32"

    def __post_init__(self):
        if self.slot_bits not in SLOT_BITS or self.mode not in MODES or \
                self.dtype not in ("f32", "f64") or not 1 <= self.max_slots <= 1 << 16 or \
                len(set(self.rows)) != len(self.rows):
            raise ValueError(f"Subset: bad field in {self!r}")


def supported(index: int, arch_number: int = 90) -> str | None:
    """None when the GPU interpreter runs table row ``index``; else why not (for messages)."""
    if not 0 <= index < len(TABLE):
        return f"no table row {index} (the table has {len(TABLE)})"
    row = TABLE[index]
    if row.flags & {"special", "volatile"}:
        return "a special register or volatile read (its value depends on where it runs)"
    if row.opcode.split(".")[0] in _COLLECTIVE:
        return "a warp-collective instruction (its value depends on the other lanes)"
    if not 1 <= len(row.results) <= 4 or len(row.operands) > 4:
        return "the interpreter runs rows of 1 to 4 results and at most 4 operands"
    for spec in row.results + row.operands:
        name, width = parse_type_spec(spec)
        if width != 1:
            return f"a vector operand ({spec})"
        if VT.BY_NAME[name].user:
            return f"a user stack type ({name})"
    if row.min_sm > arch_number:
        return f"it needs sm_{row.min_sm} (the kernel is built for sm_{arch_number})"
    return None


def slot_bits_of(types) -> int:
    """The slot width values of ``types`` (names) need: 64 when one is wider than 32 bits."""
    return 64 if any(VT.BY_NAME[t].bits > 32 for t in types) else 32


def _width(t: str) -> int:
    """Bits a value of type ``t`` takes in its slot (a pred: a u32)."""
    return 32 if t == "pred" else VT.BY_NAME[t].bits


def _types(index: int) -> tuple[list[str], list[str]]:
    row = TABLE[index]
    return ([parse_type_spec(s)[0] for s in row.results],
            [parse_type_spec(s)[0] for s in row.operands])


def row_asm(index: int) -> str:
    """The PTX of table row ``index`` over registers ``nxv<k>`` (``$k`` of its ``fmt``,
    results first), as its case runs it."""
    return _DOLLAR.sub(lambda m: f"nxv{m.group(1)}", TABLE[index].fmt).strip()


def _case(k: int, index: int, slot_bytes: int) -> list[str]:
    """The PTX lines of ``rows[k]``'s case: load the operands from their slots, the row's own
    instruction, store the results."""
    res, ops = _types(index)
    types = res + ops
    out = [f"NX_R{k}: {{   // row {index}: {TABLE[index].name}"]
    decl = [f".reg .{VT.BY_NAME[t].reg if t != 'pred' else 'pred'} nxv{j};"
            for j, t in enumerate(types)]
    decl += [f".reg .u32 nxt{j};" for j, t in enumerate(types) if t == "pred"]
    out.append("  " + " ".join(decl))
    if ops:
        n = len(ops)
        regs = ", ".join(f"nxo{i}" for i in range(n)) if n != 3 else "nxo0, nxo1, nxo2, nxo3"
        vec = "" if n == 1 else ".v2" if n == 2 else ".v4"
        out.append(f"  ld.global.nc{vec}.u32 {{{regs}}}, [nxr+16];" if n > 1 else
                   "  ld.global.nc.u32 nxo0, [nxr+16];")
    for i, t in enumerate(ops):
        j = len(res) + i
        out.append(f"  cvt.u64.u32 nxb, nxo{i}; add.u64 nxb, nxb, nxs;")
        if t == "pred":
            out.append(f"  ld.local.u32 nxt{j}, [nxb]; setp.ne.u32 nxv{j}, nxt{j}, 0;")
        else:
            out.append(f"  ld.local.b{_width(t)} nxv{j}, [nxb];")
    out.append(f"  {row_asm(index)}")
    for j, t in enumerate(res):
        at = f"[nxa+{j * slot_bytes}]" if j else "[nxa]"
        if t == "pred":
            out.append(f"  selp.u32 nxt{j}, 1, 0, nxv{j}; st.local.u32 {at}, nxt{j};")
        else:
            out.append(f"  st.local.b{_width(t)} {at}, nxv{j};")
    out.append("  bra.uni NX_NEXT;\n}")
    return out


def _loop_asm(subset: Subset) -> str:
    """The inline asm of the record loop: operands %0 records (generic global address), %1
    their count, %2 this row's first input value (generic), %3 the bytes between two inputs'
    columns, %4 the slots (generic local address)."""
    sb = subset.slot_bits // 8
    targets = ["NX_INPUT", "NX_CONST"] + [f"NX_R{k}" for k in range(len(subset.rows))]
    const = ("st.local.b32 [nxa], nxw2;" if sb == 4 else
             "mov.b64 nxl, {nxw2, nxw3}; st.local.b64 [nxa], nxl;")
    lines = [
        "{",
        ".reg .pred nxp; .reg .u32 nxk, nxc, nxd, nxw2, nxw3, nxo0, nxo1, nxo2, nxo3;",
        f".reg .u64 nxr, nxs, nxin, nxstride, nxa, nxb, nxl; .reg .b{subset.slot_bits} nxi;",
        "cvta.to.global.u64 nxr, %0; mov.u32 nxk, %1; cvta.to.global.u64 nxin, %2;",
        "mov.u64 nxstride, %3; cvta.to.local.u64 nxs, %4;",
        f"NX_TABLE: .branchtargets {', '.join(targets)};",
        "NX_LOOP:",
        "setp.eq.u32 nxp, nxk, 0; @nxp bra.uni NX_END;",
        "ld.global.nc.v4.u32 {nxc, nxd, nxw2, nxw3}, [nxr];",
        "cvt.u64.u32 nxa, nxd; add.u64 nxa, nxa, nxs;",
        "brx.idx.uni nxc, NX_TABLE;",
        "NX_INPUT:",
        "cvt.u64.u32 nxb, nxw2; mad.lo.u64 nxb, nxb, nxstride, nxin;",
        f"ld.global.nc.b{subset.slot_bits} nxi, [nxb]; st.local.b{subset.slot_bits} [nxa], nxi;",
        "bra.uni NX_NEXT;",
        "NX_CONST:",
        const,
        "bra.uni NX_NEXT;",
    ]
    for k, index in enumerate(subset.rows):
        lines += _case(k, index, sb)
    lines += ["NX_NEXT:", f"add.u64 nxr, nxr, {4 * RECORD_WORDS}; sub.u32 nxk, nxk, 1;",
              "bra.uni NX_LOOP;", "NX_END:", "}"]
    return "\n".join(lines)


def _c_string(text: str) -> str:
    """``text`` as C string literals, one per line (``%`` doubled: asm operands are ``%n``)."""
    body = text.replace("%", "%%")
    for k in range(5):
        body = body.replace(f"%%{k}", f"%{k}")      # the asm's own operands stay
    esc = body.replace("\\", "\\\\").replace('"', '\\"')
    return "\n".join(f'        "{line}\\n"' for line in esc.split("\n"))


_RUN = r'''
typedef {slot} nx_slot;
#define NX_MAX_SLOTS {max_slots}

/* One program's records over one row: s[] holds the slot values (local memory). */
static __device__ __forceinline__ void nx_run(const unsigned int* r, unsigned int n_rec,
        const nx_slot* in_row, unsigned long long in_stride, nx_slot* s)
{{
    asm volatile(
{asm}
        :: "l"(r), "r"(n_rec), "l"(in_row), "l"(in_stride), "l"(s) : "memory");
}}

static __device__ __forceinline__ const unsigned int* nx_records(const unsigned int* t)
{{
    return t + 8 + ((t[2] + 7u) & ~7u);
}}
'''

_OUTPUTS = r'''
extern "C" __global__ void nx_interp({slot}* __restrict__ out,
        const unsigned int* __restrict__ words, const unsigned long long* __restrict__ offsets,
        const {slot}* __restrict__ in, int n_rows, int n_programs, int prog0)
{{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    const int prog = prog0 + blockIdx.y;
    if (row >= n_rows) return;
    const unsigned int* t = words + offsets[prog];
    nx_slot s[NX_MAX_SLOTS];
    nx_run(nx_records(t), t[1], in + row, (unsigned long long)n_rows * sizeof(nx_slot), s);
    const unsigned int n_out = t[2];
    for (unsigned int k = 0; k < n_out; ++k) {{
        const unsigned int o = t[8 + k];
        out[((size_t)k * n_programs + prog) * n_rows + row] = o == 0xFFFFFFFFu ? 0 : s[o];
    }}
}}
'''

_FITNESS = r'''
typedef {ctype} nx_T;
extern "C" __global__ void nx_interp_fitness(double* __restrict__ acc,
        const unsigned int* __restrict__ words, const unsigned long long* __restrict__ offsets,
        const {slot}* __restrict__ in, const {ctype}* __restrict__ y, int n_rows, double c,
        int prog0)
{{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int prog = prog0 + blockIdx.y;
    /* every lane of a warp runs the program (a lane past the rows on the last row), so the
       record loop's branches stay uniform; only rows < n_rows add to the sums */
    const int row = i < n_rows ? i : n_rows - 1;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, bad = 0.0;
    const unsigned int* t = words + offsets[prog];
    nx_slot s[NX_MAX_SLOTS];
    nx_run(nx_records(t), t[1], in + row, (unsigned long long)n_rows * sizeof(nx_slot), s);
    if (i < n_rows) {{
        const unsigned int o = t[8];
        nx_T p = o == 0xFFFFFFFFu ? (nx_T)0 : {decode_p};
        nx_T tt = y[row];
        if (!isfinite(p)) bad = 1.0;
        {loss}
        if (!isfinite(s0)) bad = 1.0;
    }}
    for (int k = 16; k > 0; k >>= 1) {{
        s0 += __shfl_down_sync(0xffffffffu, s0, k);
        s1 += __shfl_down_sync(0xffffffffu, s1, k);
        s2 += __shfl_down_sync(0xffffffffu, s2, k);
        bad += __shfl_down_sync(0xffffffffu, bad, k);
    }}
    if ((threadIdx.x & 31) == 0) {{
        double* a = acc + 4 * (size_t)prog;
        atomicAdd(a, s0); atomicAdd(a + 1, s1); atomicAdd(a + 2, s2); atomicAdd(a + 3, bad);
    }}
}}
'''

# the per-row terms of numptx.jit.populations.fitness's kernel (its _loss_code), the same expressions
# (tt: the target); tests/test_interpret_gpu.py compares the scores on a GPU
_LOSS = {
    "mse": "double dd = (double)p - (double)tt; s0 = dd * dd;",
    "rmse": "double dd = (double)p - (double)tt; s0 = dd * dd;",
    "mae": "s0 = fabs((double)p - (double)tt);",
    "pearson": "double q = (double)p - c; s0 = q; s1 = q * q; s2 = q * ((double)tt - c);",
}
_DECODE = {"f32": "__uint_as_float((unsigned int)s[o])",
           "f64": "__longlong_as_double((long long)s[o])"}


def kernel_source(subset: Subset) -> str:
    """The CUDA C++ of ``subset``'s kernel (entry ``ENTRY[subset.mode]``)."""
    slot = _SLOT_C[subset.slot_bits]
    run = _RUN.format(slot=slot, max_slots=subset.max_slots, asm=_c_string(_loop_asm(subset)))
    if subset.mode == "outputs":
        return run + _OUTPUTS.format(slot=slot)
    ctype = "float" if subset.dtype == "f32" else "double"
    return run + _FITNESS.format(slot=slot, ctype=ctype, decode_p=_DECODE[subset.dtype],
                                 loss=_LOSS[subset.mode.split("-", 1)[1]])


# ---- SASS per record: the CPU proxy of the kernel's speed -------------------------------------
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/\s*(.*)$")
_SASS_LABEL = re.compile(r"^\s*([.\w$]+):\s*$")
_TARGETS = re.compile(r'BRANCH_TARGETS\s+([^"]*)"')
_BRA = re.compile(r"^(@!?U?P\w+\s+)?BRA(?:\.\w+)*\s+`?\(?([.\w$]+)\)?")


def _sass_blocks(text: str) -> tuple[list[str], dict[str, int]]:
    """The instructions of nvdisasm output (one function) and each label's position."""
    ins: list[str] = []
    labels: dict[str, int] = {}
    for line in text.splitlines():
        m = _SASS_LINE.match(line)
        if m is None:
            lm = _SASS_LABEL.match(line)
            if lm:
                labels[lm.group(1)] = len(ins)
            continue
        s = " ".join(m.group(1).split(";", 1)[0].strip(" {}").split())
        if s and s != "NOP":
            ins.append(s)
    return ins, labels


def sass_profile(cubin: bytes, subset: Subset) -> dict:
    """SASS instructions the kernel runs per record, from its cubin (needs nvdisasm,
    ``numptx[tools]``): ``head`` (fetch the record, jump: the block ending in ``BRX``),
    ``tail`` (next record, loop back), and per case the straight-line instructions from its
    jump target to its branch back (a row's slow paths off that line are not counted):
    ``cases[name]``, with ``"INPUT"`` and ``"CONST"``. A record costs head + case + tail.

    >>> p = sass_profile(interp_variant(s).cubin, s)            # doctest: +SKIP
    >>> p["head"] + p["cases"]["mul.rn.f32"] + p["tail"]        # doctest: +SKIP
    20
    """
    from ..compile.sass import sass_text
    ins, labels = _sass_blocks(sass_text(cubin, ENTRY[subset.mode]))
    brx = next(i for i, s in enumerate(ins) if s.startswith("BRX"))
    targets = [t.strip() for t in _TARGETS.search(ins[brx]).group(1).split(",")]
    jumps = [(i, m) for i, s in enumerate(ins) if (m := _BRA.match(s))]
    nxt = Counter(m.group(2) for i, m in jumps if i > brx and not m.group(1)).most_common(1)
    tail_start = labels[nxt[0][0]]
    back, head_start = next((i, labels[m.group(2)]) for i, m in jumps
                            if i >= tail_start and labels.get(m.group(2), brx + 1) <= brx)
    names = ["INPUT", "CONST"] + [TABLE[i].name for i in subset.rows]
    cases = {}
    for name, t in zip(names, targets):
        i, n = labels[t], 0
        while i != tail_start:
            n += 1
            m = _BRA.match(ins[i])
            if m and not m.group(1) and labels.get(m.group(2)) == tail_start:
                break
            i += 1
        cases[name] = n
    return {"head": brx - head_start + 1, "tail": back - tail_start + 1, "cases": cases}
