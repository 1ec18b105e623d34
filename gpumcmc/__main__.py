"""The gpumcmc command line: ``python -m gpumcmc demo`` and ``python -m gpumcmc info``."""

from __future__ import annotations

import argparse
import sys

_DESCRIPTION = """\
gpumcmc: GPU-first parallel MCMC, with a NumPy twin on machines without a GPU.
Run 'python -m gpumcmc demo --help' for the demo's options."""

_DEMO_EPILOG = """\
examples:
  python -m gpumcmc demo                  every part (small settings without a GPU)
  python -m gpumcmc demo lda glm --out plots
  python -m gpumcmc demo --full mixture   the GPU-sized settings"""


def _parser():
    from . import __version__
    from .demo import PARTS

    parser = argparse.ArgumentParser(prog="python -m gpumcmc", description=_DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gpumcmc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{demo,info}")
    demo = sub.add_parser("demo", help="fit every model on built-in data, print a summary of each, write plots",
                          description="Fit every model (or the parts named) on built-in data, print a\n"
                                      "summary of each part as it finishes, and write PNG plots.",
                          epilog=_DEMO_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("parts", nargs="*", metavar="PART",
                      help=f"parts to run (default: all), from: {' '.join(PARTS)}")
    demo.add_argument("--out", default="gpumcmc-demo", help="folder for the PNG plots (default: ./gpumcmc-demo)")
    size = demo.add_mutually_exclusive_group()
    size.add_argument("--small", dest="small", action="store_true", default=None,
                      help="small settings (the default without a GPU)")
    size.add_argument("--full", dest="small", action="store_false", help="full settings (the default on a GPU)")
    sub.add_parser("info", help="print the version, backend, device and CuPy/CUDA versions",
                   description="Print the version, the backend, the device and the CuPy/CUDA versions.")
    return parser, demo


def main(argv=None) -> int:
    parser, demo_parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        from . import demo as _demo

        # Names are checked before anything runs, with the demo's own usage line.
        unknown = [p for p in args.parts if p not in _demo.PARTS]
        if unknown:
            demo_parser.error(f"unknown part(s) {' '.join(unknown)}; choose from {' '.join(_demo.PARTS)}")
        from .backend import BackendError

        try:
            results = _demo.run(args.parts or None, args.out, args.small)
        except (ValueError, BackendError) as e:  # settings, missing packages, a backend that cannot run
            demo_parser.error(str(e))
        return 1 if any("error" in r for r in results) else 0
    if args.command in (None, "info"):
        from ._info import format_info, info

        print(format_info(info()))
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
