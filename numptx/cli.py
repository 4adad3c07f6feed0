"""The ``numptx`` command line.

    numptx demo [--arch sm_90]                 run the end-to-end demo on this machine
    numptx process a.cu b.cu -o outdir/        rewrite comment annotations into inline asm
    numptx sites kernel.cu|kernel.ptx          list the injection sites of a template
    numptx cache info|clear                    show or empty the cubin cache (NUMPTX_CACHE_DIR)
    numptx --version                           print numptx's version
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

from ._shadow import shadow_message, shadowing_folder
from ._version import __version__
from .files import atomic_write


class _InputError(Exception):
    """A file the command cannot read or write: one line on stderr, exit status 2."""


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise _InputError(f"{path}: not a UTF-8 text file (byte {e.start})") from None
    except OSError as e:
        raise _InputError(f"cannot read {path}: {e.strerror or e}") from None


def _cmd_demo(args) -> int:
    from .demo import run
    run(arch=args.arch)
    return 0


def _cmd_process(args) -> int:
    from .annotate import process_cuda
    try:
        os.makedirs(args.output, exist_ok=True)
    except OSError as e:
        raise _InputError(f"cannot create the output folder {args.output}: "
                          f"{e.strerror or e}") from None
    for path in args.files:
        src = _read_text(path)
        result = process_cuda(src, source_name=path)
        dest = os.path.join(args.output, os.path.basename(path))
        if os.path.abspath(dest) == os.path.abspath(path):
            raise SystemExit(f"numptx process: refusing to overwrite the input {path}; choose another -o")
        try:                        # a unique temporary file: two runs never share one
            atomic_write(dest, result.encode("utf-8"))
        except OSError as e:
            raise _InputError(f"cannot write {dest}: {e.strerror or e}") from None
        print(f"{path} -> {dest}")
    return 0


_NOT_CUDA = {".py": "a Python file", ".pyw": "a Python file", ".ipynb": "a notebook",
             ".pyc": "compiled Python"}


def _cmd_sites(args) -> int:
    import numptx as nx
    ext = os.path.splitext(args.file)[1].lower()
    if ext in _NOT_CUDA:
        raise _InputError(f"{args.file} is {_NOT_CUDA[ext]}; sites reads CUDA C++ (.cu, .cuh) or "
                          f"PTX (.ptx). For a template built in Python, print its sites there: "
                          f"for s in tmpl.sites.values(): print(s.signature)")
    text = _read_text(args.file)
    ptx = text if ext == ".ptx" else nx.cuda_to_ptx(text, arch=args.arch, name=args.file)
    inj = nx.PtxInject(ptx)
    if not inj.sites:
        print("no injection sites")
        return 0
    rows = [(v.kind, v.dtype, v.name, f"%{v.reg}") for s in inj.sites.values() for v in s.variables]
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(3)]
    for site in inj.sites.values():
        print(f"{site.signature}  x{site.instances}")
        for v in site.variables:
            print(f"    {v.kind:<{widths[0]}}  {v.dtype:<{widths[1]}}  {v.name:<{widths[2]}}  "
                  f"%{v.reg}".rstrip())
    return 0


def _cmd_cache(args) -> int:
    from .jit.compile.cache import default_cache
    cache = default_cache()
    if cache.directory is None:
        print("the disk cache is off (NUMPTX_CACHE=0)")
        return 0
    if args.action == "clear":
        n = cache.clear()
        print(f"removed {n} entr{'y' if n == 1 else 'ies'} from {cache.directory}")
        return 0
    info = cache.info()
    print(f"directory: {info.directory}")
    print(f"entries:   {info.entries}")
    print(f"size:      {info.bytes} bytes ({info.bytes / 2**20:.1f} MiB)")
    cap = cache.cap()
    print("cap:       " + ("none (NUMPTX_CACHE_MAX=none)" if cap is None else
                            f"{cap} bytes ({cap / 2**20:.1f} MiB; NUMPTX_CACHE_MAX): the least "
                            f"recently used entries go past it"))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="numptx", description="GPU kernel variants in microseconds.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    parser.add_argument("--version", action="version", version=f"numptx {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, summary: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=summary, description=text,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    p = command("demo", "run the end-to-end demo",
                "Compile a CUDA template with a site, inject stubs (PTX text, Stack PTX, a\n"
                "@ptx_expr formula), assemble cubins and, where a GPU is present, launch them.")
    p.add_argument("--arch", default="sm_90", help="architecture to assemble for (default sm_90)")
    p.set_defaults(fn=_cmd_demo)
    p = command("process", "rewrite comment-form annotations into inline asm",
                "Rewrite the /* PTX_INJECT ... */ comment annotations of CUDA files into inline\n"
                "asm that compiles without numptx's header; line numbers are kept.")
    p.add_argument("files", nargs="+", help="CUDA source files (.cu, .cuh)")
    p.add_argument("-o", "--output", required=True, help="output folder (not the input's own)")
    p.set_defaults(fn=_cmd_process)
    p = command("sites", "list the injection sites of a .cu or .ptx file",
                "List each injection site of a CUDA C++ file (compiled with NVRTC) or a PTX\n"
                "file: its signature, how many times it is inlined, and per variable the kind,\n"
                "type, name and the register stubs use (%v_<name>).")
    p.add_argument("file", help="a .cu/.cuh file (compiled) or a .ptx file (read as is)")
    p.add_argument("--arch", default="sm_90", help="architecture to compile .cu for (default sm_90)")
    p.set_defaults(fn=_cmd_sites)
    p = command("cache", "show (info) or empty (clear) the cubin cache",
                "Show where the cubin cache lives and how much it holds (info), or empty it\n"
                "(clear). The folder is NUMPTX_CACHE_DIR, else the XDG cache folder; its size\n"
                "is capped by NUMPTX_CACHE_MAX (default 2G; docs/config.md).")
    p.add_argument("action", choices=("info", "clear"), help="info or clear")
    p.set_defaults(fn=_cmd_cache)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    import numptx  # noqa: F401 - the package this command runs in: the real one, or a clone?
    folder = shadowing_folder()
    if folder is not None:
        print(f"numptx {args.command}: error: {shadow_message(folder)}", file=sys.stderr)
        return 2
    from .errors import NumptxError
    try:
        rc = args.fn(args)
        sys.stdout.flush()              # a closed pipe shows here, not in Python's exit flush
        return rc
    except BrokenPipeError:
        # the reader left (numptx sites k.cu | head): stop quietly, and keep Python's exit-time
        # flush of stdout from raising again
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 141                                  # 128 + SIGPIPE, as a shell reports it
    except NumptxError as e:
        print(f"numptx {args.command}: error: {e}", file=sys.stderr)
        return 1
    except _InputError as e:
        print(f"numptx {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
