"""PTX -> cubin with nvJitLink (through ``cuda.bindings``), the once-per-variant assembly.

nvJitLink releases the GIL, so calls from several threads assemble in parallel.

>>> cubin = ptx_to_cubin(rendered_ptx, arch="sm_90")        # doctest: +SKIP
"""
from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from ...errors import LinkError, NumptxError, ToolchainError
from ...site_layout import STUB_END, STUB_TAG
from .arch import normalize_arch
from .options import option_list

_LINE = re.compile(r"line (\d+); (error|warning|fatal)\s*:\s*(.*)")


def _nvjitlink():
    try:
        from cuda.bindings import nvjitlink
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ToolchainError("nvJitLink is unavailable: install numptx's dependencies "
                             "(pip install 'numba-cuda[cu13]')") from e
    return nvjitlink


@functools.lru_cache(maxsize=1)
def nvjitlink_version() -> tuple[int, int]:
    """(major, minor) of the nvJitLink in use."""
    return tuple(_nvjitlink().version())


def _stub_index(lines: list[str]) -> list[tuple[str, int] | None]:
    """For each j in 0..len(lines): the stub (site, its tag's line index) open after lines
    0..j-1, as :func:`_locate` walks back to it; one pass for all of a log's messages (a walk
    per message was quadratic: 8,000 failing lines of one stub took 26 s)."""
    out: list[tuple[str, int] | None] = [None]
    cur = None
    for i, line in enumerate(lines):
        s = line.lstrip()
        if s.startswith(STUB_END) or s.startswith((".entry", ".visible", ".func")):
            cur = None
        elif s.startswith(STUB_TAG):
            cur = (s[len(STUB_TAG):].strip(), i)
        out.append(cur)
    return out


def _locate(lines: list[str], lineno: int,
            index: list | None = None) -> tuple[str | None, int | None, str]:
    """Map a PTX line number to (site, line within the stub, text) using the comment lines that
    render writes around each stub: ``// PTX_INJECT_STUB <site>`` ... ``// PTX_INJECT_STUB_END``
    (``index``: :func:`_stub_index` of ``lines``, to look up instead of walking back)."""
    text = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
    if index is not None:
        at = min(lineno, len(lines) + 1) - 1
        got = index[at] if at > 0 else None
        return (got[0], lineno - 1 - got[1], text) if got else (None, None, text)
    for i in range(min(lineno, len(lines) + 1) - 2, -1, -1):
        s = lines[i].lstrip()
        if s.startswith(STUB_END):
            break
        if s.startswith(STUB_TAG):
            return s[len(STUB_TAG):].strip(), lineno - 1 - i, text
        if s.startswith((".entry", ".visible", ".func")):
            break
    return None, None, text


def _stub_before(lines: list[str], lineno: int) -> int | None:
    """The line number of a stub's last line when only comments and blank lines separate it
    from PTX line ``lineno``: ptxas reports a statement left open at the end of a stub (a
    missing ``;``) at the next token, past the stub's end marker."""
    passed_end = False
    for i in range(min(lineno, len(lines) + 1) - 2, -1, -1):
        s = lines[i].strip()
        if not s:
            continue
        if s.startswith("//"):
            passed_end = passed_end or s.startswith(STUB_END)
            continue
        return i + 1 if passed_end else None
    return None


_MAX_LINES = 20   # of messages and of the quoted log in a LinkError's text


def _explain(ptx: str, log: str, arch: str) -> LinkError:
    lines = ptx.split("\n")         # as ptxas counts lines ("\r", "\u2028"... end none)
    found = []
    for m in _LINE.finditer(log):
        if m.group(2) != "warning":
            found.append((int(m.group(1)), m.group(3).strip()))
    if not found:
        hint = ""
        m = re.search(r"^\s*\.target\s+(\w+)", ptx, re.M)
        if "higher than" in log and m:
            hint = (f": the PTX targets {m.group(1)}; compile the template for {arch} or lower "
                    f"(cuda_to_ptx(..., arch={arch!r}))")
        return LinkError(f"nvJitLink could not assemble the PTX for {arch}{hint}\n--- nvJitLink log ---\n"
                         f"{log.rstrip()}", log=log)
    # one line per (site, stub line, message): a stub fails the same way in every instance
    groups: dict = {}
    index = _stub_index(lines)
    for lineno, msg in sorted(set(found)):
        site, stub_lineno, text = _locate(lines, lineno, index)
        if site is None and msg.startswith("Parsing error"):
            last = _stub_before(lines, lineno)
            if last is not None:
                site, stub_lineno, text = _locate(lines, last)
                if site is not None:
                    lineno, msg = last, f"{msg} (at the end of the stub: a missing ';'?)"
        key = (site, stub_lineno, msg) if site is not None else (None, lineno, msg)
        g = groups.setdefault(key, [lineno, text, 0])
        g[2] += 1
    msgs, first_site, first_stub_line = [], None, None
    for (site, stub_lineno, msg), (lineno, text, count) in groups.items():
        if site is not None:
            where = f"PTX line {lineno}" if count == 1 else f"{count} instances, first at PTX line {lineno}"
            msgs.append(f"  stub of site {site!r}, stub line {stub_lineno} ({where}): {text!r}: {msg}")
            if first_site is None:
                first_site, first_stub_line = site, text
        else:
            msgs.append(f"  PTX line {lineno}: {text!r}: {msg}")
    if len(msgs) > _MAX_LINES:
        msgs[_MAX_LINES:] = [f"  ... and {len(msgs) - _MAX_LINES} more"]
    log_lines = log.rstrip().splitlines()
    shown = "\n".join(log_lines[:_MAX_LINES]) + (
        f"\n... {len(log_lines) - _MAX_LINES} more lines (LinkError.log has them all)"
        if len(log_lines) > _MAX_LINES else "")
    head = (f"invalid stub for site {first_site!r}" if first_site else "PTX does not assemble")
    return LinkError(f"{head} ({arch}):\n" + "\n".join(msgs) + f"\n--- nvJitLink log ---\n{shown}",
                     log=log, site=first_site, stub_line=first_stub_line)


def ptx_to_cubin(ptx: str | bytes, arch: str | int | tuple = "sm_90", *,
                 options: str | Iterable[str] = (), name: str = "numptx.ptx") -> bytes:
    """Assemble PTX text to a cubin for ``arch`` with nvJitLink and return its bytes.

    ``options`` are extra nvJitLink options (``"-O3"``, ``"-lineinfo"``, ``"-maxrregcount=64"``).
    A failure raises :class:`numptx.LinkError` with the nvJitLink log; when the failing line is in
    a stub injected by :meth:`numptx.PtxInject.render`, the message names the site and quotes the
    stub line.
    """
    number, suffix = normalize_arch(arch)
    arch_s = f"sm_{number}{suffix}"
    if not isinstance(ptx, (str, bytes, bytearray, memoryview)):
        raise NumptxError(f"ptx_to_cubin takes PTX text (str or bytes), not {type(ptx).__name__}")
    try:
        data = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
    except UnicodeEncodeError as e:
        raise LinkError(f"ptx_to_cubin: the PTX is not encodable text ({e})") from None
    if not data.strip(b"\0 \t\r\n"):
        raise LinkError(f"ptx_to_cubin: empty PTX for {arch_s}")
    if not data.endswith(b"\0"):
        data += b"\0"
    opts = [f"-arch={arch_s}", *option_list(options, "ptx_to_cubin(options=)")]
    nvj = _nvjitlink()
    try:
        handle = nvj.create(len(opts), opts)
    except nvj.nvJitLinkError as e:
        raise LinkError(f"nvJitLink rejected the options {opts}: {e}", options=tuple(opts)) from None
    try:
        try:
            nvj.add_data(handle, nvj.InputType.PTX, data, len(data), name)
            nvj.complete(handle)
        except nvj.nvJitLinkError:
            size = nvj.get_error_log_size(handle)
            buf = bytearray(size)
            if size:
                nvj.get_error_log(handle, buf)
            log = bytes(buf).rstrip(b"\0").decode(errors="replace")
            text = ptx if isinstance(ptx, str) else data.decode(errors="replace")
            err = _explain(text, log, arch_s)
            err.options = tuple(opts)
            raise err from None
        size = nvj.get_linked_cubin_size(handle)
        cubin = bytearray(size)
        nvj.get_linked_cubin(handle, cubin)
    finally:
        nvj.destroy(handle)
    return bytes(cubin)
