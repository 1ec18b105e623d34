"""``python -m gpumcmc demo``: each part runs with small settings and reports a summary."""

import subprocess
import sys

import pytest

from gpumcmc import demo


@pytest.mark.parametrize("part", demo.available())
def test_demo_part_runs(part, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    (summary,) = demo.run([part], tmp_path, small=True)
    assert "error" not in summary, summary.get("error")
    assert {"model", "data", "seconds", "quality"} <= set(summary)
    assert list(tmp_path.glob("*.png")), f"demo part {part} wrote no plot"


def test_demo_rejects_unknown_part(tmp_path):
    with pytest.raises(ValueError, match="unknown demo part"):
        demo.run(["no-such-model"], tmp_path)


def test_demo_command_line_help():
    r = subprocess.run([sys.executable, "-m", "gpumcmc", "demo", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "demo" in r.stdout
