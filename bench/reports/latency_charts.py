"""Latency against throughput, what deployments are compared by: p50/p95 TTFT and ITL against
output throughput, one curve per series, points in concurrency order, the stack's p95 TTFT SLO
as a line, and client-limited cells circled in red and named in the legend, so a point that is
the client's is never read as capacity. :func:`latency_plans` decides (pure data);
:func:`render_latency` draws and returns what the axes hold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.results.store import CellKey, slice_name, slices

__all__ = [
    "LATENCY_METRICS",
    "LatencyPlan",
    "LatencySeries",
    "latency_plans",
    "render_latency",
    "slo_ttft_ms",
]

LATENCY_METRICS = (
    ("median_ttft_ms", "p50 TTFT (ms)", True),
    ("p95_ttft_ms", "p95 TTFT (ms)", True),
    ("median_itl_ms", "p50 ITL (ms per token)", False),
    ("p95_itl_ms", "p95 ITL (ms per token)", False),
)
"""(cell field, axis title, the TTFT SLO applies)."""
X_METRIC = "output_throughput"


@dataclass(frozen=True)
class LatencySeries:
    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    concurrency: tuple[int, ...]
    limited: tuple[bool, ...]


@dataclass(frozen=True)
class LatencyPlan:
    filename: str
    title: str
    ylabel: str
    series: tuple[LatencySeries, ...]
    slo_ms: float | None = None


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def slo_ttft_ms(run: dict[str, Any]) -> float | None:
    """The p95 TTFT SLO a run was measured against (``run.json``), if any."""
    slo = run.get("slo") or (run.get("options") or {}).get("goodput_slo") or {}
    return _number(slo.get("ttft") if isinstance(slo, dict) else None)


def _series(label: str, cells: Sequence[dict[str, Any]], metric: str) -> LatencySeries | None:
    points = []
    for c in cells:
        if c.get("status") != "ok":
            continue
        x, y = _number(c.get(X_METRIC)), _number(c.get(metric))
        if x is None or y is None:
            continue
        points.append((int(c["concurrency"]), x, y, bool(c.get("client_limited"))))
    if not points:
        return None
    points.sort()
    return LatencySeries(
        label,
        tuple(p[1] for p in points),
        tuple(p[2] for p in points),
        tuple(p[0] for p in points),
        tuple(p[3] for p in points),
    )


def latency_plans(
    groups: Sequence[tuple[str, Sequence[dict[str, Any]]]],
    *,
    slo_ms: float | None = None,
    prefix: str = "latency",
    by_prompt: bool = True,
) -> list[LatencyPlan]:
    """Charts for ``groups`` (label, cells): a run's cells (``by_prompt``: one curve per prompt
    length, the run's label in the title) or several runs (one curve per run and prompt
    length, each run's label in the legend)."""
    prompts = sorted({int(c["prompt_tokens"]) for _, cells in groups for c in cells})
    plans = []
    for output_tokens, rate in slices(c for _, cells in groups for c in cells):
        name = slice_name(output_tokens, rate)
        load = "closed loop" if rate is None else f"{rate:g} req/s"
        context = f"{output_tokens} output tokens, {load}"
        if by_prompt and len(groups) == 1 and groups[0][0]:
            context += f", {groups[0][0]}"  # one run: its label (several: in the legend)
        for metric, title, applies in LATENCY_METRICS:
            series = []
            for label, cells in groups:
                for p in prompts:
                    mine = [
                        c
                        for c in cells
                        if (CellKey.of(c).output_tokens, CellKey.of(c).request_rate)
                        == (output_tokens, rate)
                        and int(c["prompt_tokens"]) == p
                    ]
                    text = f"{p} prompt tokens" if by_prompt else f"{label}, {p} prompt tokens"
                    if not by_prompt and len(prompts) == 1:
                        text = label
                    s = _series(text, mine, metric)
                    if s is not None:
                        series.append(s)
            if not series:
                continue
            plans.append(
                LatencyPlan(
                    filename=f"{prefix}-{metric}-{name}.png",
                    title=f"{title} vs output throughput\n{context}",
                    ylabel=title,
                    series=tuple(series),
                    slo_ms=slo_ms if applies and metric == "p95_ttft_ms" else None,
                )
            )
    return plans


def render_latency(plan: LatencyPlan, path: Path | None) -> dict[str, Any]:
    """Draw ``plan`` (into ``path`` when given). Returns what the axes hold: ``lines``
    (label, x, y), ``limited`` (x, y of the circled points), ``slo`` (the line's y or None)."""
    # Imported here, not with the module: the commands that only read or compare runs (and
    # their --help) start without loading matplotlib.
    import numpy as np

    from serving.capacity.plot_style import (
        PANEL_IN,
        PNG_DPI,
        WIDTH_IN,
        legend_below,
        pyplot,
        style_axes,
        write_figure,
    )

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, PANEL_IN), dpi=PNG_DPI)
    drawn: dict[str, Any] = {"lines": [], "limited": [], "slo": None}
    try:
        for s in plan.series:
            (line,) = ax.plot(s.x, s.y, marker="o", label=s.label)
            for x, y, c in zip(s.x, s.y, s.concurrency, strict=True):
                ax.annotate(f"c={c}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        limited = [
            (x, y)
            for s in plan.series
            for x, y, lim in zip(s.x, s.y, s.limited, strict=True)
            if lim
        ]
        if limited:
            ax.scatter(
                [p[0] for p in limited], [p[1] for p in limited], s=160, facecolors="none",
                edgecolors="red", linewidths=1.5, label="client-limited (the client's figure)",
                zorder=5,
            )  # fmt: skip
        if plan.slo_ms is not None:
            ax.axhline(
                plan.slo_ms, color="black", linestyle="--", linewidth=1,
                label=f"SLO p95 TTFT {plan.slo_ms:g} ms",
            )  # fmt: skip
        ax.set_title(plan.title, fontsize=10)
        style_axes(ax, "output throughput (tokens/s)", plan.ylabel)
        legend_below(ax)
        fig.tight_layout()
        for line in ax.get_lines():
            xs = [float(v) for v in np.asarray(line.get_xdata(), dtype=float)]
            ys = [float(v) for v in np.asarray(line.get_ydata(), dtype=float)]
            label = str(line.get_label())
            if label.startswith("SLO"):
                drawn["slo"] = ys[0]
            else:
                drawn["lines"].append((label, xs, ys))
        for collection in ax.collections:
            offsets = np.asarray(collection.get_offsets(), dtype=float)
            drawn["limited"] += [(float(x), float(y)) for x, y in offsets]
        if path is not None:
            write_figure(fig, path)
    finally:
        plt.close(fig)
    return drawn
