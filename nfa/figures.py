"""Figures without pyplot: the matplotlib plumbing every picture of cep shares.

:mod:`cep.nfa.render` draws an NFA with it and :mod:`cep.runtime.plot` a key's events over
time; it lives here, below both, so the NFA's pictures need nothing from the runtime.
Needs the ``viz`` extra (``pip install 'cep[viz]'``, i.e. matplotlib); figures are drawn
on matplotlib's Agg canvas, never through pyplot, so no GUI backend is touched.

>>> fig = new_figure(2, 1)
>>> figure_bytes(fig, "svg") == figure_bytes(fig, "svg")
True
"""

from __future__ import annotations

import io
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cep.errors import VisualizationError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Formats :func:`save_figure` writes (chosen from the file's suffix).
FIGURE_FORMATS = ("png", "svg", "pdf")
#: A fixed salt for the ids in matplotlib's SVG output, so the same figure gives the same bytes.
SVG_HASH_SALT = "cep"


def require_matplotlib() -> None:
    """Raise :class:`VisualizationError` saying how to install matplotlib when it is missing.

    >>> require_matplotlib()  # nothing happens: matplotlib is installed
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError as err:
        raise VisualizationError(
            "drawing needs matplotlib, which is not installed: pip install 'cep[viz]'"
        ) from err


def new_figure(width: float, height: float, layout: str | None = None) -> Figure:
    """A matplotlib Figure of ``width`` x ``height`` inches on the Agg canvas (no pyplot);
    ``layout`` as matplotlib's (e.g. ``"constrained"``).

    >>> new_figure(4, 3).get_size_inches().tolist()
    [4.0, 3.0]
    """
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout=layout)
    FigureCanvasAgg(fig)
    return fig


def figure_bytes(fig: Figure, fmt: str, dpi: float = 120) -> bytes:
    """``fig`` as PNG, SVG or PDF bytes; the same figure always gives the same bytes (SVG ids
    from a fixed salt, no creation date), and SVG text stays text (searchable, selectable).

    >>> figure_bytes(new_figure(2, 1), "png")[:4]
    b'\\x89PNG'
    """
    import matplotlib

    if fmt not in FIGURE_FORMATS:
        raise VisualizationError(
            f"unknown image format {fmt!r}: use one of {', '.join(FIGURE_FORMATS)}"
        )
    metadata: dict[str, Any] = {"png": {}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}[fmt]
    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": SVG_HASH_SALT, "svg.fonttype": "none"}):
        fig.savefig(buffer, format=fmt, dpi=dpi, metadata=metadata, facecolor="white")
    return buffer.getvalue()


def save_figure(fig: Figure, path: str | PathLike[str], dpi: float = 120) -> Path:
    """Write ``fig`` to ``path`` in the format its suffix names (.png, .svg or .pdf).

    >>> save_figure(new_figure(2, 1), "alert.png").exists()
    True
    """
    target = Path(path)
    fmt = target.suffix.lower().lstrip(".")
    if fmt not in FIGURE_FORMATS:
        raise VisualizationError(
            f"{target}: cannot tell the image format from the suffix "
            f"(use .{', .'.join(FIGURE_FORMATS)})"
        )
    target.write_bytes(figure_bytes(fig, fmt, dpi))
    return target
