"""Kernel launches name their arguments, and the names match the CUDA declarations.

Runs on a CPU with nothing compiled: every ``__global__`` signature of
``kernels_cu/*.cu`` is read from the source, every by-name launch in
``gpumcmc/`` (``_kernel_args.args``, ``packed`` and ``part``) is read with
:mod:`ast`, and each keyword is checked against its kernel's parameters; so
a misnamed, missing or extra argument, or (where the call shows it) an
address or an array where a value belongs, or a scalar of another C type,
fails here without a GPU. Kernels of more than 8 parameters still launched
by position are listed in ``POSITIONAL``: converting one shrinks the set, a
new one fails the test.
"""

from __future__ import annotations

import ast
import pathlib
import re
import textwrap

import numpy as np
import pytest

from gpumcmc import _kernel_args
from gpumcmc._kernel_args import parse_kernels

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "gpumcmc"
KERNELS = ROOT / "kernels_cu"

# Kernels of more than 8 parameters that gpumcmc/ still launches by position (file, kernel): none left; a
# new one fails the test (launch it through gpumcmc._kernel_args instead).
POSITIONAL: set = set()
BIG = 8  # parameters above which a kernel must be launched by name

# Launches that splat a dict the static check cannot follow (kept from call to call): their names are
# checked where the dict is made (a part() call) and, for completeness, at run time only.
OPEN = {
    ("bayesnet.cu", "bn_sweep"),  # the arguments that stay, kept per part and colour
}

# The scalar casts a call can show, by the name of the function called.
_SCALARS = {
    "i32": "int32", "i64": "int64", "u32": "uint32", "u64": "uint64",
    "int8": "int8", "uint8": "uint8", "int32": "int32", "int64": "int64", "uint32": "uint32", "uint64": "uint64",
    "float32": "float32", "float64": "float64", "bool_": "bool",
}
_PHILOX = ("k0", "k1", "off_lo", "off_hi")
_LAUNCH_FUNCS = ("args", "packed", "part")


def all_signatures(directory: pathlib.Path = KERNELS) -> dict:
    """{file: {kernel: KernelSignature}} for every .cu file of ``directory``."""
    return {p.name: parse_kernels(p.read_text(), p.name) for p in sorted(directory.glob("*.cu"))}


# -- the static check of launchers ------------------------------------------------------

def _is_ka(node, attrs) -> bool:
    """``node`` is ``_kernel_args.<one of attrs>``."""
    return (isinstance(node, ast.Attribute) and node.attr in attrs and isinstance(node.value, ast.Name)
            and node.value.id == "_kernel_args")


def _local_assignments(func) -> dict:
    """Names assigned exactly once in ``func`` (nested functions included) -> the value assigned."""
    seen: dict = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    seen.setdefault(t.id, []).append(node.value)
    return {k: v[0] for k, v in seen.items() if len(v) == 1}


class _Scope:
    def __init__(self, consts: dict, local: dict):
        self.consts, self.local = consts, local

    def strings(self, node) -> list[str] | None:
        """Every string ``node`` can be: a literal, a module constant, a conditional of those, or a
        local name bound once to one of them."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.IfExp):
            a, b = self.strings(node.body), self.strings(node.orelse)
            return None if a is None or b is None else a + b
        if isinstance(node, ast.Name):
            if node.id in self.local:
                return self.strings(self.local[node.id])
            if node.id in self.consts:
                return [self.consts[node.id]]
        return None

    def splat(self, node) -> dict | None:
        """The keywords that ``**node`` gives ({name: value node or None}), or None where unknown."""
        if isinstance(node, ast.Name) and node.id in self.local:
            return self.splat(self.local[node.id])
        if isinstance(node, ast.Call) and _is_ka(node.func, ("philox",)):
            return dict.fromkeys(_PHILOX)
        if isinstance(node, ast.Call) and _is_ka(node.func, ("philox_dev",)):
            return dict.fromkeys((*_PHILOX, "off_dev"))
        if isinstance(node, ast.Call) and _is_ka(node.func, ("part",)):
            out = {}
            for kw in node.keywords:
                if kw.arg is None:
                    more = self.splat(kw.value)
                    if more is None:
                        return None
                    out.update(more)
                else:
                    out[kw.arg] = None  # its value is checked at the part() call itself
            return out
        return None

    def kind(self, node):
        """What the call shows of a value: ("scalar", dtype name or None for the template's float),
        ("address",), ("array",), ("int",), ("float",), or None (cannot tell)."""
        if isinstance(node, ast.IfExp):
            a, b = self.kind(node.body), self.kind(node.orelse)
            return a if a == b else None
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return None
            if isinstance(node.value, int):
                return ("int",)
            if isinstance(node.value, float):
                return ("float",)
            return None
        if isinstance(node, ast.Attribute):
            if node.attr == "ptr" and isinstance(node.value, ast.Attribute) and node.value.attr == "data":
                return ("address",)
            if node.attr == "NULL":
                return ("scalar", "uint64")
            return None
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if isinstance(f, ast.Name) and name in self.local:  # f64 = np.float64
                alias = self.local[name]
                name = alias.attr if isinstance(alias, ast.Attribute) else name
            if name in _SCALARS:
                return ("scalar", _SCALARS[name])
            if name == "real":
                return ("scalar", None)
            if name == "contiguous":
                return ("array",)
        return None


def _kind_problem(kind, param, sig, packed: bool) -> str | None:
    if kind is None:
        return None
    tag = kind[0]
    templated = param.base in sig.type_params
    want = None if templated else param.dtype
    if param.pointer:
        if tag == "array" and packed:
            return "an array where a packed launch takes an address (array.data.ptr)"
        if tag in ("int", "address") and not packed:
            return "a Python int address, which CuPy passes as long long; use numpy.uint64"
        if tag == "scalar" and kind[1] != "uint64":
            return f"a {kind[1]} where a pointer belongs (an array, or a numpy.uint64 address)"
        if tag == "float":
            return "a float where a pointer belongs"
        return None
    if tag in ("array", "address"):
        return f"{'an array' if tag == 'array' else 'an address'} where a value of {param.ctype} belongs"
    if tag == "scalar":
        if templated:
            return None if kind[1] in (None, "float32", "float64") else f"a {kind[1]} where {param.ctype} belongs"
        if kind[1] is not None and want is not None and np.dtype(kind[1]) != want:
            return f"a {kind[1]} where {param.ctype} ({want}) belongs"
        return None
    if not packed:  # CuPy passes a Python int as long long and a float as double
        passed = np.dtype(np.int64 if tag == "int" else np.float64)
        if want is None and not templated or want == passed or templated and tag == "float":
            return None
        return f"a Python {tag}, which CuPy passes as {'long long' if tag == 'int' else 'double'}"
    if tag == "float" and want is not None and want.kind in "iub":
        return f"a float where {param.ctype} belongs"
    return None


def check_source(text: str, path: str, sigs: dict, open_calls: set | None = None) -> tuple[list[str], set]:
    """(problems, {(file, kernel) named by an args/packed call}) of the Python source ``text``; the
    kernels of calls whose names cannot all be followed go into ``open_calls``."""
    tree = ast.parse(text)
    consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
              for t in n.targets if isinstance(t, ast.Name)
              if isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    owner = {}
    for f in funcs:  # the innermost function of each node
        for n in ast.walk(f):
            owner[id(n)] = f
    locals_of = {id(f): _local_assignments(f) for f in funcs}
    problems, named = [], set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_ka(node.func, _LAUNCH_FUNCS)):
            continue
        f = owner.get(id(node))
        scope = _Scope(consts, locals_of[id(f)] if f is not None else {})
        where = f"{path}:{node.lineno}"
        if len(node.args) != 2 or any(isinstance(a, ast.Starred) for a in node.args):
            problems.append(f"{where}: give the file and the kernel, then every argument by name")
            continue
        files, kernels = scope.strings(node.args[0]), scope.strings(node.args[1])
        if files is None or kernels is None:
            problems.append(f"{where}: the file and the kernel must be literals or module constants")
            continue
        given: dict = {}
        complete = True
        for kw in node.keywords:
            items = {kw.arg: kw.value} if kw.arg is not None else scope.splat(kw.value)
            if items is None:
                complete = False
                continue
            for name in items:
                if name in given:
                    problems.append(f"{where}: {name} is given twice")
            given.update(items)
        whole = node.func.attr != "part"
        for file in files:
            for kernel in kernels:
                sig = sigs.get(file, {}).get(kernel)
                if sig is None:
                    problems.append(f"{where}: {file} defines no kernel {kernel}")
                    continue
                if whole:
                    named.add((file, kernel))
                    if not complete and open_calls is not None:
                        open_calls.add((file, kernel))
                params = {p.name: p for p in sig.params}
                unknown = [n for n in given if n not in params]
                if unknown:
                    problems.append(f"{where}: {kernel} has no parameter {', '.join(unknown)}")
                if whole and complete:
                    missing = [n for n in params if n not in given]
                    if missing:
                        problems.append(f"{where}: {kernel} misses {', '.join(missing)}")
                for name, value in given.items():
                    if value is None or name not in params:
                        continue
                    kind = scope.kind(value)
                    if node.func.attr == "part":  # for either launch: wrong only if wrong for both
                        bad = _kind_problem(kind, params[name], sig, False) and \
                            _kind_problem(kind, params[name], sig, True)
                    else:
                        bad = _kind_problem(kind, params[name], sig, node.func.attr == "packed")
                    if bad:
                        problems.append(f"{where}: {kernel} argument {name} is {bad}")
    return problems, named


def check_package(sigs: dict) -> tuple[list[str], set, set]:
    """(problems, kernels named by an args/packed call, kernels of calls not followed in full) of every
    module of gpumcmc/."""
    problems, named, open_calls = [], set(), set()
    for path in sorted(PKG.rglob("*.py")):
        p, n = check_source(path.read_text(), str(path.relative_to(ROOT)), sigs, open_calls)
        problems += p
        named |= n
    return problems, named, open_calls


def positional_big(sigs: dict, named: set) -> set:
    """Kernels of more than BIG parameters that gpumcmc/ names somewhere but launches by position."""
    text = "\n".join(p.read_text() for p in PKG.rglob("*.py"))
    return {(f, k) for f, ks in sigs.items() for k, s in ks.items()
            if len(s.params) > BIG and (f, k) not in named and re.search(rf"\b{k}\b", text)}


@pytest.fixture(scope="module")
def sigs():
    return all_signatures()


@pytest.fixture(scope="module")
def package(sigs):
    return check_package(sigs)


# -- the project's kernels and launchers ------------------------------------------------

def test_every_kernel_signature_parses(sigs):
    """Every __global__ definition is read, with a name and a known C type for each parameter."""
    for path in sorted(KERNELS.glob("*.cu")):
        text = path.read_text()
        # every kernel explicitly instantiated (or declared) has a definition read
        declared = set(re.findall(r"__global__\s+void\s+(\w+)\s*<", text))
        assert declared <= set(sigs[path.name]), (path.name, declared - set(sigs[path.name]))
        for name, sig in sigs[path.name].items():
            assert sig.params, (path.name, name)
            for p in sig.params:
                assert p.base in sig.type_params or p.dtype is not None or (p.pointer and p.base == "void"), \
                    f"{path.name}: {name}'s parameter {p.name} has a type the checks do not know: {p.ctype}"
    assert sum(len(k) for k in sigs.values()) >= 40


def test_signatures_read_as_declared(sigs):
    sweep = sigs["bayesnet.cu"]["bn_sweep"]
    assert sweep.names[:4] == ("Z", "n", "V", "cell_case")
    assert sweep.names[-6:] == ("k0", "k1", "off_lo", "off_hi", "off_dev", "bad")
    assert sweep.template == (("int", "KMAX"),)
    z = sweep.params[0]
    assert (z.base, z.pointer, z.const) == ("unsigned char", True, False)
    assert sweep.params[3].const and sweep.params[3].base == "int"
    prefix = sigs["discrete.cu"]["cat_prefix"]
    assert prefix.type_params == {"T"} and len(prefix.params) == 24
    assert prefix.params[prefix.names.index("out")].base == "void"
    # typedefs (ising.cu's u32 and u64) resolve to their C types
    ms = sigs["ising.cu"]["ising_multispin"]
    assert ms.params[0].base == "unsigned long long" and ms.params[ms.names.index("k0")].base == "unsigned int"
    # the loader's struct formats agree with the parameters read here
    from gpumcmc import _loader

    fmt = _loader.packed_format("gamma.cu", "gamma_draw", "float")
    codes = re.sub(r"\d+x", "", fmt[1:])
    want = {"unsigned long long": "Q", "long long": "q", "int": "i", "unsigned int": "I", "float": "f"}
    g = sigs["gamma.cu"]["gamma_draw"]
    assert codes == "".join("Q" if p.pointer else want["float" if p.base == "T" else p.base] for p in g.params)


def test_cat_prefix_and_cat_warp_share_one_signature(sigs):
    """discrete.py's launcher names either kernel with one set of arguments."""
    assert sigs["discrete.cu"]["cat_prefix"].params == sigs["discrete.cu"]["cat_warp"].params
    row = sigs["discrete_warp.cu"]["cat_row_warp"].names
    assert row == tuple(n for n in sigs["discrete.cu"]["cat_warp"].names
                        if n not in ("scratch", "s_in_smem", "region_words"))


def test_every_by_name_launch_matches_its_kernel(package):
    problems, named, open_calls = package
    assert not problems, "\n".join(problems)
    assert open_calls == OPEN
    # the converted launchers are all seen (a launch the walk missed would go unchecked)
    for kernel in ("bn_sweep", "bn_counts", "bn_normalise"):
        assert ("bayesnet.cu", kernel) in named
    for pair in (("discrete.cu", "cat_prefix"), ("discrete.cu", "cat_warp"), ("discrete_warp.cu", "cat_row_warp"),
                 ("gamma.cu", "gamma_draw"), ("gamma.cu", "beta_draw"), ("gamma.cu", "dirichlet_draw"),
                 ("gamma.cu", "lse_rows"), ("ising.cu", "ising_multispin"), ("ising.cu", "ising_bytes"),
                 ("rbm.cu", "rbm_bernoulli"), ("rbm.cu", "rbm_pcd_epoch"), ("nested.cu", "sinusoid_slice"),
                 ("nested.cu", "sinusoid_ssq"), ("nested.cu", "nested_progress"),
                 ("nested.cu", "nested_argsort_rows"), ("random_fill.cu", "fill_uniform"),
                 ("random_fill.cu", "fill_normal"), ("random_fill.cu", "fill_exponential"),
                 ("random_fill.cu", "philox_words")):
        assert pair in named, pair


def test_big_kernels_launched_by_position_are_the_known_ones(sigs, package):
    _, named, _ = package
    assert positional_big(sigs, named) == POSITIONAL


# -- the check can fail -------------------------------------------------------------------

_GOOD = '''
from gpumcmc import _kernel_args, _loader
FILE = "bayesnet.cu"

def normalise(fn, x, out, row_ptr, R):
    fn(1, 1, _kernel_args.args(FILE, "bn_normalise", x=x, out=out, row_ptr=row_ptr, R=_loader.i32(R)))
'''


@pytest.mark.parametrize("change, message", [
    (("row_ptr=row_ptr", "rowptr=row_ptr"), "has no parameter rowptr"),
    (("row_ptr=row_ptr, ", ""), "misses row_ptr"),
    (("R=_loader.i32(R)", "R=_loader.i64(R)"), "argument R is a int64 where int (int32) belongs"),
    (("R=_loader.i32(R)", "R=R.data.ptr"), "argument R is an address"),
    (("R=_loader.i32(R)", "R=_loader.contiguous(R)"), "argument R is an array"),
    (("R=_loader.i32(R)", "R=7"), "argument R is a Python int"),
    (("x=x", "x=_loader.i32(x)"), "argument x is a int32 where a pointer belongs"),
    (("x=x,", "x=x, y=x,"), "has no parameter y"),
    (('"bn_normalise"', '"bn_normalize"'), "defines no kernel bn_normalize"),
    (('"bn_normalise", x=x', '"bn_normalise", x'), "every argument by name"),
    (("out=out, ", "out=out, x=out, "), "x is given twice"),
])
def test_the_static_check_catches_a_wrong_call(sigs, change, message):
    assert check_source(_GOOD, "good.py", sigs)[0] == []
    bad = _GOOD.replace(*change)
    assert bad != _GOOD
    problems, _ = check_source(bad, "bad.py", sigs)
    assert any(message in p for p in problems), problems


def test_the_static_check_follows_parts_and_philox_keywords(sigs):
    text = textwrap.dedent('''
        from gpumcmc import _kernel_args
        FILE = "rbm.cu"

        def launch(fn, pre, bias, out, key, off):
            fixed = _kernel_args.part(FILE, "rbm_bernoulli", pre=pre, bias=bias)
            philox = _kernel_args.philox(key, off)
            fn(1, 1, _kernel_args.args(FILE, "rbm_bernoulli", out=out, rows=ROWS, cols=COLS, **philox, **fixed))
        ''')
    assert check_source(text, "ok.py", sigs)[0] == []
    problems, _ = check_source(text.replace("bias=bias", "bias_=bias"), "bad.py", sigs)
    assert any("no parameter bias_" in p for p in problems) and any("misses bias" in p for p in problems)
    problems, _ = check_source(text.replace("**philox, ", ""), "bad.py", sigs)
    assert any("misses k0, k1, off_lo, off_hi" in p for p in problems), problems
    # a dict the check cannot follow leaves the call open (listed in OPEN), with its other names checked
    opened = set()
    problems, _ = check_source(text.replace("**fixed", "**kept[0]").replace("out=out", "outt=out"), "open.py", sigs,
                               opened)
    assert opened == {("rbm.cu", "rbm_bernoulli")} and any("no parameter outt" in p for p in problems), problems
    assert not any("misses" in p for p in problems)
    # a conditional kernel name is checked against each kernel it can be
    cond = text.replace('"rbm_bernoulli", out', '"rbm_bernoulli" if pre else "rbm_pcd_epoch", out')
    problems, _ = check_source(cond, "bad.py", sigs)
    assert any("rbm_pcd_epoch has no parameter" in p for p in problems), problems


def test_the_packed_check_wants_addresses(sigs):
    text = textwrap.dedent('''
        from gpumcmc import _kernel_args
        def launch(a):
            return _kernel_args.packed("gamma.cu", "lse_rows", x=a, n_rows=1, K=2, G=1.5, log_out=0)
        ''')
    problems, _ = check_source(text, "bad.py", sigs)
    assert any("G is a float" in p for p in problems), problems
    problems, _ = check_source(text.replace("x=a", "x=_loader.contiguous(a)"), "bad.py", sigs)
    assert any("x is an array where a packed launch takes an address" in p for p in problems), problems


def test_a_new_big_positional_launch_changes_the_list(sigs, package):
    """Converting a kernel takes it off the list; a by-position launch of a big kernel puts it on."""
    _, named, _ = package
    _, more = check_source(textwrap.dedent('''
        from gpumcmc import _kernel_args
        def launch(fn, **kw):
            fn(1, 1, _kernel_args.args("glm.cu", "glm_niw", **kw))
        '''), "extra.py", sigs)
    # glm_niw is launched by name in gpumcmc/: without that launch it is big and positional, with the
    # one above it is off the list again
    without = {k for k in named if k != ("glm.cu", "glm_niw")}
    assert positional_big(sigs, without) == POSITIONAL | {("glm.cu", "glm_niw")}
    assert positional_big(sigs, without | more) == POSITIONAL
    fewer = {k for k in named if k != ("bayesnet.cu", "bn_sweep")}
    assert positional_big(sigs, fewer) == POSITIONAL | {("bayesnet.cu", "bn_sweep")}


# -- binding at run time -------------------------------------------------------------------

def test_args_follow_the_declared_order():
    sig = _kernel_args.signature("bayesnet.cu", "bn_normalise")
    assert _kernel_args.args("bayesnet.cu", "bn_normalise", R=4, row_ptr=3, out=2, x=1) == (1, 2, 3, 4)
    assert sig.bind(R=4, row_ptr=3, out=2, x=1) == (1, 2, 3, 4)
    values = {n: i for i, n in enumerate(_kernel_args.signature("discrete.cu", "cat_prefix").names)}
    assert _kernel_args.packed("discrete.cu", "cat_prefix", **values) == tuple(range(24))


def test_a_swapped_declaration_moves_the_arguments_with_it():
    """Reordering two pointers of one type in the C signature reorders the launch: the values follow
    their names, where a positional launch would pass them swapped without an error."""
    text = (KERNELS / "bayesnet.cu").read_text()
    decl = "const int* __restrict__ par, const int* __restrict__ par_stride,\n    const int* __restrict__ ch_ptr,"
    assert decl in text
    swapped = text.replace(decl, "const int* __restrict__ ch_ptr, const int* __restrict__ par_stride,\n"
                                 "    const int* __restrict__ par,")
    a = parse_kernels(text, "bayesnet.cu")["bn_sweep"]
    b = parse_kernels(swapped, "bayesnet.cu")["bn_sweep"]
    values = {n: n for n in a.names}
    assert a.bind(**values) == a.names and b.bind(**values) == b.names
    i, j = a.names.index("par"), a.names.index("ch_ptr")
    assert b.bind(**values)[i] == "ch_ptr" and b.bind(**values)[j] == "par"


@pytest.mark.parametrize("call, message", [
    (dict(x=1, out=2, row_ptr=3), "missing R"),
    (dict(x=1, out=2, row_ptr=3, R=4, r=5), "unknown r"),
    (dict(x=1, out=2, rowptr=3, R=4), "missing row_ptr; unknown rowptr"),
])
def test_a_wrong_name_raises_and_names_it(call, message):
    with pytest.raises(TypeError, match=message) as info:
        _kernel_args.args("bayesnet.cu", "bn_normalise", **call)
    assert "x, out, row_ptr, R" in str(info.value)
    with pytest.raises(TypeError, match=message):
        _kernel_args.packed("bayesnet.cu", "bn_normalise", **call)


def test_part_checks_its_names():
    assert _kernel_args.part("bayesnet.cu", "bn_normalise", x=1) == {"x": 1}
    with pytest.raises(TypeError, match="unknown y"):
        _kernel_args.part("bayesnet.cu", "bn_normalise", x=1, y=2)
    with pytest.raises(ValueError, match="no __global__ function 'nope'"):
        _kernel_args.args("bayesnet.cu", "nope", x=1)


def test_philox_keywords_equal_the_loaders_tuples():
    from gpumcmc import _loader

    key, off = (0x12345678, 0x9ABCDEF0), (7 << 32) + 5
    d = _kernel_args.philox(key, off)
    assert tuple(d) == _PHILOX
    assert all(type(a) is type(b) and a == b for a, b in zip(d.values(), _loader.philox_args(key, off)))
    assert [int(v) for v in d.values()] == [0x12345678, 0x9ABCDEF0, 5, 7]
    dd = _kernel_args.philox_dev(key, off)
    assert all(type(a) is type(b) and a == b for a, b in zip(dd.values(), _loader.philox_dev_args(key, off)))
    assert tuple(dd) == (*_PHILOX, "off_dev") and dd["off_dev"] == 0  # null outside a replay block
    with _loader.replay_offset(0xDEAD0000):  # inside one: the address the kernels read the offset from
        dd = _kernel_args.philox_dev(key, off)
        assert dd["off_dev"] == 0xDEAD0000 and type(dd["off_dev"]) is np.uint64
        assert all(type(a) is type(b) and a == b for a, b in zip(dd.values(), _loader.philox_dev_args(key, off)))


# -- the optional check of values ------------------------------------------------------------

@pytest.fixture
def checking():
    old = _kernel_args.set_checking(True)
    yield
    _kernel_args.set_checking(old)


def _normalise_args(**change):
    values = dict(x=np.zeros(3), out=np.zeros(3), row_ptr=np.zeros(2, np.int32), R=np.int32(1))
    values.update(change)
    return values


@pytest.mark.parametrize("change, message", [
    (dict(R=np.int64(1)), "argument R \\(int\\) is int64; int32 is expected"),
    (dict(R=1), "Python int, which CuPy passes as int64"),
    (dict(R=1.0), "Python float, which CuPy passes as float64"),
    (dict(R="1"), "is str"),
    (dict(row_ptr=np.zeros(2, np.int64)), "array of int64; int32 is expected"),
    (dict(x=None), "is None"),
    (dict(x=12345), "other than numpy.uint64"),
    (dict(R=np.zeros(1, np.int32)), "is an array; a value is expected"),
])
def test_checking_catches_a_wrong_value(checking, change, message):
    assert len(_kernel_args.args("bayesnet.cu", "bn_normalise", **_normalise_args())) == 4
    with pytest.raises(TypeError, match=message):
        _kernel_args.args("bayesnet.cu", "bn_normalise", **_normalise_args(**change))


def test_checking_keeps_one_dtype_per_template_type(checking):
    good = dict(x=np.zeros(4, np.float32), n_rows=np.int64(2), K=np.int32(2), G=np.int32(2), log_out=np.int32(0))
    _kernel_args.args("gamma.cu", "lse_rows", **good)
    values = dict(pre=np.zeros(4, np.float32), bias=np.zeros(2, np.float64), out=np.zeros(4, np.float32),
                  rows=np.int64(2), cols=np.int64(2), **_kernel_args.philox((1, 2), 3))
    with pytest.raises(TypeError, match="argument of type T was of float32"):
        _kernel_args.args("rbm.cu", "rbm_bernoulli", **values)
    # a Python float for a T value goes in as a double: wrong beside float32 arrays
    gamma = {n: np.uint64(0) for n in _kernel_args.signature("gamma.cu", "gamma_draw").names}
    gamma.update(shape=np.zeros(2, np.float32), shape_step=np.int64(1), scale=np.zeros(2, np.float32),
                 scale_step=np.int64(1), scale_value=np.float32(1), out=np.zeros(2, np.float32), n=np.int64(2),
                 log_out=np.int32(0), chunk=np.int64(1), **_kernel_args.philox((1, 2), 3))
    gamma["trials"] = np.zeros(2, np.int32)
    _kernel_args.args("gamma.cu", "gamma_draw", **gamma)
    with pytest.raises(TypeError, match="scale_value .* is of float64, but an earlier argument of type T"):
        _kernel_args.args("gamma.cu", "gamma_draw", **{**gamma, "scale_value": 1.0})
    # a null address for a T* (lda_col_normalise without a running sum) binds no T: float32 arrays beside it
    f = np.zeros(4, np.float32)
    null = np.uint64(0)
    norm = dict(x=f, m=f, s=f, out=f, sum_in=null, sum_out=null, keep=null,
                n=np.int64(4), K=np.int32(2), cnt=null, pn=null, prior=np.float32(0), vprior=np.float32(0))
    _kernel_args.args("lda.cu", "lda_col_normalise", **norm)
    with pytest.raises(TypeError, match="sum_in .* is of float64, but an earlier argument of type T"):
        _kernel_args.args("lda.cu", "lda_col_normalise", **{**norm, "sum_in": np.zeros(4)})


def test_checking_packed_launches(checking):
    values = {n: 0 for n in _kernel_args.signature("gamma.cu", "dirichlet_draw").names}
    values["alpha"], values["out"] = 1 << 40, np.uint64(1 << 41)
    _kernel_args.packed("gamma.cu", "dirichlet_draw", **values)
    with pytest.raises(TypeError, match="packed launch takes its address"):
        _kernel_args.packed("gamma.cu", "dirichlet_draw", **{**values, "alpha": np.zeros(2, np.float32)})
    with pytest.raises(TypeError, match="argument K \\(int\\) is a float"):
        _kernel_args.packed("gamma.cu", "dirichlet_draw", **{**values, "K": 2.0})


def test_checking_is_off_by_default_and_costs_nothing_then():
    # off unless GPUMCMC_CHECK_KERNEL_ARGS is set (to other than 0), read at import: a fresh interpreter
    # imports the module under each setting
    import os
    import subprocess
    import sys

    code = textwrap.dedent("""
        import importlib, os
        from gpumcmc import _kernel_args
        seen = []
        for value in (None, "", "0", "1", "yes"):
            os.environ.pop("GPUMCMC_CHECK_KERNEL_ARGS", None)
            if value is not None:
                os.environ["GPUMCMC_CHECK_KERNEL_ARGS"] = value
            seen.append(importlib.reload(_kernel_args).set_checking(False))
        print(seen)
        """)
    env = {k: v for k, v in os.environ.items() if k != "GPUMCMC_CHECK_KERNEL_ARGS"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[False,", "False,", "False,", "True,", "True]"]
    # off: a wrong kind passes (the static test is the guard)
    old = _kernel_args.set_checking(False)
    try:
        assert _kernel_args.args("bayesnet.cu", "bn_normalise", **_normalise_args(R=1))[-1] == 1
    finally:
        _kernel_args.set_checking(old)


# -- the parser on its own ---------------------------------------------------------------------

def test_parser_reads_templates_macros_and_skips_declarations():
    src = textwrap.dedent('''
        // a comment with __global__ void fake(int a) { }
        #define ARGS(T) const T*, int
        typedef unsigned int u32;
        template <typename T, int N = 4>
        __global__ void __launch_bounds__(128, (N > 2 ? 1 : 2)) SOME_BOUNDS
        k(const T* __restrict__ a, /* the count */ int n, u32 seed, void* out) { }
        extern "C" __global__ void plain(double* x, unsigned long long tag);
        extern "C" __global__ void plain(double* x, unsigned long long tag) { }
        template __global__ void k<float, 4>(ARGS(float), u32, void*);
        ''')
    sigs = parse_kernels(src, "t.cu")
    assert set(sigs) == {"k", "plain"}
    k = sigs["k"]
    assert k.template == (("typename", "T"), ("int", "N"))
    assert k.names == ("a", "n", "seed", "out")
    assert [p.base for p in k.params] == ["T", "int", "unsigned int", "void"]
    assert [p.pointer for p in k.params] == [True, False, False, True]
    assert sigs["plain"].params[1].dtype == np.dtype(np.uint64) and sigs["plain"].template == ()


def test_parser_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match="cannot read the parameter"):
        parse_kernels("__global__ void k(int) { }", "t.cu")
    with pytest.raises(ValueError, match="reference"):
        parse_kernels("__global__ void k(int& a) { }", "t.cu")
    with pytest.raises(ValueError, match="share a name"):
        parse_kernels("__global__ void k(int a, float a) { }", "t.cu")
