"""Host time that naming a kernel's arguments adds to a launch, per kernel launched by name.

For each kernel that gpumcmc launches through gpumcmc._kernel_args, times a call with every argument
as a literal keyword (as the launchers write it) against building the same tuple by position, and
prints JSON: microseconds per call, median of 7 repeats. Needs no GPU (nothing is launched).
"""

import json
import statistics
import timeit

from gpumcmc import _kernel_args

KERNELS = [("bayesnet.cu", "bn_sweep"), ("bayesnet.cu", "bn_counts"), ("discrete.cu", "cat_prefix"),
           ("discrete_warp.cu", "cat_row_warp"), ("gamma.cu", "gamma_draw"), ("gamma.cu", "dirichlet_draw"),
           ("gamma.cu", "beta_draw"), ("ising.cu", "ising_multispin"), ("nested.cu", "sinusoid_slice"),
           ("rbm.cu", "rbm_bernoulli")]


def per_call(stmt: str, env: dict, number: int = 20000) -> float:
    return statistics.median(timeit.repeat(stmt, globals=env, number=number, repeat=7)) / number * 1e6


def main():
    out = {}
    for file, kernel in KERNELS:
        names = _kernel_args.signature(file, kernel).names
        env = {"_kernel_args": _kernel_args, "v": 1}
        named = per_call(f"_kernel_args.packed({file!r}, {kernel!r}, " + ", ".join(f"{n}=v" for n in names) + ")",
                         env)
        positional = per_call("(" + ", ".join("v" for _ in names) + ",)", env)
        out[kernel] = {"parameters": len(names), "named_us": round(named, 3), "positional_us": round(positional, 3),
                       "added_us": round(named - positional, 3)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
