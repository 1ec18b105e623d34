"""The status word: bad input noted by the kernels that read it.

The kernels of :func:`gpumcmc.categorical` and its variants, and of the gamma,
beta and Dirichlet draws, check their input as they read it: no extra pass
over the data, no temporary arrays. The first bad value they meet goes to a
64-bit *status word* in mapped pinned memory (host memory that the GPU
writes directly; one word per thread, device and stream), laid out as in
``kernels_cu/status.cuh``::

    bits 63..44  the call (numbered from 0 since the word was last read)
    bits 43..4   the first bad row or element of that call
    bits  3..0   what is wrong (a code)

Kernels take the minimum, so the word names the earliest bad call and its
first bad row. Reading it needs the host to wait for the kernels: a direct
call waits once, at its end; inside :func:`gpumcmc.deferred_validation` no
call waits, and :func:`gpumcmc.check` reads every word at once. The host keeps,
per word, a short description of each call since the last read, to turn the
word into a message naming the call, the row and what to do.

Nothing here is imported by ``import gpumcmc`` unless a CuPy call needs it.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

NONE = (1 << 64) - 1
CALL_SHIFT = 44
INDEX_BITS = 40
CODE_BITS = 4
CALL_LIMIT = (1 << (64 - CALL_SHIFT)) - 2  # calls beyond it share its number

# Codes of kernels_cu/status.cuh.
NAN, INF, NEG, NEG_B, ZERO, OVERFLOW, ROWS, COLS, PARAM, PARAM_B, TINY = range(1, 12)

class _Local(threading.local):
    """This thread's words, by (device, stream pointer), and those with calls not read yet."""

    def __init__(self):
        self.words: dict = {}
        self.pending: list = []


_local = _Local()
syncs = 0  # waits for the GPU made to read words, for tests


class Word:
    """One status word: its host view, its device address and the calls noted since it was read."""

    __slots__ = ("host", "ptr", "calls", "stream")

    def __init__(self, device: int, stream):
        import cupy

        rt = cupy.cuda.runtime
        ptr = rt.hostAlloc(8, 2 | 1)  # cudaHostAllocMapped | cudaHostAllocPortable
        # Never freed: one word per thread, device and stream, for the life of the process.
        self.host = ctypes.c_uint64.from_address(ptr)  # .value reads the memory each time
        self.host.value = NONE
        # With unified addressing (every 64-bit platform CUDA supports) a mapped
        # allocation has the same address on the host and on the device.
        if not rt.deviceGetAttribute(41, device):  # cudaDevAttrUnifiedAddressing
            raise RuntimeError("gpumcmc's fused input checks need a GPU with unified addressing; "
                               "turn checks off with gpumcmc.set_validation(False).")
        self.ptr = ptr
        self.calls: list = []
        self.stream = stream

    def tag(self, describe) -> int:
        """Register the next call on this word (``describe(code, index) -> str``); its tag for the kernel."""
        n = len(self.calls)
        if not n:
            _local.pending.append(self)
        self.calls.append(describe)
        return min(n, CALL_LIMIT) << CALL_SHIFT

    def read(self):
        """Wait for the word's stream, then (call number, calls noted, call description, code, index) of
        its first failure, or None; reset. Everything but the read of the word itself happens before
        the wait, so a direct call returns as soon as the GPU is done."""
        global syncs
        calls = self.calls
        if not calls:
            return None
        self.calls = []
        host = self.host
        syncs += 1
        self.stream.synchronize()  # synchronize! (the one wait of a direct call)
        v = host.value
        if v == NONE:
            return None
        host.value = NONE
        call = v >> CALL_SHIFT
        index = (v >> CODE_BITS) & ((1 << INDEX_BITS) - 1)
        code = v & ((1 << CODE_BITS) - 1)
        return call, len(calls), calls[min(call, len(calls) - 1)], code, index


_cupy = None


def _cuda():
    """CuPy's ``cuda`` module, imported once (``ticket`` runs on every checked launch)."""
    global _cupy
    if _cupy is None:
        import cupy

        _cupy = cupy.cuda
    return _cupy


def ticket(describe, device=None, stream=None) -> tuple[int, int]:
    """(word address, tag) for a kernel launch on ``device`` and ``stream``
    (a CuPy Stream; None: the current ones, which callers that have them at
    hand pass, to save looking them up again).

    ``describe(code, index)`` turns the word's code and index into the error
    message, should this call meet bad input. The word is read by
    :func:`read_all` (which :func:`gpumcmc.check` and every direct call use).
    """
    if stream is None or device is None:
        cuda = _cupy or _cuda()
        if stream is None:
            stream = cuda.get_current_stream()
        if device is None:
            device = cuda.runtime.getDevice()
    key = (device, stream.ptr)
    word = _local.words.get(key)
    if word is None:
        word = _local.words[key] = Word(device, stream)
    return word.ptr, word.tag(describe)


def pending() -> bool:
    """True when a word of this thread has calls that were not read yet."""
    return bool(_local.pending)


def read_all():
    """Read every word of this thread with calls pending; the first failure as
    (call number, message) or None. One wait per word read."""
    words = _local.pending
    if not words:
        return None
    _local.pending = []
    found = None
    for word in words:
        got = word.read()
        if got is not None and found is None:
            call, n_calls, describe, code, index = got
            msg = describe(code, index)
            if n_calls > 1:
                msg += f" (call {call + 1} of the {n_calls} with fused checks since the word was last read)"
            found = call, msg
    return found


def at(index: int, shape: tuple):
    """``index`` (flat, C order) as an index into ``shape``: an int for 1-d, a tuple otherwise."""
    if len(shape) == 1:
        return int(index)
    if not shape:
        return ()
    return tuple(int(i) for i in np.unravel_index(int(index), shape))
