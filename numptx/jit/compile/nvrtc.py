"""CUDA C++ -> PTX with NVRTC (through ``cuda.bindings``), the once-per-template compile.

>>> import numptx as nx
>>> ptx = nx.cuda_to_ptx('extern "C" __global__ void k(float* o) { o[0] = 1.0f; }')
>>> ".entry k" in ptx
True
"""
from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterable

from ...annotate import (check_macro_annotations, process_cuda, unquoted_site_name,
                        user_type_defines)
from ...errors import CompileError, ToolchainError
from .arch import normalize_arch
from .options import option_list

log = logging.getLogger(__name__)

HEADER_NAME = "ptx_inject.cuh"


def include_dir() -> str:
    """Folder of numptx's CUDA header ``ptx_inject.cuh`` (for ``nvcc -I``)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "include")


@functools.lru_cache(maxsize=1)
def _header_text() -> bytes:
    with open(os.path.join(include_dir(), HEADER_NAME), "rb") as f:
        return f.read()


#: the fixed-width integer names <cstdint> puts in namespace std (numptx_stdint.h defines them)
_STDINT_NAMES = tuple(f"{p}int{s}{k}_t" for p in ("", "u") for s in ("", "_least", "_fast")
                      for k in (8, 16, 32, 64)) + ("intptr_t", "uintptr_t", "intmax_t",
                                                  "uintmax_t")


@functools.lru_cache(maxsize=1)
def nvrtc_headers() -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """``(texts, names)`` of the headers numptx hands NVRTC: its own header as
    ``ptx_inject.cuh`` and under mm-ptx's name ``ptx_inject.h``, and the fixed-width integer
    types as ``stdint.h`` and ``cstdint`` (NVRTC ships no C library headers)."""
    def read(name: str) -> bytes:
        with open(os.path.join(include_dir(), name), "rb") as f:
            return f.read()
    stdint = read("numptx_stdint.h")
    cstdint = (b'#include "stdint.h"\nnamespace std {\n'
               + b"".join(f"using ::{n};\n".encode() for n in _STDINT_NAMES) + b"}\n")
    texts = (_header_text(), read("ptx_inject.h"), stdint, cstdint)
    return texts, (HEADER_NAME.encode(), b"ptx_inject.h", b"stdint.h", b"cstdint")


@functools.lru_cache(maxsize=1)
def _cuda_include_dir() -> str | None:
    """The CUDA toolkit headers shipped as wheels (cuda_fp16.h, ...), if present."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
        return find_nvidia_header_directory("cudart")
    except Exception:  # pragma: no cover - optional
        return None


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ToolchainError("NVRTC is unavailable: install numptx's dependencies "
                             "(pip install 'numba-cuda[cu13]')") from e
    return nvrtc


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC in use."""
    nvrtc = _nvrtc()
    err, major, minor = nvrtc.nvrtcVersion()
    return major, minor


def _check(nvrtc, err, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise CompileError(f"NVRTC {what} failed: {msg.decode(errors='replace')}")


def cuda_to_ptx(src: str, arch: str | int | tuple = "sm_90", *, options: str | Iterable[str] = (),
                name: str = "numptx_template.cu", include_paths: str | Iterable[str] = (),
                std: str = "c++17") -> str:
    """Compile CUDA C++ ``src`` to PTX text for ``arch`` with NVRTC.

    numptx's header (``PTX_INJECT`` macros) is included for you (``#include <ptx_inject.h>``,
    mm-ptx's name, and ``"ptx_inject.cuh"`` name it too), comment-form annotations are
    rewritten first (:func:`numptx.process_cuda`), and types registered with
    :func:`numptx.register_type` are defined. ``<stdint.h>`` and ``<cstdint>`` give the
    fixed-width integer types (``uint32_t``, ``int64_t`` ...) without a CUDA toolkit. The CUDA
    headers shipped as wheels (``cuda_fp16.h`` and friends) are on the include path. Errors
    raise :class:`numptx.CompileError` carrying the NVRTC log, with line numbers of ``src`` as
    written.

    >>> ptx = cuda_to_ptx(SRC, arch="sm_90")            # doctest: +SKIP
    """
    if not isinstance(src, str):
        raise CompileError(f"cuda_to_ptx: source must be str, not {type(src).__name__}")
    if "\0" in src:      # NVRTC takes a C string: it would silently drop the rest of the source
        raise CompileError(f"{name}:{src.count(chr(10), 0, src.index(chr(0))) + 1}: the source "
                           f"contains a NUL character")
    number, suffix = normalize_arch(arch)
    extra = option_list(options, "cuda_to_ptx(options=)")
    includes = option_list(include_paths, "cuda_to_ptx(include_paths=)")
    processed = process_cuda(src, source_name=name)
    check_macro_annotations(processed, source_name=name)
    full = (f'#include "{HEADER_NAME}"\n{user_type_defines()}#line 1 "{name}"\n{processed}').encode()

    opts = [f"--gpu-architecture=compute_{number}{suffix}", f"--std={std}",
            f"-I{include_dir()}"]
    cuda_inc = _cuda_include_dir()
    if cuda_inc:
        opts.append(f"-I{cuda_inc}")
    opts += [f"-I{p}" for p in includes]
    opts += extra

    nvrtc = _nvrtc()
    texts, names = nvrtc_headers()
    err, prog = nvrtc.nvrtcCreateProgram(full, name.encode(), len(texts), list(texts), list(names))
    _check(nvrtc, err, "program creation")
    try:
        try:
            enc = [o.encode() for o in opts]
        except UnicodeEncodeError as e:
            raise CompileError(f"cuda_to_ptx: an option is not encodable text: {e}") from None
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(enc), enc)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        # a fresh writable buffer each time: NVRTC writes into it (``b" " * 1`` would be the
        # interpreter's shared one-byte bytes object)
        buf = bytearray(max(size, 1))
        nvrtc.nvrtcGetProgramLog(prog, buf)
        compile_log = bytes(buf).rstrip(b"\0").decode(errors="replace")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            bare = unquoted_site_name(processed) if "__nx_t" in compile_log else None
            if bare is not None:      # NVRTC's errors name only the macros' temporaries
                raise CompileError(f"{name}:{bare[0]}: PTX_INJECT({bare[1]}, ...): the site name "
                                   f"is not a string literal; quote the site name: "
                                   f"PTX_INJECT(\"{bare[1]}\", ...)", log=compile_log,
                                   options=tuple(opts))
            raise CompileError(f"NVRTC could not compile {name} for compute_{number}{suffix}",
                               log=compile_log, options=tuple(opts))
        if compile_log.strip():
            log.debug("NVRTC log for %s:\n%s", name, compile_log)
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx = bytearray(max(size, 1))
        _check(nvrtc, nvrtc.nvrtcGetPTX(prog, ptx)[0], "getPTX")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return bytes(ptx).rstrip(b"\0").decode("ascii", errors="replace")
