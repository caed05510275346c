"""How long the platform's startup probe and the post-deploy health check wait for a new
instance: derived from the cold-start prediction's p90 with a stated margin, not fixed
(pure; serving/capacity/coldstart.py predicts, this sizes the waits).

Both wait for the first start of a configuration, when no compile cache exists yet: a
probe sized for a cache hit would kill that first instance before it serves, and every later
one would start cold again. The margin is wide because most phases are priors that no start
of these stacks has measured (docs/cold-start.md).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from serving.capacity.coldstart import checkpoint_bytes, predict, start_path, totals
from serving.catalog.hardware import Platform, Probe
from serving.config.inputs import MAX_DEADLINE_S
from serving.config.settings import Settings

#: The waits are this many times the predicted p90.
MARGIN = 2.0
#: Phases before the container runs: the platform's probe clock has not started (Cloud Run
#: provisions the instance and streams the image first; a GKE node is created and the kubelet
#: pulls the image before it starts the container).
BEFORE_CONTAINER = frozenset({"capacity", "image"})


def _cold_phases(settings: Settings) -> list[dict[str, Any]]:
    return list(predict(start_path(settings), checkpoint_bytes(settings))["phases"])


#: How long tpu-inference's own CI waits for Gemma 4 to print 'Application startup complete.'
#: (PR #2722 raised its recipe's TIMEOUT_SECONDS from 960 to 1800 after gemma-4-31B-it on
#: tpu7x took over 960 s, engine-core init alone about 550 s): a start its maintainers allow
#: for, so a probe never kills a TPU container sooner. It is a CI wait, not an engine timeout.
TPU_ENGINE_START_S = 1800


def probe_allowance_s(settings: Settings) -> int:
    """What the startup probe must tolerate: ``MARGIN`` x the p90 of a cold start's phases
    from the container's start to its first answer, and on a TPU never less than the wait
    tpu-inference's CI gives Gemma 4's start (:data:`TPU_ENGINE_START_S`)."""
    phases = [p for p in _cold_phases(settings) if p["name"] not in BEFORE_CONTAINER]
    allowance = math.ceil(MARGIN * totals(phases)[1])
    if settings.profile.platform is Platform.TPU:
        return max(allowance, TPU_ENGINE_START_S)
    return allowance


def startup_probe(settings: Settings) -> Probe | None:
    """The platform's startup probe: the catalog's cadence (delay, period, timeout) for the
    hardware on Cloud Run or the node shape on GKE, with as many failures as the allowance
    needs, its budget the first multiple of the period at or past it. None on a TPU VM,
    which no platform probes."""
    if settings.deploy_platform == "tpu-vm":
        return None
    cadence = (
        settings.gke_shape.startup_probe
        if settings.deploy_platform == "gke"
        else settings.profile.startup_probe
    )
    needed = probe_allowance_s(settings) - cadence.initial_delay_seconds
    return replace(
        cadence,
        failure_threshold=max(1, math.ceil(needed / cadence.period_seconds)),
        source=f"{cadence.source} Failures: {MARGIN:g} x the cold start's predicted p90 from "
        "the container's start, on a TPU at least the 1800 s tpu-inference's CI waits for Gemma 4 "
        "(serving/capacity/start_budget.py).".strip(),
    )


def health_deadline_s(settings: Settings) -> int:
    """How long the post-deploy health check waits by default: ``MARGIN`` x the p90 of a whole
    cold start (capacity and image included), never less than the probe's own budget (the
    platform gives up first), at most the deadline any input may set."""
    p90 = totals(_cold_phases(settings))[1]
    probe = startup_probe(settings)
    least = probe.budget_seconds if probe else 0
    return int(min(MAX_DEADLINE_S, max(math.ceil(MARGIN * p90), least)))


BEGIN = "<!-- BEGIN GENERATED START BUDGETS by scripts/perf_docs.py: do not edit by hand -->"
END = "<!-- END GENERATED START BUDGETS -->"


def render_markdown(stacks: dict[str, Settings]) -> str:
    """docs/cold-start.md's table: each stack's probe and health check waits."""
    rows = [
        "| stack | cold start p90 (container / whole) | startup probe | health check waits |",
        "| --- | ---: | --- | ---: |",
    ]
    for name, settings in stacks.items():
        phases = _cold_phases(settings)
        inside = totals([p for p in phases if p["name"] not in BEFORE_CONTAINER])[1]
        probe = startup_probe(settings)
        shown = (
            f"{probe.initial_delay_seconds} s + {probe.failure_threshold} x "
            f"{probe.period_seconds} s = {probe.budget_seconds:,} s"
            if probe
            else "none (a TPU VM)"
        )
        rows.append(
            f"| `{name}` | {inside:,} / {totals(phases)[1]:,} s | {shown} | "
            f"{health_deadline_s(settings):,} s |"
        )
    return "\n".join([BEGIN, *rows, END])


def waits(settings: Settings) -> dict[str, Any]:
    """The ``waits`` of ``gemma4 plan --json``'s cold start: what the probe and the health
    check allow, and how they were derived."""
    probe = startup_probe(settings)
    return {
        "startup_probe_s": probe.budget_seconds if probe else None,
        "health_check_s": health_deadline_s(settings),
        "margin": MARGIN,
        "of": "a first start's p90, no compile cache yet",
    }


def waits_text(block: dict[str, Any]) -> str:
    """One line under `gemma4 plan`'s cold start block."""
    probe = block["startup_probe_s"]
    said = f"startup probe {probe:,} s, " if probe is not None else "no startup probe, "
    return (
        f"  waits: {said}health check {block['health_check_s']:,} s "
        f"({block['margin']:g} x {block['of']})"
    )
