"""Command line: ``python -m gpumcmc info``."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpumcmc", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("info", help="print the version, backend, device and CuPy/CUDA versions")
    args = parser.parse_args(argv)
    if args.command in (None, "info"):
        from .info import format_info, info

        print(format_info(info()))
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
