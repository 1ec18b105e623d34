"""The wheel carries kernels_cu/ and the bundled data, and the installed loader finds every kernel source."""

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_ships_every_kernel_source(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(ROOT)],
        check=True, timeout=300,
    )
    (wheel,) = dist.glob("gpumcmc-*.whl")

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
        check=True, timeout=300,
    )
    # NumPy and SciPy come from this interpreter's site-packages as a plain path
    # entry: its .pth files (and so any editable install of gpumcmc) stay unread.
    site = sysconfig.get_paths()["purelib"]
    code = (
        f"import sys; sys.path.append({site!r})\n"
        "import gpumcmc, gpumcmc._loader as L\n"
        f"assert not gpumcmc.__file__.startswith({str(ROOT)!r}), gpumcmc.__file__\n"
        "found = sorted(p.name for p in L.kernel_sources())\n"
        "assert str(L.kernel_dir()).startswith(sys.prefix), L.kernel_dir()\n"
        "for p in L.kernel_sources(): L.source_hash(p.name)\n"
        "from gpumcmc.datasets.fcs import _BUNDLED\n"
        "assert all(p.is_file() and str(p).startswith(sys.prefix) for p in _BUNDLED.values()), _BUNDLED\n"
        "print(' '.join(found))\n"
    )
    r = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    expected = sorted(p.name for p in (ROOT / "kernels_cu").glob("*.cu"))
    assert r.stdout.split() == expected


def test_every_package_is_listed_for_the_wheel():
    """pyproject.toml lists the packages by name: a new one (a model's folder) left out would be missing
    from the wheel, while an editable install still finds it."""
    import re

    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^\[tool\.setuptools\]\s*packages\s*=\s*\[(.*?)\]", text, re.M | re.S)
    listed = set(re.findall(r'"([^"]+)"', block.group(1)))
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "gpumcmc").rglob("__init__.py")}
    assert found <= listed, f"add {sorted(found - listed)} to [tool.setuptools] packages in pyproject.toml"
