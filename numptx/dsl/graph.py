"""The traced graph: a DAG of primitive nodes with CSE and constant folding.

Every node is an input, a constant or one row of the instruction table
(:data:`numptx.instructions.TABLE`). :class:`Graph` implements the builder protocol the DSL
operations and ``mathlib`` are written against (docs/design/dsl.md)::

    g = Graph()
    x = g.input("x", "f32")
    y = g.instr("mul.rn.f32", x, x)           # an instruction row by name
    z = g.instr("add.rn.f32", y, g.const(1.0, "f32"))
    assert g.instr("mul.rn.f32", x, x) is y   # hash-consing: the same node
    g.outputs = [("z", z)]
    print(g)                                  # one line per node, FX style

Identical instructions on identical operands are one node (commutative rows are keyed with their
first two operands in a canonical order, so ``x * y`` and ``y * x`` merge; volatile rows are never
merged). An exact,
non-volatile instruction whose operands are all constants is evaluated at once with the table's
NumPy semantic (constant folding), so the graph holds what will actually run.
"""
from __future__ import annotations

import linecache
import os
import struct
from typing import Any, Iterable

import numpy as np

from .. import semantics as S
from ..errors import NumptxError
from ..instructions import NP_DTYPE, TABLE, TYPE_ID, TYPES
from ..valuetypes import WHOLE, WIDE

__all__ = ["Node", "Graph", "GraphError", "Frame", "RowInfo", "row_info", "refresh_rows",
           "ON_TABLE_CHANGE", "frame_location", "frame_source"]

Frame = tuple  # (code object, line number): a user source position, formatted lazily
_PACK = {"f32": struct.Struct("<f").pack, "f64": struct.Struct("<d").pack}
_INT_TYPES = frozenset(WHOLE)
_CANON: dict = {}   # (type, Python int/float) -> (canonical scalar, constant key, words)
_TID = TYPE_ID
_CONST_WORDS: dict = {}   # constant key -> its Stack PTX words (CONST, or CONST64 + data)
_WIDE_TYPES = WIDE
_new = object.__new__


def _const_words(key: tuple) -> tuple:
    """The CONST word (CONST64 and its data word) of a constant key ("c", type, bits)."""
    _, dtype, bits = key
    value = int.from_bytes(bits, "little")
    words = (3 | _TID[dtype] << 8, value) if dtype in _WIDE_TYPES else \
        (2 | _TID[dtype] << 8 | value << 32,)
    if len(_CONST_WORDS) > 4096:
        _CONST_WORDS.clear()
    _CONST_WORDS[key] = words
    return words


def frame_location(frame: Frame | None) -> str:
    """``"file.py:12"`` for a recorded frame (basename only), ``"?"`` without one."""
    if frame is None:
        return "?"
    return f"{os.path.basename(frame[0].co_filename)}:{frame[1]}"


def frame_source(frame: Frame | None) -> str:
    """The stripped source line of a recorded frame ("" if unavailable)."""
    if frame is None:
        return ""
    return linecache.getline(frame[0].co_filename, frame[1]).strip()


class GraphError(NumptxError):
    """A malformed graph or builder call (wrong instruction arity or operand types)."""


class Node:
    """One graph node. ``op`` is ``"input"``, ``"const"`` or ``"instr"``; ``target`` the input
    name, the constant (a NumPy scalar in the canonical representation of ``dtype``) or the
    instruction name; ``args`` the operand nodes; ``dtype`` the value type name (``"f32"``);
    ``index`` the creation index; ``frame`` the user source position that created it; ``uses``
    the number of operand references to it; ``key`` (constants) its type and bits."""
    __slots__ = ("op", "target", "args", "dtype", "index", "frame", "uses", "key")

    def __init__(self, op: str, target: Any, args: tuple, dtype: str, index: int, frame,
                 key: tuple | None = None):
        self.op = op
        self.target = target
        self.args = args
        self.dtype = dtype
        self.index = index
        self.frame = frame
        self.uses = 0             # operand references by instruction nodes (dead ones too)
        self.key = key            # constants: ("c", type, bits)

    @property
    def is_const(self) -> bool:
        return self.op == "const"

    def __repr__(self) -> str:
        if self.op == "const":
            return f"<const {self.dtype} {format_const(self)}>"
        return f"<{self.op} {self.target} : {self.dtype} #{self.index}>"


def _simplify_selp(g: "Graph", name: str, args: tuple):
    a, b, c = args
    if c.op == "const":
        return a if c.target else b
    return b if a is b else None


def _simplify_pred(g: "Graph", name: str, args: tuple):
    x, y = args
    if x.op == "const":
        x, y = y, x
    if y.op != "const":
        return None
    v = bool(y.target)
    if name == "and.pred":
        return x if v else y
    if name == "or.pred":
        return y if v else x
    return g.instr("not.pred", x) if v else x      # xor.pred


# algebraic identities with a constant operand (applied before CSE): selp with a constant
# predicate, and/or/xor.pred with a constant
SIMPLIFY = {"and.pred": _simplify_pred, "or.pred": _simplify_pred, "xor.pred": _simplify_pred}


class RowInfo:
    """What the graph needs to know about one table row, computed once: operand and result types,
    whether it folds, commutes, may be merged (``volatile``: never), its simplifier, whether it
    takes the inlined paths (``plain``: two operands, ``plain1``: one) and its Stack PTX word."""
    __slots__ = ("name", "row", "operands", "result", "foldable", "commutative", "volatile",
                 "simplify", "plain", "plain1", "op0", "op1", "word")

    def __init__(self, row):
        if len(row.results) != 1 or any(w != 1 for w in (*row.operand_widths, *row.result_widths)):
            raise GraphError(f"instruction {row.name!r} has vector operands or several results; "
                             f"the DSL graph holds single-result scalar instructions")
        self.name = row.name
        self.row = row
        self.operands = row.operand_types
        self.result = row.result_types[0]
        self.volatile = row.is_volatile or row.is_special
        self.foldable = row.is_exact and not self.volatile and bool(row.operands)
        self.commutative = row.is_commutative
        self.simplify = SIMPLIFY.get(row.name) or (_simplify_selp if row.opcode.startswith("selp.")
                                                   else None)
        self.plain = not self.volatile and self.simplify is None and len(self.operands) == 2
        self.plain1 = not self.volatile and self.simplify is None and len(self.operands) == 1 \
            and not self.commutative
        self.op0, self.op1 = (self.operands + (None, None))[:2]
        self.word = 4 | TABLE.index(row.name) << 16      # its Stack PTX INSTR word


_ROWS: dict[str, RowInfo] = {}
_ROWS_VERSION = [(-1, -1)]
#: callables run when the instruction table changes (caches derived from its rows)
ON_TABLE_CHANGE: list = []


def refresh_rows() -> None:
    """Drop every cache derived from the instruction table's rows (ours and those registered in
    :data:`ON_TABLE_CHANGE`) if the table changed since they were filled."""
    if _ROWS_VERSION[0] != (TABLE.uid, TABLE.version):
        _ROWS.clear()
        for fn in ON_TABLE_CHANGE:
            fn()
        _ROWS_VERSION[0] = (TABLE.uid, TABLE.version)


def row_info(name: str) -> RowInfo:
    """Cached facts about the table row ``name`` (refreshed when the table changes)."""
    if _ROWS_VERSION[0] != (TABLE.uid, TABLE.version):
        refresh_rows()
    info = _ROWS.get(name)
    if info is None:
        info = _ROWS[name] = RowInfo(TABLE[TABLE.index(name)])
    return info


def _wrap_int(value: int, t: str) -> int:
    bits = np.dtype(NP_DTYPE[t]).itemsize * 8
    v = value & ((1 << bits) - 1)
    if t[0] == "s" and v >> (bits - 1):
        v -= 1 << bits
    return v


def canonical(value: Any, t: str):
    """A Python/NumPy number as a NumPy scalar in the canonical representation of value type
    ``t``: floats round to nearest (bf16: its bit pattern as uint16), integers wrap (two's
    complement spellings such as ``0xFFFFFFFF`` for s32 are accepted), pred is a bool."""
    if t == "bf16":
        return np.uint16(S.bf16_bits(value))
    if t in ("f16", "f32", "f64"):
        return NP_DTYPE[t].type(value)
    if t == "pred":
        return np.bool_(bool(value))
    if t in _INT_TYPES:
        return NP_DTYPE[t].type(_wrap_int(int(value), t if t[0] != "b" else "u" + t[1:]))
    raise GraphError(f"no constants of type {t!r} in the DSL")


def const_value(node: Node) -> float | int | bool:
    """The Python value of a constant node (bf16 bits decoded)."""
    v = node.target
    if node.dtype == "bf16":
        return float(np.uint32(int(v) << 16).view(np.float32))
    return v.item()


def format_const(node: Node) -> str:
    """The shortest spelling that round-trips in the constant's type (``0.1`` for an f32 0.1)."""
    if node.dtype == "bf16":
        return f"{const_value(node)!r}"
    return str(node.target)


class Graph:
    """A DAG of primitive nodes in creation (topological) order; see the module docstring.

    ``params`` maps parameter names to value types (declaration order), ``outputs`` is a list
    of ``(name, node)`` pairs, ``output_form`` one of ``"single"``, ``"tuple"``, ``"dict"``.
    ``frame`` is the user source position stamped on the nodes created next (the tracer sets
    it once per DSL operation).
    """

    def __init__(self, name: str = "graph"):
        self.name = name
        self.nodes: list[Node] = []
        self.params: dict[str, str] = {}
        self.inputs: dict[str, Node] = {}
        self.outputs: list[tuple[str, Node]] = []
        self.output_form = "single"
        self.frame: Frame | None = None
        #: () -> the same graph traced again with every node's source position (or None);
        #: set by the tracer when its fast paths skipped recording them
        self.retrace = None
        #: hash-consing: (row, *operands) or a constant's ("c", type, bits) -> its node
        self.cse: dict = {}
        self._lits: dict = {}           # (type, Python number) -> constant node
        if _ROWS_VERSION[0] != (TABLE.uid, TABLE.version):
            refresh_rows()              # the row caches belong to this table version
        #: every node as Stack PTX words, in creation order (native/dag_lower.h RECORD), for
        #: the C lowering; valid for the table version ``rec_version``
        self.rec: list[int] = []
        self.rec_version = _ROWS_VERSION[0]

    # ---- the builder protocol ------------------------------------------------------------------
    def input(self, name: str, dtype: str) -> Node:
        """The runtime input ``name`` of value type ``dtype`` (one node per name)."""
        node = self.inputs.get(name)
        if node is None:
            node = Node("input", name, (), dtype, len(self.nodes), self.frame)
            self.rec.append(1 | _TID[dtype] << 8 | len(self.inputs) << 16)
            self.nodes.append(node)
            self.inputs[name] = node
            self.params.setdefault(name, dtype)
        elif node.dtype != dtype:
            raise GraphError(f"input {name!r} is {node.dtype}, not {dtype}")
        return node

    def const(self, value: Any, dtype: str) -> Node:
        """A constant of value type ``dtype`` (see :func:`canonical`); equal bits share a node."""
        c = value.__class__
        if (c is float and value != 0.0) or c is int:     # -0.0 == 0.0 and NaN: by bits below
            key = (dtype, value)
            node = self._lits.get(key)
            if node is None:
                hit = _CANON.get(key)
                if hit is None:
                    bits = None
                    if c is float and dtype in _PACK and -3.4e38 < value < 3.4e38:
                        bits = _PACK[dtype](value)    # C rounding, as NumPy's (faster)
                    scalar = canonical(value, dtype)
                    if bits is None and not (c is int and (dtype in _INT_TYPES or (
                            dtype in _PACK and -(1 << 64) < value < 1 << 64))):
                        # (may overflow: NumPy warns each time, as before)
                        return self._lits.setdefault(key, self.const_canonical(scalar, dtype))
                    if len(_CANON) > 4096:
                        _CANON.clear()
                    ckey = ("c", dtype, scalar.tobytes() if bits is None else bits)
                    hit = _CANON[key] = (scalar, ckey, _CONST_WORDS.get(ckey) or _const_words(ckey))
                scalar, ckey, words = hit
                node = self.cse.get(ckey)
                if node is None:
                    node = self._add_const(scalar, dtype, ckey, words)
                self._lits[key] = node
            return node
        return self.const_canonical(canonical(value, dtype), dtype)

    def const_canonical(self, scalar, dtype: str, bits: bytes | None = None) -> Node:
        """A constant from a scalar already in the canonical representation of ``dtype``."""
        key = ("c", dtype, scalar.tobytes() if bits is None else bits)
        node = self.cse.get(key)
        if node is None:
            node = self._add_const(scalar, dtype, key, _CONST_WORDS.get(key) or _const_words(key))
        return node

    def _add_const(self, scalar, dtype: str, key: tuple, words: tuple) -> Node:
        """Append a constant node (its CSE entry, its Stack PTX words): every constant's route."""
        nodes = self.nodes
        node = Node("const", scalar, (), dtype, len(nodes), self.frame, key)
        self.rec.extend(words)
        nodes.append(node)
        self.cse[key] = node
        return node

    def add_instr(self, info: RowInfo, args: tuple, key: tuple | None) -> Node:
        """Append the instruction node ``info.name(*args)`` and file it under the CSE ``key``
        (None: never merged). The one route every instruction node takes into a graph:
        :meth:`instr` and the tracer's fused fast paths (numptx.dsl.trace) call it after their
        checks (operand types match the row, not all constant, ``key`` not yet present)."""
        nodes = self.nodes
        node = _new(Node)                # Node(...) without the __init__ call: the hot path
        node.op = "instr"
        node.target = info.name
        node.args = args
        node.dtype = info.result
        node.index = len(nodes)
        node.frame = self.frame
        node.uses = 0
        node.key = None
        rec = self.rec
        rec.append(info.word)
        for a in args:
            a.uses += 1
            rec.append(a.index)
        nodes.append(node)
        if key is not None:
            self.cse[key] = node
        return node

    def instr(self, name: str, *args: Any) -> Node:
        """Apply the table row ``name`` to operand nodes (Python numbers become constants of the
        operand's type). Folds constants and merges identical nodes."""
        info = _ROWS.get(name) or row_info(name)
        if info.plain and len(args) == 2:        # the common case, inlined
            a, b = args
            try:
                if a.dtype == info.op0 and b.dtype == info.op1 and \
                        (a.op != "const" or b.op != "const"):
                    key = (name, b, a) if info.commutative and a.index > b.index else (name, a, b)
                    node = self.cse.get(key)
                    return self.add_instr(info, args, key) if node is None else node
            except AttributeError:
                pass
        elif info.plain1 and len(args) == 1:     # unary, inlined likewise
            a = args[0]
            try:
                if a.dtype == info.op0 and a.op != "const":
                    key = (name, a)
                    node = self.cse.get(key)
                    return self.add_instr(info, args, key) if node is None else node
            except AttributeError:
                pass
        return self._instr(name, info, args)

    def _instr(self, name: str, info: RowInfo, args: tuple) -> Node:
        ops = info.operands
        n = len(args)
        try:
            if n == 2:
                ok = args[0].dtype == ops[0] and args[1].dtype == ops[1]
                const = args[0].op == "const" and args[1].op == "const"
            elif n == 1:
                ok = args[0].dtype == ops[0]
                const = args[0].op == "const"
            elif n == 3 and len(ops) == 3:
                a, b, c = args
                ok = a.dtype == ops[0] and b.dtype == ops[1] and c.dtype == ops[2]
                const = a.op == "const" and b.op == "const" and c.op == "const"
            else:
                ok = n == len(ops) and all(a.dtype == t for a, t in zip(args, ops))
                const = all(a.op == "const" for a in args)
        except AttributeError:
            ok = False
        if not ok:
            args = self._coerce(name, ops, args)
            const = all(a.op == "const" for a in args)
        if const and info.foldable:
            return self._fold(info, args)
        if info.simplify is not None:
            node = info.simplify(self, name, args)
            if node is not None:
                return node
        if info.volatile:
            key = None
        else:
            if info.commutative and args[0].index > args[1].index:
                key = (name, args[1], args[0], *args[2:])    # x*y and y*x: one node
            else:
                key = (name, *args)
            node = self.cse.get(key)
            if node is not None:
                return node
        return self.add_instr(info, args, key)

    def _coerce(self, name: str, ops: tuple, args: tuple) -> tuple:
        """Check operand count and types; Python numbers become constants."""
        if len(args) != len(ops):
            raise GraphError(f"{name} takes {len(ops)} operand(s) ({', '.join(ops)}), "
                             f"got {len(args)}")
        out = []
        for i, a in enumerate(args):
            if a.__class__ is not Node:
                if isinstance(a, (int, float, np.number, bool)):
                    out.append(self.const(a, ops[i]))
                    continue
                raise GraphError(f"{name}: operand {i} is {a!r}, not a graph value")
            if a.dtype != ops[i]:
                raise GraphError(f"{name}: operand {i} is {a.dtype}, the instruction takes "
                                 f"{', '.join(ops)}")
            out.append(a)
        return tuple(out)

    def _fold(self, info: RowInfo, args) -> Node:
        vals = [np.full(1, a.target, NP_DTYPE[a.dtype]) for a in args]
        res = np.asarray(info.row.apply(*vals), dtype=NP_DTYPE[info.result]).reshape(-1)[0]
        return self.const_canonical(res, info.result)

    # ---- views -------------------------------------------------------------------------------------
    def renumber(self, nodes: list[Node]) -> None:
        """Make ``nodes`` (this graph's nodes, rewritten in place, in a topological order) the
        graph's: indices, use counts and the Stack PTX record follow them; the CSE tables are
        cleared (their keys may name rewritten nodes). For passes after tracing
        (numptx/dsl/contract.py)."""
        rec: list[int] = []
        n_inputs = 0
        for k, n in enumerate(nodes):
            n.index = k
            n.uses = 0
        for n in nodes:
            if n.op == "input":
                rec.append(1 | _TID[n.dtype] << 8 | n_inputs << 16)
                n_inputs += 1
            elif n.op == "const":
                rec.extend(_CONST_WORDS.get(n.key) or _const_words(n.key))
            else:
                rec.append(row_info(n.target).word)
                for a in n.args:
                    a.uses += 1
                    rec.append(a.index)
        self.nodes, self.rec = nodes, rec
        self.cse, self._lits = {}, {}

    def live(self) -> list[Node]:
        """Nodes the outputs depend on, in creation order (inputs always included)."""
        seen = {id(n) for n in self.inputs.values()}
        stack = [n for _, n in self.outputs]
        while stack:
            n = stack.pop()
            if id(n) not in seen:
                seen.add(id(n))
                stack.extend(n.args)
        return [n for n in self.nodes if id(n) in seen]

    def users(self, nodes: Iterable[Node] | None = None) -> dict[int, int]:
        """Use counts by node id (operand uses among ``nodes`` plus output uses)."""
        count: dict[int, int] = {}
        for n in (self.live() if nodes is None else nodes):
            for a in n.args:
                count[id(a)] = count.get(id(a), 0) + 1
        for _, n in self.outputs:
            count[id(n)] = count.get(id(n), 0) + 1
        return count

    def names(self, nodes: Iterable[Node] | None = None) -> dict[int, str]:
        """Unique printable names: inputs by name, instructions ``t0, t1, ...``."""
        taken = set(self.inputs)
        names: dict[int, str] = {id(n): n.target for n in self.inputs.values()}
        k = 0
        for n in (self.live() if nodes is None else nodes):
            if n.op == "instr":
                while f"t{k}" in taken:
                    k += 1
                names[id(n)] = f"t{k}"
                k += 1
        return names

    def fill_frames(self) -> None:
        """Give nodes without a source position the one a re-trace records (when the re-trace
        builds the same nodes; a formula whose trace changes between runs, or that raises the
        second time, keeps none). The formula runs once more: side effects run again."""
        retrace, self.retrace = self.retrace, None
        if retrace is None or all(n.frame is not None for n in self.nodes if n.op == "instr"):
            return
        try:
            other = retrace()
        except Exception:   # noqa: BLE001 - a formula that fails the second time: no lines
            return
        if other is None or len(other.nodes) != len(self.nodes) or any(
                a.op != b.op or a.target is not b.target and a.target != b.target
                for a, b in zip(self.nodes, other.nodes) if a.op == "instr"):
            return
        for a, b in zip(self.nodes, other.nodes):
            if a.frame is None:
                a.frame = b.frame

    def format(self, *, all_nodes: bool = False) -> str:
        """The FX-style dump: a header, one line per instruction, the return line."""
        self.fill_frames()
        nodes = self.nodes if all_nodes else self.live()
        names = self.names(nodes)

        def ref(n: Node) -> str:
            return format_const(n) if n.op == "const" else f"%{names.get(id(n), '?')}"
        params = ", ".join(f"{k}: {v}" for k, v in self.params.items())
        outs = ", ".join(n.dtype for _, n in self.outputs)
        lines = [f"graph {self.name}({params}) -> {outs or 'None'}:"]
        for n in nodes:
            if n.op != "instr":
                continue
            where = f"   # {frame_location(n.frame)}" if n.frame is not None else ""
            lines.append(f"    %{names[id(n)]} : {n.dtype} = {n.target}"
                         f"({', '.join(ref(a) for a in n.args)}){where}")
        if self.output_form == "dict":
            ret = "{" + ", ".join(f"{k!r}: {ref(n)}" for k, n in self.outputs) + "}"
        elif self.output_form == "tuple":
            ret = "(" + ", ".join(ref(n) for _, n in self.outputs) + ("," if len(self.outputs) == 1 else "") + ")"
        else:
            ret = ref(self.outputs[0][1]) if self.outputs else "None"
        lines.append(f"    return {ret}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        n = sum(1 for n in self.live() if n.op == "instr")
        return f"<Graph {self.name}: {n} instructions, {len(self.outputs)} output(s)>"

    def lint(self) -> None:
        """Check topological order, operand arity and types against the table, value types and
        unique names; a :class:`GraphError` carries the whole dump."""
        problems = []
        pos = {id(n): i for i, n in enumerate(self.nodes)}
        for i, n in enumerate(self.nodes):
            if n.dtype not in TYPES:
                problems.append(f"node {i}: unknown type {n.dtype!r}")
            for a in n.args:
                if pos.get(id(a), i) >= i:
                    problems.append(f"node {i} ({n.target}): operand #{getattr(a, 'index', '?')} "
                                    f"is not an earlier node of this graph")
            if n.op == "instr":
                try:
                    info = row_info(n.target)
                except (GraphError, KeyError) as e:
                    problems.append(f"node {i}: {e}")
                    continue
                if tuple(a.dtype for a in n.args) != info.operands or n.dtype != info.result:
                    problems.append(f"node {i} ({n.target}, {frame_location(n.frame)}): types "
                                    f"{tuple(a.dtype for a in n.args)} -> {n.dtype}, the row says "
                                    f"{info.operands} -> {info.result}")
            elif n.args:
                problems.append(f"node {i}: a {n.op} node has operands")
        for name, n in self.outputs:
            if id(n) not in pos:
                problems.append(f"output {name!r} is not a node of this graph")
        names = list(self.names(self.nodes).values())
        if len(set(names)) != len(names):
            problems.append("node names are not unique")
        if problems:
            raise GraphError("graph lint failed:\n  " + "\n  ".join(problems)
                             + "\n" + self.format(all_nodes=True))
