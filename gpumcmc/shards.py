"""Data-parallel shards: one part of the data per GPU, global statistics summed over NCCL.

A data-parallel sampler keeps a shard of the data and its local latent
variables on each GPU, computes local sufficient statistics there, sums them
over every GPU (an all-reduce), and then draws the global parameters from
the sums. Drawing them with the same counter-based key on every GPU gives the
same global draws everywhere, with no second message.

:class:`Shards` is that layout:

- ``Shards(devices=[0, 1])`` or ``Shards("all")`` drives several GPUs from
  one process (a workstation, a notebook). Launches on each GPU are
  asynchronous, so the GPUs work at once; :meth:`Shards.allreduce` sums
  through NCCL (``cupy.cuda.nccl``) in one group call.
- :func:`join_dask` sets up one NCCL communicator across the workers of a
  Dask cluster (one worker per GPU, as ``dask_cuda.LocalCUDACluster``
  starts), passing NCCL's unique id through the scheduler, so the same code
  spans machines: inside a task, :func:`worker_shards` returns that worker's
  :class:`Shards`.
- ``Shards(n_virtual=3)`` splits the data into three parts in this process on
  the NumPy backend. A model written against :class:`Shards` can then be
  tested without GPUs: its draws with three virtual shards must equal those
  with one.

Examples
--------
>>> import numpy as np
>>> from gpumcmc.shards import Shards
>>> sh = Shards(n_virtual=3)
>>> parts = sh.scatter(np.arange(10.0))
>>> [p.size for p in parts]
[4, 3, 3]
>>> sums = [p.sum(keepdims=True) for p in parts]
>>> sh.allreduce(sums)[0]
array([45.])
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Sequence

import numpy as np

from . import backend

__all__ = ["Shards", "Replica", "balanced_cuts", "one_device", "check_devices", "resolve", "join_dask",
           "free_communicators", "worker_shards"]

# NCCL's data types by NumPy dtype (ncclDataType_t values; the same in every
# NCCL 2.x release).
_NCCL_DTYPE = {
    np.dtype(np.int8): 0, np.dtype(np.uint8): 1, np.dtype(np.int32): 2, np.dtype(np.uint32): 3,
    np.dtype(np.int64): 4, np.dtype(np.uint64): 5, np.dtype(np.float16): 6, np.dtype(np.float32): 7,
    np.dtype(np.float64): 8,
}
_NCCL_SUM = 0

# Communicators set up by join_dask, by name, in this worker process.
_WORKER_COMMS: dict[str, "Shards"] = {}

# NCCL communicators over GPUs of this process, by (process id, GPU ids): made once and shared by every
# Shards over those GPUs. Making a set costs from a few tens of ms to a second and destroying one about
# half a second, so a fit that made and dropped its own would pay both, at a time the garbage collector
# picks (inside a later call, often). Kept out of gpumcmc._config.memo: clearing the memo would drop them
# undestroyed, to that same collector, and out of free_communicators' reach.
_COMMS: dict = {}
_COMMS_LOCK = threading.Lock()
# How many times free_communicators has destroyed them: a Shards made before a free holds destroyed
# handles, and raises where it would pass them to NCCL.
_FREED = 0


def _communicators(devices: list[int], xp) -> list:
    key = (os.getpid(), tuple(devices))   # a forked child makes its own
    with _COMMS_LOCK:   # two threads making Shards over the same GPUs make one set between them
        comms = _COMMS.get(key)
        if comms is None:
            with _keep_current(xp):  # NCCL's initAll leaves the last GPU current
                comms = _COMMS[key] = _nccl().NcclCommunicator.initAll(devices)
    return comms


def free_communicators() -> int:
    """Destroy the NCCL communicators that :class:`Shards` over GPUs keeps for reuse; returns how many sets.

    Every ``Shards(devices)`` over the same GPUs in a process shares one set of communicators, made by the
    first and kept until this call (or the process's end), so that repeated fits do not pay NCCL's set-up
    and teardown each time. Call it to give their GPU memory back; a later ``Shards`` makes new ones.
    A Shards made before the call raises RuntimeError where it would sum; make a new one.
    """
    global _FREED
    with _COMMS_LOCK:
        cp = backend.get_backend("cupy") if _COMMS else None
        mine = [k for k in _COMMS if k[0] == os.getpid()]
        for k in mine:
            comms = _COMMS.pop(k)
            with _keep_current(cp):
                for c in comms:
                    c.destroy()
        if mine:
            _FREED += 1
    return len(mine)


def _nccl():
    try:
        from cupy.cuda import nccl
    except Exception as err:  # ImportError, or CuPy built without NCCL
        raise RuntimeError(
            "NCCL is not available to CuPy here: install a CuPy wheel with NCCL support "
            "(pip install cupy-cuda12x or cupy-cuda13x, and nvidia-nccl-cu12/cu13), "
            "or use one GPU.") from err
    return nccl


_DEVICES = "devices must be 'all', a GPU id, a list of GPU ids or a gpumcmc.shards.Shards"


def check_devices(devices) -> None:
    """Raise ValueError/TypeError unless ``devices`` has the form an estimator's ``devices=`` takes.

    ``"all"``, a GPU id, or a list of distinct ids (a :class:`Shards` is not
    checked here). Only the form: no GPU is asked, so a CPU machine reports a
    mistake before it reports the missing GPU.
    """
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(f"{_DEVICES}, got {devices!r}.")
        return
    if isinstance(devices, (bool, np.bool_)):
        raise TypeError(f"{_DEVICES}, got {devices!r}.")
    ids = [devices] if isinstance(devices, (int, np.integer)) else devices
    try:
        ids = list(ids)
    except TypeError:
        raise TypeError(f"{_DEVICES}, got {devices!r}.") from None
    if not ids:
        raise ValueError("devices is empty: give at least one GPU id, or None for one device.")
    for d in ids:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"devices must list integer GPU ids; {d!r} is not one.")
        if d < 0:
            raise ValueError(f"GPU ids are >= 0, got {d}.")
    if len(set(int(d) for d in ids)) != len(ids):
        raise ValueError(f"devices lists a GPU twice ({ids}); give each GPU once (NCCL needs each once).")


def _device_ids(devices) -> list[int]:
    check_devices(devices)
    cp = backend.get_backend("cupy")
    count = cp.cuda.runtime.getDeviceCount()
    if isinstance(devices, str):
        return list(range(count))
    ids = [int(devices)] if isinstance(devices, (int, np.integer)) else [int(d) for d in devices]
    bad = [d for d in ids if not 0 <= d < count]
    if bad:
        raise ValueError(f"no GPU with id {bad[0]}: this machine has {count} (ids 0 to {count - 1}).")
    return ids


def bounds(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ranges covering ``range(n)``, the first ``n % parts`` one longer."""
    if n < 0 or parts < 1:
        raise ValueError(f"need n >= 0 and parts >= 1, got n={n}, parts={parts}.")
    q, r = divmod(int(n), int(parts))
    out, start = [], 0
    for i in range(parts):
        stop = start + q + (i < r)
        out.append((start, stop))
        start = stop
    return out


def balanced_cuts(sizes, parts: int) -> list[int]:
    """``parts + 1`` cuts of a sequence of items of positive ``sizes`` into contiguous runs of about equal
    total size: each inner cut is the item boundary nearest to ``r * sum / parts``, and every run holds
    at least one item (the caller checks that there are at least ``parts`` items). The same answer in
    every process, from the sizes alone."""
    ends = np.cumsum(np.asarray(sizes, dtype=np.int64))
    n, total = len(ends), int(ends[-1])
    cuts = [0]
    for r in range(1, parts):
        target = r * total / parts
        b = int(np.searchsorted(ends, target)) + 1   # the first cut with at least `target` before it
        if b > 1 and target - ends[b - 2] < ends[b - 1] - target:
            b -= 1                                   # the nearer boundary
        cuts.append(min(max(b, cuts[-1] + 1), n - (parts - r)))
    cuts.append(n)
    return cuts


def _virtual(n: int) -> "Shards":
    """``Shards(n_virtual=n)``, for unpickling."""
    return Shards(n_virtual=n)


def _no_gpus(what: str = "the data") -> ValueError:
    """The error for GPUs named where none can run (CuPy missing, or no device)."""
    return ValueError(f"devices names GPUs, and none is available here (CuPy does not import or sees no "
                      f"device): to split {what} on NumPy, pass devices=gpumcmc.shards.Shards(n_virtual=k), or "
                      "leave devices=None.")


class _AbsentGPUs:
    """A :class:`Shards` over GPUs, loaded (with the estimator it was given to) where those GPUs are not: the
    estimator's fitted results still load and predict; a fit with it says what to pass instead."""

    def __init__(self, devices, one: bool):
        self.devices, self.one = list(devices), bool(one)

    def __repr__(self) -> str:
        return f"Shards({self.devices}) (saved where those GPUs were; not available here)"

    def __reduce__(self):
        return _load_shards, (self.devices, self.one)


def _load_shards(devices, one: bool = False):
    """A pickled Shards over GPUs made again where they are here, else an :class:`_AbsentGPUs` placeholder:
    loading a fitted estimator must not need the GPUs it was fitted on."""
    if backend.cupy_available():
        count = backend.get_backend("cupy").cuda.runtime.getDeviceCount()
        if all(0 <= d < count for d in devices):
            return _OneDevice(len(devices), devices[0]) if one else Shards(devices)
    return _AbsentGPUs(devices, one)


class Shards:
    """The shards of one data-parallel model: which devices, and how to sum over them.

    Parameters
    ----------
    devices : "all", int, list of int, or None
        GPUs driven from this process. None (with ``n_virtual``) means the
        NumPy backend in this process.
    n_virtual : int, optional
        Number of parts on the NumPy backend, for running and testing the
        data-parallel logic without GPUs.
    """

    def __init__(self, devices=None, *, n_virtual: int | None = None):
        self._comms = None
        self._rank0 = 0
        self._sides: dict = {}  # GPU -> the side stream of allreduce_async
        if devices is None:
            n = 1 if n_virtual is None else n_virtual
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
                raise ValueError(f"n_virtual must be a positive integer, got {n_virtual!r}.")
            self.devices: list[int | None] = [None] * int(n)
            self.world = int(n)
            self.xp = np
            return
        if n_virtual is not None:
            raise ValueError("give devices (GPUs) or n_virtual (NumPy parts), not both.")
        check_devices(devices)  # the form first: a mistake is named before the missing GPU
        if not backend.cupy_available():
            raise _no_gpus()
        self.devices = _device_ids(devices)
        self.world = len(self.devices)
        self.xp = backend.get_backend("cupy")
        if self.world > 1:
            self._comms = _communicators(self.devices, self.xp)
            self._freed = _FREED   # shared communicators: None for join_dask's own (see close)

    def close(self) -> None:
        """Let go of the NCCL communicators.

        Communicators over GPUs of this process are shared by every Shards over
        the same GPUs and kept for reuse (:func:`free_communicators` destroys
        them); those of :func:`join_dask` are destroyed here. NCCL's teardown
        makes each communicator's GPU current; the caller's GPU stays current
        here, so arrays made afterwards land where they did before.
        """
        comms, self._comms = self._comms, None
        if comms and self.xp is not np and getattr(self, "_freed", None) is None:
            with _keep_current(self.xp):
                for c in comms:
                    c.destroy()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown, or CUDA already torn down)
            pass

    @classmethod
    def _from_comm(cls, comm, device: int, rank: int, world: int) -> "Shards":
        self = cls.__new__(cls)
        self.devices, self.world, self._rank0 = [device], world, rank
        self.xp = backend.get_backend("cupy")
        self._comms = [comm]
        self._sides = {}
        return self

    def __reduce__(self):
        """Copied and pickled as the call that makes it (``sklearn.base.clone`` of an estimator given one);
        over GPUs the copy shares the process's communicators. A Dask worker's cannot be copied."""
        if self._rank0 != 0 or len(self.devices) != self.world:
            raise TypeError("This Shards is a Dask worker's part of a larger group (its communicator spans "
                            "processes): it cannot be copied or pickled. Give the estimator devices='all' or "
                            "a list of GPU ids, or make the Shards inside the worker.")
        if self.devices[0] is None:
            return _virtual, (self.world,)
        return _load_shards, (list(self.devices), False)

    def __len__(self) -> int:
        return len(self.devices)

    def __repr__(self) -> str:
        where = "NumPy" if self.devices[0] is None else f"GPUs {self.devices}"
        return f"Shards({where}, ranks {self._rank0}..{self._rank0 + len(self) - 1} of {self.world})"

    @property
    def ranks(self) -> list[int]:
        """The global rank of each local shard."""
        return list(range(self._rank0, self._rank0 + len(self)))

    @contextlib.contextmanager
    def on(self, i: int):
        """Run the block on local shard ``i``'s device (a no-op on the NumPy backend)."""
        dev = self.devices[i]
        if dev is None:
            yield
        else:
            with self.xp.cuda.Device(dev):
                yield

    def each(self, items, fn) -> list:
        """``[fn(i, items[i]) for each local shard i]``, each call on shard ``i``'s device."""
        out = []
        for i, item in enumerate(items):
            with self.on(i):
                out.append(fn(i, item))
        return out

    def bounds(self, n: int) -> list[tuple[int, int]]:
        """The ``[start, stop)`` rows of ``n`` that each local shard holds."""
        every = bounds(n, self.world)
        return [every[r] for r in self.ranks]

    def scatter(self, x, axis: int = 0) -> list:
        """This process's parts of ``x`` along ``axis``, each on its shard's device."""
        x = backend.to_host(x) if self.xp is np else x
        out = []
        for i, (a, b) in enumerate(self.bounds(x.shape[axis])):
            part = _slice(x, a, b, axis)
            with self.on(i):
                # cupy.asarray would keep a part on the GPU it is on; a copy made under the
                # shard's device lands there (a peer copy between GPUs).
                out.append(np.ascontiguousarray(part) if self.xp is np else self.xp.array(part, copy=True, order="C"))
        return out

    def allreduce(self, arrays: Sequence, streams: Sequence | None = None) -> list:
        """Sum ``arrays`` (one per local shard, equal shapes and dtypes) over every shard, in place.

        Returns ``arrays``. On GPUs the sums are queued on each device's
        current stream (or on ``streams``, one per local shard); there is no
        host synchronisation. See also :meth:`allreduce_async`.
        """
        arrays = list(arrays)
        if len(arrays) != len(self):
            raise ValueError(f"allreduce needs one array per local shard ({len(self)}), got {len(arrays)}.")
        if streams is not None and len(streams) != len(self):
            raise ValueError(f"allreduce needs one stream per local shard ({len(self)}), got {len(streams)}.")
        shape, dtype = arrays[0].shape, arrays[0].dtype
        for a in arrays[1:]:
            if a.shape != shape or a.dtype != dtype:
                raise ValueError(f"allreduce needs equal shapes and dtypes, got {shape}/{dtype} and "
                                 f"{a.shape}/{a.dtype}.")
        if self.xp is np:
            total = np.sum(np.stack(arrays), axis=0, dtype=dtype)
            for a in arrays:
                a[...] = total
            return arrays
        if self._comms is None:
            if self.world > 1:
                raise RuntimeError(f"{self!r} was closed: its NCCL communicators are gone; make a new Shards.")
            return arrays
        if getattr(self, "_freed", None) not in (None, _FREED):
            raise RuntimeError(f"gpumcmc.shards.free_communicators() destroyed the communicators of {self!r}; "
                               "make a new Shards over these GPUs.")
        code = _NCCL_DTYPE.get(np.dtype(dtype))
        if code is None:
            raise TypeError(f"NCCL cannot sum {dtype}; use float32/64 or (u)int8/32/64.")
        for i, a in enumerate(arrays):
            if not a.flags.c_contiguous:
                raise ValueError("allreduce needs C-contiguous arrays; pass cupy.ascontiguousarray(a).")
            if a.device.id != self.devices[i]:
                raise ValueError(f"allreduce: array {i} is on GPU {a.device.id}, but shard {i} is on GPU "
                                 f"{self.devices[i]}; make each shard's array under `with shards.on(i):`.")
        nccl = _nccl()
        with _keep_current(self.xp):  # the group's end launches on every GPU and leaves the last current
            nccl.groupStart()
            try:
                for i, (comm, a) in enumerate(zip(self._comms, arrays)):
                    with self.on(i):
                        stream = self.xp.cuda.get_current_stream() if streams is None else streams[i]
                        comm.allReduce(a.data.ptr, a.data.ptr, a.size, code, _NCCL_SUM, stream.ptr)
            finally:
                nccl.groupEnd()
        return arrays

    def allreduce_async(self, arrays: Sequence):
        """Queue the sums of :meth:`allreduce` beside the work that follows; returns ``wait()``.

        Between GPUs the sums run on a side stream of each GPU, after the work
        queued so far on its current stream; work queued after this call runs
        beside them, and ``wait()`` makes each GPU's current stream wait for
        them. Neither touches the host. ``arrays`` must be neither read nor
        written, nor freed, before ``wait()``. Elsewhere (NumPy, shards on one
        GPU, one GPU) the sums are made at once and ``wait()`` does nothing.
        """
        if self.xp is np or self._comms is None:
            self.allreduce(arrays)
            return _no_wait
        xp = self.xp
        sides, after = [], []
        for i in range(len(self)):
            with self.on(i):
                side = self._sides.get(self.devices[i])
                if side is None:
                    # Non-blocking: a blocking stream would wait for the legacy default stream's later work.
                    side = self._sides[self.devices[i]] = xp.cuda.Stream(non_blocking=True)
                side.wait_event(xp.cuda.get_current_stream().record())
                sides.append(side)
        self.allreduce(arrays, streams=sides)
        for i, side in enumerate(sides):
            with self.on(i):
                after.append(side.record())

        def wait():
            for i, ev in enumerate(after):
                with self.on(i):
                    xp.cuda.get_current_stream().wait_event(ev)

        return wait


class _OneDevice(Shards):
    """``n`` shards on one GPU, summed on the device (NCCL needs distinct GPUs)."""

    def __init__(self, n: int, device: int | None = None):
        if not backend.cupy_available():
            raise _no_gpus()
        cp = backend.get_backend("cupy")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}.")
        self._comms, self._rank0, self._sides = None, 0, {}
        self.devices = [cp.cuda.runtime.getDevice() if device is None else int(device)] * int(n)
        self.world = int(n)
        self.xp = cp

    def __reduce__(self):
        return _load_shards, (list(self.devices), True)

    def allreduce(self, arrays, streams=None):
        arrays = list(arrays)
        if len(arrays) != len(self):
            raise ValueError(f"allreduce needs one array per local shard ({len(self)}), got {len(arrays)}.")
        with streams[0] if streams else contextlib.nullcontext():  # one GPU: the first stream sums them all
            total = arrays[0].copy()
            for a in arrays[1:]:
                total += a
            for a in arrays:
                a[...] = total
        return arrays


def one_device(n: int, device: int | None = None) -> Shards:
    """``n`` shards of the data on one GPU, for an estimator's ``devices=``.

    The data-parallel layout of :class:`gpumcmc.shards.Shards` over ``n`` GPUs,
    run on one: each part has its own indicators and statistics, and the
    all-reduce is a sum on the device. It runs (and tests) the multi-GPU code
    path on a single GPU; ``Shards(n_virtual=n)`` does the same on NumPy.
    """
    return _OneDevice(n, device)


def resolve(devices, backend_name: str | None, what: str = "the data") -> tuple[Shards, str]:
    """An estimator's ``devices=`` and ``backend=`` as (:class:`Shards`, ``"numpy"`` or ``"cupy"``).

    The form of ``devices`` is checked on the host first (:func:`check_devices`);
    GPU ids with ``backend="numpy"``, or a backend other than the one the
    shards run on, raise ``ValueError``. ``what`` names what is split, for the
    messages.
    """
    if isinstance(devices, _AbsentGPUs):
        raise ValueError(f"devices={devices!r}: pass devices=None, 'all' or the GPUs of this machine, or "
                         "Shards(n_virtual=k) on NumPy (set_params(devices=...)), to fit here.")
    if not isinstance(devices, Shards):
        check_devices(devices)
        if backend_name == "numpy":
            raise ValueError(f"devices names GPUs, and backend='numpy' runs on none: to split {what} on NumPy, "
                             "pass devices=gpumcmc.shards.Shards(n_virtual=k).")
        if not backend.cupy_available():
            raise _no_gpus(what)
        devices = Shards(devices)
    name = "numpy" if devices.xp is np else "cupy"
    if backend_name is not None and backend_name != name:
        raise ValueError(f"backend={backend_name!r} disagrees with devices ({devices!r}), which run on {name}: "
                         "leave backend unset with devices.")
    return devices, name


class Replica:
    """``x``, an array on local shard 0's device, for each local shard of ``shards``.

    ``Replica(shards, x)(i)`` is ``x`` itself where shard ``i`` shares shard
    0's device (and on NumPy), else a copy on shard ``i``'s GPU that waits for
    the work queued on shard 0 when the Replica was made (an event, no host
    synchronisation); one copy per device, made on first use. Global draws
    made on shard 0 reach the other GPUs this way. Make the Replica before
    queuing shard 0's share of the next step, and write ``x`` no more after:
    a copy that waited for that work as well would hold the other GPUs back
    until shard 0's share is done, and the GPUs would run in turn.
    """

    def __init__(self, shards: "Shards", x):
        self.shards, self.x, self.ready, self.made = shards, x, None, {}
        if any(d != shards.devices[0] for d in shards.devices):
            with shards.on(0):
                self.ready = shards.xp.cuda.Event(disable_timing=True)
                self.ready.record()

    def __call__(self, i: int):
        sh = self.shards
        dev = sh.devices[i]
        if dev == sh.devices[0]:
            return self.x
        if dev not in self.made:
            xp = sh.xp
            with sh.on(i):
                xp.cuda.get_current_stream().wait_event(self.ready)
                self.made[dev] = _peer_copy(xp, self.x, dev)
        return self.made[dev]


_PEERS: set = set()  # (to, from) GPU pairs with peer access enabled in this process


def _peer_copy(xp, x, dev: int):
    """A copy of ``x`` (on another GPU) made on the current GPU ``dev`` by a kernel there that reads ``x``
    over the link: ordered on ``dev``'s stream alone (see kernels_cu/shards.cu). Where that cannot be
    (no peer access between the two GPUs, a size not a multiple of 8 bytes, a strided ``x``) CuPy's
    copy is made instead: the same values, but it may also wait for work queued on ``x``'s GPU later."""
    src = x.device.id
    if x.nbytes % 8 or not x.flags.c_contiguous:
        return xp.array(x, copy=True)
    if (dev, src) not in _PEERS:
        if not xp.cuda.runtime.deviceCanAccessPeer(dev, src):
            return xp.array(x, copy=True)
        try:
            xp.cuda.runtime.deviceEnablePeerAccess(src)
        except xp.cuda.runtime.CUDARuntimeError as err:  # already enabled (by CuPy, say)
            if "PeerAccessAlreadyEnabled" not in str(err):
                raise
        _PEERS.add((dev, src))
    from . import _loader

    out = xp.empty(x.shape, dtype=x.dtype)
    words = x.nbytes // 8
    if words:
        fn = _loader.get_function("shards.cu", "peer_copy")
        fn((int(min(max(1, -(-words // 256)), 4096)),), (256,),
           (_loader.u64(x.data.ptr), out, _loader.i64(words)))
    return out


def _no_wait() -> None:
    """The ``wait()`` of sums that were made at once."""


def _keep_current(xp):
    """A block that leaves the caller's GPU current, whatever NCCL makes current inside it."""
    return xp.cuda.Device(xp.cuda.runtime.getDevice())


def _slice(x, a, b, axis):
    index = [slice(None)] * x.ndim
    index[axis] = slice(a, b)
    return x[tuple(index)]


def _new_unique_id():
    return _nccl().get_unique_id()


def _join(uid, world: int, ranks: dict, name: str, dask_worker=None):
    address = dask_worker.address
    rank = ranks[address]
    cp = backend.get_backend("cupy")
    device = cp.cuda.runtime.getDevice()
    comm = _nccl().NcclCommunicator(world, uid, rank)
    _WORKER_COMMS[name] = Shards._from_comm(comm, device, rank, world)
    return rank


def join_dask(client, name: str = "default") -> dict:
    """Join every worker of ``client`` in one NCCL communicator, called ``name``.

    Each worker must own one GPU (``dask_cuda.LocalCUDACluster`` on each
    machine gives that). Worker 0 makes NCCL's unique id, the scheduler
    passes it to all, and each worker joins with its rank (workers sorted by
    address). Returns ``{worker address: rank}``. Inside a task,
    ``worker_shards(name)`` returns the worker's :class:`Shards`.
    """
    if not (hasattr(client, "run") and hasattr(client, "scheduler_info")):
        raise TypeError("client must be a dask.distributed.Client.")
    workers = sorted(client.scheduler_info()["workers"])
    if not workers:
        raise ValueError("the Dask cluster has no workers.")
    ranks = {w: r for r, w in enumerate(workers)}
    uid = client.submit(_new_unique_id, workers=[workers[0]], pure=False).result()
    client.run(_join, uid, len(workers), ranks, name)
    return ranks


def worker_shards(name: str = "default") -> Shards:
    """This Dask worker's :class:`Shards` in the communicator that :func:`join_dask` set up."""
    try:
        return _WORKER_COMMS[name]
    except KeyError:
        raise RuntimeError(f"no NCCL communicator {name!r} on this worker: call "
                           f"gpumcmc.shards.join_dask(client, {name!r}) first.") from None
