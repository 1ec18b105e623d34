"""The Figure 7 benchmark's K grid and plot (the timings themselves need a GPU)."""

from benchmarks import figure7


def test_k_grid_spans_4_to_1024():
    k = figure7.ks(False)
    assert k[0] == 4 and k[-1] == 1024 and k == sorted(set(k))
    assert all(x % 4 == 0 for x in k)
    assert figure7.ks(True) == [4, 8, 16, 32, 64, 128, 256, 512, 1024]


def test_plot_writes_a_png(tmp_path):
    rows = [{"case": f"figure7 T=16 K={k} {d}", "impl": f"gpumcmc {m}", "ms": 0.1 * k + i,
             "params": {"K": k, "dtype": d}}
            for k in figure7.ks(True) for d in ("float32", "float64") for i, m in enumerate(figure7.METHODS)]
    path = figure7.plot(rows, tmp_path / "f7.png", "test device")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
