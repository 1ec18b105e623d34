"""Input checks shared by every public function.

Checks on values (NaN, sign, positive definiteness) read the data; on CuPy
arrays each such check forces a device synchronisation (marked
``# synchronize!``). Samplers call public functions inside their sweeps, so
these value checks can be switched off, globally or for a block::

    gpumcmc.set_validation(False)          # globally
    with gpumcmc.validation(False): ...    # for a block

Cheap checks on metadata (dtype, shape, empty input) always run.

Inside a sampler's sweep, value checks can be deferred instead of switched
off: in a ``with deferred():`` block a check on CuPy data records its verdict
on the device, with no synchronisation, and :func:`check` (called where the
run driver synchronises anyway) reads every verdict at once and raises the
first failure, naming the call::

    with gpumcmc.deferred_validation():
        for _ in range(n):
            z = gpumcmc.categorical(w, rng)   # no host sync here
        gpumcmc.check()                       # one sync; ValueError if any call saw bad input

On NumPy, checks cost no synchronisation, so they raise at once even when
deferred, and :func:`check` only reports what is pending from CuPy calls.
"""

from __future__ import annotations

import contextlib
import functools
import threading

import numpy as np

from . import _status

__all__ = [
    "check",
    "check_finite",
    "check_float_dtype",
    "check_positive",
    "check_real",
    "deferred",
    "deferring",
    "report",
    "set_validation",
    "validating",
    "validation",
]

class _State(threading.local):
    """This thread's settings. Class attributes give every thread the defaults,
    so reads never miss (a missed ``getattr`` default costs an exception inside,
    on every call of a checked function)."""

    on = True        # value checks on
    deferred = 0     # depth of deferred() blocks
    pending = None   # verdicts recorded by report() since the last check()


_state = _State()
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def validating() -> bool:
    """True when value checks (which may synchronise the GPU) are on."""
    return _state.on


def set_validation(on: bool) -> None:
    """Turn value checks on or off for this thread (on by default)."""
    _state.on = bool(on)


@contextlib.contextmanager
def validation(on: bool):
    """A block with value checks on or off, restoring the previous setting after."""
    old = validating()
    set_validation(on)
    try:
        yield
    finally:
        set_validation(old)


def deferring() -> bool:
    """True inside a :func:`deferred` block (value checks on CuPy data record, not raise)."""
    return _state.deferred > 0


@contextlib.contextmanager
def deferred():
    """A block in which value checks on CuPy data do not synchronise the GPU.

    Each check records its verdict on the device; :func:`check` reads them all
    with one synchronisation and raises the first failure. Blocks nest. Leaving
    the outermost block does not check: call :func:`check` where the host
    waits for the GPU anyway.
    """
    _state.deferred += 1
    try:
        yield
    finally:
        _state.deferred -= 1


_NONE = np.iinfo(np.int64).max


def _pending() -> dict:
    p = _state.pending
    if p is None:
        p = _state.pending = {"calls": 0, "messages": [], "words": {}}
    return p


def report(bad, message: str, index=None) -> None:
    """Raise ``ValueError(message)`` if ``bad`` (a 0-d boolean, host or device) is true.

    ``message`` may hold ``{index}``, filled from ``index`` (a 0-d integer,
    host or device: the first bad row or element). On CuPy inside
    :func:`deferred` nothing is read back: the verdict is kept on the device
    for :func:`check`. Otherwise a device verdict costs one synchronisation.
    """
    if isinstance(bad, (bool, np.bool_, np.ndarray)) or not deferring():
        if bool(bad):  # synchronize! (outside deferred blocks, on CuPy)
            raise ValueError(message.replace("{index}", "?" if index is None else str(int(index))))
        return
    import cupy

    p = _pending()
    call = p["calls"]
    p["calls"] += 1
    p["messages"].append(message)
    dev = cupy.cuda.runtime.getDevice()
    word = p["words"].get(dev)
    if word is None:
        word = p["words"][dev] = cupy.full(2, _NONE, dtype=np.int64)
    if isinstance(index, cupy.ndarray):
        idx = index.astype(np.int64)
    else:  # a host value: a kernel argument, not a host-to-device copy
        idx = cupy.full((), -1 if index is None else int(index), dtype=np.int64)
    first = bad & (word[0] == _NONE)
    word[0] = cupy.where(first, call, word[0])
    word[1] = cupy.where(first, idx, word[1])


def check() -> None:
    """Raise the first failure recorded by deferred value checks since the last call, and forget them.

    Returns None when nothing failed. Costs one synchronisation per device and
    stream that recorded checks (none when nothing is pending, e.g. on NumPy).
    The checks recorded by :func:`report` (on a call's arguments, made before
    its kernels run) come before those the kernels note themselves (see
    :mod:`gpumcmc._status`).
    """
    fused = _status.read_all() if _status.pending() else None  # synchronize! (once per stream with fused checks)
    p = _state.pending
    if p is not None and p["calls"]:
        _state.pending = None
        found = []
        for dev, word in p["words"].items():
            import cupy

            with cupy.cuda.Device(dev):
                call, index = (int(v) for v in word.get())  # synchronize!
            if call != _NONE:
                found.append((call, index))
        if found:
            call, index = min(found)
            msg = p["messages"][call].replace("{index}", str(index))
            raise ValueError(f"{msg} (the {_ordinal(call + 1)} value check recorded since the last gpumcmc.check())")
    if fused is not None:
        _state.pending = None
        err = ValueError(fused[1])
        err._gpumcmc_detailed = True  # the message names the call, the row and what to do
        raise err


def fused(describe, device=None, stream=None) -> tuple[int, int]:
    """The (status word address, call tag) arguments of a kernel that checks its own input,
    launched on ``device`` and ``stream`` (None: the current ones).

    (0, 0), no checks, with validation off, outside a deferred block (a
    public function's direct call runs deferred inside :func:`checked`), or
    for ``describe=None`` (an internal launch that asks for none).
    ``describe(code, index)`` gives the message should the kernel note bad
    input; see :mod:`gpumcmc._status`.
    """
    st = _state
    if describe is None or not st.on or st.deferred <= 0:
        return 0, 0
    return _status.ticket(describe, device, stream)


def checked(fn):
    """Run a public function so that its value checks cost at most one synchronisation.

    Outside :func:`deferred` blocks, with validation on, the call runs with
    its checks deferred and the recorded verdicts are read once at the end.
    Only if one failed is the call repeated with immediate checks, to raise
    its detailed message (that path may synchronise more: it ends in an error).
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        st = _state
        depth = st.deferred
        if depth > 0 or not st.on:
            return fn(*args, **kwargs)
        saved = st.pending
        st.pending = None
        try:
            st.deferred = depth + 1  # as `with deferred():`, inlined: this runs on every call
            try:
                result = fn(*args, **kwargs)
            finally:
                st.deferred = depth
            if st.pending is None:
                # Only kernels' own checks (the usual case): read their words
                # straight away, with nothing left to do after the wait but
                # return (none recorded: no wait at all).
                found = _status.read_all()  # synchronize! (once, and only when a kernel was told to check)
                if found is None:
                    return result
                err = ValueError(found[1])
            else:
                try:
                    check()  # synchronize! (once)
                    return result
                except ValueError as e:
                    err = e
                st.pending = None
                if not getattr(err, "_gpumcmc_detailed", False):
                    fn(*args, **kwargs)  # raises the detailed message
            raise err from None
        finally:
            st.pending = saved

    return wrapper


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def check_float_dtype(dtype, name: str = "dtype") -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in _FLOATS:
        raise TypeError(f"{name} must be float32 or float64, got {dt}; cast with .astype(numpy.float32) or float64.")
    return dt


def _xp(a):
    from .backend import get_array_module

    return get_array_module(a)


def check_finite(a, name: str) -> None:
    """Raise ValueError if ``a`` holds NaN or inf. Synchronises on CuPy."""
    if not validating():
        return
    xp = _xp(a)
    report(~xp.all(xp.isfinite(a)), f"{name} contains NaN or inf; every value must be finite.")


def check_positive(a, name: str, *, strict: bool = True) -> None:
    """Raise ValueError unless every value of ``a`` is finite and > 0 (>= 0 if not strict).

    Synchronises on CuPy.
    """
    if not validating():
        return
    check_finite(a, name)
    xp = _xp(a)
    bad = (a <= 0) if strict else (a < 0)
    what = "positive" if strict else "non-negative"
    if isinstance(bad, np.ndarray) or np.isscalar(bad):  # on the host: name the first one (no extra device work)
        if np.any(bad):
            i = int(np.argmax(np.ravel(bad)))
            raise ValueError(f"{name} must be {what}; {name} holds {np.ravel(a)[i]!s} at flat index {i}. Pass "
                             f"values {'> 0' if strict else '>= 0'}.")
        return
    report(xp.any(bad), f"{name} must be {what}; found values {'<= 0' if strict else '< 0'}.")


def check_int(value, name: str, minimum: int = 1, alternative: str = "") -> int:
    """``value`` as an int of at least ``minimum``: TypeError for what is not an integer (2.5, 3.0, "3",
    True), ValueError below ``minimum``, each naming the argument (``alternative``, e.g. "or None", is
    added to both messages). Reads only the value: no synchronisation."""
    alt = f" {alternative}" if alternative else ""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer{alt}, got {value!r} ({type(value).__name__}).")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}{alt}, got {value}.")
    return int(value)


def check_real(p, name: str) -> None:
    """Raise TypeError unless ``p`` holds real numbers (bool, integer or float).

    Reads only types and dtypes, so it costs no synchronisation and always
    runs. Without it NumPy and CuPy would read the string ``'2'`` as 2.0 and
    drop the imaginary part of a complex value with only a warning.
    """
    t = type(p)
    if t is float or t is int:  # the usual call: nothing to look at
        return
    dt = getattr(p, "dtype", None)
    if dt is None:
        if isinstance(p, (str, bytes)):
            raise TypeError(f"{name} must be a real number or an array of them, got the string {p!r}; "
                            "convert it first, e.g. float(x).")
        try:
            dt = np.asarray(p).dtype  # host data only: device arrays carry a dtype
        except (TypeError, ValueError) as e:
            raise TypeError(f"{name} must be a real number or an array of them, got {t.__name__} "
                            f"({e}).") from None
    kind = np.dtype(dt).kind
    if kind in "biuf":
        return
    if kind == "c":
        raise TypeError(f"{name} must be real, got complex values ({np.dtype(dt)}); pass the part you mean, "
                        "e.g. x.real or abs(x).")
    raise TypeError(f"{name} must hold real numbers, got dtype {np.dtype(dt)}; convert it first, "
                    "e.g. numpy.asarray(x, dtype=float).")


def gone(module: str, name: str, new: str):
    """A stand-in for the removed ``module.name``: calling it raises AttributeError naming ``new``, its
    replacement."""

    def moved(*args, **kwargs):
        raise AttributeError(f"{module}.{name} is gone: use {new}.")

    moved.__name__ = name
    moved.__doc__ = f"Gone: use {new}."
    return moved
