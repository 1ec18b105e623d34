"""Walking a state: the leaves of nested NamedTuples by path, for the run driver and the CUDA graph step, and
mapping the arrays inside nested containers, for pickles."""

from __future__ import annotations


def _fields(obj, prefix: str = "", sequences: bool = False):
    """(path, value) for every leaf of a (nested) NamedTuple; with ``sequences``, plain tuples and lists are
    walked too, item ``i`` at path ``.../i`` (a per-shard tuple of arrays in a sharded state)."""
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        for name in obj._fields:
            yield from _fields(getattr(obj, name), f"{prefix}{name}/", sequences)
    elif sequences and isinstance(obj, (tuple, list)):
        for i, item in enumerate(obj):
            yield from _fields(item, f"{prefix}{i}/", sequences)
    else:
        yield prefix.rstrip("/"), obj


def _tree_map(value, fn):
    """``value`` with ``fn`` applied to every array inside tuples, NamedTuples, lists and dicts (other leaves
    as they are)."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_tree_map(v, fn) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_tree_map(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _tree_map(v, fn) for k, v in value.items()}
    return fn(value) if hasattr(value, "shape") and hasattr(value, "dtype") else value
