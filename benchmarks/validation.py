"""Suite ``validation``: only the validation-cost rows of the ``rng`` and ``categorical`` suites.

What the default path (checks on) costs beside validation off, at the sizes
of the issue that set the goal: gamma with 2^26 per-element shapes, Dirichlet
65,536 x 256, categorical 2^20 x 1024 and categorical_products on the paper's
corpus (3.07 M tokens, K = 1024). See ``_validation_cost.py`` for the rows.
"""


def run(bench) -> None:
    import gpumcmc

    from . import categorical, rng_variates

    rng_variates._default_path(bench, gpumcmc, 1 << (20 if bench.small else 26), 4096 if bench.small else 65_536)
    categorical._default_path(bench, gpumcmc)
