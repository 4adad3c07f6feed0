"""The layout of an injection site in PTX: the one place that says how a site looks.

Every Python user imports its names from here (annotation, injection, assembly errors, the
simulator's checks, constant patching). Two text copies live outside Python and are compared
with this module by ``tests/test_site_layout.py``: the C core (``native/ptx_inject.h``, which
parses the markers and writes the stub tags) and the CUDA header
(``numptx/include/ptx_inject.cuh``, whose ``PTX_INJECT`` macro writes the frame).

A site instance in PTX (one per inlined or unrolled copy; ``x`` in, ``acc`` mod, ``z`` out)::

    {
    .reg .f32 %v_x;                          frame: one register per variable (REG_PREFIX)
    .reg .f32 %v_acc;
    .reg .f32 %v_z;
    mov.f32 %v_acc, %f3;                     mod copies, then in copies
    mov.f32 %v_x, %f2;
    // PTX_INJECT_BEGIN combine              BEGIN marker + site name
    // PTX_INJECT_VAR in f32 f32 v_x x       VAR marker: kind dtype regtype reg name
    // PTX_INJECT_VAR mod f32 f32 v_acc acc
    // PTX_INJECT_VAR out f32 f32 v_z z
    // PTX_INJECT_END                        END marker
    mov.f32 %f3, %v_acc;                     mod and out copies back
    mov.f32 %f1, %v_z;
    }

Rendering replaces BEGIN..END with the stub, wrapped in stub tags that let assembly errors
name the site (``STUB_TAG_OPEN`` + site + "\\n" + stub + ``STUB_TAG_CLOSE``)::

    >>> from numptx import site_layout as L
    >>> L.reg_name("x"), L.reg_ref("x"), L.var_of_reg("v_x")
    ('v_x', '%v_x', 'x')
    >>> L.var_line("in", "f32", "f32", "x")
    '// PTX_INJECT_VAR in f32 f32 v_x x'
"""
from __future__ import annotations

__all__ = ["REG_PREFIX", "MARKER_PREFIX", "BEGIN", "VAR", "END", "LEGACY_START", "STUB_TAG",
           "STUB_END", "STUB_TAG_OPEN", "STUB_TAG_CLOSE", "MODULE_LINE", "RESERVED", "KINDS",
           "GeneratedStub", "reg_name", "reg_ref", "var_of_reg", "begin_line", "var_line",
           "end_line", "hoist_module_lines"]

#: a site variable ``x`` lives in the register ``%v_x`` (stubs are written against it)
REG_PREFIX = "v_"

#: every marker comment starts with this keyword prefix (the C core scans for it)
MARKER_PREFIX = "PTX_INJECT_"
BEGIN = "// PTX_INJECT_BEGIN"           #: then " <site>"
VAR = "// PTX_INJECT_VAR"               #: then " <kind> <dtype> <regtype> <reg> <name>"
END = "// PTX_INJECT_END"
LEGACY_START = "// PTX_INJECT_START"    #: mm-ptx 1.x blocks open with this (parsed, never written)

#: rendered stubs sit between these comment lines (assembly errors name the site from them)
STUB_TAG = "// PTX_INJECT_STUB "        #: then "<site>"
STUB_END = "// PTX_INJECT_STUB_END"
#: the exact bytes the C core writes around a stub: OPEN + site + "\n" + stub + CLOSE
STUB_TAG_OPEN = "\t" + STUB_TAG
STUB_TAG_CLOSE = "\n\t" + STUB_END + "\n"

#: a packed stub with a run-time constant table shows each module-scope line it declares as a
#: comment starting with this (so the text, and the cache key made from it, show the table);
#: rendering hoists only the lines a :class:`GeneratedStub` carries, never comment text
MODULE_LINE = "// numptx module: "

#: text numptx reserves in stubs it did not generate (checked by numptx.jit.templates.stub_checks): names
#: of its own registers, labels and tables (``__nx_``), the site markers and stub tags
#: (``PTX_INJECT``, which attribute assembly errors to sites), and the comment marks of packs
#: (``numptx candidate``, which attribute ptxas errors to candidates; ``numptx module``)
RESERVED = ("__nx_", "PTX_INJECT", "numptx candidate", "numptx module")

#: variable kinds, in the order the frame copies them in (mod before in)
KINDS = ("in", "mod", "out")


def reg_name(var: str) -> str:
    """The register (no ``%``) that holds site variable ``var``: ``v_<var>``."""
    return REG_PREFIX + var


def reg_ref(var: str) -> str:
    """The register operand a stub writes for site variable ``var``: ``%v_<var>``."""
    return "%" + REG_PREFIX + var


def var_of_reg(reg: str) -> str | None:
    """The site variable a frame register names (``v_x`` or ``%v_x`` -> ``x``), else None."""
    reg = reg[1:] if reg.startswith("%") else reg
    return reg[len(REG_PREFIX):] if reg.startswith(REG_PREFIX) and len(reg) > len(REG_PREFIX) else None


class GeneratedStub(str):
    """A stub numptx generated itself (a packed population), with the module-scope lines it
    declares held apart in ``module_lines`` (a packed stub's run-time constant table, which must
    be module scope to be found by name at load time). Rendering hoists these lines; a stub of
    any other type places nothing at module scope, whatever its text says.

    >>> s = GeneratedStub.declaring("{ ... }", [".visible .global .b8 __nx_kc_f[8];"])
    >>> s.module_lines
    ('.visible .global .b8 __nx_kc_f[8];',)
    >>> s.splitlines()[0]
    '// numptx module: .visible .global .b8 __nx_kc_f[8];'
    """

    module_lines: tuple[str, ...]

    def __new__(cls, text: str, module_lines: tuple[str, ...] = ()):
        self = super().__new__(cls, text)
        self.module_lines = tuple(module_lines)
        return self

    @classmethod
    def declaring(cls, text: str, module_lines) -> GeneratedStub:
        """``text`` declaring ``module_lines``, each shown as a ``MODULE_LINE`` comment on top."""
        lines = tuple(module_lines)
        return cls("".join(f"{MODULE_LINE}{d}\n" for d in lines) + text, lines)

    def __reduce__(self):
        return (type(self), (str.__str__(self), self.module_lines))


def hoist_module_lines(ptx: str, stubs) -> str:
    """``ptx`` with the module-scope lines that the :class:`GeneratedStub` among ``stubs``
    declare inserted after the ``.address_size`` line (or at the top), each once, in order.
    Other stubs declare nothing here, whatever their text holds."""
    decls: list[str] = []
    for s in stubs:
        for d in getattr(s, "module_lines", ()) if isinstance(s, GeneratedStub) else ():
            if d not in decls:
                decls.append(d)
    if not decls:
        return ptx
    i = ptx.find(".address_size")
    at = ptx.find("\n", i) + 1 if i >= 0 else 0
    return ptx[:at] + "\n".join(decls) + "\n" + ptx[at:]


def begin_line(site: str) -> str:
    return f"{BEGIN} {site}"


def var_line(kind: str, dtype: str, reg_type: str, var: str) -> str:
    return f"{VAR} {kind} {dtype} {reg_type} {reg_name(var)} {var}"


def end_line() -> str:
    return END
