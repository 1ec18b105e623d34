"""The data loaders' missing-package and bad-input messages."""

import importlib.util
import sys

import numpy as np
import pytest

from gpumcmc.datasets import fcs_example_files, load_fcs

HAVE_FCS = importlib.util.find_spec("fcsparser") is not None and importlib.util.find_spec("flowio") is not None
needs_fcs = pytest.mark.skipif(not HAVE_FCS, reason="needs fcsparser and flowio (pip install 'gpumcmc[data]')")


@needs_fcs
def test_fcs_examples_do_not_import_fcsparser_or_its_undeclared_six(monkeypatch):
    # fcsparser imports six without declaring it; its files are read without importing it.
    monkeypatch.setitem(sys.modules, "six", None)  # `import six` now raises ImportError
    monkeypatch.delitem(sys.modules, "fcsparser", raising=False)
    files = fcs_example_files()
    assert set(files) == {"facscalibur", "lsr2", "fortessa"}
    d = load_fcs("facscalibur")
    assert d.data.shape == (37395, 7) and np.all(np.isfinite(d.data))
    assert "fcsparser" not in sys.modules


def _no_fcsparser(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "fcsparser" else real(name, *a))


# (call, error, words the message must hold)
BAD = [
    pytest.param(lambda mp: (_no_fcsparser(mp), fcs_example_files()), ImportError, "pip install fcsparser",
                 id="examples-without-fcsparser"),
    pytest.param(lambda mp: (_no_fcsparser(mp), load_fcs("facscalibur")), ImportError, "pip install fcsparser",
                 id="example-name-without-fcsparser", marks=pytest.mark.skipif(
                     importlib.util.find_spec("flowio") is None, reason="needs flowio")),
    pytest.param(lambda mp: load_fcs("no-such-file.fcs"), FileNotFoundError, "example names",
                 id="unknown-file", marks=needs_fcs),
    pytest.param(lambda mp: load_fcs("facscalibur", channels=["XYZ"]), ValueError, "no channel 'XYZ'",
                 id="unknown-channel", marks=needs_fcs),
    pytest.param(lambda mp: load_fcs("facscalibur", channels=[99]), ValueError, "out of range",
                 id="channel-index", marks=needs_fcs),
    pytest.param(lambda mp: load_fcs("facscalibur", cofactor=-1.0), ValueError, "cofactor must be positive",
                 id="cofactor", marks=needs_fcs),
]


@pytest.mark.parametrize("call,error,message", BAD)
def test_fcs_bad_inputs(monkeypatch, call, error, message):
    with pytest.raises(error, match=message):
        call(monkeypatch)
