"""SASS, the machine code in a cubin, as text: ``nvdisasm`` from the ``numptx[tools]`` extra.

::

    pip install "numptx[tools]"         # nvdisasm and cuobjdump, as NVIDIA's CUDA 13 wheels

    text = sass_text(cubin)                      # every function of the module
    text = sass_text(cubin, "kernel")            # one kernel
    ins = sass_instructions(cubin)               # ['LDC R1, c[0x0][0x28]', 'S2R R0, SR_TID.X', ...]
    collections.Counter(i.split()[0] for i in ins)          # opcodes (predicates read '@P0')

Without ``nvdisasm`` a :class:`~numptx.jit.errors.ToolMissingError` says what to install. The
tool is looked for in :func:`tool_dirs`: the NVIDIA wheels' ``bin`` folders (the ``nvidia``
namespace package: ``cu13/bin``, ``cu12/bin``, ``cuda_nvdisasm/bin``), the folder
``cuda.pathfinder`` finds, ``$CUDA_HOME/bin`` and ``$CUDA_PATH/bin``, then ``PATH``.
(``cuobjdump -sass`` runs ``nvdisasm`` itself, so nvdisasm is the one tool needed.) nvdisasm of
CUDA 13 reads sm_75 and newer code.

:func:`sass_instructions` keeps the instruction lines of one function: the text between the
``/*offset*/`` column and the ``;`` (predicate, opcode with modifiers, operands), without
nvdisasm's comments. It leaves out what does no work: every ``NOP`` (ptxas pads each function
to a 128-byte boundary with them) and the ``BRA`` to itself that ptxas puts after the last
``EXIT`` (a guard against running past the end), dropped only when it is the function's last
instruction left and unpredicated.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import re
import shutil
import subprocess
import tempfile

from ...errors import NumptxError, ToolchainError
from .cubin_elf import STT_FUNC, CubinElf
from ..errors import ToolMissingError

__all__ = ["sass_text", "sass_instructions", "find_tool", "tool_dirs", "ToolMissingError"]

log = logging.getLogger(__name__)

INSTALL_HINT = 'pip install "numptx[tools]"'
#: where NVIDIA's wheels put their executables, under the ``nvidia`` namespace package
WHEEL_BIN_DIRS = ("cu13/bin", "cu12/bin", "cuda_nvdisasm/bin", "cuda_cuobjdump/bin",
                  "cuda_nvcc/bin")
#: seconds nvdisasm may take (a 512-site GEMM disassembles in well under one)
TIMEOUT_S = 300

_LINE = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/\s*(.*)$")
_LABEL = re.compile(r"^\s*([.\w$]+):\s*$")
_SELF_BRA = re.compile(r"^BRA(?:\.\w+)*\s+`?\(?([.\w$]+)\)?\s*$")


def tool_dirs() -> list[str]:
    """The folders :func:`find_tool` looks in, in order (see the module docstring)."""
    dirs: list[str] = []
    try:
        spec = importlib.util.find_spec("nvidia")
        roots = list(spec.submodule_search_locations or ()) if spec else []
    except (ImportError, ValueError):
        roots = []
    for root in roots:
        dirs += [os.path.join(root, *sub.split("/")) for sub in WHEEL_BIN_DIRS]
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
        found = find_nvidia_binary_utility("nvdisasm")
        if found:
            dirs.append(os.path.dirname(found))
    except Exception:   # noqa: BLE001 - an older cuda-pathfinder, or its search failed
        pass
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(os.path.join(os.environ[var], "bin"))
    dirs += [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    return list(dict.fromkeys(d for d in dirs if os.path.isdir(d)))


def find_tool(name: str) -> str:
    """The path of CUDA tool ``name`` (``"nvdisasm"``, ``"cuobjdump"``) in :func:`tool_dirs`;
    :class:`ToolMissingError` when none has it."""
    dirs = tool_dirs()
    found = shutil.which(name, path=os.pathsep.join(dirs)) if dirs else None
    if found is None:
        raise ToolMissingError(f"{name} is not installed: {INSTALL_HINT} (NVIDIA's "
                               f"nvidia-cuda-nvdisasm and nvidia-cuda-cuobjdump wheels), or put "
                               f"a CUDA toolkit's bin folder on PATH; looked in "
                               f"{len(dirs)} folder(s)", tool=name, searched=tuple(dirs))
    return found


def _function(elf: CubinElf, kernel: str):
    sym = next((s for s in elf.symbols if s.name == kernel and s.type == STT_FUNC), None)
    if sym is None:
        names = [k.name for k in elf.kernels()]
        raise NumptxError(f"no function {kernel!r} in the cubin; its kernels: "
                          f"{', '.join(names) or 'none'}")
    return sym


def sass_text(cubin: bytes, kernel: str | None = None) -> str:
    """The SASS of ``cubin`` as ``nvdisasm -c`` prints it: every function, or only function
    ``kernel`` (by name). Needs ``numptx[tools]`` (:class:`ToolMissingError` otherwise).

    >>> print(sass_text(v.cubin, "kernel"))        # doctest: +SKIP
            /*0000*/                   LDC R1, c[0x0][0x28] ;
    """
    elf = CubinElf(cubin)       # a CubinError for bytes that are not a cubin, before any tool
    args = ["-c"]
    if kernel is not None:
        args += ["-fun", str(_function(elf, kernel).index)]
    return _run(find_tool("nvdisasm"), args, elf)


def _run(tool: str, args: list[str], elf: CubinElf) -> str:
    fd, path = tempfile.mkstemp(suffix=".cubin", prefix="numptx-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(elf.data)
        try:
            r = subprocess.run([tool, *args, path], capture_output=True, text=True,
                               timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ToolchainError(f"{os.path.basename(tool)} could not run ({tool}): {e}") from None
    finally:
        try:
            os.unlink(path)
        except OSError:   # pragma: no cover - the temp folder vanished
            pass
    if r.returncode != 0:
        raise ToolchainError(f"{os.path.basename(tool)} failed (exit {r.returncode}) on a "
                             f"{elf.arch or 'cubin'} cubin ({tool}):\n{r.stderr.strip()}")
    log.debug("numptx: %s %s: %d lines", tool, " ".join(args), r.stdout.count("\n"))
    return r.stdout


def sass_instructions(cubin: bytes, kernel: str | None = None) -> list[str]:
    """The instructions of one kernel (by name; None: the cubin's only kernel), one string
    each, without NOPs and the closing self-branch (the rule is in the module docstring).

    >>> sass_instructions(v.cubin)[:2]            # doctest: +SKIP
    ['LDC R1, c[0x0][0x28]', 'S2R R0, SR_TID.X']
    """
    if kernel is None:
        names = [k.name for k in CubinElf(cubin).kernels()]
        if len(names) != 1:
            raise NumptxError(f"the cubin has {len(names)} kernels ({', '.join(names) or 'none'}):"
                              f" name one, sass_instructions(cubin, kernel=...)")
        kernel = names[0]
    return instruction_lines(sass_text(cubin, kernel))


def instruction_lines(text: str) -> list[str]:
    """The instructions of nvdisasm output ``text`` (one function) by the rule above."""
    out: list[str] = []
    label_before: list[str | None] = []      # the label right before each kept instruction
    label = None
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None:
            lm = _LABEL.match(line)
            if lm:
                label = lm.group(1)
            continue
        ins = " ".join(m.group(1).split(";", 1)[0].strip(" {}").split())
        if not ins or ins == "NOP":
            continue
        out.append(ins)
        label_before.append(label)
        label = None
    if out:
        m = _SELF_BRA.match(out[-1])
        if m and m.group(1) == label_before[-1]:
            out.pop()
    return out
