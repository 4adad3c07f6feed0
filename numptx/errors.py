"""The numptx exception hierarchy.

Every error numptx raises derives from :class:`NumptxError`, so one ``except`` catches them all::

    try:
        nx.PtxInject(ptx).render({"combine": stub})
    except nx.NumptxError as e:
        print(e)
"""
from __future__ import annotations


class NumptxError(Exception):
    """Base class of every numptx error."""


class PtxParseError(NumptxError):
    """PTX with injection markers that numptx cannot read.

    ``line`` is the 1-based PTX line at fault (or None), ``site`` the site involved (or None).
    """

    def __init__(self, message: str, *, line: int | None = None, site: str | None = None,
                 code: str | None = None):
        self.line, self.site, self.code = line, site, code
        where = f"PTX line {line}: " if line is not None else ""
        super().__init__(where + message)


class RenderError(NumptxError):
    """Stubs that do not match the sites of a template (missing or unknown site names)."""

    def __init__(self, message: str, *, missing: tuple[str, ...] = (), unknown: tuple[str, ...] = ()):
        self.missing, self.unknown = missing, unknown
        super().__init__(message)


class AnnotationError(NumptxError):
    """A CUDA-side annotation (``PTX_INJECT`` macro or comment block) that is malformed.

    ``line`` is the 1-based line of the CUDA source at fault.
    """

    def __init__(self, message: str, *, line: int | None = None, source_name: str = "<source>"):
        self.line = line
        where = f"{source_name}:{line}: " if line is not None else ""
        super().__init__(where + message)


class TypeRegistryError(NumptxError):
    """An unknown data type name, or a bad :func:`numptx.register_type` call."""


class CompileError(NumptxError):
    """NVRTC failed to compile CUDA C++ to PTX; ``log`` holds the compiler log."""

    def __init__(self, message: str, *, log: str = "", options: tuple[str, ...] = ()):
        self.log, self.options = log, options
        super().__init__(message + (f"\n--- NVRTC log ---\n{log.rstrip()}" if log.strip() else ""))


class LinkError(NumptxError):
    """nvJitLink failed to assemble PTX to a cubin; ``log`` holds its error log.

    When the failing PTX line lies in an injected stub, ``site`` names the site and
    ``stub_line`` quotes the stub line at fault.
    """

    def __init__(self, message: str, *, log: str = "", options: tuple[str, ...] = (),
                 site: str | None = None, stub_line: str | None = None):
        self.log, self.options, self.site, self.stub_line = log, options, site, stub_line
        super().__init__(message)


class ToolchainError(NumptxError):
    """A CUDA toolchain component (NVRTC, nvJitLink) is missing or unusable."""


class NumptxWarning(UserWarning):
    """Base class of the warnings numptx issues (``warnings.simplefilter("error",
    nx.NumptxWarning)`` turns them all into errors)."""


class StubNulWarning(NumptxWarning):
    """A stub ended in NUL bytes (mm-ptx-py returns its stubs with a C string's terminating
    ``'\\x00'``); numptx trimmed them before nvJitLink, which would refuse the PTX."""


def trim_stub_nul(text: str, site: str) -> tuple[str, bool]:
    """``(text without trailing NUL bytes, whether any were trimmed)``. A NUL anywhere else
    raises :class:`RenderError` naming the site and stub line: PTX text never holds one."""
    if "\0" not in text:
        return text, False
    body = text.rstrip("\0")
    k = body.find("\0")
    if k >= 0:
        lineno = body.count("\n", 0, k) + 1
        line = body.splitlines()[lineno - 1]
        raise RenderError(f"the stub of site {site!r} contains a NUL character inside its text "
                          f"(stub line {lineno}: {line!r}); PTX text holds none: remove it")
    return body, True


def warn_from_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the first frame outside the numptx package (the user's
    line), whatever the depth of numptx's own calls."""
    import os
    import sys
    import warnings
    from types import FrameType
    pkg = os.path.dirname(os.path.abspath(__file__)) + os.sep
    level = 2
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(pkg):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
