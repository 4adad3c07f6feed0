"""What a kernel uses: registers, local, shared and constant memory, spills, threads per block.

Read from the cubin's own ELF sections (:mod:`numptx.jit.compile.cubin_elf`), so no CUDA tool is needed::

    v = tmpl.inject(combine=stub)
    print(v.resources)
    # kernel sm_90: 12 registers, 0 B local, spills 0 B stored / 0 B loaded, 0 B shared, ...
    v.resources.registers, v.resources.spill_stores
    v.sass()                                    # SASS text (pip install "numptx[tools]")
    cubin_resources(cubin)                      # {kernel name: Resources} of any cubin

``resources`` and ``sass()`` exist on CUDA C++ variants (:class:`numptx.jit.templates.template.Variant`),
numba variants (:class:`numptx.jit.numba.kernel.KernelVariant`, for the default signature) and packs
(:class:`numptx.jit.populations.pack.Pack`: one module, one kernel; ``[p.resources for p in packs]`` for
``pack_many``'s modules). They are read on first use and kept until the cubin changes.

Where each :class:`Resources` field comes from (checked field by field against
``cuobjdump --dump-resource-usage`` and nvJitLink's ``-verbose`` ptxas report, CUDA 13.5,
sm_75 to sm_120; ``tests/test_resources.py``):

============================ ==================================================================
``registers``                ``EIATTR_REGCOUNT`` in ``.nv.info`` (callees included: what the
                             driver allocates); cuobjdump's ``REG``
``local_bytes``              per-thread local memory: ``EIATTR_MIN_STACK_SIZE`` (the kernel's
                             stack frame plus its deepest chain of non-inlined callees; local
                             arrays and spills live there) plus any ``.nv.local.<k>`` section;
                             cuobjdump's ``STACK`` + ``LOCAL``
``spill_stores/_loads``      bytes the kernel's own code stores / loads to spill registers, as
                             ptxas ``-v`` reports them (below); None when not known
``shared_bytes``             static ``__shared__`` memory per block: ``.nv.shared.<k>`` less the
                             reserved part (dynamic shared memory is a launch argument)
``reserved_shared_bytes``    shared memory ptxas reserves for the system in each block that
                             uses shared memory (1 KiB from sm_90: the ``.nv.reservedSmem.cap``
                             symbol, or 1 KiB where nvJitLink 13.0 names only
                             ``.nv.reservedSmem.offset0``); cuobjdump's ``SHARED`` is
                             ``shared_bytes`` + this
``constant_bytes``           the module's ``__constant__`` data (``.nv.constant3``, cuobjdump's
                             "Common" ``CONSTANT[3]``), seen by every kernel of the module
``param_bytes``              the kernel's parameters (``EIATTR_CBANK_PARAM_SIZE``)
``constant_banks``           the kernel's own constant banks, bank -> bytes (``.nv.constant<N>.<k>``:
                             0 holds the parameters after the driver's area, 2 compiler
                             constants on sm_75/sm_80); cuobjdump's per-function ``CONSTANT[N]``
``launch_bounds``            ``(x, y, z)`` of ``__launch_bounds__``/``.maxntid``
                             (``EIATTR_MAX_THREADS``) or ``.reqntid`` (``EIATTR_REQNTID``); None
``max_threads_per_block``    x*y*z of ``launch_bounds``; without them 1024, the hardware limit
                             of every architecture. A kernel using more than 64 registers per
                             thread cannot launch 1024 threads either (65536 registers per
                             block): ``registers`` tells.
============================ ==================================================================

**Spills.** The ELF has no spill total, but ptxas 13 lists the offset of each spill and refill
instruction in ``.nv.info.<k>`` (``EIATTR_ANNOTATIONS``, kind ``SpillRefill``; nvdisasm prints
them as ``(*"SpillRefill"*)``). Each is an ``STL`` (store, opcode ``0x387``) or ``LDL`` (load,
``0x983``) of 4, 8 or 16 bytes (size field, bits 73-75 of the 128-bit instruction: 4, 5, 6).
Summed, they equal ptxas's "bytes spill stores / loads" on every kernel tried (32-, 64- and
128-bit spills, sm_75 to sm_120). A kernel with no annotation spills nothing when its stack frame
is empty, or when ptxas 13 or newer assembled it (``.note.nv.tkinfo``). Anything else (an older
ptxas, an instruction that is not STL/LDL, code before sm_75) gives None, not a guess. Spills in
non-inlined callees are theirs, as ptxas reports them.
"""
from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass, field

from .cubin_elf import (EIATTR_ANNOTATIONS, EIATTR_CBANK_PARAM_SIZE, EIATTR_FRAME_SIZE,
                        EIATTR_MAX_THREADS, EIATTR_MIN_STACK_SIZE, EIATTR_REGCOUNT,
                        EIATTR_REQNTID, EIFMT_SVAL, CubinElf, Section, Symbol)
from ..errors import CubinError, ToolMissingError
from .sass import sass_instructions, sass_text

__all__ = ["Resources", "cubin_resources", "kernel_resources", "sass_text", "sass_instructions",
           "CubinInspection", "ToolMissingError", "CubinError", "MAX_THREADS_PER_BLOCK"]

#: threads per block on every architecture CUDA supports (sm_20 on)
MAX_THREADS_PER_BLOCK = 1024
#: the system's shared memory per block from sm_90 (the driver's ReservedSharedMemoryPerBlock)
RESERVED_SMEM = 1024

_SPILL_REFILL = 1                  # EIATTR_ANNOTATIONS kind
_STL, _LDL = 0x387, 0x983          # opcodes, bits 0-11 of sm_70+ instructions
_WIDTH = {4: 4, 5: 8, 6: 16}       # the size field (bits 73-75) of STL/LDL: bytes
_SPILL_SM = 75                     # the first architecture the decoding is checked on


@dataclass(frozen=True)
class Resources:
    """What one kernel uses, read from its cubin (the module docstring says where each field
    comes from). Sizes in bytes; ``spill_*`` is None when unknown."""
    kernel: str
    arch: str | None
    registers: int
    local_bytes: int
    spill_stores: int | None
    spill_loads: int | None
    shared_bytes: int
    reserved_shared_bytes: int
    constant_bytes: int
    param_bytes: int
    max_threads_per_block: int
    launch_bounds: tuple[int, int, int] | None
    constant_banks: dict[int, int] = field(default_factory=dict, hash=False)

    def __str__(self) -> str:
        spills = ("spills unknown" if self.spill_stores is None or self.spill_loads is None else
                  f"spills {self.spill_stores} B stored / {self.spill_loads} B loaded")
        reserved = f" (+{self.reserved_shared_bytes} B reserved)" if self.reserved_shared_bytes else ""
        bound = "__launch_bounds__" if self.launch_bounds else "hardware limit"
        return (f"{self.kernel} {self.arch or ''}".rstrip() +
                f": {self.registers} registers, {self.local_bytes} B local, {spills}, "
                f"{self.shared_bytes} B shared{reserved}, {self.constant_bytes} B __constant__, "
                f"{self.param_bytes} B of parameters, up to {self.max_threads_per_block} threads "
                f"per block ({bound})")

    def as_dict(self) -> dict:
        """The fields as a plain dict (``constant_banks`` copied)."""
        return dataclasses.asdict(self)


def cubin_resources(cubin: bytes) -> dict[str, Resources]:
    """:class:`Resources` of every kernel of ``cubin``, by kernel name (symbol-table order).
    Bytes that are not a readable cubin raise :class:`~numptx.jit.errors.CubinError`.

    >>> res = cubin_resources(nx.ptx_to_cubin(ptx, "sm_90"))       # doctest: +SKIP
    >>> res["kernel"].registers
    12
    """
    elf = CubinElf(cubin)
    return {k.name: _resources(elf, k) for k in elf.kernels()}


def kernel_resources(cubin: bytes, kernel: str) -> Resources:
    """:class:`Resources` of kernel ``kernel`` of ``cubin`` (a NumptxError naming the kernels
    there when it has no such kernel)."""
    elf = CubinElf(cubin)
    for k in elf.kernels():
        if k.name == kernel:
            return _resources(elf, k)
    raise CubinError(f"no kernel {kernel!r} in the cubin; its kernels: "
                     f"{', '.join(k.name for k in elf.kernels()) or 'none'}")


def _size(elf: CubinElf, name: str) -> int:
    sec = elf.section(name)
    return sec.size if sec is not None else 0


def _resources(elf: CubinElf, k: Symbol) -> Resources:
    name = k.name
    text = elf.sections[k.shndx]
    regs = elf.function_values(EIATTR_REGCOUNT).get(k.index)
    if regs is None:                        # an older ELF ABI: the count sits in sh_info
        regs = text.info >> 24
    frame = elf.function_values(EIATTR_FRAME_SIZE).get(k.index)
    stack = elf.function_values(EIATTR_MIN_STACK_SIZE).get(k.index, frame or 0)
    records = elf.records(f".nv.info.{name}")
    bounds = None
    params = 0
    annotations: list[tuple[int, int]] = []
    for r in records:
        if r.attr in (EIATTR_MAX_THREADS, EIATTR_REQNTID) and r.format == EIFMT_SVAL \
                and len(r.payload) >= 12:
            if bounds is None or r.attr == EIATTR_REQNTID:
                bounds = struct.unpack_from("<III", r.payload)
        elif r.attr == EIATTR_CBANK_PARAM_SIZE and r.format != EIFMT_SVAL:
            params = r.value
        elif r.attr == EIATTR_ANNOTATIONS and r.format == EIFMT_SVAL:
            annotations += [struct.unpack_from("<II", r.payload, i)
                            for i in range(0, len(r.payload) - 7, 8)]
    shared_sec = elf.section(f".nv.shared.{name}")
    reserved = 0
    if shared_sec is not None:
        cap = elf.symbol(".nv.reservedSmem.cap")
        if cap is not None:
            reserved = min(cap.value, shared_sec.size)
        elif elf.symbol(".nv.reservedSmem.offset0") is not None:
            # nvJitLink 13.0 reserves the block but names only its offset (seen on an H200)
            reserved = min(RESERVED_SMEM, shared_sec.size)
    banks, module_constants = {}, 0
    for sec in elf.sections:
        if sec.name.startswith(".nv.constant"):
            bank, _, owner = sec.name[len(".nv.constant"):].partition(".")
            if not bank.isdigit():
                continue
            if owner == name:
                banks[int(bank)] = sec.size
            elif not owner and int(bank) != 0:
                module_constants += sec.size
    stores, loads = _spills(elf, text, annotations, frame)
    threads = MAX_THREADS_PER_BLOCK
    if bounds is not None and all(b > 0 for b in bounds):
        threads = bounds[0] * bounds[1] * bounds[2]
    return Resources(
        kernel=name, arch=elf.arch, registers=regs,
        local_bytes=stack + _size(elf, f".nv.local.{name}"),
        spill_stores=stores, spill_loads=loads,
        shared_bytes=(shared_sec.size - reserved) if shared_sec is not None else 0,
        reserved_shared_bytes=reserved, constant_bytes=module_constants, param_bytes=params,
        max_threads_per_block=threads, launch_bounds=tuple(bounds) if bounds else None,
        constant_banks=dict(sorted(banks.items())))


def _spills(elf: CubinElf, text: Section, annotations: list[tuple[int, int]],
            frame: int | None) -> tuple[int | None, int | None]:
    """Spill stores and loads in bytes (the rule is in the module docstring)."""
    offsets = [off for kind, off in annotations if kind == _SPILL_REFILL]
    if not offsets:
        if frame == 0:
            return 0, 0                      # no stack frame: nowhere to spill to
        release = elf.ptxas_release()
        return (0, 0) if frame is not None and release and release >= (13, 0) else (None, None)
    sm = int(elf.arch[3:]) if elf.arch else 0
    if sm < _SPILL_SM:
        return None, None
    code = elf.bytes_of(text)
    stores = loads = 0
    for off in offsets:
        if off % 16 or off + 16 > len(code):
            return None, None
        lo, hi = struct.unpack_from("<QQ", code, off)
        width = _WIDTH.get((hi >> 9) & 7)
        op = lo & 0xFFF
        if width is None or op not in (_STL, _LDL):
            return None, None
        if op == _STL:
            stores += width
        else:
            loads += width
    return stores, loads


class CubinInspection:
    """``resources`` and ``sass()`` for an object with ``cubin`` (bytes, built on first use)
    and ``entry`` (its kernel's name): variants and packs.

    >>> v.resources.registers, v.resources.shared_bytes      # doctest: +SKIP
    (12, 0)
    >>> print(v.sass())                                      # doctest: +SKIP
    """

    @property
    def resources(self) -> Resources:
        """What the kernel uses (:class:`Resources`), read from the cubin (built first if need
        be) on first use; read again only when the cubin changes."""
        cubin = self.cubin
        kept = getattr(self, "_resources_of", None)
        if kept is not None and kept[0] is cubin:
            return kept[1]
        res = kernel_resources(cubin, self.entry)
        self._resources_of = (cubin, res)
        return res

    def sass(self, kernel: str | None = None) -> str:
        """The SASS of the kernel (or of function ``kernel`` of the module) as nvdisasm prints
        it; needs ``pip install "numptx[tools]"``."""
        return sass_text(self.cubin, self.entry if kernel is None else kernel)
