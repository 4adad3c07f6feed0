"""The errors of building, launching and inspecting variants, and the one-line form failures
are listed in.

They live here, below every module that raises them, so that the build (:mod:`.build`), the
templates (:mod:`.template`), the launchers (:mod:`.launch`, :mod:`.cuda_launch`) and the cubin
readers (:mod:`.cubin_elf`, :mod:`.sass`) import them without importing each other; each is
re-exported where it was first defined (``numptx.jit.templates.template.BuildError``,
``numptx.jit.numba.launch.LaunchError``) and from ``numptx``.

>>> summary(NumptxError("invalid stub for site 'combine':\\n  bogus.f32 %v_z;\\n--- log ---"))
"invalid stub for site 'combine': bogus.f32 %v_z;"
"""
from __future__ import annotations

from ..errors import NumptxError, ToolchainError

__all__ = ["BuildError", "LaunchError", "CubinError", "ToolMissingError", "summary"]


class BuildError(NumptxError):
    """Some variants of a :meth:`Template.build_many` batch failed. ``errors`` maps each failing
    index to its exception; ``variants`` holds the built variants (None where one failed)."""

    def __init__(self, message: str, *, errors: dict[int, BaseException], variants: list):
        super().__init__(message)
        self.errors, self.variants = errors, variants


class LaunchError(NumptxError):
    """A variant that cannot be launched here (no GPU, unsupported kernel)."""


class CubinError(NumptxError):
    """Bytes that are not a cubin numptx can read (not an ELF for CUDA, truncated, a table
    pointing outside the file). ``offset`` is the byte offset at fault, or None."""

    def __init__(self, message: str, *, offset: int | None = None):
        self.offset = offset
        super().__init__(message + (f" (at byte {offset:#x})" if offset is not None else ""))


class ToolMissingError(ToolchainError):
    """A CUDA binary tool (``nvdisasm``) is not installed; the message says how to install it.
    ``tool`` names it, ``searched`` lists the folders looked in."""

    def __init__(self, message: str, *, tool: str, searched: tuple[str, ...] = ()):
        self.tool, self.searched = tool, searched
        super().__init__(message)


def summary(e: BaseException) -> str:
    """One line for a failed variant: the message's first line, and the next one when the
    first only introduces it (a LinkError's "invalid stub for site ...:" + the stub line)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if not lines:
        return ""
    if lines[0].endswith(":") and len(lines) > 1 and not lines[1].startswith("---"):
        return f"{lines[0]} {lines[1]}"
    return lines[0]
