"""Kernel arguments by name: the order comes from the kernel's own declaration.

A kernel of ``kernels_cu/`` takes a long positional list (``cat_prefix`` 24
parameters, ``bn_sweep`` 23). Two arguments of one type given in the wrong
order launch without an error and draw wrong numbers. So launchers name
every argument after the C parameter, and this module puts them in the
order of the ``__global__`` declaration::

    fn(grid, block, _kernel_args.args("bayesnet.cu", "bn_normalise",
                                      x=x, out=out, row_ptr=row_ptr, R=_loader.i32(R)))

:func:`args` returns the tuple that a CuPy ``RawKernel`` takes; a missing
or unknown name raises TypeError naming it. :func:`packed` does the same for
a :class:`gpumcmc._loader.PackedLaunch` (pointers as integer addresses).
:func:`part` names some of the arguments once, for a launch that keeps them
from call to call: its dict goes into a later :func:`args` call as
``**part``. :func:`philox` and :func:`philox_dev` give the Philox
arguments as keywords.

Each file's signatures are read from its source once (comments and
preprocessor lines stripped) and kept; a call then costs a dictionary look-up
and one ``operator.itemgetter``, no parsing. ``tests/test_kernel_args.py``
reads every launcher's call in ``gpumcmc/`` with :mod:`ast` and checks its
names, and the kinds it can tell (an array or an address for a pointer, a
NumPy scalar of the C type for a value), against these declarations, on a
CPU with nothing compiled.

With the environment variable ``GPUMCMC_CHECK_KERNEL_ARGS=1`` (read at
import; or :func:`set_checking`) every call also checks each value against
its parameter: a CuPy array of the pointer's element type, or an address,
for a pointer; a NumPy scalar of the parameter's C type for a value (CuPy
passes a Python ``int`` as ``long long`` whatever the kernel declares). The
GPU tests run with it on (``scripts/gpu-checks/kernel_args.sh``).
"""

from __future__ import annotations

import operator
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "KernelSignature",
    "Param",
    "args",
    "check_values",
    "packed",
    "parse_kernels",
    "part",
    "philox",
    "philox_dev",
    "set_checking",
    "signature",
    "signatures",
]

# The NumPy dtype of each C scalar type that kernels take (after typedefs).
C_DTYPES = {
    "bool": np.dtype(np.bool_),
    "signed char": np.dtype(np.int8),
    "char": np.dtype(np.int8),
    "unsigned char": np.dtype(np.uint8),
    "short": np.dtype(np.int16),
    "unsigned short": np.dtype(np.uint16),
    "int": np.dtype(np.int32),
    "unsigned int": np.dtype(np.uint32),
    "long long": np.dtype(np.int64),
    "unsigned long long": np.dtype(np.uint64),
    "float": np.dtype(np.float32),
    "double": np.dtype(np.float64),
    # CUDA's vector types, as arrays of their components
    "uint2": np.dtype(np.uint32),
    "uint4": np.dtype(np.uint32),
}

_SPELLINGS = {
    "unsigned": "unsigned int",
    "signed": "int",
    "signed int": "int",
    "long long int": "long long",
    "signed long long": "long long",
    "unsigned long long int": "unsigned long long",
    "size_t": "unsigned long long",
}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict"}


@dataclass(frozen=True)
class Param:
    """One kernel parameter: its ``name``, its C type as written (``ctype``, qualifiers but ``const``
    dropped), the type pointed to or held (``base``, typedefs resolved), and whether it is a pointer."""

    name: str
    ctype: str
    base: str
    pointer: bool
    const: bool

    @property
    def dtype(self):
        """The NumPy dtype of the value (or of the elements pointed to); None for a template type
        parameter or ``void``."""
        return C_DTYPES.get(self.base)


@dataclass(frozen=True)
class KernelSignature:
    """A ``__global__`` function's declaration: its file, name, template parameters as (kind, name)
    pairs (``("typename", "T")``, ``("int", "SRC")``) and parameters in order."""

    file: str
    name: str
    template: tuple
    params: tuple

    @property
    def names(self) -> tuple:
        return tuple(p.name for p in self.params)

    @property
    def type_params(self) -> frozenset:
        """The template's type parameters (``T``, ``I``): each stands for one dtype in a launch."""
        return frozenset(n for k, n in self.template if k in ("typename", "class"))

    def bind(self, /, **values) -> tuple:
        """``values`` in the declared order, as :func:`args` gives them (without the cache)."""
        b = _Binder(self)
        if len(values) == b.n:
            try:
                return b.get(values)
            except KeyError:
                pass
        raise b.error(values)


# -- parsing ------------------------------------------------------------------------

_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_STRING_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_TYPEDEF_RE = re.compile(r"\btypedef\s+([\w\s]+?)\s+(\w+)\s*;")
_USING_RE = re.compile(r"\busing\s+(\w+)\s*=\s*([\w\s]+?)\s*;")
_GLOBAL_RE = re.compile(r"\b__global__\b")
_IDENT_RE = re.compile(r"[A-Za-z_]\w*")


def _strip(text: str) -> str:
    """``text`` without comments and preprocessor lines (newlines kept, so offsets keep their line)."""
    text = _COMMENT_RE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    out = []
    continued = False
    for line in text.split("\n"):
        directive = continued or line.lstrip().startswith("#")
        continued = directive and line.rstrip().endswith("\\")
        out.append("" if directive else line)
    return "\n".join(out)


def _close(text: str, i: int, open_: str = "(", close: str = ")") -> int:
    """The index just past the bracket that closes the one at ``text[i]``."""
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j + 1
    raise ValueError(f"unbalanced {open_!r} from offset {i}")


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for j, c in enumerate(text):
        if c in "(<[":
            depth += 1
        elif c in ")>]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:j])
            start = j + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _normal(words: list[str], aliases: dict) -> str:
    t = " ".join(words)
    t = _SPELLINGS.get(t, t)
    seen = set()
    while t in aliases and t not in seen:  # typedef chains
        seen.add(t)
        t = _SPELLINGS.get(aliases[t], aliases[t])
    return t


def _param(text: str, aliases: dict, where: str) -> Param:
    text = text.split("=")[0]  # a default value
    tokens = re.findall(r"[A-Za-z_]\w*|\*|&|::|\S", text)
    tokens = [t for t in tokens if t not in ("__restrict__", "__restrict", "restrict")]
    idents = [t for t in tokens if _IDENT_RE.fullmatch(t)]
    if len(idents) < 2 or tokens[-1] != idents[-1]:
        raise ValueError(f"{where}: cannot read the parameter {text.strip()!r} (a type and a name expected)")
    name = idents[-1]
    body = tokens[:-1]
    if "&" in body or "[" in body:
        raise ValueError(f"{where}: parameter {name!r} is a reference or an array, which a kernel cannot take")
    pointer = body.count("*")
    if pointer > 1:
        raise ValueError(f"{where}: parameter {name!r} is a pointer to a pointer, which the checks do not cover")
    first_star = body.index("*") if pointer else len(body)
    const = "const" in body[:first_star]
    words = [t for t in body if t not in _QUALIFIERS and t != "*"]
    words = [w for w in words if w != "::" and w != "gpumcmc"]
    base = _normal(words, aliases)
    written = " ".join(w for w in body if w not in ("volatile",)).replace(" *", "*")
    return Param(name=name, ctype=written, base=base, pointer=bool(pointer), const=const)


def _template_before(text: str, start: int) -> tuple:
    """The template parameter list that ends just before ``start`` (skipping ``extern "C"``), or ()."""
    head = re.sub(r'extern\s*"\s*"$', "", text[:start].rstrip()).rstrip()  # extern "C", its string blanked
    if not head.endswith(">"):
        return ()
    depth, j = 0, len(head) - 1
    while j >= 0:
        depth += {">": 1, "<": -1}.get(head[j], 0)
        if depth == 0:
            break
        j -= 1
    if not head[:j].rstrip().endswith("template"):
        return ()
    out = []
    for p in _split_top(head[j + 1:-1]):
        words = p.split("=")[0].split()
        out.append((" ".join(words[:-1]), words[-1]))
    return tuple(out)


def parse_kernels(text: str, filename: str = "<source>") -> dict[str, KernelSignature]:
    """Every ``__global__`` function defined in the CUDA source ``text``, by name.

    Declarations and explicit instantiations (``template __global__ void
    f<float>(...);``) are skipped: they carry no parameter names. Two
    definitions of one name (overloads) must have the same parameters.
    Raises ValueError on a parameter it cannot read.
    """
    # string literals blanked (a "//" or "/*" in one is no comment), then comments and directives
    src = _strip(_STRING_RE.sub(lambda m: '"' + " " * (len(m.group()) - 2) + '"', text))
    aliases = {}
    for m in _TYPEDEF_RE.finditer(src):
        aliases[m.group(2)] = " ".join(m.group(1).split())
    for m in _USING_RE.finditer(src):
        aliases[m.group(1)] = " ".join(m.group(2).split())
    out: dict[str, KernelSignature] = {}
    for m in _GLOBAL_RE.finditer(src):
        before = src[:m.start()].rstrip()
        if before.endswith("template"):  # an explicit instantiation
            continue
        i = m.end()
        name = None
        while True:
            ident = _IDENT_RE.search(src, i)
            if ident is None:
                raise ValueError(f"{filename}: no kernel name after __global__ at offset {m.start()}")
            j = ident.end()
            while j < len(src) and src[j].isspace():
                j += 1
            between = src[i:ident.start()].strip()
            if between:  # a '<' (an instantiation's arguments) or other syntax before the name
                name = None
                break
            if ident.group() == "__launch_bounds__":
                i = _close(src, j)
                continue
            if j < len(src) and src[j] == "(":
                name = ident.group()
                break
            i = ident.end()
        if name is None:
            continue
        end = _close(src, j)
        k = end
        while k < len(src) and src[k].isspace():
            k += 1
        if k >= len(src) or src[k] != "{":  # a declaration
            continue
        where = f"{filename}: {name}"
        params = tuple(_param(p, aliases, where) for p in _split_top(src[j + 1:end - 1]))
        if len({p.name for p in params}) != len(params):
            raise ValueError(f"{where}: two parameters share a name")
        sig = KernelSignature(filename, name, _template_before(src, m.start()), params)
        old = out.get(name)
        if old is not None and old.params != sig.params:
            raise ValueError(f"{where}: defined twice with different parameters")
        out[name] = sig
    return out


_files: dict = {}
_lock = threading.Lock()


def signatures(filename: str, directory: Path | None = None) -> dict[str, KernelSignature]:
    """Every kernel of ``kernels_cu/filename`` (or ``directory/filename``), read once and kept."""
    key = (filename, None if directory is None else str(directory))
    sigs = _files.get(key)
    if sigs is None:
        from . import _loader

        path = (directory or _loader.kernel_dir()) / filename
        with _lock:
            sigs = _files.get(key)
            if sigs is None:
                sigs = _files[key] = parse_kernels(path.read_text(), filename)
    return sigs


def signature(filename: str, kernel: str, directory: Path | None = None) -> KernelSignature:
    """The declaration of ``kernel`` (its name without template arguments) in ``filename``."""
    sigs = signatures(filename, directory)
    if kernel not in sigs:
        raise ValueError(f"{filename} defines no __global__ function {kernel!r}; it defines "
                         f"{', '.join(sorted(sigs))}.")
    return sigs[kernel]


# -- binding ------------------------------------------------------------------------

class _Binder:
    """The declared order of one kernel's parameters, as one ``itemgetter``."""

    __slots__ = ("sig", "n", "names", "get", "known")

    def __init__(self, sig: KernelSignature):
        self.sig = sig
        self.names = sig.names
        self.n = len(self.names)
        self.known = frozenset(self.names)
        if self.n == 0:
            self.get = lambda d: ()
        elif self.n == 1:
            only = self.names[0]
            self.get = lambda d: (d[only],)
        else:
            self.get = operator.itemgetter(*self.names)

    def error(self, values: dict, whole: bool = True) -> TypeError:
        given = set(values)
        missing = [n for n in self.names if n not in given] if whole else []
        extra = sorted(given - self.known)
        what = []
        if missing:
            what.append(f"missing {', '.join(missing)}")
        if extra:
            what.append(f"unknown {', '.join(extra)}")
        return TypeError(f"{self.sig.name} in {self.sig.file}: {'; '.join(what)}. Its parameters are, in order: "
                         f"{', '.join(self.names)}.")


_binders: dict = {}


class _Check:
    on = os.environ.get("GPUMCMC_CHECK_KERNEL_ARGS", "") not in ("", "0")


def set_checking(on: bool) -> bool:
    """Turn the per-call check of values against their parameters on or off; returns the old setting."""
    old, _Check.on = _Check.on, bool(on)
    return old


def _binder(filename: str, kernel: str) -> _Binder:
    b = _binders.get((filename, kernel))
    if b is None:
        b = _binders[(filename, kernel)] = _Binder(signature(filename, kernel))
    return b


def _ordered(filename: str, kernel: str, values: dict, packed: bool) -> tuple:
    b = _binders.get((filename, kernel)) or _binder(filename, kernel)
    if len(values) == b.n:
        try:
            out = b.get(values)
        except KeyError:
            pass
        else:
            if _Check.on:
                check_values(b.sig, out, packed=packed)
            return out
    raise b.error(values)


def args(filename: str, kernel: str, /, **values) -> tuple:
    """``values`` (one keyword per parameter of ``kernel`` in ``kernels_cu/filename``, named as in C) in
    the declared order: the argument tuple of a CuPy ``RawKernel`` launch.

    Raises TypeError naming each missing and each unknown name.
    """
    return _ordered(filename, kernel, values, False)


def packed(filename: str, kernel: str, /, **values) -> tuple:
    """As :func:`args`, for a :class:`gpumcmc._loader.PackedLaunch`: pointers as integer addresses
    (``array.data.ptr``, 0 for null) and values as Python or NumPy numbers."""
    return _ordered(filename, kernel, values, True)


def part(filename: str, kernel: str, /, **values) -> dict:
    """Some of ``kernel``'s arguments by name, checked to be its parameters: a dict to keep and give a
    later :func:`args` or :func:`packed` call as ``**part``."""
    b = _binders.get((filename, kernel)) or _binder(filename, kernel)
    if not b.known.issuperset(values):
        raise b.error(values, whole=False)
    return values


def philox(key, offset: int) -> dict:
    """The keywords ``k0, k1, off_lo, off_hi`` of a Philox key and a 64-bit call offset, as
    :func:`gpumcmc._loader.philox_args` gives them (``numpy.uint32``)."""
    return {"k0": np.uint32(key[0]), "k1": np.uint32(key[1]), "off_lo": np.uint32(offset & 0xFFFFFFFF),
            "off_hi": np.uint32(offset >> 32)}


def philox_dev(key, offset: int) -> dict:
    """:func:`philox` and ``off_dev``, the address of :func:`gpumcmc._loader.replay_offset` (null
    outside one), as :func:`gpumcmc._loader.philox_dev_args` gives them."""
    from ._loader import device_offset

    d = philox(key, offset)
    d["off_dev"] = np.uint64(device_offset())
    return d


# -- the optional check of values ----------------------------------------------------



def check_values(sig: KernelSignature, values: tuple, packed: bool = False) -> None:
    """Raise TypeError where a value cannot be what its parameter declares.

    A pointer takes a CuPy array (of the pointer's element type; any for
    ``void*``) or an address (a ``numpy.uint64``, or in a packed launch any
    integer; never ``None``, which CuPy passes as 0xffffffff). A value takes
    a NumPy scalar of its C type, or a Python number that CuPy passes as that
    type (an ``int`` for ``long long``, a ``float`` for ``double``); in a
    packed launch any number of its kind. Every array and value of one
    template type (``T``) has one dtype.
    """
    bound: dict = {}
    for p, v in zip(sig.params, values):
        problem = _problem(sig, p, v, packed, bound)
        if problem:
            raise TypeError(f"{sig.name} in {sig.file}: argument {p.name} ({p.ctype}) {problem}")


def _problem(sig, p: Param, v, packed: bool, bound: dict) -> str | None:
    is_array = type(v).__module__.startswith("cupy") or isinstance(v, np.ndarray)
    if p.base in sig.type_params:  # T: one dtype for the call (a Python float goes in as a double)
        if is_array or (isinstance(v, np.generic) and not p.pointer):   # an address (a null T*) binds no T
            dtype = v.dtype
        elif isinstance(v, float) and not packed and not p.pointer:
            dtype = np.dtype(np.float64)
        else:
            dtype = None
        if dtype is not None and bound.setdefault(p.base, dtype) != dtype:
            return f"is of {dtype}, but an earlier argument of type {p.base} was of {bound[p.base]}."
        want = None
    else:
        want = p.dtype
    if p.pointer:
        if is_array:
            if packed:
                return "is an array; a packed launch takes its address (array.data.ptr)."
            if want is not None and v.dtype != want:
                return f"is an array of {v.dtype}; {want} is expected."
            return None
        if v is None:
            return "is None; pass 0 (numpy.uint64(0), _loader.NULL) for a null pointer."
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            return f"is {type(v).__name__}; an array or an address is expected."
        if not packed and not isinstance(v, np.uint64):
            return "is an integer other than numpy.uint64; pass an address as numpy.uint64(address)."
        return None
    if is_array:
        return "is an array; a value is expected."
    if packed:
        if not isinstance(v, (np.generic, int, float)):
            return f"is {type(v).__name__}; a number is expected."
        if want is not None and want.kind in "iub" and isinstance(v, (float, np.floating)):
            return f"is a float; {want} is expected."
        return None
    if not isinstance(v, np.generic):
        if not isinstance(v, (int, float)):
            return f"is {type(v).__name__}; a NumPy scalar of the C type is expected."
        # CuPy passes a Python bool as bool, an int as long long and a float as double
        got = np.dtype(np.bool_ if isinstance(v, bool) else np.int64 if isinstance(v, int) else np.float64)
        if want is not None and got != want or want is None and got.kind != "f":
            return (f"is a Python {type(v).__name__}, which CuPy passes as {got}; pass a NumPy scalar of the "
                    f"C type.")
        return None
    got = np.dtype(type(v))
    if want is not None and got != want:
        return f"is {got}; {want} is expected."
    return None
