"""Runs side by side (MTP on vs off, L4 vs TPU), the first the baseline: cells matched by key,
each metric's value per run and its change against the baseline; a cell skipped or never run
has no delta. Cost per million requests uses the price given, the one the run recorded, or the
hardware catalog's list price for one instance kept busy at that cell's load.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.reports.charts import ChartPlan, Series, render_plans
from bench.reports.latency_charts import LatencyPlan, latency_plans, slo_ttft_ms
from bench.reports.tables import CLIENT_LIMITED_MARK
from bench.results.store import CellKey, RunData, slice_name
from serving.catalog.hardware import CONFIRMED, ESTIMATE, HARDWARE, LOWER_BOUND
from serving.sizing import memory

__all__ = ["Comparison", "compare_runs", "cost_per_million_requests", "priced"]

METRICS: tuple[tuple[str, str, str, bool], ...] = (
    ("request_throughput", "Request throughput (requests/s)", "{:.2f}", True),
    ("output_throughput", "Output throughput (tokens/s)", "{:.1f}", True),
    ("p95_ttft_ms", "p95 TTFT (ms)", "{:.0f}", False),
    ("median_itl_ms", "Median ITL (ms per token)", "{:.1f}", False),
    ("p95_e2el_ms", "p95 end-to-end latency (ms)", "{:.0f}", False),
    ("success_rate", "Success rate", "{:.1%}", True),
    ("cost_per_million_requests", "Cost per million requests (USD)", "{:.2f}", False),
)
"""(key, title, format, higher is better)."""


def cost_per_million_requests(usd_per_hour: float, request_throughput: float) -> float | None:
    """:func:`serving.sizing.memory.cost_per_million_requests`; None without throughput."""
    if request_throughput <= 0:
        return None
    return memory.cost_per_million_requests(usd_per_hour, request_throughput)


#: The highest hourly price a run may record for itself (USD); anything else is ignored.
MAX_RECORDED_USD_PER_HOUR = 10_000.0


def priced(run: RunData, prices: Mapping[str, float] | None = None) -> tuple[float | None, str]:
    """The run's hourly price and what it is: given (by label or hardware), recorded by the run
    (the post-deploy benchmark records its stack's price), or the catalog's ("confirmed" or
    "estimate"). A price the catalog cannot give (a rate with no figure anywhere) is
    ``(None, "lower_bound")``: pass ``--price``."""
    prices = prices or {}
    hardware = run.run.get("hardware")
    for key in (run.label, hardware):
        if key is not None and key in prices:
            return float(prices[key]), "given"
    recorded = run.run.get("usd_per_hour")
    status = run.run.get("usd_per_hour_status")
    if run.run.get("usd_per_hour_is_lower_bound") is True:
        status = LOWER_BOUND
    if (
        isinstance(recorded, int | float)
        and not isinstance(recorded, bool)
        and math.isfinite(recorded)
        and 0 < recorded <= MAX_RECORDED_USD_PER_HOUR
        and status != LOWER_BOUND
    ):
        return float(recorded), status if status in (CONFIRMED, ESTIMATE) else "recorded"
    if isinstance(hardware, str) and hardware in HARDWARE:
        price = HARDWARE[hardware].price
        if price.is_lower_bound:
            return None, LOWER_BOUND
        return price.usd_per_hour, price.status
    return None, "unknown"


@dataclass
class Comparison:
    """The comparison of several runs (the first is the baseline)."""

    runs: list[RunData]
    prices: list[float | None]
    keys: list[CellKey]
    values: dict[str, list[list[Any]]]
    """metric -> per cell key (in ``keys`` order) -> per run: value, "skipped" or None."""
    #: Per run, what its price is (:func:`priced`): given, confirmed, estimate, recorded,
    #: lower_bound (no price) or unknown.
    price_statuses: list[str] = field(default_factory=list)

    def price_status(self, run: int) -> str:
        return self.price_statuses[run] if run < len(self.price_statuses) else "given"

    def delta_percent(self, metric: str, row: int, run: int) -> float | None:
        base, other = self.values[metric][row][0], self.values[metric][row][run]
        if not isinstance(base, int | float) or not isinstance(other, int | float) or base == 0:
            return None
        return (other - base) / base * 100.0

    def best(self, run: int) -> dict[str, Any] | None:
        """The run's cell with the highest request throughput."""
        measured = [c for c in self.runs[run].measured() if c.get("request_throughput")]
        return max(measured, key=lambda c: c["request_throughput"]) if measured else None

    def as_dict(self) -> dict[str, Any]:
        runs = []
        for i, run in enumerate(self.runs):
            best = self.best(i)
            price = self.prices[i]
            runs.append(
                {
                    "label": run.label,
                    "path": str(run.path),
                    "hardware": run.run.get("hardware"),
                    "usd_per_hour": price,
                    "price_status": self.price_status(i),
                    "best_cell": best["id"] if best else None,
                    "best_request_throughput": best["request_throughput"] if best else None,
                    "cost_per_million_requests_at_best": (
                        cost_per_million_requests(price, best["request_throughput"])
                        if best and price is not None
                        else None
                    ),
                }
            )
        cells = []
        for row, key in enumerate(self.keys):
            entry: dict[str, Any] = {"id": key.id, **key.as_dict()}
            for metric, *_ in METRICS:
                entry[metric] = self.values[metric][row]
                entry[f"{metric}_delta_percent"] = [
                    self.delta_percent(metric, row, r) for r in range(len(self.runs))
                ]
            cells.append(entry)
        return {"baseline": self.runs[0].label, "runs": runs, "cells": cells}

    def markdown(self) -> str:
        labels = [r.label for r in self.runs]
        lines = [
            "# Comparison",
            "",
            f"Baseline: **{labels[0]}**. {CLIENT_LIMITED_MARK.strip()} marks a client-limited "
            "cell: its figures are the client's, not the server's (see that run's report).",
            "",
        ]
        keyed = [run.by_key() for run in self.runs]
        lines += [
            "| run | hardware | USD/hour | best cell | requests/s | USD per million requests |",
            "|---|---|---:|---|---:|---:|",
        ]
        for run in self.as_dict()["runs"]:
            price = run["usd_per_hour"]
            cost = run["cost_per_million_requests_at_best"]
            rps = run["best_request_throughput"]
            mark = "~" if run["price_status"] == ESTIMATE else ""
            lines.append(
                f"| {run['label']} | {run['hardware'] or 'n/a'} | "
                f"{'n/a' if price is None else f'{mark}{price:.2f}'} | "
                f"{run['best_cell'] or 'n/a'} | "
                f"{'n/a' if rps is None else f'{rps:.2f}'} | "
                f"{'n/a' if cost is None else f'{mark}{cost:.2f}'} |"
            )
        if any(self.price_status(i) == ESTIMATE for i in range(len(self.runs))):
            lines += [
                "",
                "~ : an ESTIMATE: the instance's price counts a rate not confirmed on Google's "
                "price page at the figure a named public source quotes (`gemma4 plan` names "
                "it); pass `--price LABEL=USD` to cost at your own.",
            ]
        if any(price is None for price in self.prices):
            lines += [
                "",
                "USD/hour n/a: no price for that run's instance (the hardware catalog's is a "
                "unknown: a rate with no figure anywhere); "
                "pass `--price LABEL=USD`.",
            ]
        lines.append("")
        for metric, title, fmt, _ in METRICS:
            lines += [f"## {title}", ""]
            lines.append("| cell | " + " | ".join(labels) + " |")
            lines.append("|---|" + "---:|" * len(labels))
            for row, key in enumerate(self.keys):
                texts = []
                for r in range(len(self.runs)):
                    value = self.values[metric][row][r]
                    if value is None or value == "skipped":
                        texts.append(value or "")
                        continue
                    text = fmt.format(value)
                    if (keyed[r].get(key) or {}).get("client_limited"):
                        text += CLIENT_LIMITED_MARK
                    delta = self.delta_percent(metric, row, r) if r else None
                    texts.append(f"{text} ({delta:+.1f}%)" if delta is not None else text)
                lines.append(f"| {key.id} | " + " | ".join(texts) + " |")
            lines.append("")
        return "\n".join(lines)

    def chart_plans(self) -> list[ChartPlan]:
        """Request throughput and p95 E2EL against concurrency, one line per run, per
        (prompt, output, rate); points only where that run measured the cell."""
        plans = []
        slices = sorted(
            {(k.prompt_tokens, k.output_tokens, k.request_rate) for k in self.keys},
            key=lambda s: (s[0], s[1], -1.0 if s[2] is None else s[2]),
        )
        for metric, title in (
            ("request_throughput", "request throughput (req/s)"),
            ("p95_e2el_ms", "p95 end-to-end latency (ms)"),
        ):
            for prompt, output, rate in slices:
                series = []
                for r, run in enumerate(self.runs):
                    points = sorted(
                        (k.concurrency, float(v))
                        for row, k in enumerate(self.keys)
                        if (k.prompt_tokens, k.output_tokens, k.request_rate)
                        == (prompt, output, rate)
                        and isinstance(v := self.values[metric][row][r], int | float)
                    )
                    if points:
                        series.append(Series.of(run.label, points))
                if not series:
                    continue
                name = f"p{prompt}-{slice_name(output, rate)}"
                plans.append(
                    ChartPlan(
                        filename=f"compare-{metric}-{name}.png",
                        kind="lines",
                        title=f"{title}, {prompt} prompt / {output} output tokens",
                        xlabel="concurrency",
                        ylabel=title,
                        series=tuple(series),
                    )
                )
        return plans

    def write(self, out_dir: str | Path) -> list[Path]:
        """Write ``compare.md``, ``compare.json`` and the charts into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = [out / "compare.md", out / "compare.json"]
        written[0].write_text(self.markdown() + "\n", encoding="utf-8")
        written[1].write_text(json.dumps(self.as_dict(), indent=2) + "\n", encoding="utf-8")
        return written + render_plans(out / "charts", self.chart_plans(), self.latency_plans())

    def latency_plans(self) -> list[LatencyPlan]:
        """Latency against throughput, one curve per run (per prompt length when the runs
        measured several), the baseline's p95 TTFT SLO as a line, client-limited cells
        circled (:mod:`bench.reports.latency_charts`)."""
        return latency_plans(
            [(run.label, run.cells) for run in self.runs],
            slo_ms=slo_ttft_ms(self.runs[0].run),
            prefix="compare-latency",
            by_prompt=False,
        )


def compare_runs(
    runs: Sequence[RunData], *, prices: Mapping[str, float] | None = None
) -> Comparison:
    """Compare ``runs`` (at least two; the first is the baseline)."""
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs")
    found = [priced(run, prices) for run in runs]
    run_prices = [price for price, _ in found]
    keyed = [run.by_key() for run in runs]
    keys = sorted({k for cells in keyed for k in cells}, key=lambda k: k.order())
    values: dict[str, list[list[Any]]] = {m: [] for m, *_ in METRICS}
    for key in keys:
        for metric, *_ in METRICS:
            row: list[Any] = []
            for r, cells in enumerate(keyed):
                cell = cells.get(key)
                if cell is None:
                    row.append(None)
                elif cell.get("status") == "skipped":
                    row.append("skipped")
                elif metric == "cost_per_million_requests":
                    rps = cell.get("request_throughput")
                    price = run_prices[r]
                    row.append(
                        cost_per_million_requests(price, rps)
                        if price is not None and isinstance(rps, int | float)
                        else None
                    )
                else:
                    row.append(cell.get(metric))
            values[metric].append(row)
    return Comparison(list(runs), run_prices, keys, values, [status for _, status in found])
