"""The data loaders' missing-package and bad-input messages."""

import importlib.util
import sys

import numpy as np
import pytest

from gpumcmc.datasets import fcs_example_files, load_fcs

HAVE_FLOWIO = importlib.util.find_spec("flowio") is not None
HAVE_FCSPARSER = importlib.util.find_spec("fcsparser") is not None
needs_flowio = pytest.mark.skipif(not HAVE_FLOWIO, reason="needs flowio (pip install 'gpumcmc[data]')")
needs_fcsparser = pytest.mark.skipif(not (HAVE_FLOWIO and HAVE_FCSPARSER),
                                     reason="needs fcsparser and flowio (pip install fcsparser flowio)")


@needs_flowio
def test_the_bundled_fcs_file_needs_only_flowio(monkeypatch):
    _no_fcsparser(monkeypatch)
    assert set(fcs_example_files()) == {"facscalibur"}
    d = load_fcs("facscalibur")
    assert d.data.shape == (37395, 7) and np.all(np.isfinite(d.data))
    assert "gpumcmc" in d.path
    # the values: arcsinh(x / cofactor) of the file's linear values, the Time channel dropped, channels
    # kept in the order asked for
    import flowio

    fd = flowio.FlowData(d.path)
    raw = np.asarray(fd.as_array(preprocess=True), dtype=np.float64).reshape(fd.event_count, fd.channel_count)
    names = [str(n) for n in fd.pnn_labels]
    assert names[-1] == "Time" and d.channels == names[:-1]
    linear = load_fcs("facscalibur", cofactor=None, drop_time=False)
    assert linear.channels == names and np.array_equal(linear.data, raw)
    np.testing.assert_allclose(d.data, np.arcsinh(raw[:, :-1] / 150.0), rtol=1e-12)
    np.testing.assert_allclose(load_fcs("facscalibur", cofactor=5.0).data, np.arcsinh(raw[:, :-1] / 5.0), rtol=1e-12)
    picked = load_fcs("facscalibur", channels=["SSC-H", 0], cofactor=None)
    assert picked.channels == ["SSC-H", "FSC-H"] and np.array_equal(picked.data, raw[:, [1, 0]])


@needs_fcsparser
def test_fcs_examples_do_not_import_fcsparser_or_its_six(monkeypatch):
    # fcsparser imports six (undeclared in some releases); its files are read without importing it.
    monkeypatch.setitem(sys.modules, "six", None)  # `import six` now raises ImportError
    monkeypatch.delitem(sys.modules, "fcsparser", raising=False)
    files = fcs_example_files()
    assert set(files) == {"facscalibur", "lsr2", "fortessa"}
    assert load_fcs("lsr2", drop_time=False).data.shape == (14945, 11)
    assert "fcsparser" not in sys.modules


def _no_fcsparser(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "fcsparser" else real(name, *a))


# (call, error, words the message must hold)
BAD = [
    pytest.param(lambda mp: (_no_fcsparser(mp), load_fcs("lsr2")), ImportError, "comes with the fcsparser package, "
                 "which is not installed: pip install fcsparser", id="fcsparser-example-without-fcsparser",
                 marks=needs_flowio),
    pytest.param(lambda mp: load_fcs("no-such-file.fcs"), FileNotFoundError, "example names",
                 id="unknown-file", marks=needs_flowio),
    pytest.param(lambda mp: load_fcs("facscalibur", channels=["XYZ"]), ValueError, "no channel 'XYZ'",
                 id="unknown-channel", marks=needs_flowio),
    pytest.param(lambda mp: load_fcs("facscalibur", channels=[99]), ValueError, "out of range",
                 id="channel-index", marks=needs_flowio),
    pytest.param(lambda mp: load_fcs("facscalibur", cofactor=-1.0), ValueError, "cofactor must be positive",
                 id="cofactor", marks=needs_flowio),
]


@pytest.mark.parametrize("call,error,message", BAD)
def test_fcs_bad_inputs(monkeypatch, call, error, message):
    with pytest.raises(error, match=message):
        call(monkeypatch)


@pytest.mark.parametrize("kw,err,match", [(dict(n_words=0), ValueError, "n_words"),
                                          (dict(n_components=0), ValueError, "n_components"),
                                          (dict(topic_concentration=-1), ValueError, "topic_concentration"),
                                          (dict(n_docs=2.7), TypeError, "n_docs"),
                                          (dict(doc_length=-1), ValueError, "doc_length"),
                                          (dict(n_tokens=-5), ValueError, "n_tokens")])
def test_synthetic_corpus_names_a_bad_argument(kw, err, match):
    from gpumcmc.datasets import synthetic_lda_corpus

    base = dict(n_docs=5, n_words=10, doc_length=4, n_components=2, random_state=0, backend="numpy")
    with pytest.raises(err, match=match):
        synthetic_lda_corpus(**{**base, **kw})


def test_load_fcs_names_a_file_that_is_not_fcs_and_takes_one_channel(tmp_path):
    pytest.importorskip("flowio")
    from gpumcmc.datasets import load_fcs

    bad = tmp_path / "notes.fcs"
    bad.write_text("hello\nworld\n")
    with pytest.raises(ValueError, match="is not an FCS file"):
        load_fcs(bad)
    d = load_fcs("facscalibur", channels="FSC-H")
    assert d.data.shape[1] == 1 and d.channels == ["FSC-H"]


def test_uci_bow_says_what_is_wrong_with_a_line(tmp_path):
    from gpumcmc.datasets import load_uci_bow

    two = tmp_path / "d2.txt"
    two.write_text("3\n4\n3\n1 1\n2 4\n3 2\n")
    with pytest.raises(ValueError, match="lines of 2 numbers"):
        load_uci_bow(two)
    neg = tmp_path / "dn.txt"
    neg.write_text("3\n4\n2\n1 1 2\n2 4 -2\n")
    with pytest.raises(ValueError, match="negative count .line 5"):
        load_uci_bow(neg)


def test_bif_examples_without_pgmpy_say_what_to_install(monkeypatch):
    import sys

    from gpumcmc.datasets import bif_example_files

    monkeypatch.setitem(sys.modules, "pgmpy", None)
    files = bif_example_files()
    assert files == {} and not files
    with pytest.raises(KeyError, match="pip install pgmpy"):
        files["asia"]


def test_uci_bow_with_its_header_alone(tmp_path):
    from gpumcmc.datasets import load_uci_bow

    f = tmp_path / "d.txt"
    f.write_text("2\n3\n2\n")
    with pytest.raises(ValueError, match="declares 2 entries .* holds 0"):
        load_uci_bow(f)
