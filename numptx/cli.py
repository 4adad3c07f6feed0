"""The ``numptx`` command line.

    numptx demo [--arch sm_90]                 run the end-to-end demo on this machine
    numptx process a.cu b.cu -o outdir/        rewrite comment annotations into inline asm
    numptx sites kernel.cu|kernel.ptx          list the injection sites of a template
    numptx cache info|clear                    show or empty the cubin cache (NUMPTX_CACHE_DIR)
"""
from __future__ import annotations

import argparse
import logging
import os
import sys


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
        tmp = dest + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(result)
            os.replace(tmp, dest)
        except OSError as e:
            raise _InputError(f"cannot write {dest}: {e.strerror or e}") from None
        print(f"{path} -> {dest}")
    return 0


def _cmd_sites(args) -> int:
    import numptx as nx
    text = _read_text(args.file)
    ptx = text if args.file.endswith(".ptx") else nx.cuda_to_ptx(text, arch=args.arch, name=args.file)
    inj = nx.PtxInject(ptx)
    if not inj.sites:
        print("no injection sites")
    for site in inj.sites.values():
        print(f"{site.signature}  x{site.instances}")
        for v in site.variables:
            print(f"    {v.kind:<3} {v.dtype:<6} {v.name}  %{v.reg}")
    return 0


def _cmd_cache(args) -> int:
    from .jit.cache import default_cache
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
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="numptx", description="GPU kernel variants in microseconds.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="run the end-to-end demo")
    p.add_argument("--arch", default="sm_90")
    p.set_defaults(fn=_cmd_demo)
    p = sub.add_parser("process", help="rewrite comment-form annotations into inline asm")
    p.add_argument("files", nargs="+")
    p.add_argument("-o", "--output", required=True, help="output folder")
    p.set_defaults(fn=_cmd_process)
    p = sub.add_parser("sites", help="list the injection sites of a .cu or .ptx file")
    p.add_argument("file")
    p.add_argument("--arch", default="sm_90")
    p.set_defaults(fn=_cmd_sites)
    p = sub.add_parser("cache", help="show (info) or empty (clear) the cubin cache")
    p.add_argument("action", choices=("info", "clear"))
    p.set_defaults(fn=_cmd_cache)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    from .errors import NumptxError
    try:
        return args.fn(args)
    except NumptxError as e:
        print(f"numptx {args.command}: error: {e}", file=sys.stderr)
        return 1
    except _InputError as e:
        print(f"numptx {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
