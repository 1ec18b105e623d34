"""Command line: ``python -m gpumcmc demo [PART ...]`` and ``python -m gpumcmc info``."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpumcmc", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="fit every model on built-in data, print summaries, write plots")
    demo.add_argument("parts", nargs="*", help="model parts to run (default: all): lda mixture bayesnet glm "
                                               "ising nested")
    demo.add_argument("--out", default="gpumcmc-demo", help="folder for the PNG plots (default ./gpumcmc-demo)")
    size = demo.add_mutually_exclusive_group()
    size.add_argument("--small", dest="small", action="store_true", default=None,
                      help="small settings (the default without a GPU)")
    size.add_argument("--full", dest="small", action="store_false", help="full settings (the default on a GPU)")
    sub.add_parser("info", help="print the version, backend, device and CuPy/CUDA versions")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from . import demo as _demo

        try:
            results = _demo.run(args.parts or None, args.out, args.small)
        except ValueError as e:
            parser.error(str(e))
        return 1 if any("error" in r for r in results) else 0
    if args.command in (None, "info"):
        from .info import format_info, info

        print(format_info(info()))
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
