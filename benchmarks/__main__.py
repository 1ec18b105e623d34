"""Run benchmark suites side by side with the peers on this machine's GPU.

    python -m benchmarks rng                 # one suite
    python -m benchmarks all --out DIR       # every suite, JSON into DIR
    python -m benchmarks rng --small         # a quick smoke run

JSON goes to ``benchmarks/results/`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from pathlib import Path

# Suite name -> modules of this package, each with run(bench).
SUITES = {
    # rng_variates first: its validation-cost rows run before the peers start (see harness.Bench).
    "rng": ["rng_variates", "rng_fill"],
    "categorical": ["categorical"],
    "validation": ["validation"],
    "figure7": ["figure7"],
    "lda": ["lda"],
    "mixture": ["mixture"],
    "bayesnet": ["bayesnet"],
    "glm": ["glm"],
    "ising": ["ising"],
    "nested": ["nested"],
    "scaling": ["scaling"],
}


def _present(module: str) -> bool:
    return (Path(__file__).resolve().parent / f"{module}.py").exists()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", choices=[*SUITES, "all"])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--small", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args(argv)

    from .harness import Bench, format_table

    failed = False
    suites = [s for s in SUITES if all(_present(m) for m in SUITES[s])] if args.suite == "all" else [args.suite]
    for suite in suites:
        if not all(_present(m) for m in SUITES[suite]):
            print(f"# suite {suite} is not in this version of the benchmarks", file=sys.stderr)
            failed = True
            continue
        bench = Bench(small=args.small)
        bench.suite, bench.out_dir = suite, args.out
        print(f"# suite {suite} on {bench.device}: copy bandwidth {bench.copy_bandwidth / 1e9:.0f} GB/s "
              f"(read + write), memset {bench.write_bandwidth / 1e9:.0f} GB/s", flush=True)
        for name in SUITES[suite]:
            try:
                module = importlib.import_module(f"{__package__}.{name}")
                module.run(bench)
            except Exception:
                failed = True
                print(f"!! {suite}/{name} failed:", file=sys.stderr)
                traceback.print_exc()
                bench.record(name, "gpumcmc", None, 0, note=traceback.format_exc(limit=3)[-300:])
            bench.cupy.get_default_memory_pool().free_all_blocks()
        path = bench.write(suite, args.out)
        print(format_table(bench.rows))
        print(f"# wrote {path}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
