"""PTX Inject from Python: find the injection sites of a PTX template and render variants.

>>> import numptx as nx
>>> inj = nx.PtxInject(nx.cuda_to_ptx(SRC, arch="sm_90"))          # doctest: +SKIP
>>> site = inj.sites["combine"]                                       # doctest: +SKIP
>>> x, y, z = site["x"], site["y"], site["z"]                         # doctest: +SKIP
>>> ptx = inj.render({"combine": f"add.f32 %{z.reg}, %{x.reg}, %{y.reg};"})   # doctest: +SKIP

Parsing and rendering run in the C core ``native/ptx_inject.h`` (linear in the PTX size and the
number of sites); Python only maps names to stubs.
"""
from __future__ import annotations

import threading
from array import array
from collections.abc import Iterable, Iterator, Mapping
from itertools import accumulate
from operator import itemgetter
from typing import NamedTuple

from ._native import ffi, lib
from .errors import (NumptxError, PtxParseError, RenderError, StubNulWarning, trim_stub_nul,
                     warn_from_caller)
from .site_layout import STUB_TAG_CLOSE, STUB_TAG_OPEN

__all__ = ["PtxInject", "Site", "Variable"]

_KINDS = ("in", "out", "mod")
_STATUS_CODES = {
    lib.PTXINJ_ERR_MALFORMED_MARKER: "malformed_marker",
    lib.PTXINJ_ERR_MISSING_END: "missing_end",
    lib.PTXINJ_ERR_UNEXPECTED_END: "unexpected_end",
    lib.PTXINJ_ERR_NESTED_SITE: "nested_site",
    lib.PTXINJ_ERR_DUPLICATE_VARIABLE: "duplicate_variable",
    lib.PTXINJ_ERR_INCONSISTENT_INSTANCES: "inconsistent_instances",
    lib.PTXINJ_ERR_UNKNOWN_SITE: "unknown_site",
    lib.PTXINJ_ERR_TOO_LARGE: "too_large",
    lib.PTXINJ_ERR_INVALID_ARGUMENT: "invalid_argument",
    lib.PTXINJ_ERR_BUFFER_TOO_SMALL: "buffer_too_small",
}
# the output buffer is filled completely by the C core: skip the zeroing of ffi.new
_raw_alloc = ffi.new_allocator(should_clear_after_alloc=False)
_SITE_FIELDS = 7   # ptxinj_site is seven uint32 fields
_VAR_FIELDS = 10   # ptxinj_var is ten uint32 fields


def _hiding_cr(data: bytes) -> int | None:
    """Offset of a carriage return without a line feed before a ``PTX_INJECT`` keyword on the
    same line (the parser, which splits lines at LF, would read the marker as part of a comment
    and find no site), or None. Linear: each stretch of ``data`` is searched once."""
    if b"\r" not in data:
        return None
    pos, line_start = 0, 0
    while (m := data.find(b"PTX_INJECT", pos)) >= 0:
        nl = data.rfind(b"\n", pos, m)
        if nl >= 0:
            line_start = nl + 1
        cr = data.find(b"\r", max(line_start, pos), m)   # no LF follows it: none lies before m
        if cr >= 0:
            return cr
        pos = m + 1
    return None


def _status_text(status: int) -> str:
    return ffi.string(lib.ptxinj_status_string(status)).decode()


class Variable(NamedTuple):
    """One variable of a site. ``reg`` is the stable register name stubs use (no leading ``%``);
    ``kind`` is ``"in"``, ``"out"`` or ``"mod"``; ``dtype`` the data type name (``"f32"``);
    ``reg_type`` the PTX register type (``"f32"``, ``"b16"``)."""
    name: str
    kind: str
    dtype: str
    reg_type: str
    reg: str

    def __str__(self) -> str:
        return f"{self.kind} {self.dtype} {self.name}"


class UnknownVariableError(NumptxError, KeyError):
    """A variable name that a site does not have."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Site:
    """An injection site: its name, variables (declaration order) and number of instances.

    ``site["x"]`` returns the :class:`Variable` named ``x``; ``site.inputs`` are the variables a
    stub reads (in and mod), ``site.outputs`` those it writes (out and mod).
    """
    __slots__ = ("name", "variables", "instances", "_by_name")

    def __init__(self, name: str, variables: tuple[Variable, ...], instances: int):
        self.name, self.variables, self.instances = name, variables, instances
        self._by_name = {v.name: v for v in variables}

    def __getitem__(self, name: str) -> Variable:
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownVariableError(f"site {self.name!r} has no variable {name!r}; it has "
                                       f"{self.signature}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Variable]:
        return iter(self.variables)

    def __len__(self) -> int:
        return len(self.variables)

    @property
    def inputs(self) -> tuple[Variable, ...]:
        return tuple(v for v in self.variables if v.kind != "out")

    @property
    def outputs(self) -> tuple[Variable, ...]:
        return tuple(v for v in self.variables if v.kind != "in")

    @property
    def signature(self) -> str:
        """``combine(in f32 x, in f32 y, out f32 z)``."""
        return f"{self.name}({', '.join(map(str, self.variables))})"

    def __repr__(self) -> str:
        return f"<Site {self.signature} x{self.instances}>"


class _Sites(Mapping):
    """Read-only mapping name -> :class:`Site` in first-appearance order; Site objects are built
    on first access so that templates with thousands of sites parse fast."""

    def __init__(self, inj: PtxInject):
        self._inj = inj
        self._cache: dict[int, Site] = {}

    def __getitem__(self, name: str) -> Site:
        index = self._inj._index.get(name) if isinstance(name, str) else None
        if index is None:
            raise UnknownSiteError(self._inj, name)
        site = self._cache.get(index)
        if site is None:
            site = self._cache[index] = self._inj._build_site(index)
        return site

    def __iter__(self) -> Iterator[str]:
        return iter(self._inj._names)

    def __len__(self) -> int:
        return self._inj._n_sites

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._inj._index

    def __repr__(self) -> str:
        return "{" + ", ".join(repr(self[n]) for n in self) + "}"


class UnknownSiteError(NumptxError, KeyError):
    """A site name that the PTX does not contain."""

    def __init__(self, inj: PtxInject, name: object):
        names = list(inj._names)
        shown = ", ".join(map(repr, names[:20])) + (" ..." if len(names) > 20 else "")
        super().__init__(f"no site named {name!r}; the PTX has {len(names)} site(s): {shown or 'none'}")

    def __str__(self) -> str:
        return str(self.args[0])


_TAG_OPEN = STUB_TAG_OPEN         # the bytes the C core writes too (tests/test_site_layout.py)
_TAG_CLOSE = STUB_TAG_CLOSE


class PtxInject:
    """A PTX template with injection sites.

    ``PtxInject(ptx)`` parses the markers (numptx's ``PTX_INJECT`` annotations and mm-ptx 1.x
    ``PTX_INJECT_START`` blocks) in the C core. ``sites`` maps site names to :class:`Site` in order
    of first appearance; several instances of one site (unrolled loops, inlining) share one
    variable list and one stub. Parse errors raise :class:`numptx.PtxParseError` with the PTX line.

    Rendering wraps each stub in ``// PTX_INJECT_STUB <site>`` ... ``// PTX_INJECT_STUB_END``
    comment lines, which let :func:`numptx.ptx_to_cubin` name the site and quote the stub line
    when assembly fails; rendered PTX has no sites left.
    """

    def __init__(self, ptx: str | bytes):
        if isinstance(ptx, str):
            try:
                data = ptx.encode("utf-8", errors="surrogateescape")
            except UnicodeEncodeError as e:
                raise PtxParseError(
                    f"the PTX text holds the lone surrogate {ptx[e.start]!r} (character "
                    f"{e.start}), which is no UTF-8 text; decode PTX bytes with "
                    f"errors='surrogateescape' or pass the bytes", line=ptx.count("\n", 0, e.start) + 1,
                    code="encoding") from None
            self.ptx = ptx
        elif isinstance(ptx, (bytes, bytearray, memoryview)):
            data = bytes(ptx)
            self.ptx = data.decode("utf-8", errors="surrogateescape")
        else:
            raise NumptxError(f"PtxInject needs PTX text (str or bytes), not {type(ptx).__name__}")
        cr = _hiding_cr(data)
        if cr is not None:
            raise PtxParseError("a carriage return without a line feed hides a PTX_INJECT marker "
                                "(CR-only line endings?): PTX lines end in \\n or \\r\\n",
                                line=data.count(b"\n", 0, cr) + 1, code="line_endings")
        self._data = data
        self._buf = ffi.from_buffer(data)   # keeps the bytes alive and their address fixed
        ctx = ffi.new("ptxinj_ctx *")
        status = lib.ptxinj_parse(ctx, self._buf, len(data), ffi.NULL, 0)
        if status == lib.PTXINJ_ERR_BUFFER_TOO_SMALL:
            self._mem = ffi.new("char[]", max(int(ctx.mem_needed), 1))
            status = lib.ptxinj_parse(ctx, self._buf, len(data), self._mem, len(self._mem))
        if status != lib.PTXINJ_OK:
            self._raise_parse_error(ctx, status)
        self._ctx = ctx
        self._n_sites = ctx.n_sites
        if not data.isascii():
            self._check_utf8_names(ctx)
        self.sites: Mapping[str, Site] = _Sites(self)
        # built on first use: names, the name index and the render plan
        self._names_cache: list[str] | None = None
        self._index_cache: dict[str, int] | None = None
        self._plan_cache = None
        self._scratch = threading.local()
        self._last_size = 0          # of the last C render: sizes the next one's buffer

    # -- lazily built tables -------------------------------------------------------------------
    def _u32(self, ptr, count: int, ctype: str) -> array:
        raw = array("I")
        if count:
            raw.frombytes(ffi.buffer(ptr, count * ffi.sizeof(ctype)))
        return raw

    @property
    def _site_raw(self) -> array:
        return self._u32(self._ctx.sites, self._n_sites, "ptxinj_site")

    @property
    def _names(self) -> list[str]:
        if self._names_cache is None:
            raw = self._site_raw
            # byte offsets index the str directly when the PTX is ASCII (it always should be)
            text = self.ptx if len(self.ptx) == len(self._data) else None
            if text is not None:
                names = [text[o:o + n] for o, n in zip(raw[0::_SITE_FIELDS], raw[1::_SITE_FIELDS])]
            else:
                d = self._data
                names = [d[o:o + n].decode("utf-8")        # checked at parse time
                         for o, n in zip(raw[0::_SITE_FIELDS], raw[1::_SITE_FIELDS])]
            self._names_cache = names
        return self._names_cache

    @property
    def _index(self) -> dict[str, int]:
        if self._index_cache is None:
            self._index_cache = {name: i for i, name in enumerate(self._names)}
        return self._index_cache

    def _plan(self):
        """Pieces of the output around the instances, for a str join: even slots hold the PTX
        between instances with the tags, odd slots receive the stubs."""
        if self._plan_cache is None:
            names, text = self._names, self.ptx
            ascii_ok = len(text) == len(self._data)
            inst = self._u32(self._ctx.instances, self._ctx.n_instances, "ptxinj_instance")
            site_of, begins, ends = inst[0::3], inst[1::3], inst[2::3]
            pieces: list = []
            prev, close = 0, ""
            for s, b, e in zip(site_of, begins, ends):
                seg = text[prev:b] if ascii_ok else self._data[prev:b].decode("utf-8", "surrogateescape")
                pieces.append(f"{close}{seg}{_TAG_OPEN}{names[s]}\n")
                pieces.append(None)
                prev, close = e, _TAG_CLOSE
            tail = text[prev:] if ascii_ok else self._data[prev:].decode("utf-8", "surrogateescape")
            pieces.append(close + tail)
            in_site_order = list(site_of) == list(range(len(names)))
            per_instance = None if in_site_order else (itemgetter(*site_of) if len(site_of) > 1
                                                       else (lambda got, i=site_of[0]: (got[i],)))
            getter = itemgetter(*names) if len(names) > 1 else None
            self._plan_cache = (pieces, per_instance, getter)
        return self._plan_cache

    # -- parse helpers -------------------------------------------------------------------------
    def _raise_parse_error(self, ctx, status: int):
        line = None
        if status not in (lib.PTXINJ_ERR_INVALID_ARGUMENT, lib.PTXINJ_ERR_TOO_LARGE):
            line = int(lib.ptxinj_line_of(self._buf, len(self._data), ctx.err_offset))
        site = None
        if ctx.err_site != 0xFFFFFFFF and ctx.sites != ffi.NULL and ctx.err_site < ctx.n_sites:
            s = ctx.sites[ctx.err_site]
            site = self._data[s.name_off:s.name_off + s.name_len].decode(errors="replace")
        text = ""
        if line is not None:
            lines = self._data.split(b"\n", line)
            if len(lines) >= line:
                text = lines[line - 1].decode(errors="replace").strip()
                if len(text) > 200:
                    text = text[:200] + "..."
        what = _status_text(status)
        msg = what + (f" (site {site!r})" if site else "") + (f" near {text!r}" if text else "")
        raise PtxParseError(msg, line=line, site=site, code=_STATUS_CODES.get(status, "error"))

    def _check_utf8_names(self, ctx) -> None:
        """Site and variable names must be UTF-8: two names that differ only in invalid bytes
        would decode to one name (and share a stub)."""
        d = self._data
        for i in range(ctx.n_sites):
            s = ctx.sites[i]
            site = d[s.name_off:s.name_off + s.name_len]
            fields = [("site name", site, s.name_off)]
            for k in range(s.first_var, s.first_var + s.n_vars):
                v = ctx.vars[k]
                fields += [("variable field", d[o:o + n], o) for o, n in
                           ((v.dtype_off, v.dtype_len), (v.regtype_off, v.regtype_len),
                            (v.reg_off, v.reg_len), (v.name_off, v.name_len))]
            for what, raw, off in fields:
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError:
                    name = site.decode("utf-8", "backslashreplace")
                    shown = raw.decode("utf-8", "backslashreplace")
                    line = int(lib.ptxinj_line_of(self._buf, len(d), off))
                    where = "" if what == "site name" else f" (site '{name}')"
                    raise PtxParseError(f"{what} '{shown}'{where} is not valid UTF-8; names that "
                                        f"differ only in invalid bytes would merge",
                                        line=line, site=name, code="encoding") from None

    def _build_site(self, index: int) -> Site:
        raw = self._u32(self._ctx.sites + index, 1, "ptxinj_site")
        first_var, n_vars, n_inst = raw[2], raw[3], raw[4]
        variables = []
        if n_vars:
            vr = self._u32(self._ctx.vars + first_var, n_vars, "ptxinj_var")
            d = self._data
            for k in range(n_vars):
                f = vr[k * _VAR_FIELDS:(k + 1) * _VAR_FIELDS]
                dtype, reg_type, reg, name = (d[f[i]:f[i] + f[i + 1]].decode(errors="replace")
                                              for i in (1, 3, 5, 7))
                variables.append(Variable(name, _KINDS[f[0]], dtype.lower(), reg_type, reg))
        return Site(self._names[index], tuple(variables), n_inst)

    # -- render --------------------------------------------------------------------------------
    def _stub_values(self, stubs: Mapping[str, str], missing: str) -> tuple:
        """The stubs in site order, after checking for missing and unknown names; stubs ending
        in NUL bytes (mm-ptx-py's) come back trimmed, with one :class:`StubNulWarning`."""
        got = self._stub_values_in_order(stubs, missing)
        if any("\0" in s for s in got if isinstance(s, str)):
            got = self._trim_nul(got)
        return got

    def _trim_nul(self, got) -> tuple:
        out, trimmed = [], []
        for name, stub in zip(self._names, got):
            if isinstance(stub, str) and "\0" in stub:
                stub, cut = trim_stub_nul(stub, name)
                if cut:
                    trimmed.append(name)
            out.append(stub)
        if trimmed:
            shown = ", ".join(map(repr, trimmed[:10])) + (" ..." if len(trimmed) > 10 else "")
            warn_from_caller(f"the stub(s) of site(s) {shown} end in NUL bytes (as mm-ptx-py "
                             f"returns its stubs); numptx trimmed them before rendering: pass "
                             f"the text without the trailing '\\x00' to silence this",
                             StubNulWarning)
        return tuple(out)

    def _stub_values_in_order(self, stubs: Mapping[str, str], missing: str) -> tuple:
        """The stubs in site order, after checking for missing and unknown names."""
        if not isinstance(stubs, (Mapping, list, tuple)):
            raise RenderError(f"render() takes a mapping site name -> stub text (or a list of "
                              f"stubs in site order), not {type(stubs).__name__}")
        if missing not in ("error", "empty"):
            raise RenderError(f"render(missing={missing!r}): use 'error' or 'empty'")
        names = self._names
        n = len(names)
        if isinstance(stubs, (list, tuple)):      # the fast form: stubs in site order
            if len(stubs) != n:
                raise RenderError(f"render() got {len(stubs)} stubs in a sequence for {n} site(s); "
                                  f"a sequence must list one stub per site in inj.sites order")
            return stubs
        if len(stubs) == n:
            keys = list(stubs)
            if keys == names:                    # built by iterating inj.sites: no lookups needed
                return tuple(stubs.values())
        getter = self._plan()[2]
        try:
            got = (getter(stubs) if n > 1 else (stubs[names[0]],)) if n else ()
            if len(stubs) == n:
                return got                        # all n names found, no room for unknown ones
            absent: list[str] = []
        except KeyError:
            absent = [name for name in names if name not in stubs]
            got = tuple(stubs.get(name, "") for name in names)
        unknown = sorted(map(str, stubs.keys() - self._index.keys()))
        if unknown or (absent and missing == "error"):
            parts = []
            if absent and missing == "error":
                shown = ", ".join(map(repr, absent[:20])) + (" ..." if len(absent) > 20 else "")
                parts.append(f"no stub for site(s) {shown} (pass missing='empty' to leave them as no-ops)")
            if unknown:
                shown = ", ".join(repr(u[:200]) for u in unknown[:20])
                parts.append(f"no site named {shown} (sites: {', '.join(repr(x[:200]) for x in names[:20])})")
            raise RenderError("; ".join(parts), missing=tuple(absent), unknown=tuple(unknown))
        return got

    def render(self, stubs: Mapping[str, str], *, missing: str = "error", bind: bool = False) -> str:
        """Return the PTX with every instance of every site replaced by its stub.

        ``stubs`` maps site names to PTX text written against the sites' registers
        (``%`` + :attr:`Variable.reg`). Sites without a stub raise :class:`numptx.RenderError`
        unless ``missing="empty"`` (they become no-ops); names that match no site always raise.
        A list or tuple with one stub per site, in ``inj.sites`` order, skips the name lookups
        (the fastest form for templates with thousands of sites).

        ``bind=True`` writes each stub straight into the registers the template hands the site,
        dropping the site's copy frame (``.reg`` + ``mov`` lines) wherever the C core can show
        that this changes nothing (see "BINDING" in ``native/ptx_inject.h``); elsewhere the
        instance renders as usual. ptxas then has fewer instructions to assemble: the same
        computation (byte-identical machine code in the tests), 10–30 % sooner on a 512-site
        GEMM.

        >>> out = inj.render({"combine": "add.f32 %v_z, %v_x, %v_y;"})     # doctest: +SKIP
        """
        got = self._stub_values(stubs, missing)
        if bind and got:
            return self._render_c(got, lib.PTXINJ_RENDER_TAG | lib.PTXINJ_RENDER_BIND).decode(
                "utf-8", errors="surrogateescape")
        return self._join(got)

    def render_many(self, batch: Iterable[Mapping[str, str]], *, missing: str = "error",
                    bind: bool = False) -> list[str]:
        """Render a batch of stub dictionaries; the result list matches the batch order."""
        if bind:
            return [self.render(s, missing=missing, bind=True) for s in batch]
        return [self._join(self._stub_values(s, missing)) for s in batch]

    def render_bytes(self, stubs: Mapping[str, str], *, missing: str = "error",
                     bind: bool = False) -> bytes:
        """Like :meth:`render` but returns bytes, rendered by the C core into one buffer sized
        by a measuring pass (what nvJitLink takes)."""
        flags = lib.PTXINJ_RENDER_TAG | (lib.PTXINJ_RENDER_BIND if bind else 0)
        return self._render_c(self._stub_values(stubs, missing), flags)

    def _render_c(self, got, flags: int) -> bytes:
        self._check_types(got)
        try:
            enc = [s.encode() for s in got]
        except UnicodeEncodeError:   # text decoded with surrogateescape goes back byte for byte
            try:
                enc = [s.encode("utf-8", errors="surrogateescape") for s in got]
            except UnicodeEncodeError as e:
                raise RenderError(f"a stub is not valid text: {e}") from None
        blob = b"".join(enc)
        offsets = array("I", accumulate(map(len, enc), initial=0))
        if len(blob) >= 0xFFFFFFFF:
            raise RenderError("stubs too large (4 GiB)")
        offs = ffi.from_buffer("uint32_t[]", offsets) if got else ffi.NULL
        size = ffi.new("size_t *")
        # the C core measures before it fills: with a buffer that fits (guessed from the last
        # render plus the stubs' size) one call does both; else it reports the size needed
        cap = max(self._last_size, len(self._data)) + 2 * len(blob) + 4096
        out = _raw_alloc("char[]", cap)
        st = lib.ptxinj_render(self._ctx, blob, len(blob), offs, flags, out, cap, size)
        if st == lib.PTXINJ_ERR_BUFFER_TOO_SMALL:
            cap = size[0]
            out = _raw_alloc("char[]", max(cap, 1))
            st = lib.ptxinj_render(self._ctx, blob, len(blob), offs, flags, out, cap, size)
        if st != lib.PTXINJ_OK:
            raise RenderError(f"render failed: {_status_text(st)}")
        n = size[0]
        self._last_size = n
        return ffi.buffer(out, n)[:]

    def _check_types(self, got) -> None:
        for name, stub in zip(self._names, got):
            if not isinstance(stub, str):
                raise RenderError(f"stub for site {name!r} must be PTX text (str), not "
                                  f"{type(stub).__name__}")

    def _join(self, got) -> str:
        if not got:
            return self.ptx
        template, per_instance, _ = self._plan()
        # one scratch copy of the piece list per thread: renders in parallel threads stay apart
        pieces = getattr(self._scratch, "pieces", None)
        if pieces is None:
            pieces = self._scratch.pieces = template.copy()
        pieces[1::2] = got if per_instance is None else per_instance(got)
        try:
            return "".join(pieces)
        except TypeError:
            self._check_types(got)
            raise

    def __repr__(self) -> str:
        return f"<PtxInject {self._n_sites} site(s), {len(self._data)} bytes>"
