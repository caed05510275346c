"""Every shipped stack at a glance: predicted capacity at its SLO, the band and what it costs,
each figure the one `gemma4 plan -s STACK --json` prints (:func:`serving.capacity.plan.report`
at its defaults). scripts/perf_docs.py writes the table at the top of docs/performance-model.md
and docs/deploy/cost.md, so the pages that answer "which hardware?" carry the program's numbers.

A price is shown as its figure; how far to trust it (confirmed, estimate, unknown) is a note
below the table, and an unknown price is "unknown" in every cell built from it, never 0."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from serving.capacity.costs import HOURS_PER_MONTH, UNKNOWN
from serving.capacity.gke_costs import fixed_costs
from serving.capacity.perf_stack import HEADROOM
from serving.capacity.plan import load_stack_file, report, stack_names
from serving.capacity.plan_perf import workload_for
from serving.catalog.hardware import CONFIRMED, ESTIMATE, LOWER_BOUND
from serving.config.settings import Settings

BEGIN = "<!-- BEGIN GENERATED STACK TABLE by scripts/perf_docs.py: do not edit by hand -->"
END = "<!-- END GENERATED STACK TABLE -->"

#: Every figure (a row of the table): its label and what the note under the table says of it.
NOTES = {
    "req/s per replica": "what one replica serves within the stack's SLO as planned "
    f"({HEADROOM * 100:g} % headroom, on the band's slow side: `replicas.per_replica_rps`)",
    "req/s at most": "the same at the stack's most replicas as declared, their count in "
    "brackets (`replicas.rps_at_max_replicas`)",
    "band": "how far a prediction may be off either way, from the published figures "
    "(`performance.band`)",
    "$/h": "serving the plan's default load, what the stack's fewest replicas (at least one) "
    "serve as planned, GKE's fixed costs included (`usd_per_hour_at_rate`)",
    "$/month": f"the same for {HOURS_PER_MONTH:g} h (`usd_per_month_at_rate`)",
    "$/M requests": "per million requests at that load (`usd_per_million_requests`)",
    "$/M output tokens": "per million output tokens at that load (`usd_per_million_output_tokens`)",
    "cold start": "a new replica's start to its first token, p50 / p90, with the stack's "
    "compile cache (`cold_start.p50_s`, `cold_start.p90_s`; [cold start](cold-start.md))",
}
#: The rows of the cost page: what each stack serves at its SLO, and what it costs.
COST_ROWS = ("req/s per replica", "$/h", "$/month", "$/M requests", "$/M output tokens")


def plans(root: Path) -> dict[str, tuple[Settings, dict[str, Any]]]:
    """Each shipped stack's settings and its `gemma4 plan -s STACK --json` at the defaults."""
    out = {}
    for name in stack_names(root):
        settings, raw = load_stack_file(root / f"Pulumi.{name}.yaml", root)
        workload = workload_for(settings, None, None)
        out[name] = settings, report(name, settings, None, workload, raw=raw)
    return out


def _usd(value: float | None) -> str:
    """Cents below $100, whole dollars above."""
    if value is None:
        return UNKNOWN
    return f"${value:,.2f}" if value < 100 else f"${value:,.0f}"


def _figures(r: dict[str, Any]) -> dict[str, str]:
    """Each row's cell for the stack whose `gemma4 plan` JSON is ``r``."""
    p = r["replicas"]
    per_replica = p.get("per_replica_rps")
    at_most = p.get("rps_at_max_replicas")
    most = p["stack_max_replicas"]
    return {
        "req/s per replica": "none" if per_replica is None else f"{per_replica:.3g}",
        "req/s at most": "none" if at_most is None else f"{at_most:.3g} ({most})",
        "band": f"+/-{r['performance']['band']:.0%}",
        "$/h": _usd(r["usd_per_hour_at_rate"]),
        "$/month": _usd(r["usd_per_month_at_rate"]),
        "$/M requests": _usd(r["usd_per_million_requests"]),
        "$/M output tokens": _usd(r["usd_per_million_output_tokens"]),
        "cold start": f"{r['cold_start']['p50_s']:,.0f} / {r['cold_start']['p90_s']:,.0f} s",
    }


def _short(what: str) -> str:
    """A rate's name without its parenthesised details."""
    return re.sub(r" \([^)]*\)", "", what)


def provenance(settings: Settings, status: str) -> str:
    """Where a stack's price stands and which rates make it so: confirmed on Google's page,
    an estimate (a rate counted at a named source's quote) or unknown (a rate with no figure
    anywhere)."""
    named = [(_short(rate.what), rate.status) for rate, _ in settings.price.parts]
    if settings.deploy_platform == "gke":
        named += [(f.item, f.status) for f in fixed_costs(settings)]
    word = {ESTIMATE: "estimate", CONFIRMED: "confirmed", UNKNOWN: "unknown"}.get(
        status, "lower bound"
    )
    said = [
        f" {label}: {'; '.join(what for what, s in named if s in kinds)}."
        for label, kinds in (
            ("No figure anywhere", (LOWER_BOUND,)),
            ("Quoted by a named source, not read on Google's page", (ESTIMATE,)),
        )
        if any(s in kinds for _, s in named)
    ]
    return f"**{word}**." + ("".join(said) or " Every rate read on Google's page.")


def _grouped(values: dict[str, str]) -> str:
    """One value for every stack, or each value with the stacks it holds for."""
    by: dict[str, list[str]] = {}
    for stack, value in values.items():
        by.setdefault(value, []).append(f"`{stack}`")
    if len(by) == 1:
        return f"{next(iter(by))}, every stack"
    return "; ".join(f"{value} ({', '.join(stacks)})" for value, stacks in by.items())


def render_markdown(
    stacks: dict[str, tuple[Settings, dict[str, Any]]], rows: Sequence[str] = tuple(NOTES)
) -> str:
    """The table of ``stacks`` (:func:`plans`), a column each (they are compared across), with
    the figures ``rows``, their notes and each price's provenance, between :data:`BEGIN` and
    :data:`END`."""
    lines = [
        BEGIN,
        "",
        "| | " + " | ".join(f"`{name}`" for name in stacks) + " |",
        "|---|" + "---:|" * len(stacks),
        "| platform | " + " | ".join(s.deploy_platform for s, _ in stacks.values()) + " |",
        "| hardware | " + " | ".join(s.hardware for s, _ in stacks.values()) + " |",
    ]
    figures = [_figures(r) for _, r in stacks.values()]
    lines += [f"| {row} | " + " | ".join(f[row] for f in figures) + " |" for row in rows]
    shapes = {
        name: f"{r['performance']['prompt_tokens']} prompt + "
        f"{r['performance']['output_tokens']} output tokens"
        for name, (_, r) in stacks.items()
    }
    lines += [
        "",
        "PREDICTED with the uncalibrated priors, at each stack's benchmark request shape "
        f"({_grouped(shapes)}), as `gemma4 plan -s STACK --json` prints them:",
        "",
    ]
    if "req/s per replica" in rows:
        slos = {name: str(r["replicas"].get("slo")) for name, (_, r) in stacks.items()}
        lines.append(f"- SLO: {_grouped(slos)}.")
    lines += [f"- **{row}**: {NOTES[row]}." for row in rows]
    lines += ["", "Each price, and how far to trust it:", ""]
    lines += [
        f"- `{name}`: {provenance(settings, r['price_status_at_rate'])}"
        for name, (settings, r) in stacks.items()
    ]
    return "\n".join([*lines, "", END])
