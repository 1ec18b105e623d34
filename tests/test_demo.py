"""``python -m gpumcmc demo``: each part runs with small settings and reports a summary."""

import re
import subprocess
import sys

import pytest

import gpumcmc
from gpumcmc import demo


# Parts that take more than a few seconds on a 2-core CPU run with the slow tests.
SLOW_PARTS = {"lda", "mixture", "glm", "ising", "nested"}


@pytest.mark.parametrize("part", [pytest.param(p, marks=pytest.mark.slow) if p in SLOW_PARTS else p
                                  for p in demo.available()])
def test_demo_part_runs(part, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    (summary,) = demo.run([part], tmp_path, small=True)
    assert "error" not in summary, summary.get("error")
    assert {"model", "data", "seconds", "quality"} <= set(summary)
    assert list(tmp_path.glob("*.png")), f"demo part {part} wrote no plot"


def test_demo_rejects_unknown_part(tmp_path):
    with pytest.raises(ValueError, match="unknown demo part"):
        demo.run(["no-such-model"], tmp_path)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "gpumcmc", *args], capture_output=True, text=True, timeout=120)


def test_demo_command_line_help():
    r = _cli("demo", "--help")
    assert r.returncode == 0 and "demo" in r.stdout
    for part in demo.PARTS:
        assert part in r.stdout


# (arguments, exit status, stream, words it must hold, words it must not hold)
CLI = [
    pytest.param(("--version",), 0, "stdout", "gpumcmc " + gpumcmc.__version__, None, id="version"),
    pytest.param(("--help",), 0, "stdout", "demo", "``", id="help-has-no-rest-markup"),
    pytest.param(("demo", "--help"), 0, "stdout", "--small", "``", id="demo-help-has-no-rest-markup"),
    pytest.param(("demo", "no-such-part"), 2, "stderr", "usage: python -m gpumcmc demo", None,
                 id="unknown-part-prints-the-demo-usage"),
    pytest.param(("demo", "no-such-part"), 2, "stderr", "unknown part.*no-such-part.*lda", None,
                 id="unknown-part-names-the-parts"),
    pytest.param(("no-such-command",), 2, "stderr", "invalid choice", None, id="unknown-command"),
]


@pytest.mark.parametrize("args,status,stream,present,absent", CLI)
def test_command_line(args, status, stream, present, absent):
    r = _cli(*args)
    assert r.returncode == status, (r.stdout, r.stderr)
    text = getattr(r, stream)
    assert re.search(present, text), text
    if absent:
        assert absent not in r.stdout + r.stderr


def test_each_part_prints_its_result_when_it_finishes(tmp_path, monkeypatch, capsys):
    import types

    calls = []

    def fake(name):
        def run(outdir, small):
            calls.append(name)
            print(f"inside {name}")
            return {"model": name, "data": "d", "seconds": 0.0, "quality": f"q-{name}"}

        return types.SimpleNamespace(run=run)

    monkeypatch.setattr(demo.importlib, "import_module", lambda mod: fake(mod.rsplit(".", 1)[1]))
    demo.run(["lda", "glm"], tmp_path, small=True)
    out = capsys.readouterr().out
    # The result line of lda comes before glm starts, not only in the final summary.
    assert out.index("-> lda: d; 0.0 s; q-lda") < out.index("== glm") < out.index("== summary")
    assert calls == ["lda", "glm"]


@pytest.mark.parametrize("env,gpu,expected", [("", False, True), ("", True, False), ("0", False, False),
                                              ("1", True, True), ("yes", True, True), ("False", False, False)])
def test_small_settings_without_a_gpu_unless_told(monkeypatch, env, gpu, expected):
    from gpumcmc import backend

    monkeypatch.setenv("GPUMCMC_SMALL", env)
    monkeypatch.setattr(backend, "backend_name", lambda: "cupy" if gpu else "numpy")
    assert demo.small_settings() is expected


def test_demo_says_what_to_install_and_refuses_a_bad_folder_in_one_line(tmp_path, monkeypatch, capsys):
    from gpumcmc.__main__ import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)   # as without the demo extra
    monkeypatch.setattr(demo, "_missing", lambda names: ["matplotlib"])
    with pytest.raises(SystemExit) as e:
        main(["demo", "nested", "--out", str(tmp_path / "plots")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and 'pip install "gpumcmc[demo]"' in err and "Traceback" not in err
    assert not (tmp_path / "plots").exists()                 # nothing made before the check
    monkeypatch.undo()
    (tmp_path / "afile").write_text("")
    with pytest.raises(SystemExit) as e:
        main(["demo", "nested", "--out", str(tmp_path / "afile")])
    assert e.value.code == 2 and "is a file" in capsys.readouterr().err


def test_demo_run_takes_one_part_as_a_string(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(demo, "available", lambda: list(demo.PARTS))
    monkeypatch.setattr(demo.importlib, "import_module", lambda name: type("m", (), {
        "run": staticmethod(lambda out, small: seen.append(name) or {"model": name, "data": "", "quality": ""})}))
    demo.run("lda", tmp_path, small=True)
    assert seen == ["gpumcmc.demo.lda"]
