"""Kernel parameter lists, read from CUDA C++ source and checked against the PTX ``.entry``.

::

    params = kernel_params(ptx, "kernel", src=SRC)    # CudaTemplate.params does this, lazily
    params[0]          # Param(name='out', ctype='float*', is_pointer=True, dtype='float32', size=8)
    signature("kernel", params)                       # 'kernel(float* out, ..., int n)'

The PTX is authoritative for the count and the sizes; the C declaration adds names,
signedness and which 64-bit parameters are pointers. Where the C side cannot be read (macros,
templates, typedefs) a parameter keeps its PTX type, and a 64-bit one (``.u64``) may be either a
pointer or an integer (``is_pointer=None``). By-value structs and arrays (``.b8 x[N]`` in the
PTX, except ``__half``/``__nv_bfloat16``) get ``dtype="struct"``: the launcher refuses them.
"""
from __future__ import annotations

import logging
import re
from typing import NamedTuple

from ..._text import split_top

__all__ = ["Param", "kernel_params", "parse_c_params", "parse_ptx_params", "signature"]

log = logging.getLogger(__name__)


class Param(NamedTuple):
    """One kernel parameter."""
    name: str                 # the C name, or "param_<i>" when only the PTX names it
    ctype: str                # as declared ("const float* __restrict__"), or the PTX type (".u32")
    is_pointer: bool | None   # None: a 64-bit PTX parameter, pointer or integer
    dtype: str | None         # NumPy name of the value (scalars) or the pointee (pointers);
                              # "struct" for by-value aggregates; None when unknown
    size: int                 # bytes in the PTX parameter list

    @property
    def decl(self) -> str:
        return f"{self.ctype} {self.name}"


# C scalar spellings -> NumPy dtype names (after qualifiers and namespaces are dropped)
_C_SCALARS = {
    "bool": "bool", "float": "float32", "double": "float64",
    "__half": "float16", "half": "float16", "__nv_half": "float16",
    "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16",
    "size_t": "uint64", "ptrdiff_t": "int64", "ssize_t": "int64",
    "intptr_t": "int64", "uintptr_t": "uint64",
    **{f"int{b}_t": f"int{b}" for b in (8, 16, 32, 64)},
    **{f"uint{b}_t": f"uint{b}" for b in (8, 16, 32, 64)},
}
_INT_WORDS = {"signed", "unsigned", "char", "short", "int", "long"}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "class",
               "__grid_constant__", "register"}
_SIZES = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2,
          "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8}

_STRIP = re.compile(r'("(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')|//[^\n]*|/\*.*?\*/', re.S)
_TOKEN = re.compile(r"::|[A-Za-z_]\w*|\*|&|\[[^\]]*\]|<|>|,|\S")
_IDENT = re.compile(r"[A-Za-z_]\w*$")
_TYPE_WORDS = {"void", "bool", "float", "double"}


def _int_dtype(words: list[str]) -> str | None:
    """``unsigned long long int`` and friends (LP64: long is 64 bits; the PTX size decides)."""
    longs, unsigned = words.count("long"), "unsigned" in words
    if "char" in words:         # plain char is signed on x86 hosts, unsigned on Arm: either
        return "uint8" if unsigned else "int8" if "signed" in words else None
    bits = 16 if "short" in words else 64 if longs else 32
    return f"{'u' if unsigned else ''}int{bits}"


def _strip_comments(src: str) -> str:
    return _STRIP.sub(lambda m: m.group(1) or " ", src)


def _split_top(text: str) -> list[str]:
    """Split a parameter list at the commas outside <>, (), [] and {}."""
    return split_top(text, "<([{", ">)]}")


def _words_dtype(words: list[str]) -> str | None:
    if words and set(words) <= _INT_WORDS:
        return _int_dtype(words)
    return _C_SCALARS.get(words[0]) if len(words) == 1 else None


def _parse_decl(decl: str, index: int) -> Param:
    """One C parameter declaration -> Param (size 0: the PTX fills it in)."""
    decl = re.split(r"(?<![=!<>])=(?!=)", decl, maxsplit=1)[0].strip()   # drop a default value
    tokens = [t for t in _TOKEN.findall(decl) if t not in _QUALIFIERS]
    pointer = any(t == "*" or t.startswith("[") for t in tokens)
    core = tokens
    while core and core[-1].startswith("["):
        core = core[:-1]
    name = f"param_{index}"
    last = core[-1] if core else ""
    if (len(core) > 1 and _IDENT.match(last) and core[-2] != "::"
            and last not in _INT_WORDS | _TYPE_WORDS):
        name = last
        core = core[:-1]
        decl = decl[:decl.rfind(name)] + decl[decl.rfind(name) + len(name):]
    ctype = re.sub(r"\s*\[[^\]]*\]", "*", " ".join(decl.split()))       # float a[] is float* a
    ctype = re.sub(r"\*(?=[^\s*])", "* ", re.sub(r"\s*\*", "*", ctype)).strip()
    # type words, without namespaces (std::size_t, cuda::std::int32_t); templates are opaque
    words = [t for i, t in enumerate(core) if _IDENT.match(t)
             and not (i + 1 < len(core) and core[i + 1] == "::")]
    dtype = None if "<" in core or words == ["void"] else _words_dtype(words)
    return Param(name, ctype, pointer, dtype, 0)


def parse_c_params(src: str, name: str) -> list[Param] | None:
    """The parameters of ``__global__ ... name(...)`` in ``src``, or None when they cannot be
    read (no such kernel, several different declarations). Sizes are 0 until checked against
    the PTX."""
    text = _strip_comments(src)
    found: list[list[Param]] = []
    for g in re.finditer(r"\b__global__\b", text):
        end = min((i for i in (text.find("{", g.end()), text.find(";", g.end())) if i >= 0),
                  default=len(text))
        m = re.search(rf"\b{re.escape(name)}\s*\(", text[g.end():end])
        if not m:
            continue
        start = g.end() + m.end()
        depth, i = 1, start
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        if depth:
            return None
        inner = text[start:i - 1].strip()
        decls = [] if inner in ("", "void") else _split_top(inner)
        params = [_parse_decl(d, k) for k, d in enumerate(decls)]
        if params not in found:
            found.append(params)
    return found[0] if len(found) == 1 else None


_PTX_PARAM = re.compile(r"\.param\s+((?:\.\w+\s+(?:\d+\s+)?)*)"      # .align 8 .b8, .u64 .ptr
                        r"([A-Za-z_$%][\w$]*)\s*(\[\s*\d+\s*\])?")


def parse_ptx_params(ptx: str, entry: str) -> list[Param]:
    """The parameters of ``.entry entry(...)`` in ``ptx``, typed by the PTX alone."""
    m = re.search(rf"\.entry\s+{re.escape(entry)}\s*\(([^)]*)\)", ptx)
    if not m:
        m = re.search(rf"\.entry\s+{re.escape(entry)}\s*(?=[{{.])", ptx)    # no parameters
        if not m:
            raise ValueError(f"no .entry {entry} in the PTX")
        return []
    out = []
    for k, p in enumerate(_PTX_PARAM.finditer(m.group(1))):
        directives, pname, count = p.group(1).split(), p.group(2), p.group(3)
        types = [d for d in directives if re.match(r"\.[bsuf]\d+$", d)]
        ty = types[0] if types else ".b8"
        bits = ty[2:]
        size = int(bits) // 8
        num = pname.rsplit("_param_", 1)[-1]
        name = f"param_{num if num.isdigit() else k}"
        if count:
            n = int(count.strip("[] "))
            out.append(Param(name, f"{ty}[{n}]", False, "struct", size * n))
        elif ".ptr" in directives:
            out.append(Param(name, ty, True, None, size))
        elif ty[1] == "f":
            out.append(Param(name, ty, False, {"16": "float16", "32": "float32",
                                               "64": "float64"}[bits], size))
        else:       # integers: the PTX keeps no signedness (NVRTC writes .u32 for int)
            out.append(Param(name, ty, None if size == 8 else False, None, size))
    return out


def _merge(c: Param, p: Param, entry: str) -> Param:
    """C knowledge where the PTX agrees with it; the PTX's alone where it does not."""
    if c.is_pointer:
        if p.size == 8 and p.dtype is None:
            return c._replace(size=8)
    elif c.dtype in ("float16", "bfloat16"):
        if p.size == 2 and (p.dtype in ("struct", "float16") or p.ctype in (".b16", ".u16")):
            return c._replace(size=2)
    elif c.dtype is not None:
        want = _SIZES[c.dtype]
        is_float = c.dtype.startswith("float")
        if p.size == want and p.dtype != "struct" and is_float == (p.ctype[1] == "f"):
            return c._replace(size=want)
        if c.dtype.endswith("int64") and p.size == 4:          # long on an LLP64 host
            return c._replace(dtype=c.dtype.replace("64", "32"), size=4)
    else:           # a type the C side does not know (typedef, template, struct): PTX types it
        return p._replace(name=c.name, ctype=c.ctype)
    log.debug("%s: C parameter %r disagrees with PTX %s; using the PTX type", entry, c.decl,
              p.ctype)
    return p._replace(name=c.name)


def kernel_params(ptx: str, entry: str, src: str | None = None) -> tuple[Param, ...]:
    """The parameters of kernel ``entry``: from ``src`` (CUDA C++) checked against ``ptx``, or
    from the PTX alone when there is no source or it cannot be read."""
    ptx_params = parse_ptx_params(ptx, entry)
    c_params = None
    if src is not None:
        name = entry
        mangled = re.match(r"_Z(\d+)", entry)               # a plain function: _Z<len><name>...
        if mangled:
            n = int(mangled.group(1))
            name = entry[mangled.end():mangled.end() + n]
        c_params = parse_c_params(src, name)
        if c_params is not None and len(c_params) != len(ptx_params):
            log.debug("%s: %d C parameters but %d in the PTX; using the PTX types", entry,
                      len(c_params), len(ptx_params))
            c_params = None
    if c_params is None:
        return tuple(ptx_params)
    return tuple(_merge(c, p, entry) for c, p in zip(c_params, ptx_params))


def signature(entry: str, params: tuple[Param, ...] | list[Param]) -> str:
    """``entry(float* out, int n)``, for messages."""
    return f"{entry}({', '.join(p.decl for p in params)})"
