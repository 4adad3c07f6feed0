"""Stack PTX dialects: numptx's own semantics and mm-ptx's (MetaMachines' mm-ptx, whose
programs port unchanged with ``dialect="mm-ptx"``), and :func:`convert` between them::

    from numptx import stack_ptx as sp
    prog = [sp.input("a"), sp.input("b"), sp.instr("sub.f32")]          # mm-ptx: b - a
    ported = sp.convert(prog, "mm-ptx", "numptx", inputs={"a": "f32", "b": "f32"},
                        outputs={"z": "f32"})
    # ported computes b - a under numptx's rules: [input('a'), input('b'), meta(2),
    # reverse('f32'), instr('sub.f32')]

The words are the same in both dialects; only what they do differs (docs/dialects.md has the
table, op by op). The C core runs either (``stackptx_limits.dialect``).

How :func:`convert` works. A Stack PTX program's stack depths do not depend on the values it
computes: given the types of the inputs, every op's effect on the stacks (and on the meta
stack and the scratch slots) is known before the program runs. :func:`convert` runs the
program's stack effects under the source dialect's rules (no values, only depths) and writes,
for each op that does something, target-dialect ops with the same effect at that depth: an
mm-ptx ``reverse`` of 5 values becomes numptx ``meta(5), reverse``; a numptx ``rotate`` of
depth 3 becomes three mm-ptx ``swap_with``. Ops that do nothing are left out, meta values are
pushed right before the op that takes them, and routines are inlined (a routine's depths
depend on its caller). That is why it needs the compile's inputs and outputs. The replay
assumes every word with its operands runs; only the DAG node limit breaks that (CSE decides
which values need a node), so the source is compiled once and a hit refuses the conversion.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..instructions import TABLE, TYPES
from ..opkinds import (CONST, CONST64, INPUT, INSTR, LOAD, META, META_CONST, META_OPS, NOP,
                       RETURN, ROUTINE, STORE)
from .compile import value_type
from .encoding import as_program, decode, input_tag, program_dialect, routine_dialects
from .ops import DIALECTS, Op, ProgramError, const, dialect_id
from .ops import input as input_op
from .stub import DEFAULT_LIMITS, Limits, meta_capacity

__all__ = ["convert", "resolve_dialect"]


_NUMPTX, _MMPTX = 0, 1


def resolve_dialect(dialect: str | None, prog, routines, what: str):
    """(dialect index, ``prog``, ``routines``) for a compile, markers stripped: ``dialect=``, or
    the one the program carries (its marker word, ``Encoded.dialect``), or its routines', or
    numptx. A program or routine in another dialect than the one named or than each other is an
    error (its words would silently compute something else)."""
    d = None if dialect is None else dialect_id(dialect, what)
    own, prog = program_dialect(prog)
    if own is not None:
        if d is not None and own != d:
            raise ProgramError(f"{what}: the program is in the {DIALECTS[own]} dialect ("
                               f"{_how(own)}) and is compiled with "
                               f"dialect={dialect!r}; compile it with dialect="
                               f"{DIALECTS[own]!r}, or sp.convert(prog, {DIALECTS[own]!r}, "
                               f"{dialect!r}, ...) first")
        d = own
    d, routines = routine_dialects(routines, d, "the program" if dialect is None else
                                   f"dialect={dialect!r}", what)
    return (d or 0), prog, routines


def _how(d: int) -> str:
    return "its marker word, from encode(dialect=)" if d else "encode(dialect='numptx')"


# ---- the target program's ops -------------------------------------------------------------------
def _meta(n: int) -> Op:
    return Op(META_CONST, n << 16, text=f"meta({n})")


def _m(op_name: str, t: int) -> Op:
    return Op(META, t << 8 | META_OPS.index(op_name) << 16, text=f"{op_name}({TYPES[t]!r})")


def _instr_type_counts(types_widths) -> dict[int, int]:
    counts: dict[int, int] = {}
    for t, w in types_widths:
        counts[t] = counts.get(t, 0) + w
    return counts


@dataclass
class _Run:
    """The source program's stack state (depths only) and the target ops written so far."""
    src: int
    dst: int
    lim: Limits
    in_types: list[int]          # by input position
    in_names: list[str]
    sz: list[int] = field(default_factory=lambda: [0] * len(TYPES))
    meta: list[int] = field(default_factory=list)
    slots: dict[int, int] = field(default_factory=dict)      # slot -> type of its value
    out: list[Op] = field(default_factory=list)
    steps: int = 0
    where: str = ""
    meta_cap: int = 256

    def fail(self, why: str) -> ProgramError:
        return ProgramError(f"convert {DIALECTS[self.src]} -> {DIALECTS[self.dst]}: "
                            f"{self.where}: {why}")

    def grow(self, t: int, n: int = 1) -> None:
        # the dialects treat a full stack differently (mm-ptx drops results that find it
        # full, refuses yank_dup/swap_with/replace on it): stay below the capacity
        if self.sz[t] + n >= self.lim.stack_capacity:
            raise self.fail(f"the {TYPES[t]} stack reaches its capacity "
                            f"({self.lim.stack_capacity}), where the dialects differ; pass "
                            f"limits=sp.Limits(stack_capacity=...) larger than the program needs")
        self.sz[t] += n

    # -- target-dialect stack moves (each one leaves the target's meta stack empty) --
    def reverse_top(self, t: int, k: int) -> None:
        """Reverse the top ``k`` values of stack ``t`` (k <= depth) in the target dialect."""
        if k < 2:
            return
        if self.dst == _NUMPTX:
            self._add_or_cancel([_meta(k), _m("reverse", t)])
        elif k == 2:
            self._add_or_cancel([_m("swap", t)])
        elif k == self.sz[t]:
            self._add_or_cancel([_m("reverse", t)])           # mm-ptx: the whole stack
        else:
            for i in range(k // 2):
                self.swap_depths(t, i, k - 1 - i)

    def _add_or_cancel(self, ops: list[Op]) -> None:
        # an involution right after itself (nothing in between: the same depths) undoes it:
        # an mm-ptx reverse before an instruction that reverses its operands again, say
        if self.out[-len(ops):] == ops:
            del self.out[-len(ops):]
        else:
            self.out += ops

    def swap_depths(self, t: int, i: int, j: int) -> None:
        """mm-ptx: exchange depths i < j through the top (swap_with exchanges with depth 0)."""
        seq = [j] if i == 0 else [i, j, i]
        for d in seq:
            self.out += [_m("swap", t)] if d == 1 else [_meta(d), _m("swap_with", t)]


def _routine_ops(routines, names: list[str]) -> list[list[Op]]:
    out = []
    for i, r in enumerate(routines):
        if isinstance(r, (bytes, bytearray)):
            r = np.frombuffer(bytes(r), dtype="<u8").astype(np.uint64)
        out.append(decode(r, names) if isinstance(r, np.ndarray) else list(r))
        if any(not isinstance(op, Op) for op in out[-1]):
            raise ProgramError(f"convert: routine {i} holds an item that is no Stack PTX op")
    return out


def convert(prog, src: str, dst: str, inputs: Mapping[str, str] | None = None,
            outputs: Mapping[str, str] | None = None, *, site=None, routines: Sequence = (),
            limits: Limits | None = None) -> list[Op]:
    """A program of dialect ``dst`` that computes what ``prog`` computes in dialect ``src``
    (``"numptx"`` or ``"mm-ptx"``) for the compile ``inputs``/``outputs`` (or ``site=``),
    ``routines`` (inlined) and ``limits`` (default :class:`Limits`)::

        numptx_prog = sp.convert(mmptx_prog, "mm-ptx", "numptx", inputs={...}, outputs={...})

    Raises :class:`ProgramError` naming the op where no faithful conversion exists: a stack
    that reaches its capacity (the dialects differ on a full stack); for mm-ptx -> numptx, an
    output the program leaves unwritten that is not also an input (numptx writes zero where
    mm-ptx writes nothing: push a value for it or make it a mod variable); a converted program
    longer than ``limits.max_steps``; a source that hits the DAG node limit (a value-dependent
    no-op, found by compiling the source once), or a converted program that does under the
    same ``limits`` (its pushes for the outputs cost nodes: compiled once too); a program or
    routine whose dialect marker is
    not ``src``. Programs that stop at the step limit convert up to that point. With
    ``src == dst`` the program comes back as a list, unchanged."""
    s, d = dialect_id(src, "convert"), dialect_id(dst, "convert")
    lim = DEFAULT_LIMITS if limits is None else limits
    if not isinstance(lim, Limits):
        raise ProgramError(f"convert: limits must be a numptx.stack_ptx.Limits, not "
                           f"{type(lim).__name__}")
    if site is not None:
        if inputs is not None or outputs is not None:
            raise ProgramError("convert: pass either site= or inputs=/outputs=, not both")
        ins = [(v.name, v.dtype) for v in site.inputs]
        outs = [(v.name, v.dtype) for v in site.outputs]
    else:
        if not isinstance(inputs or {}, Mapping) or not isinstance(outputs or {}, Mapping):
            raise ProgramError("convert: inputs and outputs map names to value types, e.g. "
                               "{'x': 'f32'}")
        ins, outs = list((inputs or {}).items()), list((outputs or {}).items())
    names = [n for n, _ in ins]
    in_types = [TYPES.index(value_type(t, f"convert: input {n!r}")) for n, t in ins]
    out_types = [TYPES.index(value_type(t, f"convert: output {n!r}")) for n, t in outs]
    own, prog = program_dialect(as_program(prog, "convert"))
    if own is not None and own != s:
        raise ProgramError(f"convert: the program is in the {DIALECTS[own]} dialect "
                           f"({_how(own)}), not {src}; convert it from "
                           f"{DIALECTS[own]!r}")
    _, routines = routine_dialects(routines, s, f"the source ({src})", "convert")
    if isinstance(prog, np.ndarray):
        prog = decode(prog, getattr(prog, "inputs", None) or names)
    prog = list(prog)
    if any(not isinstance(op, Op) for op in prog):
        bad = next(i for i, op in enumerate(prog) if not isinstance(op, Op))
        raise ProgramError(f"convert: item {bad} is {prog[bad]!r}, not a Stack PTX op")
    if s == d:
        return prog
    run = _Run(s, d, lim, in_types, names, meta_cap=meta_capacity(lim, s))
    try:
        _execute(run, prog, _routine_ops(routines, names), depth=0, path="")
    except _Stop:
        pass                                # the rest never runs in the source: left out
    _check_value_limits(run, prog, ins, outs, site, routines)
    run.where = "the outputs"
    _fix_outputs(run, outs, out_types)
    n_steps = len(run.out)
    if n_steps > lim.max_steps:
        raise ProgramError(f"convert {src} -> {dst}: the converted program takes {n_steps} steps, "
                           f"more than limits.max_steps ({lim.max_steps}); compile it with "
                           f"limits=sp.Limits(max_steps={n_steps}) and convert with the same")
    _check_target_nodes(run, ins, outs, site)
    return run.out


def _check_target_nodes(run: _Run, ins, outs, site) -> None:
    """The converted program may need DAG nodes the source did not (a value pushed for an
    output the source leaves to the dialect: numptx's zero, mm-ptx's unwritten register); under
    the node limit those pushes would be no-ops and the program would compute something else:
    compile it once in the target dialect under the same limits and refuse where it hits the
    limit, naming the nodes it needs."""
    from dataclasses import asdict
    from .compile import compile_words
    ins, outs = (None, None) if site is not None else (dict(ins), dict(outs))

    def nodes(lim: Limits):
        stub = compile_words("stack", run.out, ins, outs, site=site, limits=lim, dialect=run.dst)
        return stub._diag[0] & 2, stub.stats["nodes"]        # STACKPTX_D_NODE_LIMIT

    hit, _ = nodes(run.lim)
    if not hit:
        return
    wide = Limits(**{**asdict(run.lim), "max_nodes": 1 << 20,
                     "meta_capacity": meta_capacity(run.lim, run.dst)})
    need = nodes(wide)[1]
    raise ProgramError(f"convert {DIALECTS[run.src]} -> {DIALECTS[run.dst]}: the converted "
                       f"program needs {need} DAG nodes, more than limits.max_nodes = "
                       f"{run.lim.max_nodes} (the values it pushes for outputs the source "
                       f"leaves to its dialect cost nodes the source does not spend); under that "
                       f"limit it would compute something else: raise limits.max_nodes to "
                       f"{need} (sp.Limits(..., max_nodes={need})) for the conversion and for "
                       f"the compiles of the converted program")


def _check_value_limits(run: _Run, prog: list[Op], ins, outs, site, routines) -> None:
    """The replay assumes every word that has its operands runs; the DAG node limit makes a
    word a no-op depending on the values (CSE merges equal ones), which only the source compile
    knows: compile it once, and refuse where that limit was hit."""
    from .compile import _op_index, compile_words
    ins, outs = (None, None) if site is not None else (dict(ins), dict(outs))
    stub = compile_words("stack", prog, ins, outs, site=site, routines=routines, limits=run.lim,
                         dialect=run.src)
    flags, word = stub._diag[0], stub._diag[7]
    if flags & 2:                                              # STACKPTX_D_NODE_LIMIT
        i = _op_index(prog, word)
        at = f"op {i} ({prog[i]!r})" if i < len(prog) else "the outputs"
        raise ProgramError(f"convert {DIALECTS[run.src]} -> {DIALECTS[run.dst]}: {at} hits the "
                           f"DAG node limit (limits.max_nodes = {run.lim.max_nodes}) in the "
                           f"source, which makes words no-ops depending on the values: the "
                           f"depths cannot be replayed; convert with limits=sp.Limits("
                           f"max_nodes=...) large enough that the source compiles within it")


class _Stop(Exception):
    """The source program stops (its step limit, or a top-level return)."""


def _execute(run: _Run, ops: list[Op], routines: list[list[Op]], depth: int, path: str) -> None:
    mm_src = run.src == _MMPTX
    for i, op in enumerate(ops):
        if run.steps >= run.lim.max_steps:
            raise _Stop
        run.steps += 1
        run.where = f"op {path}{i} ({op!r})"
        kind, t, a = op.word & 0xFF, (op.word >> 8) & 0xFF, (op.word >> 16) & 0xFFFF
        if kind == RETURN:
            if depth == 0:
                raise _Stop
            return
        if kind == ROUTINE:
            if a < len(routines) and depth < run.lim.max_depth:
                _execute(run, routines[a], routines, depth + 1, f"{path}{i} > routine {a} op ")
                run.where = f"op {path}{i} ({op!r})"
            continue
        if kind in (INPUT, CONST, CONST64):
            if kind == INPUT:
                t = _input_type(run, op, a)
            elif t >= len(TYPES):
                continue                                   # malformed: a no-op in both
            run.grow(t)
            run.out.append(op)
        elif kind == INSTR:
            _instr(run, op, a)
        elif kind == META_CONST:
            if len(run.meta) < run.meta_cap:
                run.meta.append(a)
        elif kind == META and t < len(TYPES) and a < len(META_OPS):
            (_meta_from_mm if mm_src else _meta_from_numptx)(run, META_OPS[a], t)
        elif kind == STORE and t < len(TYPES):
            if a < run.lim.n_slots and run.sz[t]:
                run.sz[t] -= 1
                run.slots[a] = t
                run.out.append(op)
        elif kind == LOAD:
            st = run.slots.get(a)
            if st is not None and (mm_src or st == t):    # mm-ptx's load names no type
                run.grow(st)
                run.out.append(Op(LOAD, st << 8 | a << 16, text=f"load({TYPES[st]!r}, {a})"))
        # NOP and malformed words do nothing in either dialect
    if depth and mm_src:                # an mm-ptx routine ends in RETURN: a step
        if run.steps >= run.lim.max_steps:
            raise _Stop
        run.steps += 1


def _input_type(run: _Run, op: Op, a: int) -> int:
    if op.name is not None:
        if op.name not in run.in_names:
            raise run.fail(f"no input named {op.name!r} (inputs: "
                           f"{', '.join(map(repr, run.in_names)) or 'none'})")
        return run.in_types[run.in_names.index(op.name)]
    tag = op.word >> 32
    if tag:
        tagged = [k for k, n in enumerate(run.in_names) if input_tag(n) == tag]
        if not tagged:
            raise run.fail("the input's name tag matches no input of the compile")
        a = a if a in tagged else tagged[0]
    if a >= len(run.in_types):
        raise run.fail(f"input index {a} is out of range ({len(run.in_types)} inputs)")
    return run.in_types[a]


def _instr(run: _Run, op: Op, row_index: int) -> None:
    if row_index >= len(TABLE):
        return                                             # malformed: a no-op in both
    row = TABLE[row_index]
    need = _instr_type_counts(zip(row.operand_type_ids, row.operand_widths))
    made = _instr_type_counts(zip(row.result_type_ids, row.result_widths))
    if any(run.sz[t] < n for t, n in need.items()):
        return                                             # missing operands: a no-op in both
    # the source takes its operands in its order; the target gets them in that order by
    # reversing each type's operand group first (and its result group after), except for the
    # results of a row without operands (a special register: both push component 0 first)
    for t, n in need.items():
        run.reverse_top(t, n)
    for t, n in need.items():
        run.sz[t] -= n
    run.out.append(op)
    for t, n in made.items():
        run.grow(t, n)
        if need:
            run.reverse_top(t, n)


def _meta_from_mm(run: _Run, name: str, t: int) -> None:
    """An mm-ptx meta op (the source) as numptx ops."""
    n = run.sz[t]
    if name in ("yank_dup", "swap_with", "replace", "drop"):
        if not run.meta:
            return
        d = run.meta.pop()                  # mm-ptx takes it whether or not the op runs
        if name == "drop":
            if d < n:
                run.out += [_m("drop", t)] * d
                run.sz[t] -= d
            return
        if d >= n:
            return
        if name == "yank_dup":
            run.grow(t)
            run.out += [_meta(d), _m("yank_dup", t)]
        elif name == "swap_with" and d:
            run.out += [_meta(d), _m("swap_with", t)]
        elif name == "replace":
            run.out += [_m("drop", t)] if d == 0 else [_meta(d - 1), _m("replace", t)]
            run.sz[t] -= 1
    elif name == "dup" and n:
        run.grow(t)
        run.out.append(_m("dup", t))
    elif name == "swap" and n >= 2:
        run.out.append(_m("swap", t))
    elif name == "clear" and n:
        run.out.append(_m("clear", t))
        run.sz[t] = 0
    elif name == "rotate" and n >= 3:       # top-first t m b -> m b t: numptx's rotate(2) twice
        run.out += [_meta(2), _m("rotate", t)] * 2
    elif name == "reverse" and n >= 2:      # the whole stack
        run.out += [_meta(n), _m("reverse", t)]


def _meta_from_numptx(run: _Run, name: str, t: int) -> None:
    """A numptx meta op (the source) as mm-ptx ops."""
    n = run.sz[t]
    if name in ("yank_dup", "swap_with", "replace", "rotate", "reverse"):
        if not run.meta:
            return
        d = run.meta[-1]
        ok = d <= n if name == "reverse" else (d < n - 1 if name == "replace" else d < n)
        if not ok:
            return                          # numptx keeps the value when the op cannot run
        run.meta.pop()
        if name == "yank_dup":
            run.grow(t)
            run.out += [_meta(d), _m("yank_dup", t)]
        elif name == "swap_with" and d:
            run.swap_depths(t, 0, d)
        elif name == "replace":             # numptx's depth counts below the popped top
            run.out += [_meta(d + 1), _m("replace", t)]
            run.sz[t] -= 1
        elif name == "rotate":              # depth d to the top: swap it up through depths 1..d
            for k in range(1, d + 1):
                run.swap_depths(t, 0, k)
        elif name == "reverse":
            run.reverse_top(t, d)
    elif name == "dup" and n:
        run.grow(t)
        run.out.append(_m("dup", t))
    elif name == "swap" and n >= 2:
        run.out.append(_m("swap", t))
    elif name == "drop" and n:              # mm-ptx's drop needs more values than it drops
        run.out += [_m("clear", t)] if n == 1 else [_meta(1), _m("drop", t)]
        run.sz[t] -= 1
    elif name == "clear" and n:
        run.out.append(_m("clear", t))
        run.sz[t] = 0


def _fix_outputs(run: _Run, outs: list, out_types: list[int]) -> None:
    """Outputs of a type with fewer values than outputs: numptx writes zero to the last ones,
    mm-ptx writes nothing. Put what the target must see under the values (reverse the stack,
    push, reverse again), so the outputs that got a value keep it."""
    for t in sorted(set(out_types)):
        mine = [name for (name, _), ot in zip(outs, out_types) if ot == t]
        n, k = run.sz[t], len(mine)
        if n >= k:
            continue
        fill: list[Op] = []
        for name in mine[n:]:
            if run.dst == _MMPTX:
                fill.append(const(0, TYPES[t]))
            elif name in run.in_names and run.in_types[run.in_names.index(name)] == t:
                fill.append(input_op(name))           # untouched = the register's own value
            else:
                raise run.fail(f"output {name!r} gets no value, which mm-ptx leaves unwritten "
                               f"and numptx sets to zero; no numptx program leaves an output "
                               f"unwritten: push a value for it, or make it an input too (a "
                               f"mod variable) so the conversion can pass its value through")
        run.grow(t, k - n)
        if not n:                           # nothing to keep on top: push in place
            run.out += fill[::-1]
            continue
        run.sz[t] = n                       # (reverse_top reads the depth before the fill)
        run.reverse_top(t, n)
        run.out += fill
        run.sz[t] = k
        run.reverse_top(t, k)
