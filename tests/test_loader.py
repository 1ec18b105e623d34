"""The kernel loader: sources found, compile keys that see every header, clear errors."""

import pathlib
import re

import numpy as np
import pytest

from gpumcmc import _loader


def test_every_kernel_source_is_found_and_its_includes_resolve():
    """Every .cu file of kernels_cu/ is found, each hashes (its includes resolve) and to a key of its own."""
    srcs = _loader.kernel_sources()
    names = {p.name for p in srcs}
    on_disk = {p.name for p in (pathlib.Path(__file__).resolve().parents[1] / "kernels_cu").glob("*.cu")}
    assert names == on_disk and {"random_fill.cu", "gamma.cu", "lda.cu"} <= names
    hashes = {_loader.source_hash(p.name) for p in srcs}
    assert len(hashes) == len(srcs) and all(re.fullmatch(r"[0-9a-f]{16}", h) for h in hashes)


def test_compile_options(tmp_path):
    opts = _loader.compile_options("random_fill.cu", defines=(("GPUMCMC_FILL_BLOCK", 128),))
    assert opts == ("-std=c++17", f"-I{_loader.kernel_dir()}",
                    f"-DGPUMCMC_SRC_HASH=0x{_loader.source_hash('random_fill.cu')}ULL", "-DGPUMCMC_FILL_BLOCK=128")
    _tree(tmp_path, "1.0f")  # another folder: its headers are included and hashed
    assert _loader.compile_options("probe.cu", directory=tmp_path)[1:] == (
        f"-I{tmp_path}", f"-DGPUMCMC_SRC_HASH=0x{_loader.source_hash('probe.cu', tmp_path)}ULL")


def _tree(tmp_path, value: str):
    (tmp_path / "inner.cuh").write_text(f"#pragma once\n#define GPUMCMC_TEST_VALUE {value}\n")
    (tmp_path / "outer.cuh").write_text('#pragma once\n#include "inner.cuh"\n')
    (tmp_path / "probe.cu").write_text(
        '#include "outer.cuh"\n'
        'extern "C" __global__ void probe(float* out) { out[0] = GPUMCMC_TEST_VALUE; }\n'
    )


def test_editing_a_nested_header_changes_the_compile_key(tmp_path):
    _tree(tmp_path, "1.0f")
    before = _loader.compile_options("probe.cu", directory=tmp_path)
    (tmp_path / "inner.cuh").write_text("#pragma once\n#define GPUMCMC_TEST_VALUE 2.0f\n")
    after = _loader.compile_options("probe.cu", directory=tmp_path)
    assert before != after


def test_missing_header_is_named(tmp_path):
    (tmp_path / "bad.cu").write_text('#include "nowhere.cuh"\n')
    with pytest.raises(FileNotFoundError, match="nowhere.cuh"):
        _loader.source_hash("bad.cu", tmp_path)


def test_edited_header_is_never_answered_from_a_stale_cache(cp, tmp_path):
    _tree(tmp_path, "1.0f")
    out = cp.zeros(1, dtype=cp.float32)
    _loader.get_function("probe.cu", "probe", directory=tmp_path)((1,), (1,), (out,))
    assert float(out[0]) == 1.0
    (tmp_path / "inner.cuh").write_text("#pragma once\n#define GPUMCMC_TEST_VALUE 2.0f\n")
    _loader.clear_cache()  # a new process: only CuPy's on-disk cache remains
    _loader.get_function("probe.cu", "probe", directory=tmp_path)((1,), (1,), (out,))
    assert float(out[0]) == 2.0


def test_compile_error_names_the_file_and_shows_the_log(cp, tmp_path):
    (tmp_path / "broken.cu").write_text('extern "C" __global__ void k(float* o) { o[0] = undefined_name; }\n')
    with pytest.raises(_loader.KernelCompileError) as info:
        _loader.get_function("broken.cu", "k", directory=tmp_path)
    msg = str(info.value)
    assert "broken.cu" in msg and "undefined_name" in msg


def test_modules_are_memoised_per_device(cp):
    from gpumcmc._config import config

    names = ("fill_uniform<float>", "fill_uniform<double>", "fill_normal<float>", "fill_normal<double>")
    with config.override(compile_kernels_alone=False):  # one module holds every instantiation listed
        f1 = _loader.get_function("random_fill.cu", "fill_uniform<float>", names)
        n = len(_loader._modules)
        f2 = _loader.get_function("random_fill.cu", "fill_uniform<double>", names)
    assert len(_loader._modules) == n
    assert f1 is not None and f2 is not None


def test_a_long_compile_says_what_the_wait_is_once(capsys, monkeypatch):
    # A first use compiles for up to a minute with nothing on the screen: past config.compile_notice_s a
    # one-line notice says what the wait is, once a process; a short block (a cache hit) prints nothing.
    import time

    from gpumcmc._config import config

    monkeypatch.setattr(_loader, "_noticed", type(_loader._noticed)())
    with config.override(compile_notice_s=0.05):
        with _loader._compile_notice():
            pass
        time.sleep(0.15)
        assert capsys.readouterr().err == ""
        for _ in range(2):
            with _loader._compile_notice():
                time.sleep(0.3)
        assert capsys.readouterr().err.count("compiling CUDA kernels") == 1
    monkeypatch.setattr(_loader, "_noticed", type(_loader._noticed)())
    with config.override(compile_notice_s=None), _loader._compile_notice():
        time.sleep(0.1)
    assert capsys.readouterr().err == ""


def test_compiles_are_logged_on_request(cp, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GPUMCMC_LOG_COMPILES", "1")
    _tree(tmp_path, "3.0f")
    _loader.get_function("probe.cu", "probe", directory=tmp_path)
    assert "probe.cu" in capsys.readouterr().err


def test_kernels_alone_compiles_only_the_instantiation_asked_for(monkeypatch):
    # config.compile_kernels_alone: get_function compiles the one instantiation asked for (a first use
    # then compiles what it calls, not the whole list); off, the whole list in one module, as before.
    import sys
    import types

    from gpumcmc._config import config

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0)))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    asked = []

    class Module:
        def get_function(self, name):
            return name

    def module(filename, names, defines, directory, prelude=""):
        asked.append(names)
        return Module()

    monkeypatch.setattr(_loader, "_module", module)
    names = ("k<float>", "k<double>")
    try:
        for alone, expect in ((True, [("k<double>",), ("k<float>",), ()]), (False, [names, names, names])):
            _loader.clear_cache()
            asked.clear()
            with config.override(compile_kernels_alone=alone):
                assert _loader.get_function("x.cu", "k<double>", names) == "k<double>"
                assert _loader.get_function("x.cu", "k<float>", names) == "k<float>"
                assert _loader.get_function("x.cu", "plain", names) == "plain"  # extern "C": no instantiation
            assert asked == expect
    finally:
        _loader.clear_cache()


def test_launch_returns_at_once_for_empty_input(monkeypatch):
    """No launch for no work; otherwise one launch with the block, arguments and shared memory given, over
    a grid that covers the items, capped at blocks_per_sm blocks a multiprocessor (a grid-stride loop does
    the rest)."""
    monkeypatch.setattr(_loader, "sm_count", lambda: 2)  # as on a GPU of two multiprocessors
    called = []

    def kernel(grid, block, args, shared_mem=0):
        called.append((grid, block, args, shared_mem))

    _loader.launch(kernel, 0, ())
    _loader.launch(kernel, -1, ())
    assert not called
    _loader.launch(kernel, 1000, (1, 2), block=128, shared_mem=64)  # ceil(1000 / 128) = 8 blocks
    _loader.launch(kernel, 1, (3,))
    _loader.launch(kernel, 10**6, (4,), blocks_per_sm=5)  # capped at 2 * 5 blocks
    assert called == [((8,), (128,), (1, 2), 64), ((1,), (256,), (3,), 0), ((10,), (256,), (4,), 0)]


def test_scalar_casts_are_explicit():
    """Each cast gives its C type and keeps the value, also where a narrower type would not."""
    for cast, typ, value in ((_loader.i32, np.int32, -(2**31)), (_loader.i64, np.int64, 2**40 + 3),
                             (_loader.u32, np.uint32, 2**32 - 1), (_loader.u64, np.uint64, 2**63 + 5)):
        out = cast(value)
        assert type(out) is typ and int(out) == value, (cast.__name__, out)
    for dtype in (np.float32, np.float64):
        out = _loader.real(0.1, dtype)
        assert type(out) is dtype and out == dtype(0.1)
    assert _loader.real(0.1, np.float64) != np.float32(0.1)  # float64 keeps what float32 rounds off


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_gamma_draw_arguments_pack_as_the_kernel_lays_them_out(dtype):
    # PackedLaunch hands gamma_draw one buffer; its struct format must put
    # every parameter where the C ABI does. ctypes lays out the same
    # parameters as a C struct (the kernel parameter buffer's rules).
    import ctypes
    import struct

    from gpumcmc.random import _gamma

    real = ctypes.c_float if dtype == np.float32 else ctypes.c_double
    P, LL, U, I = ctypes.c_void_p, ctypes.c_longlong, ctypes.c_uint, ctypes.c_int
    params = [("shape", P), ("shape_step", LL), ("scale", P), ("scale_step", LL), ("scale_value", real),
              ("out", P), ("n", LL), ("k0", U), ("k1", U), ("off_lo", U), ("off_hi", U), ("off_dev", P), ("log_out", I),
              ("trials", P), ("chunk", LL), ("next", P), ("status", P), ("tag", ctypes.c_uint64)]
    layout = type("Params", (ctypes.Structure,), {"_fields_": params})
    fmt = _gamma._GAMMA_ARGS[np.dtype(dtype)]
    assert struct.calcsize(fmt) == ctypes.sizeof(layout)
    values = list(range(1, len(params) + 1))
    packed = struct.pack(fmt, *values)
    c = layout.from_buffer_copy(packed)
    assert [getattr(c, name) for name, _ in params] == values


def test_gamma_packed_arguments_match_the_kernel_signature():
    """The hand-packed gamma_draw argument struct is checked against gamma.cu before any launch."""
    import numpy as np

    from gpumcmc import _loader
    from gpumcmc.random import _gamma

    for dt, ctype in ((np.float32, "float"), (np.float64, "double")):
        assert _gamma._GAMMA_ARGS[np.dtype(dt)] == _loader.packed_format("gamma.cu", "gamma_draw", ctype)


def test_packed_format_follows_a_changed_signature(tmp_path):
    from gpumcmc import _loader

    (tmp_path / "k.cu").write_text("template <typename T>\n__global__ void __launch_bounds__(128)\n"
                                   "k(const T* __restrict__ a, int n, T x, long long m) { }\n")
    assert _loader.packed_format("k.cu", "k", "float", tmp_path) == "<Qifq"
    assert _loader.packed_format("k.cu", "k", "double", tmp_path) == "<Qi4xdq"


def test_packed_formats_of_the_categorical_and_dirichlet_kernels_match_c_layout():
    """The formats launch_packed reads for cat_row_warp, cat_warp/cat_prefix and dirichlet_draw lay the
    parameters out as a C struct of the same fields does (ctypes gives the C alignment)."""
    import ctypes
    import struct

    from gpumcmc import _loader

    P, LL, I, U, Q = ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int, ctypes.c_uint, ctypes.c_uint64
    philox = [U, U, U, U, P]
    # out, out64, key/offset, n_a, n_b, status, tag, cbase, cidx, ll, ll_group
    tail = [P, I, *philox, LL, LL, P, Q, LL, P, P, LL]
    kernels = {
        ("discrete_warp.cu", "cat_row_warp"): [P, P, P, P, LL, I, *tail],
        ("discrete.cu", "cat_warp"): [P, P, P, P, LL, I, P, I, I, *tail],
        ("discrete.cu", "cat_prefix"): [P, P, P, P, LL, I, P, I, I, *tail],
        ("gamma.cu", "dirichlet_draw"): [P, P, LL, LL, I, LL, I, *philox, I, P, Q],
    }
    for (filename, name), types in kernels.items():
        for ctype in ("float", "double"):
            fmt = _loader.packed_format(filename, name, ctype)
            layout = type("Params", (ctypes.Structure,), {"_fields_": [(f"p{i}", t) for i, t in enumerate(types)]})
            assert struct.calcsize(fmt) == ctypes.sizeof(layout), (name, fmt)
            values = list(range(1, len(types) + 1))
            c = layout.from_buffer_copy(struct.pack(fmt, *values))
            assert [getattr(c, f"p{i}") for i in range(len(types))] == values, (name, fmt)
