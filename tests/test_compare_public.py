"""benchmarks.compare_public on small hand-made files of a run, and on the committed results' key names.

CPU only, no randomness: each test writes JSON (and logs) as user_path.py and the suites write them, and
checks the rows' figures and verdicts exactly.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import compare_public as cmp

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
F_G = "f+g bernoulli N=4000000 K=50 float32"


def _write(d: Path, name: str, data) -> None:
    (d / name).write_text(json.dumps(data))


def _bench(suite, rows, device="NVIDIA H100 80GB HBM3"):
    return {"suite": suite, "device": device, "rows": [dict(r, params=r.get("params", {})) for r in rows]}


@pytest.fixture
def run_dir(tmp_path):
    """One run's files: a met goal (Ising), a missed one (the mixture), a >10% disagreement (LDA K=1024),
    agreement within 10% (loglik_and_grad), and the RBM's suite rows without its kernel-only row."""
    _write(tmp_path, "user_path-a.json", {
        "device": "NVIDIA H100 80GB HBM3",
        "lda_site_packages_K1024_Mtokens_per_s": 2100.0,
        "ising_L16384_sample_flips_per_ns": 1500.0,
        "mixture_gibbs_n2^20_p14_k256_ms": 4.2,
        "glm_loglik_and_grad_N4M_K50_default_ms": 0.36,
        "glm_loglik_and_grad_N4M_K50_check_False_ms": 0.33,
        "mixture_bem_n2^20_p14_k256_ms": "error: RuntimeError: out of memory",
        "setup_s": {"lda_site_packages_K1024_Mtokens_per_s": 0.8}})
    _write(tmp_path, "lda-fit-vs-step.json", {
        "site_packages_K1024": {"fit_Mtokens_per_s": 1800.0, "step_Mtokens_per_s": 2000.0, "fit_setup_s": 0.85},
        "device": "NVIDIA H100 80GB HBM3"})
    _write(tmp_path, "mixture-profile-fit.json", {"gibbs_fit_ms": 3.9, "gibbs_step_ms": 3.4, "bem_fit_ms": 6.0,
                                                  "bem_step_ms": 6.2})
    _write(tmp_path, "glm-x.json", _bench("glm", [
        {"case": F_G, "impl": "gpumcmc loglik_and_grad, defaults (check=True: the status word)", "ms": 0.38},
        {"case": F_G, "impl": "gpumcmc loglik_and_grad (rows kernel, the default), check=False", "ms": 0.35},
        {"case": F_G + ", 8 chains", "impl": "gpumcmc loglik_and_grad, defaults (check=True: the status word)",
         "ms": 9.0}]))
    _write(tmp_path, "ising-user-path-x.json", _bench("ising-user-path", [
        {"case": "ising L=16384 per sweep, public call", "impl": "gpumcmc Ising.sample, defaults (progress=False)",
         "ms": 0.18, "flips_per_ns": 1491.0},
        {"case": "ising L=16384 per sweep, public call", "impl": "kernel only: sweep, observables off",
         "ms": 0.17, "flips_per_ns": 1579.0},
        {"case": "rbm fit digits 1797x64 hidden=256 per epoch, public call", "impl": "gpumcmc RBM.fit, progress=False",
         "ms": 9.0}]))
    return tmp_path


def _rows(d):
    return {r["id"]: r for r in cmp.compare(d)["rows"]}


def test_met_missed_and_missing_goals(run_dir):
    rows = _rows(run_dir)
    assert rows["ising_sample"]["status"] == "met"                  # 1,500 >= 1,400 flips/ns
    assert rows["ising_sample"]["kernel_only"] == 1579.0
    assert rows["mixture_gibbs"]["status"] == "missed"               # user_path's 4.2 ms > 4.0
    assert rows["mixture_gibbs"]["suite_status"] == "met"            # the suite's 3.9 ms is not the reference
    assert rows["lda_site_packages_K1024"]["status"] == "met"        # 2,100 >= 2,000
    assert rows["lda_site_packages_K1024"]["suite_status"] == "missed"
    assert rows["lda_setup"]["status"] == "met" and rows["lda_setup"]["user_path"] == 0.8
    assert rows["mixture_gibbs_over_step"]["status"] == "missed"    # 3.9 / 3.4 > 1.1
    assert rows["mixture_bem"]["status"] == "met"                    # 6.0 / 6.2 <= 1.1, judged in one process
    assert rows["fg_default"]["kernel_only"] == 0.35                 # the one-vector case, not the 8-chain one
    assert rows["fg_default_over_check_false"]["status"] == "missed"  # user_path.py's 0.36 / 0.33 > 1.05
    assert rows["fg_default_over_check_false"]["suite"] == pytest.approx(0.38 / 0.35)


def test_a_missing_figure_is_missing_not_met(run_dir):
    rows = _rows(run_dir)
    # absent from every file: the paper shape's LDA, the scaling, the Bayesian network
    for rid in ("lda_paper_shape_zipf_K1024", "scaling_mixture_2gpu", "scaling_lda_4gpu", "bayesnet"):
        assert rows[rid]["status"] == "missing", rid
    # an error string in user_path.py's place is no figure; BEM's verdict comes from the suite's own rows
    assert rows["mixture_bem"]["user_path"] is None
    # the RBM's public row without its kernel-only row: the 1.1x goal cannot be judged
    assert rows["rbm"]["suite"] == 9.0 and rows["rbm"]["kernel_only"] is None
    assert rows["rbm"]["status"] == "missing"
    summary = cmp.compare(run_dir)["summary"]
    assert "rbm" in summary["missing"] and "rbm" not in summary["met"]


def test_disagreement_over_ten_percent_is_flagged(run_dir):
    rows = _rows(run_dir)
    lda = rows["lda_site_packages_K1024"]
    assert lda["suite_over_user_path"] == pytest.approx(1800 / 2100)
    assert lda["disagree"] is True
    assert rows["fg_default"]["disagree"] is False                  # 0.38 / 0.36: within 10%
    assert rows["ising_sample"]["disagree"] is False
    assert rows["mixture_bem"]["disagree"] is None                  # nothing to compare with
    assert set(cmp.compare(run_dir)["summary"]["disagree"]) == {"lda_site_packages_K1024"}


def test_main_writes_json_and_markdown(run_dir, capsys):
    assert cmp.main([str(run_dir)]) == 0
    saved = json.loads((run_dir / "compare.json").read_text())
    assert {r["id"] for r in saved["rows"]} == {f.id for f in cmp.figures()}
    md = (run_dir / "compare.md").read_text()
    assert md == capsys.readouterr().out
    line = next(ln for ln in md.splitlines() if ln.startswith("| LDA(1024).fit, 29 M-token text"))
    assert "differ > 10%" in line and "| met |" in line
    assert cmp.main([str(run_dir)]) == 0                             # compare.json of a run is not read back
    assert json.loads((run_dir / "compare.json").read_text())["problems"] == []


def test_logs_stand_in_for_files_a_time_limit_stopped(tmp_path):
    (tmp_path / "user_path-scaling.log").write_text(
        "loading\n" + json.dumps({"scaling_mixture_gibbs_n1e7_k256_2gpu_efficiency": 0.95}) + "\n"
        + json.dumps({"scaling_glm_N2e7_K50_2gpu_efficiency": "error: ValueError: no"}) + "\n")
    (tmp_path / "lda-suite.log").write_text(json.dumps({"case": "paper_shape_zipf_K1024", "fit_Mtokens_per_s": 740.0,
                                                        "step_Mtokens_per_s": 760.0}) + "\n")
    _write(tmp_path, "scaling-x.json", _bench("scaling", [
        {"case": "scaling mixture n=10000000 p=14 k=256", "impl": "gpumcmc Gibbs sweep, devices=[0, 1]", "ms": 14.8,
         "params": {"devices": 2, "shards": 2, "scaling_efficiency": 0.94}},
        {"case": "scaling mixture n=10000000 p=14 k=256", "impl": "gpumcmc Gibbs sweep, devices=one_device(2)",
         "ms": 29.0, "params": {"devices": 1, "shards": 2, "scaling_efficiency": 0.97}}]))
    rows = _rows(tmp_path)
    assert rows["scaling_mixture_2gpu"]["user_path"] == 0.95
    assert rows["scaling_mixture_2gpu"]["kernel_only"] == 0.94       # two GPUs, not two shards of one
    assert rows["scaling_mixture_2gpu"]["status"] == "met"           # >= 0.9 and >= 0.94 - 0.05
    assert rows["scaling_glm_2gpu"]["status"] == "missing"
    assert rows["lda_paper_shape_zipf_K1024"]["suite"] == 740.0
    assert rows["lda_paper_shape_zipf_K1024"]["status"] == "missing"  # no user_path figure: not judged


def test_mixed_gpus_and_unknown_files_are_reported(run_dir):
    _write(run_dir, "user_path-b.json", {"device": "NVIDIA H200", "nested_sinusoid_1e5_M4_N64_R32_s": 0.1})
    _write(run_dir, "other.json", {"x": 1})
    problems = cmp.compare(run_dir)["problems"]
    assert any("more than one kind of GPU" in p for p in problems)
    assert any(p.startswith("other.json") for p in problems)
    with pytest.raises(ValueError, match="DIR"):
        cmp.compare(run_dir / "absent")


def test_the_committed_results_keys(tmp_path):
    """The key names of user_path.py's and the suites' committed files are those the comparison reads."""
    up = RESULTS / "user_path"
    for name in ("user_path-41226ae-nvidia-h100-80gb-hbm3.json",
                 "user_path-scaling-waves16-7b3cdd9-4xnvidia-h100-80gb-hbm3.json",
                 "glm-public-b9bb51e-nvidia-h100-80gb-hbm3.json", "lda-fit-vs-step-83560a2-nvidia-h100-80gb-hbm3.json",
                 "bayesnet-fit-vs-step-83560a2-nvidia-h100-80gb-hbm3.json"):
        shutil.copy(up / name, tmp_path / name)
    shutil.copy(RESULTS / "scaling-nvidia-h100-80gb-hbm3.json", tmp_path)
    result = cmp.compare(tmp_path)
    rows = {r["id"]: r for r in result["rows"]}
    assert result["problems"] == []
    assert rows["lda_site_packages_K1024"]["user_path"] == pytest.approx(1846.2555805602815)
    assert rows["ising_sample"]["user_path"] == pytest.approx(1465.3542033379547)
    assert rows["lda_setup"]["user_path"] == pytest.approx(0.8308160894000366)
    assert rows["fg_default"]["suite"] == pytest.approx(0.4028480052947998)
    assert rows["hierarchical_glm"]["kernel_only"] == pytest.approx(1.6201111299994864)
    assert rows["bayesnet"]["suite"] == pytest.approx(0.49076958000000553)
    assert rows["scaling_glm_4gpu"]["user_path"] == pytest.approx(0.9267868894730724)
    assert rows["scaling_glm_4gpu"]["kernel_only"] == pytest.approx(0.9633)
    # the LDA entry point's file of that commit timed a Zipf corpus of the text's size, and says so
    assert "Zipf" in rows["lda_site_packages_K1024"]["notes"]


def test_bayesnet_over_gpus_is_judged_against_its_bare_step(tmp_path):
    # bn_scaling.py's file: the fit's efficiency within 0.05 of its bare step's over the same shards (item 6).
    _write(tmp_path, "bn_scaling.json", {"cases": 1_000_000, "same": 10, "fit_1gpu_ms": 0.46, "step_1gpu_ms": 0.45,
                                         "fit_2gpu_efficiency": 0.34, "step_2gpu_efficiency": 0.73,
                                         "fit_4gpu_efficiency": 0.12, "step_4gpu_efficiency": 0.14})
    rows = _rows(tmp_path)
    # at 10^6 cases the rows are shown, not judged (bound by the host at that size)
    assert rows["scaling_bayesnet_2gpu"]["status"] == "no goal"
    assert rows["scaling_bayesnet_4gpu"]["kernel_only"] == 0.14
    assert rows["scaling_bayesnet_n1e7_2gpu"]["status"] == "missing"  # its own file, by its number of cases
    _write(tmp_path, "bn_scaling_10000000.json", {"cases": 10_000_000, "same": 10, "fit_1gpu_ms": 4.5,
                                                   "step_1gpu_ms": 4.5, "fit_2gpu_efficiency": 0.97,
                                                   "step_2gpu_efficiency": 0.99, "fit_4gpu_efficiency": 0.80,
                                                   "step_4gpu_efficiency": 0.99})
    rows = _rows(tmp_path)
    assert rows["scaling_bayesnet_n1e7_2gpu"]["status"] == "met"      # 0.97 >= 0.99 - 0.05
    assert rows["scaling_bayesnet_n1e7_4gpu"]["status"] == "missed"   # 0.80 < 0.99 - 0.05
    # where the file has the fits' loops timed inside the calls, they are judged, the whole calls noted
    _write(tmp_path, "bn_scaling_10000000.json", {"cases": 10_000_000, "same": 10, "fit_1gpu_ms": 4.5,
                                                   "step_1gpu_ms": 4.5, "fit_4gpu_efficiency": 1.83,
                                                   "fitloop_4gpu_efficiency": 0.97, "step_4gpu_efficiency": 0.99})
    rows = _rows(tmp_path)
    assert rows["scaling_bayesnet_n1e7_4gpu"]["user_path"] == 0.97
    assert rows["scaling_bayesnet_n1e7_4gpu"]["status"] == "met"
    assert "1.830" in rows["scaling_bayesnet_n1e7_4gpu"]["notes"]
    # a fit faster than its own bare step over the same shards is the set-up's noise: no figure, never met
    _write(tmp_path, "bn_scaling_10000000.json", {"cases": 10_000_000, "same": 10, "fit_1gpu_ms": 4.5,
                                                   "step_1gpu_ms": 4.5, "fit_4gpu_efficiency": 1.39,
                                                   "step_4gpu_efficiency": 1.02})
    rows = _rows(tmp_path)
    assert rows["scaling_bayesnet_n1e7_4gpu"]["status"] == "missing"
    assert "not a figure" in rows["scaling_bayesnet_n1e7_4gpu"]["notes"]
    assert rows["scaling_bayesnet_2gpu"]["user_path"] == 0.34  # the 10^6 figures are their own
    (tmp_path / "bn_scaling_10000000.json").unlink()
    rows = _rows(tmp_path)
    assert rows["scaling_bayesnet_n1e7_2gpu"]["status"] == "missing"  # never met without a figure


def test_issue38_rows_judge_the_floors_and_dynesty(run_dir):
    _write(run_dir, "user_path-n.json", {"device": "NVIDIA H100 80GB HBM3", "nested_shells_2d_nlive500_s": 1.0,
                                         "nested_shells_2d_nlive500_dynesty_s": 2.0,
                                         "nested_shells_10d_nlive500_s": 9.0})
    _write(run_dir, "glm-floor.json", _bench("glm", [
        {"case": F_G, "impl": "gpumcmc loglik_and_grad, defaults (check=True: the status word)", "ms": 0.40,
         "floor_ms": 0.20},
        {"case": F_G, "impl": "gpumcmc loglik_and_grad kernel='rows', 20 calls queued, per call", "ms": 0.21,
         "floor_ms": 0.20}]))
    rows = _rows(run_dir)
    assert rows["i38_ising"]["status"] == "missed"                   # 1,500 < 2,400 flips/ns
    assert rows["i38_mixture_gibbs"]["status"] == "missed"           # 4.2 > 2.0 ms
    assert rows["i38_nested_shells_2d"]["user_path"] == 0.5
    assert rows["i38_nested_shells_2d"]["status"] == "met"           # half dynesty's time
    assert rows["i38_nested_shells_10d"]["status"] == "missing"      # no dynesty figure: not judged
    fg = rows["i38_fg_floor"]
    assert fg["user_path"] == pytest.approx(0.20 / 0.36) and fg["kernel_only"] == pytest.approx(0.20 / 0.21)
    assert fg["status"] == "missed"                                  # the call's 0.56 < 0.9, the kernel's 0.95 not
