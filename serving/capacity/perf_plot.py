"""Pictures of the performance model: latency against throughput, and cost against load.

``gemma4 plan --plot FILE`` draws one stack; ``scripts/perf_docs.py`` draws every shipped
stack into ``docs/img/`` (no network: the figures come from the model and the catalogues).
Matplotlib with the Agg backend (no display); SVG output is made deterministic (no date, a
fixed hash salt) so a regenerated file is byte-identical and a test can tell a stale one.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from serving.capacity.perf import StepModel, Workload
from serving.config.settings import Settings

#: Concurrency levels a picture samples (geometric, up to the slots and a little past them).
_SAMPLES = 40


class PlotError(ValueError):
    """A figure that cannot be drawn or written."""


def _levels(top: float) -> list[int]:
    levels = {1}
    hi = max(2.0, top * 1.5)
    for i in range(_SAMPLES):
        levels.add(max(1, round(hi ** (i / (_SAMPLES - 1)))))
    return sorted(levels)


def curve_points(model: StepModel, w: Workload) -> list[dict[str, Any]]:
    """(requests/s, E2E ms at the client, ceiling) along a closed-loop sweep."""
    out = []
    for c in _levels(model.max_num_seqs):
        p = model.at_concurrency(c, w)
        out.append(
            {
                "concurrency": c,
                "requests_per_s": p.requests_per_s,
                "e2e_ms": p.e2e_s * 1000.0,
                "ttft_ms": p.ttft_s * 1000.0,
                "ceiling": p.ceiling,
            }
        )
    return out


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


def _figure() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Matplotlib's own defaults, not a matplotlibrc of the user's or the machine's: the same
    # picture on every machine (and the docs' check compares the pictures).
    matplotlib.rcdefaults()
    plt.rcParams["svg.hashsalt"] = "gemma4"
    return plt


def _save(fig: Any, path: Path) -> None:
    suffix = path.suffix.lower()
    if suffix not in (".png", ".svg"):
        raise PlotError(f"--plot {path}: the file must end in .png or .svg")
    metadata: dict[str, Any] = {"Date": None} if suffix == ".svg" else {"Software": None}
    try:
        fig.savefig(path, format=suffix[1:], metadata=metadata, bbox_inches="tight")
    except OSError as exc:
        raise PlotError(f"--plot {path}: cannot write ({exc.strerror or exc})") from None


def measured_points(cells: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(requests/s, mean E2E ms) of a benchmark run's measured cells (``cells`` as the run
    store reads them); cells without both figures are left out."""
    points = []
    for cell in cells:
        rate, e2e = cell.get("request_throughput"), cell.get("mean_e2el_ms")
        if cell.get("status") != "ok":
            continue
        if not (isinstance(rate, int | float) and isinstance(e2e, int | float)):
            continue
        if math.isfinite(rate) and rate > 0 and math.isfinite(e2e) and e2e > 0:
            points.append((float(rate), float(e2e)))
    return points


def plot_stack(
    path: Path,
    stack: str,
    settings: Settings,
    w: Workload,
    *,
    mtp_acceptance: float | None = None,
    measured: list[tuple[float, float]] | None = None,
) -> None:
    """Latency (mean E2E at the client) against throughput for one stack: the prediction,
    its band, the ceilings (capacity: slots or compute; the front end's floor), the SLO line
    when the stack sets one, and a run's measured cells (``measured``: requests/s, E2E ms)."""
    from serving.capacity.perf_stack import model_for_settings

    model, _ = model_for_settings(settings, mtp_acceptance=mtp_acceptance)
    model.check_shape(w)
    measured = measured or []
    plt = _figure()
    points = curve_points(model, w)
    x = [p["requests_per_s"] for p in points]
    y = [p["e2e_ms"] for p in points]
    band = model.band
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.fill_between(
        x,
        [v / (1 + band) for v in y],
        [v * (1 + band) for v in y],
        alpha=0.2,
        label=f"band +/-{band:.0%}",
    )
    ax.plot(x, y, marker=".", label="predicted mean E2E (client)")
    capacity = model.capacity_rps(w)
    ax.axvline(capacity, color="grey", linestyle="--", label=f"capacity {capacity:.2f} req/s")
    ax.axhline(
        model.front_end_s * 1000.0,
        color="grey",
        linestyle=":",
        label=f"front end {model.front_end_s * 1000:.0f} ms",
    )
    slo = settings.slo.slo_p95_e2e_ms
    if slo is not None:
        ax.axhline(slo, color="red", linestyle="-.", label=f"SLO E2E {slo:g} ms")
    if measured:
        ax.scatter(
            [m[0] for m in measured],
            [m[1] for m in measured],
            color="black",
            marker="x",
            label="measured (calibration run)",
            zorder=5,
        )
    first = {p["ceiling"]: p for p in reversed(points)}
    for name, p in sorted(first.items()):
        ax.annotate(name, (p["requests_per_s"], p["e2e_ms"]), fontsize=7)
    ax.set_yscale("log")
    ax.set_xlabel("requests/s (one instance)")
    ax.set_ylabel("mean end-to-end latency, ms (log)")
    ax.set_title(
        f"{stack}: {w.prompt_tokens} prompt + {w.output_tokens} output tokens (PREDICTED)",
        fontsize=10,
    )
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, alpha=0.3)
    _save(fig, path)
    plt.close(fig)


def plot_cost(path: Path, stacks: dict[str, Settings]) -> None:
    """USD per million requests against load, one line per stack, each at its benchmark
    request shape and one instance's hourly price (PREDICTED); an estimated price (a rate
    counted at a named source's quote) is labelled ``~$X/h, ESTIMATE``; a lower-bound price (a
    rate with no figure anywhere, counted 0) is dashed and labelled so; a stack with no figure
    at all is named, not drawn."""
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan_perf import workload_for

    plt = _figure()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    unpriced = []
    for name, settings in sorted(stacks.items()):
        price = settings.price
        if price.usd_per_hour <= 0 or price.is_lower_bound:  # a rate with no figure: unknown
            unpriced.append(name)
            continue
        model, _ = model_for_settings(settings)
        w = workload_for(settings, None, None)
        pts = cost_points(model, w, price.usd_per_hour)
        tilde = "~" if price.is_estimate else ""
        kind = ", ESTIMATE" if tilde else ""
        ax.plot(
            [p["requests_per_s"] for p in pts],
            [p["usd_per_million_requests"] for p in pts],
            label=f"{name} ({w.prompt_tokens}+{w.output_tokens} tokens, "
            f"{tilde}${price.usd_per_hour:.2f}/h{kind})",
        )
    if unpriced:
        ax.text(
            0.01,
            0.01,
            f"Not drawn (price unknown: a rate with no figure anywhere): {', '.join(unpriced)}",
            transform=ax.transAxes,
            fontsize=7,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("requests/s offered to one instance (log)")
    ax.set_ylabel("USD per million requests (log)")
    ax.set_title("Cost per million requests against load, one instance (PREDICTED)", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    _save(fig, path)
    plt.close(fig)
