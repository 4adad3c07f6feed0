"""What a compile returns and takes: the :class:`Stub` (the PTX text, a ``str``, with the
compiler's diagnostics) and the compile :class:`Limits`::

    from numptx import stack_ptx as sp
    stub = sp.compile([sp.input("x")], inputs={"x": "f32"}, outputs={"y": "f32"})
    stub.stats["emitted"], stub.diagnostics       # (1, ()): one mov, nothing to report
    sp.Limits(max_steps=100)                     # a misspelled field raises ProgramError
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, fields

from .ops import ProgramError

__all__ = ["Stub", "Limits", "DEFAULT_LIMITS", "meta_capacity"]

_DIAG_FLAGS = ((1, "step limit reached"), (2, "DAG node limit reached"),
               (4, "routine depth limit reached"), (8, "a stack overflowed"),
               (16, "the meta stack overflowed"), (32, "malformed words were skipped"),
               (128, "an input word's name tag matches no input"))


_DIAG = struct.Struct("<9I")


def diag_fields(raw) -> tuple:
    return _DIAG.unpack(raw) if isinstance(raw, (bytes, bytearray)) else tuple(raw)


class Stub(str):
    """A compiled PTX stub: the text itself (a ``str``), plus what the compiler noticed.

    ``stub.diagnostics`` lists limits hit and outputs that got no value (a zero value; the
    mm-ptx dialect leaves them unwritten); ``stub.unsatisfied`` names those outputs;
    ``stub.stats`` counts steps, DAG nodes, emitted instructions and no-ops; ``stub.inputs`` /
    ``stub.outputs`` map register names to types; ``stub.dialect`` is the Stack PTX dialect
    that compiled it (``"numptx"`` or ``"mm-ptx"``).
    """

    def __new__(cls, text: str, inputs: dict, outputs: dict, diag=bytes(36),
                dialect: str = "numptx"):
        self = super().__new__(cls, text)
        self._meta = (inputs, outputs, diag, dialect)     # diag: raw stackptx_diag bytes
        return self

    @property
    def dialect(self) -> str:
        return self._meta[3] if len(self._meta) > 3 else "numptx"

    @property
    def text(self) -> str:
        return str.__str__(self)

    @property
    def inputs(self) -> dict:
        return self._meta[0]

    @property
    def outputs(self) -> dict:
        return self._meta[1]

    @property
    def _diag(self) -> tuple:
        return diag_fields(self._meta[2])

    @property
    def unsatisfied(self) -> tuple[str, ...]:
        mask = self._diag[3]
        return tuple(n for i, n in enumerate(self.outputs) if i < 32 and mask >> i & 1)

    @property
    def n_unsatisfied(self) -> int:
        """How many outputs got no value (``unsatisfied`` names the first 32 outputs' only)."""
        return self._diag[2]

    @property
    def stats(self) -> dict[str, int]:
        d = self._diag
        return {"steps": d[4], "nodes": d[5], "emitted": d[6], "noops": d[1]}

    @property
    def diagnostics(self) -> tuple[str, ...]:
        d = self._diag
        flags, msgs = d[0], []
        for bit, text in _DIAG_FLAGS:
            if flags & bit:
                at = f" (at word {d[7]})" if bit <= 4 and d[7] != 0xFFFFFFFF else ""
                msgs.append(text + at)
        unsat = self.unsatisfied
        for name in unsat:
            msgs.append(f"output {name!r} ({self.outputs[name]}) got no value: " +
                        ("left unwritten (mm-ptx dialect: the register keeps what it held)"
                         if self.dialect == "mm-ptx" else "set to zero"))
        if d[2] > len(unsat):
            msgs.append(f"{d[2] - len(unsat)} more output(s) beyond the 32nd got no value")
        return tuple(msgs)

    def __reduce__(self):
        inputs, outputs, diag = self._meta[:3]
        return (Stub, (self.text, inputs, outputs, bytes(diag), self.dialect))

    def __repr__(self) -> str:
        return f"Stub({str.__repr__(self)})"


def batch_stubs(texts: list[str], inputs: dict, outputs: dict, diags: bytes,
                diag_size: int, dialect: str = "numptx") -> list[Stub]:
    """The stubs of a batch compile: ``texts[i]`` with the i-th ``diag_size``-byte
    stackptx_diag of ``diags``; all share ``inputs``, ``outputs`` and ``dialect``."""
    new, stubs = str.__new__, []
    append = stubs.append
    for i, text in enumerate(texts):           # Stub(...) inlined: this loop is per program
        stub = new(Stub, text)
        stub._meta = (inputs, outputs, diags[i * diag_size:(i + 1) * diag_size], dialect)
        append(stub)
    return stubs


@dataclass(frozen=True)
class Limits:
    """Compile limits (docs/design/programs.md); hitting one is reported in ``stub.diagnostics``.
    Under ``dialect="mm-ptx"`` (one size for every stack, as mm-ptx's stack_size), a Limits
    that sets ``stack_capacity`` but not ``meta_capacity`` sizes the meta stack the same."""
    max_steps: int = 4096
    max_nodes: int = 4096
    max_depth: int = 8
    stack_capacity: int = 256
    meta_capacity: int = 256
    n_slots: int = 16

    def __new__(cls, *args, **kwargs):
        # a misspelled field would be a bare TypeError from the generated __init__
        unknown = [k for k in kwargs if k not in _LIMIT_FIELDS]
        if unknown or len(args) > len(_LIMIT_FIELDS):
            what = f"unknown field {unknown[0]!r}" if unknown else f"{len(args)} positional values"
            raise ProgramError(f"Limits: {what}; the fields are {', '.join(_LIMIT_FIELDS)}")
        self = super().__new__(cls)
        # the fields set by the caller (not a field: eq/hash/repr ignore it): the mm-ptx
        # dialect sizes the meta stack like the stacks unless meta_capacity is given
        object.__setattr__(self, "_given", frozenset((*_LIMIT_FIELDS[:len(args)], *kwargs)))
        return self

    def __post_init__(self):
        for k in _LIMIT_FIELDS:
            v = getattr(self, k)
            if not isinstance(v, int) or not 1 <= v <= 1 << 20:
                raise ProgramError(f"Limits.{k} = {v!r}: must be an int in [1, 1048576]")


_LIMIT_FIELDS = tuple(f.name for f in fields(Limits))
DEFAULT_LIMITS = Limits()


def meta_capacity(lim: Limits, dialect: int) -> int:
    """The meta stack's capacity a compile runs with: mm-ptx has one size for the stacks and
    the meta stack (its stack_size), so under dialect mm-ptx (1) a Limits that sets
    stack_capacity and not meta_capacity gets meta_capacity = stack_capacity."""
    given = getattr(lim, "_given", ())
    if dialect == 1 and "stack_capacity" in given and "meta_capacity" not in given:
        return lim.stack_capacity
    return getattr(lim, "meta_capacity", None)      # (not a Limits: the caller refuses it)
