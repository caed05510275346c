"""Charts of a run (``charts/*.png``; the file name's suffix chooses PNG or SVG), drawn only
from cells that were measured: per output length and request rate, heatmaps (concurrency x
prompt tokens; skipped cells say so, cells never run are blank) and line charts against
concurrency, one line per prompt length, with points only where a cell was measured (no line
through a context never measured). :func:`plan_charts` decides what is
drawn (pure data, what the tests inspect); :func:`render_chart` draws it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench.results.store import CellKey, RunData, slice_name, slices

__all__ = ["ChartPlan", "Series", "plan_charts", "render_chart", "write_charts"]

CHARTS_DIR = "charts"

_HEATMAPS = (
    ("request_throughput", "request throughput (req/s)"),
    ("p95_ttft_ms", "p95 TTFT (ms)"),
    ("p95_e2el_ms", "p95 end-to-end latency (ms)"),
)
_LINES = (
    ("request_throughput", "request throughput (req/s)"),
    ("output_throughput", "output throughput (tokens/s)"),
    ("p95_e2el_ms", "p95 end-to-end latency (ms)"),
)


@dataclass(frozen=True)
class Series:
    """One line: measured points only."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]

    @classmethod
    def of(cls, label: str, points: Sequence[tuple[float, float]]) -> Series:
        return cls(label, tuple(float(x) for x, _ in points), tuple(y for _, y in points))


@dataclass(frozen=True)
class ChartPlan:
    """What one chart shows."""

    filename: str
    kind: Literal["heatmap", "lines"]
    title: str
    xlabel: str
    ylabel: str
    series: tuple[Series, ...] = ()
    rows: tuple[int, ...] = ()
    columns: tuple[int, ...] = ()
    values: tuple[tuple[float | None, ...], ...] = ()
    """Heatmap values by row then column; None where not measured."""
    notes: tuple[tuple[str, ...], ...] = ()
    """Heatmap cell notes ("skipped" or "")."""


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def plan_charts(cells: Sequence[dict[str, Any]], *, label: str = "") -> list[ChartPlan]:
    """The charts for a run's cells (see the module docstring)."""
    plans: list[ChartPlan] = []
    for output_tokens, rate in slices(cells):
        mine = {
            CellKey.of(c): c
            for c in cells
            if (CellKey.of(c).output_tokens, CellKey.of(c).request_rate) == (output_tokens, rate)
        }
        measured = {k: c for k, c in mine.items() if c.get("status") == "ok"}
        if not measured:
            continue
        name = slice_name(output_tokens, rate)
        load = "closed loop" if rate is None else f"{rate:g} req/s"
        context = f"{output_tokens} output tokens, {load}" + (f", {label}" if label else "")
        rows = tuple(sorted({k.concurrency for k in measured}))
        columns = tuple(sorted({k.prompt_tokens for k in measured}))
        for metric, title in _HEATMAPS:
            values = tuple(
                tuple(
                    _number(measured[k].get(metric))
                    if (k := CellKey(r, p, output_tokens, rate)) in measured
                    else None
                    for p in columns
                )
                for r in rows
            )
            notes = tuple(
                tuple(
                    "skipped"
                    if mine.get(CellKey(r, p, output_tokens, rate), {}).get("status") == "skipped"
                    else ""
                    for p in columns
                )
                for r in rows
            )
            plans.append(
                ChartPlan(
                    filename=f"heatmap-{metric}-{name}.png",
                    kind="heatmap",
                    title=f"{title}, {context}",
                    xlabel="prompt tokens",
                    ylabel="concurrency",
                    rows=rows,
                    columns=columns,
                    values=values,
                    notes=notes,
                )
            )
        for metric, title in _LINES:
            series = []
            for p in columns:
                points = sorted(
                    (k.concurrency, v)
                    for k, c in measured.items()
                    if k.prompt_tokens == p and (v := _number(c.get(metric))) is not None
                )
                if points:
                    series.append(Series.of(f"{p} prompt tokens", points))
            if series:
                plans.append(
                    ChartPlan(
                        filename=f"lines-{metric}-{name}.png",
                        kind="lines",
                        title=f"{title}, {context}",
                        xlabel="concurrency",
                        ylabel=title,
                        series=tuple(series),
                    )
                )
    return plans


def render_chart(plan: ChartPlan, path: Path | None) -> list[tuple[str, list[float], list[float]]]:
    """Draw ``plan`` (into ``path`` when given); returns the plotted lines as read back from
    the axes (label, x, y), or for a heatmap one entry per row with the drawn values (NaN
    where blank)."""
    # Imported here, not with the module: the commands that only read or compare runs (and
    # their --help) start without loading matplotlib.
    import numpy as np

    from serving.capacity.plot_style import (
        PANEL_IN,
        PNG_DPI,
        WIDTH_IN,
        legend_below,
        plain_numbers,
        pyplot,
        style_axes,
        write_figure,
    )

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, PANEL_IN), dpi=PNG_DPI)
    drawn: list[tuple[str, list[float], list[float]]] = []
    try:
        if plan.kind == "lines":
            for s in plan.series:
                ax.plot(s.x, s.y, marker="o", label=s.label)
            style_axes(ax, plan.xlabel, plan.ylabel)
            ax.set_xscale("log", base=2)  # concurrency: 1, 2, 4, ...
            plain_numbers(ax.xaxis)
            legend_below(ax)
            for line in ax.get_lines():
                xs = [float(v) for v in np.asarray(line.get_xdata(), dtype=float)]
                ys = [float(v) for v in np.asarray(line.get_ydata(), dtype=float)]
                drawn.append((str(line.get_label()), xs, ys))
        else:
            grid = np.array(
                [[math.nan if v is None else v for v in row] for row in plan.values], dtype=float
            )
            image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", aspect="auto")
            fig.colorbar(image, ax=ax)
            ax.set_xticks(range(len(plan.columns)), [str(c) for c in plan.columns])
            ax.set_yticks(range(len(plan.rows)), [str(r) for r in plan.rows])
            for label in heatmap_labels(plan, image.cmap, image.norm):
                ax.text(
                    label.column, label.row, label.text, ha="center", va="center",
                    color=label.color, fontsize=8,
                )  # fmt: skip
            data = image.get_array()
            assert data is not None
            filled = np.ma.filled(data, math.nan)
            for i, r in enumerate(plan.rows):
                drawn.append(
                    (str(r), [float(c) for c in plan.columns], [float(v) for v in filled[i]])
                )
        ax.set_title(plan.title, fontsize=10)
        ax.set_xlabel(plan.xlabel)
        ax.set_ylabel(plan.ylabel)
        fig.tight_layout()
        if path is not None:
            write_figure(fig, path)
    finally:
        plt.close(fig)
    return drawn


@dataclass(frozen=True)
class HeatmapLabel:
    """A number (or note) printed on a heatmap cell, in a colour readable on that cell."""

    row: int
    column: int
    text: str
    color: str
    background: tuple[float, float, float]


def _luminance(rgb: Sequence[float]) -> float:
    """WCAG relative luminance of an sRGB colour (components 0..1)."""

    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(float(c)) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """WCAG contrast ratio of two colours (1 to 21; 4.5 is the floor for small text)."""
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


_WHITE = (1.0, 1.0, 1.0)
_BLACK = (0.0, 0.0, 0.0)


def cell_number(value: float) -> str:
    """A heatmap cell's number, never in exponent form: whole from 100 up (``1063``, not
    ``1.06e+03``), three significant figures below (``12.5``, ``0.42``)."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def heatmap_labels(plan: ChartPlan, cmap: Any, norm: Any) -> list[HeatmapLabel]:
    """Every heatmap cell's label with black or white, whichever contrasts more with the
    cell's colour (a blank cell shows the white axes)."""
    labels = []
    for i, row in enumerate(plan.values):
        for j, value in enumerate(row):
            text = cell_number(value) if value is not None else plan.notes[i][j]
            if not text:
                continue
            background = (
                tuple(float(c) for c in cmap(norm(value))[:3]) if value is not None else _WHITE
            )
            color = (
                "black"
                if contrast_ratio(_BLACK, background) >= contrast_ratio(_WHITE, background)
                else "white"
            )
            labels.append(HeatmapLabel(i, j, text, color, background))  # type: ignore[arg-type]
    return labels


def render_plans(out: Path, plans: Sequence[Any], latency: Sequence[Any] = ()) -> list[Path]:
    """Draw chart plans and latency plans (:mod:`bench.reports.latency_charts`) into ``out``
    (made if missing); returns the files written."""
    from bench.reports.latency_charts import render_latency

    out.mkdir(parents=True, exist_ok=True)
    for plan in plans:
        render_chart(plan, out / plan.filename)
    for lplan in latency:
        render_latency(lplan, out / lplan.filename)
    return [out / plan.filename for plan in (*plans, *latency)]


def write_charts(run: RunData) -> list[Path]:
    """Render every chart of ``run`` into ``<run>/charts/``, latency against throughput
    included; returns the files written."""
    from bench.reports.latency_charts import latency_plans, slo_ttft_ms

    label = str(run.run.get("label") or "")
    plans = plan_charts(run.cells, label=label)
    latency = latency_plans([(label, run.cells)], slo_ms=slo_ttft_ms(run.run))
    if not plans and not latency:
        return []
    return render_plans(run.path / CHARTS_DIR, plans, latency)
