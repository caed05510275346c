"""One style for every chart the planner and the benchmark draw: Matplotlib's own defaults (not a
matplotlibrc of the user's or the machine's), a deterministic SVG, axes labelled with units,
few tick labels, legends outside the data, and a limit line far off the data said in a note
rather than stretching the axis to reach it."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: Most tick labels an axis shows (MaxNLocator's bins): they never crowd.
MAX_TICKS = 6
#: Room left above the highest point drawn (a share of it).
HEADROOM = 0.15
#: Inches: a figure as wide as this (about 615 CSS px) fits the docs' content column (about
#: 690 px in a 1,280 px window) unscaled, so 8 pt text shows at 10.7 px (the browser check
#: wants 9 at least).
WIDTH_IN = 6.4
#: Inches of height a panel of a one-column figure takes (its legend below it included).
PANEL_IN = 4.6
#: Dots per inch of `gemma4 bench`'s PNG charts (``charts/*.png``): at
#: ``WIDTH_IN``, the width the docs' SVG copies are drawn at, about 800 px wide. An SVG has no
#: dots: the same figure is the same picture in either format.
PNG_DPI = 125


class PlotError(ValueError):
    """A figure that cannot be drawn or written."""


def pyplot() -> Any:
    """Matplotlib's pyplot on the Agg backend (no display), with its defaults: the same picture
    on every machine (the docs' check compares the pictures)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcdefaults()
    plt.rcParams["svg.hashsalt"] = "gemma4"
    return plt


def write_figure(fig: Any, path: Path) -> None:
    """Write ``fig`` to ``path`` in the format its suffix names (.png or .svg), with nothing
    that differs between runs: an SVG has no date, a PNG no Matplotlib version, so a figure
    drawn again from the same data is byte-identical."""
    suffix = path.suffix.lower()
    metadata: dict[str, Any] = {"Date": None} if suffix == ".svg" else {"Software": None}
    fig.savefig(path, format=suffix[1:], metadata=metadata, bbox_inches="tight")


def save(fig: Any, path: Path, flag: str = "--plot") -> None:
    """Write ``fig`` to ``path`` (.png or .svg, :func:`write_figure`) and close it;
    :class:`PlotError` naming ``flag`` otherwise."""
    suffix = path.suffix.lower()
    try:
        if suffix not in (".png", ".svg"):
            raise PlotError(f"{flag} {path}: the file must end in .png or .svg")
        try:
            write_figure(fig, path)
        except OSError as exc:
            raise PlotError(f"{flag} {path}: cannot write ({exc.strerror or exc})") from None
    finally:
        pyplot().close(fig)


def style_axes(ax: Any, xlabel: str, ylabel: str, title: str = "") -> None:
    """Labels (with units), a light grid and few tick labels: at most :data:`MAX_TICKS` on a
    linear axis; on a log axis plain numbers (``0.5``, ``20``, not ``10^1``) at 1-2-5 steps
    over a decade or so, fewer over more decades, evenly spaced ones over less than half a
    decade. Call it once the data and limits are set."""
    from matplotlib.ticker import LogLocator, MaxNLocator

    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    if title:
        ax.set_title(title, fontsize=10)
    for axis, scale, (lo, hi) in (
        (ax.xaxis, ax.get_xscale(), ax.get_xlim()),
        (ax.yaxis, ax.get_yscale(), ax.get_ylim()),
    ):
        if scale != "log":
            axis.set_major_locator(MaxNLocator(MAX_TICKS))
            continue
        decades = math.log10(hi / lo)
        subs = (1.0, 2.0, 5.0) if decades <= 1.5 else (1.0, 3.0) if decades <= 3 else (1.0,)
        axis.set_major_locator(MaxNLocator(MAX_TICKS) if decades < 0.5 else LogLocator(subs=subs))
        plain_numbers(axis)
    ax.tick_params(labelsize=8)
    ax.grid(True, alpha=0.3)


def plain_numbers(axis: Any) -> None:
    """Tick labels of a log axis as plain numbers (``16``, not ``2^4``), none on minor ticks."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def fit_to_data(ax: Any, values: Iterable[float], *, log: bool = False) -> float:
    """The y axis on the values drawn: from 0 (a log axis: the lowest less :data:`HEADROOM`)
    to the highest plus :data:`HEADROOM` (on a log axis twice over, to be seen); returns the
    top."""
    shown = [v for v in values if v > 0] or [1.0]
    top = max(shown) * (1 + HEADROOM) ** (2 if log else 1)
    if log:
        ax.set_yscale("log")
    ax.set_ylim(min(shown) / (1 + HEADROOM) if log else 0, top)
    return top


def limit_line(ax: Any, y: float, top: float, label: str) -> None:
    """A limit (an SLO) as a horizontal line when it is near the data (the axis stretched up to
    twice the data's ``top`` to reach it), else said in the legend as above the axis, which
    stays on the data."""
    if y <= 2 * top:
        if y > top:
            room = (1 + HEADROOM) ** (2 if ax.get_yscale() == "log" else 1)
            ax.set_ylim(ax.get_ylim()[0], y * room)
        ax.axhline(y, color="red", linestyle="-.", linewidth=1, label=label)
    else:
        legend_note(ax, f"{label}: above the axis (\u2191), not drawn")


def legend_note(ax: Any, text: str) -> None:
    """A line of text in the legend with nothing drawn beside it."""
    ax.plot([], [], " ", label=text)


def legend_below(ax: Any, columns: int = 2) -> None:
    """The legend under the axes, never on the data."""
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=columns, fontsize=8,
        frameon=False,
    )  # fmt: skip
