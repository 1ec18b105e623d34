"""Flow-cytometry (FCS) files: a reader with the usual arcsinh transform, and bundled examples.

FCS files are read with ``flowio`` (fcsparser's own parser calls
``ndarray.newbyteorder``, which NumPy 2 removed); the example files are the
real instrument files that fcsparser's wheel ships for its tests, one of which
(``"facscalibur"``) gpumcmc also ships.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["FCSData", "fcs_example_files", "load_fcs"]

# Short name -> path inside the installed fcsparser package.
_EXAMPLES = {
    "facscalibur": "tests/data/FlowCytometers/FACSCaliburHTS/Sample_Well_A02.fcs",       # 37,395 x 8
    "lsr2": "tests/data/FlowCytometers/HTS_BD_LSR-II/HTS_BD_LSR_II_Mixed_Specimen_001_D6_D06.fcs",  # 14,945 x 11
    "fortessa": "tests/data/FlowCytometers/Fortessa/FCS_3.0_Fortessa_PBS_Specimen_001_A1_A01.fcs",  # 11,585 x 11
}
# Files gpumcmc ships itself (copies of fcsparser's, MIT; see data/README.md).
_BUNDLED = {"facscalibur": Path(__file__).resolve().parent / "data" / "facscalibur_Sample_Well_A02.fcs"}


class FCSData(NamedTuple):
    """Events of one FCS file.

    data : (n_events, n_channels) float64, arcsinh(x / cofactor) of the selected channels.
    channels : channel names ($PnN) in column order.
    path : the file read.
    """

    data: np.ndarray
    channels: list
    path: str


def fcs_example_files() -> dict:
    """Example FCS files, ``{name: path}``.

    ``"facscalibur"`` (37,395 events x 8 channels) ships with gpumcmc;
    ``"lsr2"`` (14,945 x 11) and ``"fortessa"`` (11,585 x 11) come with the
    fcsparser package, and are listed where it is installed.

    Only fcsparser's files are read (flowio parses them), so fcsparser is
    located, never imported: its own imports (``six`` and pandas) need not
    work.
    """
    import importlib.util

    out = {name: str(p) for name, p in _BUNDLED.items() if p.is_file()}
    spec = importlib.util.find_spec("fcsparser")
    if spec is not None and spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations))).resolve()
        for name, rel in _EXAMPLES.items():
            p = root / rel
            if name not in out and p.is_file():
                out[name] = str(p)
    return out


def load_fcs(path, cofactor: float = 150.0, channels=None, drop_time: bool = True) -> FCSData:
    """Read an FCS file with flowio and apply ``arcsinh(x / cofactor)``.

    Parameters
    ----------
    path : str or Path
        The file, or a name from :func:`fcs_example_files` (e.g. ``"facscalibur"``).
    cofactor : float
        The arcsinh cofactor (about 150 for fluorescence flow cytometry, 5 for
        mass cytometry). ``None`` leaves the values linear.
    channels : sequence of str or int, optional
        Channels to keep, by name ($PnN) or 0-based index; default all.
    drop_time : bool
        When ``channels`` is None, drop a channel named "Time".

    Examples
    --------
    >>> from gpumcmc.datasets import load_fcs
    >>> d = load_fcs("facscalibur")
    >>> d.data.shape, d.channels[:2]
    ((37395, 7), ['FSC-H', 'SSC-H'])
    """
    try:
        import flowio
    except ImportError as e:
        raise ImportError("load_fcs needs flowio: pip install flowio.") from e
    path = str(path)
    if not Path(path).is_file():
        examples = fcs_example_files()
        if path in examples:
            path = examples[path]
        elif path in _EXAMPLES:
            raise ImportError(f"The example FCS file {path!r} comes with the fcsparser package, which is not "
                              "installed: pip install fcsparser.")
        else:
            raise FileNotFoundError(f"No FCS file {path!r}; give a path or one of the example names "
                                    f"{sorted(_EXAMPLES)}.")
    try:
        fd = flowio.FlowData(path)
    except (ValueError, KeyError, IndexError, UnicodeDecodeError) as e:  # flowio's own words on a file that is not FCS
        raise ValueError(f"{path} is not an FCS file flowio can read ({type(e).__name__}: {e}).") from None
    x = np.asarray(fd.as_array(preprocess=True), dtype=np.float64).reshape(fd.event_count, fd.channel_count)
    names = [str(n) for n in fd.pnn_labels]
    if isinstance(channels, (str, int)):  # one channel, by name or index
        channels = [channels]
    if channels is None:
        keep = [i for i, n in enumerate(names) if not (drop_time and n.lower() == "time")]
    else:
        keep = []
        for c in channels:
            if isinstance(c, (int, np.integer)):
                if not 0 <= c < len(names):
                    raise ValueError(f"channel index {c} is out of range for {len(names)} channels.")
                keep.append(int(c))
            elif c in names:
                keep.append(names.index(c))
            else:
                raise ValueError(f"no channel {c!r} in {path}; channels are {names}.")
    x = x[:, keep]
    if cofactor is not None:
        if not cofactor > 0:
            raise ValueError(f"cofactor must be positive, got {cofactor}.")
        x = np.arcsinh(x / float(cofactor))
    return FCSData(x, [names[i] for i in keep], path)
