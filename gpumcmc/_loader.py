"""Finding, compiling and launching the CUDA kernels in ``kernels_cu/``.

Nothing here runs at import. A kernel file is compiled by NVRTC through
``cupy.RawModule`` the first time one of its functions is asked for, and the
module is memoised per device for the life of the process. CuPy also keeps an
on-disk cache keyed on the source text and the options; since the source text
of a ``.cu`` file does not contain the headers it includes, a hash of the file
and of every header it reaches is passed as ``-DGPUMCMC_SRC_HASH=...`` so that
an edited ``.cuh`` can never be answered with a stale binary.

CuPy adds the architecture of the current device (``-arch=sm_XX``) itself.

The first use of a model on a machine (or after an upgrade, whose sources differ) compiles its kernels:
from a few seconds to about a minute; later processes load them from CuPy's cache
(``~/.cupy/kernel_cache``, or ``CUPY_CACHE_DIR``). A new setting compiles again where it is written into
the kernels (the mixture's number of features, the Bayesian network's structure, a ``*_defines`` knob).
A compilation that takes longer than ``config.compile_notice_s`` prints a one-line notice saying so (once
a process), and with the environment variable ``GPUMCMC_LOG_COMPILES=1`` every module the loader makes
(compiled, or read from CuPy's disk cache) prints its file, kernels and seconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib.resources
import math
import os
import re
import struct
import sys
import threading
import time
from pathlib import Path

import numpy as np

from ._config import config, memo

__all__ = [
    "CTYPE",
    "KernelCompileError",
    "PackedLaunch",
    "packed_format",
    "packed_launcher",
    "compile_options",
    "get_function",
    "kernel_dir",
    "kernel_sources",
    "launch",
    "source_hash",
]

STD = "-std=c++17"
CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}  # template argument per dtype
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


class KernelCompileError(RuntimeError):
    """NVRTC rejected a kernel file; the message holds the file name and the log."""


def kernel_dir() -> Path:
    """The folder holding the ``.cu``/``.cuh`` sources.

    Installed wheels carry them as the package ``gpumcmc.kernels_cu``; a source
    checkout has them in the top-level ``kernels_cu/`` beside ``gpumcmc/``.
    """
    try:
        path = Path(str(importlib.resources.files("gpumcmc.kernels_cu")))
        if path.is_dir() and any(path.glob("*.cu")):
            return path
    except (ModuleNotFoundError, TypeError):
        pass
    path = Path(__file__).resolve().parent.parent / "kernels_cu"
    if path.is_dir():
        return path
    raise FileNotFoundError(
        "gpumcmc's CUDA sources (kernels_cu/*.cu) were not found; reinstall the "
        "package, which ships them inside the wheel."
    )


def kernel_sources(directory: Path | None = None) -> list[Path]:
    """Every ``.cu`` file that the loader can compile."""
    return sorted((directory or kernel_dir()).glob("*.cu"))


def _includes(path: Path, directory: Path, seen: dict[str, bytes]) -> None:
    text = path.read_bytes()
    seen[path.name] = text
    for name in _INCLUDE_RE.findall(text.decode("utf-8", "replace")):
        if name in seen:
            continue
        header = directory / name
        if not header.is_file():
            raise FileNotFoundError(f"{path.name} includes {name!r}, which is not in {directory}.")
        _includes(header, directory, seen)


def source_hash(filename: str, directory: Path | None = None) -> str:
    """A hash of ``filename`` and of every local header it includes, transitively."""
    directory = directory or kernel_dir()
    seen: dict[str, bytes] = {}
    _includes(directory / filename, directory, seen)
    h = hashlib.sha256()
    for name in sorted(seen):
        h.update(name.encode() + b"\0" + seen[name] + b"\0")
    return h.hexdigest()[:16]


def compile_options(filename: str, defines: tuple = (), directory: Path | None = None) -> tuple:
    """NVRTC options for ``filename``: C++17, the include folder, the source hash, defines."""
    directory = directory or kernel_dir()
    opts = [STD, f"-I{directory}", f"-DGPUMCMC_SRC_HASH=0x{source_hash(filename, directory)}ULL"]
    opts += [f"-D{name}={value}" for name, value in defines]
    return tuple(opts)


_modules = memo.table("loader.modules")
_functions = memo.table("loader.functions")  # one kernel object per (device, module, name): launches skip the lookup
_lock = threading.Lock()


def clear_cache() -> None:
    """Forget compiled modules and kernels held in memory, and every launch plan made from them: all of
    :data:`gpumcmc._config.memo` (CuPy's on-disk cache stays)."""
    with _lock:
        memo.clear()


def _module(filename: str, name_expressions: tuple, defines: tuple, directory: Path | None, prelude: str = ""):
    import cupy

    device = cupy.cuda.runtime.getDevice()
    # Keyed on the directory as given (None: the package's), so that a cached
    # module is found without resolving the package folder, a file-system walk per call.
    key = (device, None if directory is None else str(directory), filename, name_expressions, defines, prelude)
    mod = _modules.get(key)
    if mod is not None:
        return mod
    directory = directory or kernel_dir()
    with _lock:
        mod = _modules.get(key)
        if mod is None:
            src_path = directory / filename
            if not src_path.is_file():
                raise FileNotFoundError(f"No kernel file {filename!r} in {directory}.")
            options = compile_options(filename, defines, directory)
            mod = cupy.RawModule(
                code=prelude + src_path.read_text(),
                options=options,
                name_expressions=list(name_expressions) or None,
            )
            t = time.perf_counter()
            try:
                with _compile_notice():
                    mod.compile()  # from CuPy's disk cache where it has this source and these options
            except cupy.cuda.compiler.CompileException as exc:
                raise KernelCompileError(
                    f"NVRTC could not compile {src_path} with options {options}:\n{exc}"
                ) from None
            if os.environ.get("GPUMCMC_LOG_COMPILES", "") not in ("", "0"):
                print(f"gpumcmc: {filename} (kernels: {len(name_expressions) or 'its extern C ones'}, defines {dict(defines)}"
                      f"{', a prelude' if prelude else ''}) ready in {time.perf_counter() - t:.2f} s",
                      file=sys.stderr, flush=True)
            _modules[key] = mod
    return mod


_noticed = threading.Event()  # the compile notice has been printed in this process
_notice_lock = threading.Lock()
NOTICE = ("gpumcmc: compiling CUDA kernels for this GPU (the first use of each kernel and setting on this "
          "machine, or after an upgrade: up to about a minute for a model; CuPy then caches them on disk, in "
          "~/.cupy/kernel_cache or $CUPY_CACHE_DIR)...")


@contextlib.contextmanager
def _compile_notice():
    """A block that prints :data:`NOTICE` to stderr, once a process, if it runs longer than
    ``config.compile_notice_s`` seconds (a kernel compilation: a cache hit takes far less)."""
    after = config.compile_notice_s
    if after is None or _noticed.is_set():
        yield
        return
    done = threading.Event()

    def notice():
        with _notice_lock:  # the block's end and another timer's notice both wait for this one
            if not done.is_set() and not _noticed.is_set():
                _noticed.set()
                print(NOTICE, file=sys.stderr, flush=True)

    timer = threading.Timer(float(after), notice)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with _notice_lock:
            done.set()
        timer.cancel()


def get_function(filename: str, name: str, name_expressions: tuple = (), defines: tuple = (),
                 directory: Path | None = None, prelude: str = ""):
    """The compiled kernel ``name`` from ``kernels_cu/filename`` on the current device.

    ``name`` is a plain ``extern "C"`` name or one of ``name_expressions``
    (template instantiations such as ``"fill_uniform<float>"``); give every
    instantiation the file needs in one tuple so that it compiles once.
    With ``config.compile_kernels_alone``, an instantiation in ``name_expressions``
    is compiled by itself instead (see :func:`module_for`): a first use then compiles
    only the kernels it calls (``gamma.cu``'s sixteen take about 25 s on an H200,
    where a model calls one to three of them).
    ``prelude``: source text put before the file's (generated definitions, such
    as the Bayesian network's ``BN_NET_CASES``).
    """
    import cupy

    key = (cupy.cuda.runtime.getDevice(), None if directory is None else str(directory), filename,
           tuple(name_expressions), tuple(defines), name, prelude)
    fn = _functions.get(key)
    if fn is None:
        fn = _functions[key] = module_for(filename, name, key[3], key[4], directory, prelude).get_function(name)
    return fn


def module_for(filename: str, name: str, name_expressions: tuple = (), defines: tuple = (),
               directory: Path | None = None, prelude: str = ""):
    """The compiled module :func:`get_function` takes kernel ``name`` from (for reading a ``__device__``
    global beside it, as a test's tally). With ``config.compile_kernels_alone`` a template instantiation is
    compiled by itself and a plain ``extern "C"`` name with no instantiation (every ``extern "C"`` kernel of
    the file is in every module); otherwise with every instantiation listed."""
    names = tuple(name_expressions)
    if config.compile_kernels_alone:
        names = (name,) if name in names else ()
    return _module(filename, names, tuple(defines), directory, prelude)


_sm_counts: dict[int, int] = memo.table("loader.sm_counts")


def sm_count() -> int:
    """Streaming multiprocessors on the current device (cached per device)."""
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    if dev not in _sm_counts:
        _sm_counts[dev] = cupy.cuda.Device(dev).attributes["MultiProcessorCount"]
    return _sm_counts[dev]


_resident = memo.table("loader.resident", device_at=3)


def resident_blocks(kernel, block: int, shared_mem: int = 0) -> int:
    """Blocks of ``block`` threads that fit on one SM at once (the occupancy limit), at least 1.

    A grid-stride kernel whose grid is this many blocks per SM runs in one
    wave: no second, part-filled wave of blocks at the end.
    """
    import cupy

    key = (kernel, block, shared_mem, cupy.cuda.runtime.getDevice())
    if key not in _resident:
        fn = kernel.kernel if hasattr(kernel, "kernel") else kernel  # RawKernel -> its driver Function
        n = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(fn.ptr, block, shared_mem)
        _resident[key] = max(1, int(n))
    return _resident[key]


def grid_size(n_items: int, block: int, blocks_per_sm: int = 32) -> int:
    """Blocks for ``n_items`` work items: enough to cover them, capped for grid-stride loops."""
    return max(1, min(math.ceil(n_items / block), sm_count() * blocks_per_sm))


def launch(kernel, n_items: int, args: tuple, block: int = 256, shared_mem: int = 0,
           blocks_per_sm: int = 32) -> None:
    """Launch ``kernel`` over ``n_items`` work items with a grid-stride grid.

    Returns at once when there is nothing to do. ``args`` must already be
    contiguous arrays and explicitly typed NumPy scalars (see :func:`i64` and
    friends): a bare Python ``int`` would be passed as ``long long``.
    """
    if n_items <= 0:
        return
    grid = grid_size(n_items, block, blocks_per_sm)
    kernel((grid,), (block,), args, shared_mem=shared_mem)


class PackedLaunch:
    """A kernel launched through the driver with its arguments packed in one buffer.

    CuPy converts each argument of a launch on its own, a few tenths of a
    microsecond apiece; for a kernel of a dozen arguments that a sampler
    calls every iteration, packing them with :mod:`struct` into the layout
    the kernel expects and handing the buffer to ``cuLaunchKernel``
    (``CU_LAUNCH_PARAM_BUFFER_POINTER``) takes about half the host time.

    ``fmt`` is a little-endian :mod:`struct` format of the kernel's
    parameters in order, each at its C alignment, with padding written out
    (``x``): pointers as ``Q`` (pass ``array.data.ptr``, 0 for null),
    ``long long`` as ``q``, ``unsigned int`` as ``I``, ``int`` as ``i``,
    ``float`` as ``f``, ``double`` as ``d``. A wrong format launches the
    kernel with wrong arguments, so every user is covered by GPU tests that
    compare its draws with the NumPy twin.
    """

    # cuLaunchKernel's `extra` markers.
    _BUFFER_POINTER, _BUFFER_SIZE, _END = 1, 2, 0

    def __init__(self, kernel, fmt: str):
        if not fmt.startswith("<"):
            raise ValueError("fmt must be little-endian with explicit padding ('<...').")
        fn = kernel.kernel if hasattr(kernel, "kernel") else kernel  # RawKernel -> its driver Function
        self._fptr = fn.ptr
        self._struct = struct.Struct(fmt)
        self._local = threading.local()  # one buffer per thread (the driver copies it at the launch)

    def _buffers(self):
        b = getattr(self._local, "b", None)
        if b is None:
            buf = ctypes.create_string_buffer(self._struct.size)
            size = ctypes.c_size_t(self._struct.size)
            extra = (ctypes.c_void_p * 5)(self._BUFFER_POINTER, ctypes.addressof(buf), self._BUFFER_SIZE,
                                          ctypes.addressof(size), self._END)
            b = self._local.b = (buf, size, extra, ctypes.addressof(extra))
        return b

    def __call__(self, grid, block: int, stream_ptr: int, *values, shared_mem: int = 0) -> None:
        """Launch ``grid`` blocks (a number, or (x, y) for a grid of two dimensions) of ``block`` threads
        on the stream ``stream_ptr`` with ``values`` (and ``shared_mem`` bytes of dynamic shared memory a
        block)."""
        import cupy

        gx, gy = (grid, 1) if isinstance(grid, int) else grid
        buf, _, _, extra = self._buffers()
        self._struct.pack_into(buf, 0, *values)
        cupy.cuda.driver.launchKernel(self._fptr, gx, gy, 1, block, 1, 1, shared_mem, stream_ptr, 0, extra)


_packed = memo.table("loader.packed", device_at=None)  # keyed by kernel address


def packed_launcher(kernel, filename: str, name: str, T: str) -> PackedLaunch:
    """The :class:`PackedLaunch` of ``kernel`` (compiled from ``filename``, named ``name`` there, its
    template parameter ``T`` standing for the C type ``T``), made once per compiled kernel (so per
    device), with the format :func:`packed_format` reads from the source."""
    fn = kernel.kernel if hasattr(kernel, "kernel") else kernel  # RawKernel -> its driver Function
    launcher = _packed.get(fn.ptr)
    if launcher is None:
        launcher = _packed[fn.ptr] = PackedLaunch(fn, packed_format(filename, name, T))
    return launcher


def launch_packed(kernel, filename: str, name: str, T: str, n_items: int, args: tuple, block: int = 256,
                  shared_mem: int = 0, blocks_per_sm: int = 32) -> None:
    """:func:`launch` through a :class:`PackedLaunch` whose format is read from the kernel's source.

    ``name`` is the kernel's name in ``filename`` (without template
    arguments) and ``T`` the C type of its template parameter ``T``; the
    format comes from :func:`packed_format` once per compiled kernel, so it
    follows the signature. ``args`` as for :func:`launch`: CuPy arrays (passed
    as their addresses) and explicitly typed NumPy scalars.
    """
    if n_items <= 0:
        return
    launcher = packed_launcher(kernel, filename, name, T)
    import cupy

    values = [a.data.ptr if isinstance(a, cupy.ndarray) else a for a in args]
    launcher(grid_size(n_items, block, blocks_per_sm), block, cupy.cuda.get_current_stream().ptr, *values,
             shared_mem=shared_mem)


_PARAM_CODES = {"long long": "q", "unsigned long long": "Q", "unsigned int": "I", "int": "i", "float": "f",
                "double": "d"}


def packed_format(filename: str, kernel: str, T: str, directory: Path | None = None) -> str:
    """The :class:`PackedLaunch` format of ``kernel``'s parameters, read from its source.

    ``T`` is the C type that the template parameter ``T`` stands for. Raises
    ValueError on a parameter type it does not know, so a hand-written format
    can be checked against the kernel's current signature before any launch.
    """
    text = ((directory or kernel_dir()) / filename).read_text()
    m = re.search(r"__global__[^;{]*?\b" + re.escape(kernel) + r"\s*\(", text)
    if m is None:
        raise ValueError(f"no __global__ {kernel}( in {filename}")
    start = depth = m.end()
    depth = 1
    i = start
    while depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    fmt, offset = "<", 0
    for param in text[start:i - 1].split(","):
        words = [w for w in re.sub(r"\*", " * ", param).split() if w not in ("const", "__restrict__")]
        if "*" in words:
            code = "Q"
        else:
            ctype = " ".join(words[:-1])
            ctype = T if ctype == "T" else ctype
            if ctype not in _PARAM_CODES:
                raise ValueError(f"{kernel}: parameter {param.strip()!r} has a type packed_format does not know")
            code = _PARAM_CODES[ctype]
        size = struct.calcsize("<" + code)
        pad = -offset % size
        if pad:
            fmt += f"{pad}x"
        fmt += code
        offset += pad + size
    return fmt


def i32(x) -> np.int32:
    return np.int32(x)


def i64(x) -> np.int64:
    return np.int64(x)


def u32(x) -> np.uint32:
    return np.uint32(x)


def u64(x) -> np.uint64:
    """A 64-bit unsigned argument; also a device address (a pointer parameter)."""
    return np.uint64(x)


# A null pointer argument: CuPy passes None as 0xffffffff, not as 0.
NULL = np.uint64(0)


def philox_args(key, offset: int) -> tuple:
    """The kernel arguments ``k0, k1, off_lo, off_hi`` of a Philox key and a 64-bit call offset."""
    return (np.uint32(key[0]), np.uint32(key[1]), np.uint32(offset & 0xFFFFFFFF), np.uint32(offset >> 32))


_replay = threading.local()


def device_offset() -> int:
    """The device address that kernels add to their call offset (0: none); see :func:`replay_offset`."""
    return getattr(_replay, "ptr", 0)


@contextlib.contextmanager
def replay_offset(ptr: int):
    """Launches in this block add the 64-bit value at device address ``ptr`` to their call offsets.

    A CUDA graph captured in such a block replays with new random numbers when
    the value is advanced between replays (see ``gpumcmc/sampling/_graph.py``).
    Kernels that take ``off_dev`` read it (``offset_from_device`` in
    ``kernels_cu/philox.cuh``); :func:`philox_dev_args` passes it.
    """
    old = device_offset()
    _replay.ptr = int(ptr)
    try:
        yield
    finally:
        _replay.ptr = old


def philox_dev_args(key, offset: int) -> tuple:
    """:func:`philox_args` and then ``off_dev``, the address of :func:`replay_offset` (null outside one)."""
    return (*philox_args(key, offset), np.uint64(device_offset()))


def real(x, dtype) -> np.floating:
    """``x`` as a NumPy scalar of the kernel's floating type (float32 or float64)."""
    return np.dtype(dtype).type(x)


def contiguous(a, dtype=None):
    """``a`` as a C-contiguous CuPy array of ``dtype`` (kernels ignore strides)."""
    import cupy

    return cupy.ascontiguousarray(a, dtype=dtype)
