"""Pictures of the performance model in the field's conventions (PREDICTED, from the model):

- latency percentiles against load: p50/p95/p99 TTFT and E2E at the client against requests/s
  offered to one instance, from the scheduler simulation `gemma4 plan` sizes with
  (:mod:`serving.capacity.simulate`), the stack's SLOs as lines;
- throughput against interactivity: output tokens/s per accelerator chip, and output tokens per
  USD, against output tokens/s per user (1 / ITL), one curve per stack with its error band, a
  point per concurrency (as InferenceMAX and vLLM's benchmarks compare serving setups);
- cost per million requests against load.

A benchmark run's measured cells are drawn as markers on the same axes (``gemma4 plan --plot
--calibration-run`` and ``gemma4 bench compare --predict``); ``scripts/perf_docs.py`` draws
every shipped stack into ``docs/img/perf/``. The style is :mod:`serving.capacity.plot_style`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from serving.capacity.costs import instance_price
from serving.capacity.perf import StepModel, Workload
from serving.capacity.plot_style import (
    PANEL_IN,
    WIDTH_IN,
    fit_to_data,
    legend_below,
    legend_note,
    limit_line,
    pyplot,
    save,
    style_axes,
)
from serving.capacity.simulate import PERCENTILES, Traffic, simulate
from serving.config.settings import Settings

#: Loads a latency picture simulates, as shares of the mean model's capacity.
LOAD_SHARES = (0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.9)
#: Requests per simulated load (the sizing search's count).
SIM_REQUESTS = 2000
#: Cost samples per curve.
_SAMPLES = 40
#: Each percentile's colour, the same on the prediction's lines and a run's markers.
_COLOURS = {"p50": "C0", "p95": "C1", "p99": "C4"}
#: Each stack's marker and line (two stacks of one chip predict one curve: both stay seen).
_MARKERS = "osD^v"
_LINES = ("-", "--", ":")
#: A run's cell fields for each percentile (vLLM's benchmark names).
_CELL_KEYS = {"p50": "median", "p95": "p95", "p99": "p99"}


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value) if value > 0 else None
    return None


def percentile_points(model: StepModel, platform: str, traffic: Traffic) -> list[dict[str, Any]]:
    """The simulated p50/p95/p99 TTFT and E2E (ms, at the client) of one instance at each of
    :data:`LOAD_SHARES` of its capacity, ``traffic``'s lengths and burstiness; a saturated load
    (a queue that grows) is marked so."""
    from serving.capacity.configsearch import BALANCER

    w = Workload(traffic.prompt_tokens, traffic.output_tokens)
    capacity = model.capacity_rps(w)
    # One instance: Cloud Run's per-instance limit or the Gateway's picker in front of it; a
    # TPU VM is reached directly (as the sizing search simulates one replica).
    balancer = "engine" if platform == "tpu-vm" else BALANCER[platform]
    out = []
    for share in LOAD_SHARES:
        r = simulate(
            model,
            replace(traffic, rate=capacity * share),
            balancer=balancer,
            requests=SIM_REQUESTS,
        )
        out.append(
            {
                "requests_per_s": capacity * share,
                "ttft_ms": {q: r.latency_ms["ttft"][q] for q in PERCENTILES},
                "e2e_ms": {q: r.latency_ms["e2e"][q] for q in PERCENTILES},
                "saturated": r.saturated,
            }
        )
    return out


def throughput_points(
    model: StepModel, w: Workload, chips: int, usd_per_hour: float | None
) -> list[dict[str, Any]]:
    """Closed-loop points from 1 to max-num-seqs requests in flight: output tokens/s per user
    (1 / ITL), per chip, and millions of output tokens per USD (None at an unknown price);
    a level past what the KV cache holds adds nothing and is left out."""
    out: list[dict[str, Any]] = []
    top = model.max_num_seqs
    for c in sorted({1, top, *(2**i for i in range(1, top.bit_length()) if 2**i < top)}):
        p = model.at_concurrency(c, w)
        if out and p.output_tokens_per_s <= out[-1]["output_tokens_per_s"]:
            break
        out.append(
            {
                "concurrency": c,
                "output_tokens_per_s": p.output_tokens_per_s,
                "tokens_per_s_per_user": 1.0 / p.itl_s,
                "tokens_per_s_per_chip": p.output_tokens_per_s / chips,
                "million_tokens_per_usd": p.output_tokens_per_s * 3600 / usd_per_hour / 1e6
                if usd_per_hour
                else None,
            }
        )
    return out


def measured_points(cells: list[dict[str, Any]], w: Workload | None = None) -> list[dict[str, Any]]:
    """A benchmark run's measured cells (``cells`` as the run store reads them) as the pictures
    draw them: requests/s, each percentile of TTFT and E2E it recorded (ms), output tokens/s
    and per user (1000 / mean ITL ms) where recorded; cells without a request rate, or (given
    ``w``) of another request shape than the picture's, are left out."""
    points = []
    for cell in cells:
        rate = _number(cell.get("request_throughput"))
        if cell.get("status") != "ok" or rate is None:
            continue
        shape = (cell.get("prompt_tokens"), cell.get("output_tokens"))
        if w is not None and shape != (w.prompt_tokens, w.output_tokens):
            continue
        itl = _number(cell.get("mean_itl_ms") or cell.get("client_mean_itl_ms"))
        points.append(
            {
                "requests_per_s": rate,
                **{
                    f"{metric}_ms": {
                        q: v
                        for q, key in _CELL_KEYS.items()
                        if (v := _number(cell.get(f"{key}_{field}_ms"))) is not None
                    }
                    for metric, field in (("ttft", "ttft"), ("e2e", "e2el"))
                },
                "output_tokens_per_s": _number(cell.get("output_throughput")),
                "tokens_per_s_per_user": None if itl is None else 1000.0 / itl,
            }
        )
    return points


def _price_text(settings: Settings) -> tuple[float | None, str]:
    """One instance's hourly price and how a legend says it (``~`` for an estimate)."""
    price, status = instance_price(settings)
    if price is None:
        return None, "price unknown"
    if status == "estimate":
        return price, f"~${price:.2f}/h, estimate"
    return price, f"${price:.2f}/h"


def _latency_axes(
    ax: Any,
    metric: str,
    points: list[dict[str, Any]],
    measured: list[dict[str, Any]],
    slo_ms: float | None,
    capacity: float,
) -> None:
    """One metric's percentiles against requests/s (saturated loads left out, said so)."""
    stable = [p for p in points if not p["saturated"]]
    values = []
    for q, colour in _COLOURS.items():
        ys = [p[f"{metric}_ms"][q] / 1000.0 for p in stable]
        values += ys
        ax.plot(
            [p["requests_per_s"] for p in stable], ys, marker=".", color=colour,
            label=f"{q} predicted",
        )  # fmt: skip
    for q, colour in _COLOURS.items():
        mine = [
            (m["requests_per_s"], m[f"{metric}_ms"][q] / 1000.0)
            for m in measured
            if q in m[f"{metric}_ms"]
        ]
        if mine:
            values += [y for _, y in mine]
            ax.scatter(
                [x for x, _ in mine], [y for _, y in mine], marker="x", color=colour, zorder=5,
                label=f"{q} measured",
            )  # fmt: skip
    top = fit_to_data(ax, values, log=True)
    ax.axvline(
        capacity, color="grey", linestyle="--", linewidth=1, label=f"capacity {capacity:.2f} req/s"
    )
    if slo_ms is not None:
        limit_line(ax, slo_ms / 1000.0, top, f"SLO p95 {metric.upper()} {slo_ms / 1000:g} s")
    saturated = [p["requests_per_s"] for p in points if p["saturated"]]
    if saturated:
        legend_note(ax, f"saturated from {min(saturated):.2f} req/s: not drawn")
    ax.set_xlim(0, max([capacity, *(m["requests_per_s"] for m in measured)]) * 1.05)
    name = "time to first token" if metric == "ttft" else "end-to-end latency"
    style_axes(
        ax,
        "requests/s offered to one instance",
        f"{name}, s (log)",
        f"{metric.upper()} percentiles",
    )
    legend_below(ax)


def _throughput_axes(
    chip_ax: Any,
    usd_ax: Any,
    stacks: dict[str, Settings],
    *,
    w: Workload | None = None,
    mtp_acceptance: float | None = None,
    measured: list[dict[str, Any]] | None = None,
) -> None:
    """Each stack's output tokens/s per chip (``chip_ax``) and per USD (``usd_ax``) against
    tokens/s per user, with the model's band shaded; a stack at an unknown price is named in
    ``usd_ax``'s legend, not drawn; ``measured`` (one stack's run) as markers."""
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan_perf import workload_for

    chip_values: list[float] = []
    usd_values: list[float] = []
    for i, (name, settings) in enumerate(sorted(stacks.items())):
        colour = f"C{i}"
        model, _ = model_for_settings(settings, mtp_acceptance=mtp_acceptance)
        shape = w or workload_for(settings, None, None)
        chips = settings.profile.accelerator_count
        price, price_text = _price_text(settings)
        pts = throughput_points(model, shape, chips, price)
        x = [p["tokens_per_s_per_user"] for p in pts]
        plural = "s" if chips > 1 else ""
        label = f"{name} ({shape.prompt_tokens}+{shape.output_tokens} tokens, {chips} chip{plural})"
        for ax, key, values in (
            (chip_ax, "tokens_per_s_per_chip", chip_values),
            (usd_ax, "million_tokens_per_usd", usd_values),
        ):
            if price is None and ax is usd_ax:
                legend_note(ax, f"{name}: {price_text}, not drawn")
                continue
            y = [p[key] for p in pts]
            low, high = [v / (1 + model.band) for v in y], [v * (1 + model.band) for v in y]
            values += low + high
            ax.fill_between(x, low, high, color=colour, alpha=0.15, linewidth=0)
            ax.plot(
                x,
                y,
                marker=_MARKERS[i % len(_MARKERS)],
                markersize=4,
                linestyle=_LINES[i % len(_LINES)],
                color=colour,
                label=label if ax is chip_ax else f"{name} ({price_text})",
            )
        for m in measured or []:
            if m["tokens_per_s_per_user"] is None or m["output_tokens_per_s"] is None:
                continue
            chip_ax.scatter(
                [m["tokens_per_s_per_user"]],
                [m["output_tokens_per_s"] / chips],
                marker="x",
                color="black",
                zorder=5,
            )
            chip_values.append(m["output_tokens_per_s"] / chips)
            if price is not None:
                per_usd = m["output_tokens_per_s"] * 3600 / price / 1e6
                usd_ax.scatter(
                    [m["tokens_per_s_per_user"]], [per_usd], marker="x", color="black", zorder=5
                )
                usd_values.append(per_usd)
    if measured:
        for ax in (chip_ax, usd_ax):
            ax.scatter([], [], marker="x", color="black", label="measured (one cell each)")
    for ax, values in ((chip_ax, chip_values), (usd_ax, usd_values)):
        ax.set_xscale("log")
        fit_to_data(ax, values, log=True)
    band = "shaded: the model's error band"
    style_axes(
        chip_ax,
        "output tokens/s per user (1 / ITL; log)",
        "output tokens/s per chip (log)",
        f"Throughput per accelerator ({band})",
    )
    style_axes(
        usd_ax,
        "output tokens/s per user (1 / ITL; log)",
        "million output tokens per USD (log)",
        f"Throughput per dollar ({band})",
    )
    legend_below(chip_ax, columns=1)
    legend_below(usd_ax, columns=1)


def plot_stack(
    path: Path,
    stack: str,
    settings: Settings,
    traffic: Traffic,
    *,
    mtp_acceptance: float | None = None,
    measured: list[dict[str, Any]] | None = None,
    throughput: bool = True,
    flag: str = "--plot",
) -> None:
    """One stack at ``traffic``'s request shape: its TTFT and E2E percentiles against load and,
    with ``throughput``, its output tokens/s per chip and per USD against tokens/s per user;
    ``measured`` (:func:`measured_points` of a run of it) as markers on the same axes."""
    from serving.capacity.perf_stack import model_for_settings

    model, _ = model_for_settings(settings, mtp_acceptance=mtp_acceptance)
    w = Workload(traffic.prompt_tokens, traffic.output_tokens)
    model.check_shape(w)
    measured = measured or []
    points = percentile_points(model, settings.deploy_platform, traffic)
    plt = pyplot()
    # One column no wider than the docs' content (WIDTH_IN): shown unscaled, its text readable.
    panels = 4 if throughput else 2
    fig, axes = plt.subplots(panels, 1, figsize=(WIDTH_IN, PANEL_IN * panels), squeeze=False)
    slo = settings.slo
    capacity = model.capacity_rps(w)
    for ax, metric, slo_ms in (
        (axes[0][0], "ttft", slo.slo_p95_ttft_ms),
        (axes[1][0], "e2e", slo.slo_p95_e2e_ms),
    ):
        _latency_axes(ax, metric, points, measured, slo_ms, capacity)
    if throughput:
        _throughput_axes(
            axes[2][0], axes[3][0], {stack: settings}, w=w, mtp_acceptance=mtp_acceptance,
            measured=measured,
        )  # fmt: skip
    front = model.front_end_s * 1000.0
    client = f"front end {front:.0f} ms included" if front else "no front end counted (0 ms)"
    fig.suptitle(
        f"{stack}: {w.prompt_tokens} prompt + {w.output_tokens} output tokens, one instance, at "
        f"the client, {client}\n(PREDICTED: {SIM_REQUESTS} simulated requests a load)",
        fontsize=10,
    )
    fig.tight_layout()
    save(fig, path, flag)


def plot_throughput(path: Path, stacks: dict[str, Settings]) -> None:
    """Every stack's throughput per chip and per USD against tokens/s per user, each at its
    benchmark's request shape (PREDICTED)."""
    plt = pyplot()
    fig, (chip_ax, usd_ax) = plt.subplots(2, 1, figsize=(WIDTH_IN, 2 * PANEL_IN))
    _throughput_axes(chip_ax, usd_ax, stacks)
    fig.suptitle(
        "Output throughput against interactivity, one instance, a point per concurrency "
        "(PREDICTED)",
        fontsize=10,
    )
    fig.tight_layout()
    save(fig, path)


def cost_points(model: StepModel, w: Workload, usd_per_hour: float) -> list[dict[str, float]]:
    """USD per million requests for one instance billed all hour at open-loop loads up to its
    capacity (an idle instance bills the same hour: the cost falls as the load rises)."""
    capacity = model.capacity_rps(w)
    out = []
    for i in range(1, _SAMPLES + 1):
        rate = capacity * 0.95 * i / _SAMPLES
        out.append(
            {"requests_per_s": rate, "usd_per_million_requests": usd_per_hour / (rate * 3.6e-3)}
        )
    return out


def plot_cost(path: Path, stacks: dict[str, Settings]) -> None:
    """USD per million requests against load, one line per stack, each at its benchmark
    request shape and one instance's hourly price (PREDICTED); an estimated price is labelled
    ``~$X/h, estimate``; a stack at an unknown price (a rate with no figure anywhere) is named
    in the legend, not drawn."""
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan_perf import workload_for

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, PANEL_IN + 1.0))
    for i, (name, settings) in enumerate(sorted(stacks.items())):
        price, price_text = _price_text(settings)
        if price is None:
            legend_note(ax, f"{name}: {price_text}, not drawn")
            continue
        model, _ = model_for_settings(settings)
        w = workload_for(settings, None, None)
        pts = cost_points(model, w, price)
        ax.plot(
            [p["requests_per_s"] for p in pts],
            [p["usd_per_million_requests"] for p in pts],
            color=f"C{i}",
            linestyle=_LINES[i % len(_LINES)],
            label=f"{name} ({w.prompt_tokens}+{w.output_tokens} tokens, {price_text})",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    style_axes(
        ax,
        "requests/s offered to one instance (log)",
        "USD per million requests (log)",
        "Cost per million requests against load, one instance (PREDICTED)",
    )
    legend_below(ax, columns=1)
    save(fig, path)
