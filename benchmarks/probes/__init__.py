"""One-off probes behind findings in ``benchmarks/NOTES.md``: each measured one question (a wait's cost,
a host-side piece of a call, the shards' timeline, a tuning sweep) and is kept so the finding can be
re-measured (``python -m benchmarks.probes.NAME``). They are not suites: ``python -m benchmarks`` runs
the suites, one per model plus the primitives'."""
