"""Walking a state: the leaves of nested NamedTuples by path, for the run driver and the CUDA graph step."""

from __future__ import annotations


def _fields(obj, prefix: str = ""):
    """(path, value) for every leaf of a (nested) NamedTuple."""
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        for name in obj._fields:
            yield from _fields(getattr(obj, name), f"{prefix}{name}/")
    else:
        yield prefix.rstrip("/"), obj
