"""Run a PTX stub on the CPU with NumPy: the reference the GPU results are checked against.

    from numptx.dsl.emulator import emulate
    stub = '''{
    .reg .f32 %_s0;
    mul.rn.f32 %_s0, %x, %y;
    add.rn.f32 %z, %_s0, %x;
    }'''
    emulate(stub, {"x": np.float32([1, 2]), "y": 3.0}, ["z"])   # {'z': array([4., 8.], float32)}

A stub is text made of instructions of the table (:data:`numptx.instructions.TABLE`, looked up by
opcode), ``mov`` lines (also ``mov.b32 %r, {%lo, %hi}`` packing and the reverse unpacking),
``.reg`` declarations (``.reg .f32 %a, %b;``, ``.reg .b32 %r<4>;``), braces, ``@%p`` / ``@!%p``
guards, ``//`` and ``/* */`` comments and blank lines; several statements may share a line.

Blocks scope registers as in PTX: a ``.reg`` declared inside ``{ }`` is a register of its own
that shadows an outer one of the same name until the matching ``}`` (writes to it never reach
the outer register). The stub's top level is the scope of the site's variables (the registers
named in ``inputs`` and ``outputs``), so a stub that declares ``%v_z`` inside a block and writes
it there leaves the outer ``%v_z`` unwritten, as the GPU does.

Values (design, section 2): every register holds an array in the canonical NumPy representation
of its type; a read with another type of the same size reinterprets the bits (``.view``). A
register the stub declares is checked against the instructions that use it as ptxas checks it
(:func:`numptx.valuetypes.ptx_compatible`: ``add.u32`` takes a ``.b32`` or ``.s32`` register,
not a ``.f32`` one).

* ``inputs`` maps register names (without ``%``) to scalars or arrays, broadcast to one common
  shape; the outputs have that shape. NumPy arrays and NumPy scalars are taken *as stored*: a read
  with a type of the same size reinterprets their bits (a float32 array read by ``and.b32`` gives
  its bit patterns), a read with another size converts the value. Python numbers and lists are
  *values*: converted to the type that reads them (for bit types b16/b32/b64/f16x2/bf16x2 a Python
  int is the bit pattern, a Python float is the bits of that float at the register's width).
* Special registers come from ``inputs`` under their PTX name: ``{"%tid.x": np.arange(n)}``.
  Missing ones read 0, except ``%laneid`` and ``%tid.x`` which default to ``arange(n) % 32``
  over the flattened broadcast shape (n elements), and those the ISA defines from others
  (``numptx.instructions_mmptx.DERIVED``: ``%lanemask_*`` from ``%laneid``, ``%clock_hi`` from
  ``%clock64``, ``%globaltimer_lo/_hi`` from ``%globaltimer``); ``%clock``-style registers
  read 0. A vector read (``mov.v4.u32 {%a, %b, %c, %d}, %tid;``) takes the components
  (``%tid.x`` ...; the 4th is 0): give those as inputs, not ``%tid``. The 4th component read
  alone (``mov.u32 %w, %tid.w;``, as the mm-ptx dialect's stubs read it) is 0 too, as on a
  GPU; an input for it is refused.
* Literals: ``0f3F800000`` (f32 bits), ``0d3FF0000000000000`` (f64 bits), hex/octal/binary/decimal
  integers (the bit pattern for bit types and f16/bf16, a wrapped value for s/u types; PTX
  rejects them for f32/f64), decimal floats such as ``1.5`` (float types), and ``0``/``1`` for
  predicates.
* Warp-level instructions (mma) see consecutive groups of 32 elements as warps (lane = i % 32).
* ``outputs`` is a list of register names (each returned in the canonical dtype of its declared
  ``.reg`` type, else of the type that last wrote it) or a dict name -> type name to force one.
* ``site=`` (a :class:`~numptx.inject.Site`) names inputs and outputs by the site's variables
  (``x``, ``acc``) instead of registers (``v_x``); see :func:`emulate`.

Errors are :class:`EmulationError` (a :class:`numptx.NumptxError`) naming the stub line number and
text: unknown instructions (with close matches), malformed lines, literals or operand counts,
reads of undefined registers, unknown outputs (an output written only under an inner
declaration of its name is unknown: the hint says so), unbalanced braces and arguments of the
wrong kind. Each stub text is parsed once (cached).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .. import instructions as _instructions
from ..instructions import NP_DTYPE
from ..instruction_model import ptx_slot_types
from ..instructions_mmptx import DERIVED, VECTOR_SPECIALS
from .ptx_parse import (LANE_DEFAULT, Const, EmulationError, Operand, Program, Reg, Step, convert,
                        parse, reg_shown)

__all__ = ["emulate", "EmulationError", "registers_written"]

#: the 4th components (``%tid.w`` ...): 0 on a GPU, so never an input
_W_COMPONENTS = frozenset(f"{v}.w" for v in VECTOR_SPECIALS)


# ------------------------------------------------------------------------------ execution
@dataclass
class _Val:
    arr: np.ndarray          # flat, n elements
    type: str | None         # numptx type when written by the stub; None for inputs
    as_value: bool = False   # Python numbers/lists: convert by value on every read


def _to_val(v: Any) -> _Val:
    as_value = isinstance(v, (bool, int, float, list, tuple))
    arr = np.asarray(v)
    if arr.dtype.kind not in "biuf":
        raise EmulationError(f"inputs must be numbers or numeric arrays, got dtype {arr.dtype}")
    return _Val(arr, None, as_value)


def _outer(regs: Mapping[str, Any]) -> list[str]:
    """The outer (top-level) register names among ``regs``, sorted."""
    return sorted(k for k in regs if "#" not in k)


_WHOLE = frozenset(("s32", "u32", "s64", "u64", "b16", "b32", "b64"))
_UNSIGNED = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _cvt_source_bits(ins) -> int:
    """Bits of a cvt row's source type in its PTX (``cvt.u32.u8``: 8)."""
    t = ptx_slot_types(ins)[-1][0]
    m = re.search(r"\d+", t)                                 # u8 -> 8, f16x2 -> 16 (x2: 32)
    return (int(m.group()) if m else 0) * (2 if t.endswith("x2") else 1)


class _Machine:
    def __init__(self, prog: Program, inputs: Mapping[str, Any]):
        self.prog = prog
        vals: dict[str, _Val] = {}
        self.special_inputs: dict[str, _Val] = {}
        for k, v in inputs.items():
            if not isinstance(k, str) or not k:
                raise EmulationError(f"input names must be non-empty strings, got {k!r}")
            table = _instructions.TABLE
            if k in VECTOR_SPECIALS:
                raise EmulationError(f"input {k!r} is a vector special register: give its "
                                     f"components {', '.join(map(repr, VECTOR_SPECIALS[k]))} "
                                     f"instead (the 4th component reads 0)")
            if k in _W_COMPONENTS:
                raise EmulationError(f"input {k!r}: the 4th component of {k[:-2]} always reads "
                                     f"0 on a GPU (PTX ISA), and so it does here, whether a "
                                     f"stub reads it with mov.u32 or mov.v4.u32: drop this input")
            if k.startswith("%") and k in table and table[k].is_special:
                self.special_inputs[k] = _to_val(v)
            else:
                vals[k.lstrip("%")] = _to_val(v)
        every = list(vals.values()) + list(self.special_inputs.values())
        try:
            self.shape = np.broadcast_shapes(*(x.arr.shape for x in every)) if every else ()
        except ValueError as e:
            raise EmulationError(f"inputs do not broadcast to one shape: {e}") from None
        self.n = int(np.prod(self.shape, dtype=np.int64))
        for x in every:
            x.arr = np.ascontiguousarray(np.broadcast_to(x.arr, self.shape)).reshape(self.n)
        self.regs = vals

    def special(self, name: str) -> _Val:
        """A special register's value (from inputs, converted to its type, or the default)."""
        if name in VECTOR_SPECIALS:
            raise EmulationError(f"{name} is a vector special register: read it with "
                                 f"'mov.v4.u32 {{%a, %b, %c, %d}}, {name};' or read a component "
                                 f"such as {VECTOR_SPECIALS[name][0]}")
        ins = _instructions.TABLE[name]
        rt = ins.result_types[0]
        if name in self.special_inputs:
            v = self.special_inputs[name]
            arr = convert(v.arr, rt, as_value=True if v.arr.dtype.itemsize != NP_DTYPE[rt].itemsize
                           else v.as_value)
        elif name in LANE_DEFAULT:
            arr = (np.arange(self.n) % 32).astype(NP_DTYPE[rt])
        elif name in DERIVED:                    # %lanemask_lt from %laneid ...
            sources, fn = DERIVED[name]
            arr = np.asarray(fn(*(self.special(src).arr for src in sources))).astype(NP_DTYPE[rt])
        else:
            arr = np.full(self.n, ins.semantic(), NP_DTYPE[rt])
        return _Val(arr, rt)

    def read(self, op: Operand, t: str, step: Step) -> np.ndarray:
        if isinstance(op, Const):
            return np.full(self.n, op.value[0], op.value.dtype)
        v = self.special(op.name) if op.special else self.regs.get(op.name)
        shown = op.name if op.special else "%" + reg_shown(op.name)
        if v is None:
            if "#" in op.name:
                raise EmulationError(f"register {shown} is read before it is written: it is "
                                     f"the one declared in the enclosing {{ }} block, which "
                                     f"shadows any outer {shown} there", line=step.line,
                                     text=step.text)
            close = difflib.get_close_matches(op.name, _outer(self.regs), n=3)
            hint = f"; did you mean {', '.join('%' + c for c in close)}?" if close else ""
            raise EmulationError(f"register {shown} is read before it is written and is not "
                                 f"an input{hint}", line=step.line, text=step.text)
        if v.type in _WHOLE and t in _WHOLE and v.type != t and step.kind == "instr" and \
                step.instr.opcode.startswith("cvt") and \
                NP_DTYPE[v.type].itemsize * 8 >= _cvt_source_bits(step.instr):
            # cvt's relaxed rule: an integer register at least as wide as the cvt's source
            # type; its low bits (cvt.u32.u8 of a .b16 reads the low byte either way)
            size = NP_DTYPE[t].itemsize
            raw = v.arr.view(_UNSIGNED[v.arr.dtype.itemsize])
            return raw.astype(_UNSIGNED[size]).view(NP_DTYPE[t])
        if v.type is not None and v.type != t and (NP_DTYPE[v.type].itemsize != NP_DTYPE[t].itemsize
                                                   or "pred" in (v.type, t)):
            raise EmulationError(f"register {shown} holds a {v.type} value and cannot be read "
                                 f"as {t} (different size)", line=step.line, text=step.text)
        try:
            return convert(v.arr, t, as_value=v.as_value)
        except TypeError as e:
            raise EmulationError(str(e), line=step.line, text=step.text) from None

    def write(self, name: str, arr: np.ndarray, t: str, mask: np.ndarray | None) -> None:
        dt = NP_DTYPE[t]
        arr = np.asarray(arr)
        if arr.dtype != dt:
            arr = arr.astype(dt)
        arr = np.broadcast_to(arr, (self.n,)) if arr.shape != (self.n,) else arr
        if mask is not None:
            old = self.regs.get(name)
            prev = (convert(old.arr, t, as_value=old.as_value) if old is not None
                    else np.zeros(self.n, dt))
            arr = np.where(mask, arr, prev)
        self.regs[name] = _Val(np.ascontiguousarray(arr), t)

    def run(self) -> None:
        for step in self.prog.steps:
            mask = None
            if step.guard is not None:
                mask = self.read(Reg(step.guard[0]), "pred", step)
                if step.guard[1]:
                    mask = ~mask
            args = [tuple(self.read(o, t, step) for o in slot)
                    for slot, t in zip(step.srcs, step.src_types)]
            if step.kind == "mov":
                self._mov(step, args[0], mask)
                continue
            ins = step.instr
            call = [a if w > 1 else a[0] for a, w in zip(args, step.src_widths)]
            try:
                out = ins.apply(*call)
            except (ValueError, TypeError, ArithmeticError) as e:
                raise EmulationError(f"{ins.name}: {e}", line=step.line, text=step.text) from None
            outs = (out,) if len(ins.results) == 1 else tuple(out)
            for names, t, w, res in zip(step.dests, step.dest_types, step.dest_widths, outs):
                comps = tuple(res) if w > 1 else (res,)
                for name, comp in zip(names, comps):
                    self.write(name, comp, t, mask)

    def _mov(self, step: Step, srcs: tuple, mask) -> None:
        dests, dt, st = step.dests[0], step.dest_types[0], step.src_types[0]
        if len(dests) == len(srcs):              # scalar, or a vector special register read
            for name, src in zip(dests, srcs):
                self.write(name, src, dt, mask)
        elif len(srcs) > 1:                      # pack: element 0 in the lowest bits
            wide = np.uint64 if NP_DTYPE[dt].itemsize == 8 else np.uint32
            bits = NP_DTYPE[st].itemsize * 8
            acc = np.zeros(self.n, wide)
            for k, s in enumerate(srcs):
                u = s.view({2: np.uint16, 4: np.uint32}[s.dtype.itemsize]).astype(wide)
                acc |= u << wide(bits * k)
            self.write(dests[0], acc.view(NP_DTYPE[dt]), dt, mask)
        else:                                    # unpack
            src = srcs[0]
            wide = np.uint64 if src.dtype.itemsize == 8 else np.uint32
            u = src.view(wide)
            bits = NP_DTYPE[dt].itemsize * 8
            narrow = {16: np.uint16, 32: np.uint32}[bits]
            for k, name in enumerate(dests):
                part = ((u >> wide(bits * k)) & wide((1 << bits) - 1)).astype(narrow)
                self.write(name, part.view(NP_DTYPE[dt]), dt, mask)


def _output_items(outputs: Any) -> list[tuple[str, str | None]]:
    """``outputs`` (a name, names, or a mapping name -> type name) as (name, type or None)."""
    if isinstance(outputs, str):
        outputs = [outputs]
    if isinstance(outputs, Mapping):
        items = list(outputs.items())
    elif isinstance(outputs, (bytes, bytearray)) or not isinstance(outputs, Iterable):
        raise EmulationError(f"outputs must be register names (a list of str) or a mapping name "
                             f"-> type name, not {type(outputs).__name__}")
    else:
        items = [(o, None) for o in outputs]
    out = []
    for name, forced in items:
        if not isinstance(name, str) or not name.lstrip("%"):
            raise EmulationError(f"output names must be non-empty strings, got {name!r}")
        if forced is not None and not isinstance(forced, str):
            forced = getattr(forced, "name", forced)        # a DSL type: nx.f32
            if not isinstance(forced, str):
                raise EmulationError(f"output {name!r}: the type is a name such as 'f32', not "
                                     f"{forced!r}")
        out.append((name, forced))
    return out


def registers_written(text: str) -> tuple[frozenset[str], dict[str, int]]:
    """``(registers, inner)``: the registers (without ``%``) that the top level of stub ``text``
    writes (a write to a ``.reg`` declared inside ``{ }`` is not one), and the names declared
    inside blocks -> the first such stub line. Raises :class:`EmulationError` where the text
    does not parse (an instruction the table lacks, say)."""
    table = _instructions.TABLE
    prog = parse(text, table.uid, table.version)
    return (frozenset(n for step in prog.steps for names in step.dests for n in names
                      if "#" not in n), dict(prog.inner))


def _did_you_mean(name: str, names: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(names), n=3)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def _at_site(stub: Any, site: Any, inputs: Mapping[str, Any] | None,
             outputs: Any) -> dict[str, np.ndarray]:
    """:func:`emulate` with ``site=``: inputs and outputs named by the site's variables."""
    variables = getattr(site, "variables", None)
    if not isinstance(getattr(site, "name", None), str) or variables is None:
        raise EmulationError(f"site= takes a site (nx.PtxInject(ptx).sites['name'], "
                             f"template.sites['name']), not {type(site).__name__}")
    by_name = {v.name: v for v in variables}
    ins = [v.name for v in variables if v.kind != "out"]
    outs = [v.name for v in variables if v.kind != "in"]
    where = f"site {site.name!r}"

    def unknown(what: str, name: Any, allowed: list[str]) -> EmulationError:
        key = str(name).lstrip("%")
        regs = {v.reg: v.name for v in variables}
        if key in regs and regs[key] in allowed:
            hint = (f"; with site= variables go by their names, not their registers: "
                    f"{regs[key]!r}")
        else:
            hint = _did_you_mean(key, allowed)
        kinds = "in or mod" if what == "input" else "out or mod"
        return EmulationError(f"unknown {what} {name!r}: {where} has no {kinds} variable of that "
                              f"name ({what}s: {', '.join(allowed) or 'none'}){hint}")

    if inputs is not None and not isinstance(inputs, Mapping):
        raise EmulationError(f"inputs must be a mapping variable name -> value (e.g. "
                             f"{{'x': np.float32([1, 2])}}), not {type(inputs).__name__}")
    regs: dict[str, Any] = {}
    site_regs = {v.reg for v in variables} | set(by_name)
    for name, value in (inputs or {}).items():
        if isinstance(name, str) and name.startswith("%") and name[1:] not in site_regs:
            regs[name] = value                      # a special register (%clock, %tid.x, ...)
            continue
        if name not in ins:
            raise unknown("input", name, ins)
        regs[by_name[name].reg] = value
    items = _output_items(outputs) if outputs else [(n, None) for n in outs]
    wanted = {}
    for name, forced in items:
        if name not in outs:
            raise unknown("output", name, outs)
        v = by_name[name]
        wanted[v.reg] = forced or (v.dtype if v.dtype in NP_DTYPE else v.reg_type)
    if not isinstance(getattr(stub, "text", stub), str) and callable(getattr(stub, "stub", None)):
        stub = stub.stub(site)                      # a formula: its stub for this site
    got = emulate(stub, regs, wanted)
    return {name: got[by_name[name].reg] for name, _ in items}


def emulate(stub: Any, inputs: Mapping[str, Any] | None = None,
            outputs: Sequence[str] | Mapping[str, str] = (), *,
            site: Any = None) -> dict[str, np.ndarray]:
    """Run ``stub`` (PTX text, or an object with a ``.text``) on ``inputs`` and return
    ``{name: array}`` for each register named in ``outputs`` (see the module docstring).

    With ``site=`` (a :class:`~numptx.inject.Site`), inputs and outputs are the site's
    variables by name (``{"x": ..., "acc": ...}``, not registers ``v_x``): unknown names are
    refused with the names the site has (special registers keep their ``%`` names:
    ``{"x": ..., "%tid.x": ...}``); ``outputs`` defaults to all its out and mod variables
    (in their types); ``stub`` may be a formula (its ``.stub(site)`` runs)."""
    if site is not None:
        return _at_site(stub, site, inputs, outputs)
    text = getattr(stub, "text", stub)
    if not isinstance(text, str):
        raise EmulationError(f"stub must be PTX text (str) or have a .text, "
                             f"got {type(stub).__name__}")
    items = _output_items(outputs)
    if inputs is not None and not isinstance(inputs, Mapping):
        raise EmulationError(f"inputs must be a mapping register name -> value (e.g. "
                             f"{{'x': np.float32([1, 2])}}), not {type(inputs).__name__}")
    table = _instructions.TABLE
    prog = parse(text, table.uid, table.version)
    m = _Machine(prog, inputs or {})
    m.run()
    result: dict[str, np.ndarray] = {}
    for name, forced in items:
        key = name[1:] if name.startswith("%") else name
        v = m.regs.get(key)
        if v is None:
            if key in prog.inner:
                hint = (f"; %{key} is declared inside a {{ }} block (stub line "
                        f"{prog.inner[key]}), which shadows the outer %{key} there: writes to "
                        f"it do not reach the outer register")
            else:
                close = difflib.get_close_matches(key, _outer(m.regs), n=3)
                hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise EmulationError(f"unknown output {name!r}: no register of that name is written "
                                 f"by the stub or given as an input{hint}")
        t = forced or prog.declared.get(key) or v.type
        if forced is not None and forced not in NP_DTYPE:
            raise EmulationError(f"output {name!r}: unknown type {forced!r}")
        arr = v.arr if t is None else convert(v.arr, t, as_value=v.as_value)
        result[name] = arr.reshape(m.shape).copy()
    return result
