"""Write the Benchmarks pages from the committed JSON in ``benchmarks/results/``.

Nothing here measures anything: every figure is read from a results file, and
each table names the file and the device it came from. Rows are labelled by what
was timed:

``public call``
    gpumcmc as a user calls it: an estimator's ``fit``/``run`` (or the run driver
    that ``fit`` uses), or a public function called directly with its defaults.
``kernel only``
    a bare loop over a sampler's ``step``, one stage of a sweep, or a kernel
    variant; these leave out what the public call adds per iteration.
``peer``
    another library (or a hand-written CuPy version) timed in the same run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

PUBLIC, KERNEL, PEER = "public call", "kernel only", "peer"

# The headline: public calls against their peers, from the same run of a suite.
# metric: "ms" (lower is better), "sweep_ms" (the note's per-sweep time),
# "min_ess_s" (the note's min-ESS/s, higher is better), "seconds".
HEADLINE = [
    dict(model="Random variates", what="Gamma, 2^26 per-element shapes, float32",
         file="rng-nvidia-h100-80gb-hbm3.json", case="gamma per-element shape float32",
         ours="gpumcmc (Marsaglia-Tsang, Philox)", metric="ms",
         peers=["torch._standard_gamma", "cupy Generator.standard_gamma", "jax.random.gamma (jit)"]),
    dict(model="Random variates", what="Dirichlet, 65,536 rows x 256, float32",
         file="rng-nvidia-h100-80gb-hbm3.json", case="dirichlet rows 65536x256 float32",
         ours="gpumcmc (log-sum-exp rows)", metric="ms",
         peers=["torch Dirichlet.sample", "cupy legacy gamma / row sum", "jax.random.dirichlet (jit)"]),
    dict(model="Discrete draws", what="categorical, 2^20 rows x K = 1024, float32",
         file="categorical-nvidia-h100-80gb-hbm3.json", case="categorical n=1048576 K=1024 float32",
         ours="gpumcmc auto", metric="ms",
         peers=["torch.multinomial", "jax.random.categorical (log w)", "cupy cumsum + compare"]),
    dict(model="LDA", what="one sweep, 3.07 M tokens, K = 1024",
         file="lda-nvidia-h100-80gb-hbm3.json", case="paper T=3072662 K=1024",
         ours="gpumcmc LDA (driver)", metric="sweep_ms", peers=["plain CuPy sweep"]),
    dict(model="DP mixture", what="fit, FACSCalibur FCS file, 37,395 events, k = 64",
         file="mixture-nvidia-h100-80gb-hbm3.json", case="mixture fcs facscalibur n=37395 p=7 k=64",
         ours="gpumcmc BEM fit (GPU), tol = 1e-3 / n", metric="ms",
         peers=["sklearn BayesianGaussianMixture (CPU)"]),
    dict(model="Bayesian GLM", what="flat logistic, N = 10^5, K = 50 (min-ESS/s)",
         file="glm-nvidia-h100-80gb-hbm3.json", case="flat logistic N=100000 K=50",
         ours="gpumcmc BayesianGLM slice-within-Gibbs", metric="min_ess_s", peers=["numpyro NUTS"]),
    dict(model="Hierarchical GLM", what="logistic, 1,000 groups x 20 x 100 (min-ESS/s)",
         file="glm-nvidia-h100-80gb-hbm3.json", case="hierarchical logistic G=1000 K=20 n=100",
         ours="gpumcmc HierarchicalGLM", metric="min_ess_s", peers=["numpyro NUTS (non-centred)"]),
    dict(model="RBM", what="fit, digits 1797 x 64, 256 hidden, 20 epochs",
         file="rbm-fit-nvidia-h100-80gb-hbm3.json", case="rbm fit digits 1797x64 hidden=256 epochs=20",
         ours="gpumcmc RBM.fit (GPU)", metric="ms", peers=["scikit-learn BernoulliRBM (CPU)"]),
    dict(model="Nested sampling", what="sinusoid, 1 atom, 10^5 points (whole run)",
         file="nested-nvidia-h100-80gb-hbm3.json", case="sinusoid 1 atom n_data=100000",
         ours="gpumcmc fused f32 M=10 N=100 R=50", metric="ms",
         peers=["dynesty (CPU) nlive=50", "jaxns 3.0.0 on GPU (compiled)"]),
]


def kind(suite: str, row: dict) -> str:
    """What a row times: PUBLIC, KERNEL or PEER (see the module docstring)."""
    impl, case = row.get("impl", ""), row.get("case", "")
    ours = impl.startswith("gpumcmc") or suite in ("bayesnet", "bayesnet-devices")
    if not ours:
        return PEER
    if suite in ("lda", "lda_graph"):
        return PUBLIC if impl.startswith("gpumcmc LDA") else KERNEL
    if suite == "mixture":
        return PUBLIC if " fit" in impl else KERNEL
    if suite in ("bayesnet", "bayesnet-devices"):
        return KERNEL if "part:" in case else PUBLIC
    if suite == "glm":
        return PUBLIC if re.search(r"GLM|loglik_and_grad", impl) else KERNEL
    if suite in ("ising", "rbm-fit"):
        return PUBLIC if ".fit" in impl else KERNEL
    if suite == "nested":
        return KERNEL if "loglike" in case else PUBLIC
    if suite in ("rng", "categorical", "validation", "valcost"):
        return KERNEL if "validation off" in impl else PUBLIC
    return KERNEL


def _fmt(x, digits=3) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        if x == 0:
            return "0"
        if abs(x) >= 1e5 or abs(x) < 1e-3:
            return f"{x:.3g}"
        return f"{x:.{digits}g}" if abs(x) < 100 else f"{x:,.0f}"
    return str(x)


def _cell(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _load(results: Path) -> dict[str, dict]:
    out = {}
    for path in sorted(results.glob("*.json")):
        try:
            out[path.name] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return out


def _value(row: dict, metric: str):
    note = row.get("note") or ""
    if metric == "sweep_ms":
        # gpumcmc's rows time 10 sweeps and give the per-sweep time in the note;
        # the peer's row times one sweep.
        m = re.search(r"([\d.]+) ms per sweep", note)
        return float(m.group(1)) if m else row.get("ms")
    if metric == "min_ess_s":
        m = re.search(r"min-ESS/s ([\d.]+)", note)
        return float(m.group(1)) if m else None
    return row.get("ms")


def _show(v, metric) -> str:
    if v is None:
        return "n/a"
    if metric == "min_ess_s":
        return f"{_fmt(v)} min-ESS/s"
    if v >= 1000:
        return f"{v / 1000:.3g} s"
    return f"{_fmt(v)} ms"


def headline(data: dict[str, dict]) -> list[dict]:
    """The headline rows with their values, skipping any whose file or row is missing."""
    out = []
    for spec in HEADLINE:
        d = data.get(spec["file"])
        if not d:
            continue
        rows = [r for r in d.get("rows", []) if r.get("case") == spec["case"]]
        ours = next((r for r in rows if r.get("impl") == spec["ours"]), None)
        if ours is None or _value(ours, spec["metric"]) is None:
            continue
        v = _value(ours, spec["metric"])
        peers = []
        for name in spec["peers"]:
            p = next((r for r in rows if r.get("impl") == name), None)
            pv = _value(p, spec["metric"]) if p else None
            if pv:
                ratio = (v / pv) if spec["metric"] == "min_ess_s" else (pv / v)
                peers.append((name, pv, ratio))
        out.append(dict(spec, value=v, peer_values=peers, device=d.get("device", "?"),
                        commit=d.get("git_commit"), date=d.get("date")))
    return out


def headline_markdown(rows: list[dict], link_files: bool = True) -> str:
    lines = ["| model | case | gpumcmc | peer (same run) | gpumcmc faster by | device, file |",
             "| --- | --- | --- | --- | --- | --- |"]
    for h in rows:
        peers = "; ".join(f"{n}: {_show(pv, h['metric'])}" for n, pv, _ in h["peer_values"])
        ratios = "; ".join(f"{r:.3g}x" for _, _, r in h["peer_values"])
        src = f"`{h['file']}`"
        lines.append(f"| {h['model']} | {_cell(h['what'])} | {_show(h['value'], h['metric'])} | "
                     f"{_cell(peers)} | {ratios} | {h['device']}, {src} |")
    return "\n".join(lines)


def _headline_plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    labels, ratios = [], []
    for h in rows:
        for name, _, r in h["peer_values"]:
            labels.append(f"{h['model']}: vs {name}")
            ratios.append(r)
    if not ratios:
        return False
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(ratios) + 1.2))
    y = range(len(ratios))[::-1]
    ax.barh(list(y), ratios, color=["#3b7dd8" if r >= 1 else "#d8763b" for r in ratios])
    ax.set_xscale("log")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_yticks(list(y))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("times faster than the peer (log scale)")
    devices = sorted({h["device"] for h in rows})
    ax.set_title("gpumcmc's public calls against peers, " + ", ".join(devices), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _figure7_plot(d: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=False)
    for ax, dtype in zip(axes, ("float32", "float64")):
        series: dict[str, list] = {}
        for r in d.get("rows", []):
            p = r.get("params", {})
            if p.get("dtype") != dtype or r.get("ms") is None:
                continue
            series.setdefault(r["impl"], []).append((p.get("K"), r["ms"]))
        for impl, pts in sorted(series.items()):
            pts.sort()
            ax.plot([k for k, _ in pts], [m for _, m in pts], label=impl.replace("gpumcmc ", ""), lw=1.2)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("K (categories)")
        ax.set_title(dtype)
    axes[0].set_ylabel("ms per call")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _suite_table(suite: str, rows: list[dict]) -> list[str]:
    order = {PUBLIC: 0, PEER: 1, KERNEL: 2}
    tagged = sorted(((kind(suite, r), i, r) for i, r in enumerate(rows)), key=lambda t: (order[t[0]], t[1]))
    lines = ["| what is timed | case | implementation | ms | items/s | of floor | note |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for k, _, r in tagged:
        frac = r.get("fraction_of_floor")
        lines.append("| " + " | ".join(_cell(x) for x in (
            k, r.get("case", ""), r.get("impl", ""), _fmt(r.get("ms")), _fmt(r.get("items_per_s")),
            f"{100 * frac:.0f}%" if isinstance(frac, float) else "", (r.get("note") or "")[:160])) + " |")
    return lines


def _generic_table(rows: list[dict]) -> list[str]:
    keys: list[str] = []
    for r in rows:
        for k, v in r.items():
            if k not in keys and not isinstance(v, (dict, list)):
                keys.append(k)
    lines = ["| " + " | ".join(keys) + " |", "|" + " --- |" * len(keys)]
    for r in rows:
        lines.append("| " + " | ".join(_cell(_fmt(r.get(k))) for k in keys) + " |")
    return lines


def write(results: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    data = _load(results)
    rows = headline(data)
    head = ["# Headline: public calls against peers", "",
            "Each row is one public call of gpumcmc (an estimator's `fit` or `run`, or a function called",
            "directly with its defaults, value checks on) beside the other libraries timed in the same run",
            "of the same benchmark suite, on the GPU named in the row. The figures are read from the",
            "committed files in `benchmarks/results/` when these pages are built.", "",
            headline_markdown(rows), ""]
    if _headline_plot(rows, out / "headline.png"):
        head += ["```{image} headline.png", ":alt: gpumcmc's public calls against their peers", "```", ""]
    head += ["Ratios above 1 mean gpumcmc is faster. For min-ESS/s (effective draws per second of the",
             "whole fit, warm-up and compilation included) the ratio is gpumcmc's rate over the peer's.", ""]
    _write(out / "headline.md", "\n".join(head))

    suites = ["# All suites", "",
              "Every committed results file, one section each. In each table the public calls come first,",
              "then the peers, then the rows that time a bare step loop, one stage or a kernel variant",
              "(**kernel only**: they leave out what a public call adds per iteration).", ""]
    for name, d in data.items():
        title = d.get("suite") or name[:-5] if isinstance(d, dict) else name
        suites += [f"## {title}", ""]
        if not isinstance(d, dict):
            suites += [f"`{name}`: not a table.", ""]
            continue
        device = d.get("device") or d.get("machine") or "not recorded"
        meta = f"File `{name}`; device: **{device}**"
        if d.get("git_commit"):
            meta += f"; commit {d['git_commit']}"
        if d.get("date"):
            meta += f"; {str(d['date'])[:10]}"
        if d.get("cpu_count") or d.get("cpus"):
            meta += f"; {d.get('cpu_count') or d.get('cpus')} CPU cores"
        suites += [meta + ".", ""]
        if isinstance(d.get("note"), str):
            suites += [_cell(d["note"]), ""]
        rs = d.get("rows")
        if name.startswith("figure7") and _figure7_plot(d, out / "figure7.png"):
            suites += ["```{image} figure7.png", ":alt: Figure 7: ms per call against K for each method", "```", "",
                       "Per-method times of the fused LDA-shaped draw against K (kernel only: methods forced,",
                       "value checks off).", ""]
            continue
        if isinstance(rs, list) and rs and all(isinstance(r, dict) for r in rs):
            if "impl" in rs[0] and "case" in rs[0] and d.get("suite") not in (None, "glm_cpu"):
                suites += _suite_table(d.get("suite", ""), rs)
            else:
                suites += _generic_table(rs)
            suites.append("")
        else:
            suites += [f"Not tabulated here: see `benchmarks/results/{name}`.", ""]
    _write(out / "suites.md", "\n".join(suites))
    _write(out / "goals.md", goals_markdown(results / "issue40-final"))


def goals_markdown(runs: Path) -> str:
    """The page of the public calls against their goals: each run of ``scripts/gpu-checks/issue40-final.sh``
    (a folder of ``benchmarks/results/issue40-final/``, named by host and commit), its ``compare.md`` as
    ``python -m benchmarks.compare_public`` wrote it."""
    lines = ["# Public calls against their goals", "",
             "Each table is one run on one host (`scripts/gpu-checks/issue40-final.sh`): every public call",
             "with its defaults, timed as a user calls it and by the suite's public row, with the suite's bare",
             "step (**kernel only**) beside them and the goal each figure answers.",
             "`python -m benchmarks.compare_public DIR` makes the table from the run's files, which are",
             "committed beside it.", ""]
    found = []
    for d in sorted(runs.glob("*/compare.md")) if runs.is_dir() else []:
        host = d.parent / "host.txt"
        head = host.read_text().splitlines()[:2] if host.exists() else []
        found.append((head[0] if head else "", d, head))
    for date, path, head in found:
        gpus = sorted({ln.split("(UUID")[0].split(":", 1)[1].strip() for ln in
                       (path.parent / "host.txt").read_text().splitlines() if ln.startswith("GPU ")}) \
            if (path.parent / "host.txt").exists() else []
        lines += [f"## {path.parent.name}", "",
                  f"{' and '.join(gpus) or 'GPU not recorded'}; {' '.join(head[1:]) or 'commit not recorded'}; "
                  f"{date or 'date not recorded'}. Files: `benchmarks/results/issue40-final/{path.parent.name}/`.",
                  "", path.read_text().strip(), ""]
    if not found:
        lines += ["No run is committed yet.", ""]
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
