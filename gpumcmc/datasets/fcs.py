"""Flow-cytometry (FCS) files: a reader with the usual arcsinh transform, and bundled examples.

FCS files are read with ``flowio`` (fcsparser's own parser calls
``ndarray.newbyteorder``, which NumPy 2 removed); the example files are the
real instrument files that fcsparser's wheel ships for its tests.
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
    """The FCS files bundled in the installed fcsparser package, ``{name: path}``.

    ``"facscalibur"`` (37,395 events x 8 channels), ``"lsr2"`` (14,945 x 11),
    ``"fortessa"`` (11,585 x 11). Raises ImportError when fcsparser is not
    installed.

    Only fcsparser's files are read (flowio parses them), so fcsparser is
    located, never imported: its own imports (``six``, which it does not
    declare, and pandas) need not be installed.
    """
    import importlib.util

    spec = importlib.util.find_spec("fcsparser")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("The example FCS files come with the fcsparser package, which is not installed: "
                          "pip install fcsparser (or pip install 'gpumcmc[data]').")
    root = Path(next(iter(spec.submodule_search_locations))).resolve()
    out = {}
    for name, rel in _EXAMPLES.items():
        p = root / rel
        if p.is_file():
            out[name] = str(p)
    if not out:
        raise FileNotFoundError(f"No example FCS files found under {root}; reinstall fcsparser.")
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
        examples = {}
        try:
            examples = fcs_example_files()
        except (ImportError, FileNotFoundError):
            if path in _EXAMPLES:  # an example's name: say what to install
                raise
        if path in examples:
            path = examples[path]
        else:
            raise FileNotFoundError(f"No FCS file {path!r}; give a path or one of the example names "
                                    f"{sorted(_EXAMPLES)}.")
    fd = flowio.FlowData(path)
    x = np.asarray(fd.as_array(preprocess=True), dtype=np.float64).reshape(fd.event_count, fd.channel_count)
    names = [str(n) for n in fd.pnn_labels]
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
