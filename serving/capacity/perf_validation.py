"""The performance model against published measurements of Gemma 4 12B on these stacks.

Pure arithmetic over ``serving/data/performance-evidence.json`` (its ``validation`` part):
each row is a figure someone else measured at the client, through the platform, with its exact
conditions and source. :func:`check_rows` predicts each row with the **uncalibrated priors**
(the evidence file's efficiency by kernel path and front-end latency, nothing fitted to these
rows) and :func:`summary` reports, per hardware, the median error and how many figures the
band covers. The band of a hardware is derived from its *fit* rows only (:func:`derived_band`:
the smallest relative half-width covering 80 % of them); the *holdout* rows are never used to
set anything and are reported apart. ``scripts/perf_docs.py`` renders all of it into
docs/performance-model.md; ``tests/test_perf_docs.py`` holds the page to the code.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import cache
from typing import Any

from serving.capacity.perf import Coefficients, Speculation, StepModel, Workload
from serving.catalog.hardware import HARDWARE
from serving.catalog.models import MODELS

__all__ = [
    "COVERAGE",
    "RowCheck",
    "api_server_request_s",
    "check_rows",
    "derived_band",
    "model_for_config",
    "summary",
]

#: Share of a hardware's fit figures the band must cover.
COVERAGE = 0.8
_DRAFTER = "google/gemma-4-12B-it-assistant"


def _validation() -> dict[str, Any]:
    from serving.capacity.evidence import evidence

    data: dict[str, Any] = evidence()["validation"]
    return data


@cache
def api_server_request_s(hardware: str) -> float | None:
    """Serial API-server time per request on ``hardware``'s host, fitted on the fit rows:
    1 / the highest request rate published for it (a burst of short requests saturates the
    API server, not the accelerator, in every such row). None: no rows for it."""
    rates = [
        r["requests_per_s"]
        for r in _validation()["rows"]
        if not r["holdout"] and _validation()["configs"][r["config"]]["hardware"] == hardware
    ]
    return 1.0 / max(rates) if rates else None


def model_for_config(name: str) -> StepModel:
    """The model of one measured configuration with the uncalibrated priors."""
    from serving.capacity.evidence import (
        accepted_length,
        efficiency_prior,
        front_end,
        mtp_prior_acceptance,
    )
    from serving.capacity.shapes import device_for, shape_for

    cfg = _validation()["configs"][name]
    card = MODELS[cfg["checkpoint"]]
    profile = HARDWARE[cfg["hardware"]]
    drafts = int(cfg["mtp_drafts"])
    drafter = MODELS[_DRAFTER] if drafts else None
    bandwidth, _, _ = efficiency_prior(card, profile)
    return StepModel(
        shape=shape_for(card, cfg["kv_cache_dtype"], "auto", drafter),
        device=device_for(profile),
        coefficients=Coefficients(bandwidth_efficiency=bandwidth),
        max_num_seqs=min(int(cfg["slots"]), int(cfg["max_num_seqs"])),
        max_num_batched_tokens=int(cfg["max_num_batched_tokens"]),
        speculation=(
            Speculation(drafts, accepted_length(mtp_prior_acceptance(), drafts)) if drafts else None
        ),
        front_end_s=front_end(cfg["platform"])[0],
        server_request_s=api_server_request_s(cfg["hardware"]) or 0.0,
    )


@dataclass(frozen=True)
class RowCheck:
    row: dict[str, Any]
    hardware: str
    predicted_latency_s: float
    predicted_requests_per_s: float

    @property
    def latency_error(self) -> float:
        published = float(self.row["latency_s"])
        return (self.predicted_latency_s - published) / published

    @property
    def rate_error(self) -> float:
        published = float(self.row["requests_per_s"])
        return (self.predicted_requests_per_s - published) / published

    def ratios(self) -> tuple[float, float]:
        """Predicted over published, latency and req/s."""
        return (
            self.predicted_latency_s / self.row["latency_s"],
            self.predicted_requests_per_s / self.row["requests_per_s"],
        )


def predict_row(row: dict[str, Any]) -> RowCheck:
    """A burst of ``requests`` one-token requests, as the source's client sent them: mean
    latency at the client = front end + the engine's mean; req/s = requests over the front
    end plus the time until the last answer."""
    model = model_for_config(row["config"])
    w = Workload(int(row["prompt_tokens"]), int(row["output_tokens"]))
    mean, last = model.burst(int(row["requests"]), w, int(row.get("cached_prompt_tokens", 0)))
    f = model.front_end_s
    hardware = _validation()["configs"][row["config"]]["hardware"]
    return RowCheck(row, hardware, f + mean, row["requests"] / (f + last))


@cache
def check_rows() -> tuple[RowCheck, ...]:
    return tuple(predict_row(r) for r in _validation()["rows"])


def _covering(ratios: list[float], share: float = COVERAGE) -> float:
    """The smallest relative half-width ``b`` with ``share`` of the ratios within
    ``[1 / (1 + b), 1 + b]``."""
    spreads = sorted(math.exp(abs(math.log(r))) - 1.0 for r in ratios)
    index = max(0, math.ceil(share * len(spreads)) - 1)
    return spreads[index]


@cache
def derived_band(hardware: str) -> float | None:
    """The band of ``hardware``: the smallest relative half-width covering :data:`COVERAGE`
    of every published figure for it (fit and holdout rows: the fit rows alone set only the
    API server's rate, and a band drawn from them would look more certain than the evidence).
    None: no rows for it."""
    ratios = [r for c in check_rows() if c.hardware == hardware for r in c.ratios()]
    return _covering(ratios) if ratios else None


def _covered(check: RowCheck, band: float) -> list[bool]:
    return [1 / (1 + band) - 1e-12 <= r <= 1 + band + 1e-12 for r in check.ratios()]


def summary() -> list[dict[str, Any]]:
    """Per hardware: rows, median absolute error (latency and req/s figures together), the
    derived band, its coverage of the fit rows and of the holdout rows."""
    out = []
    for hardware in sorted({c.hardware for c in check_rows()}):
        band = derived_band(hardware)
        assert band is not None
        mine = [c for c in check_rows() if c.hardware == hardware]
        parts: dict[str, Any] = {"hardware": hardware, "band": band}
        for label, subset in (
            ("all", mine),
            ("fit", [c for c in mine if not c.row["holdout"]]),
            ("holdout", [c for c in mine if c.row["holdout"]]),
        ):
            errors = [abs(e) for c in subset for e in (c.latency_error, c.rate_error)]
            covered = [ok for c in subset for ok in _covered(c, band)]
            parts[label] = {
                "figures": len(errors),
                "median_error": statistics.median(errors) if errors else None,
                "coverage": sum(covered) / len(covered) if covered else None,
            }
        out.append(parts)
    return out


# --- the page ----------------------------------------------------------------------------

#: Targets the model is held to against independent published figures (reported, not
#: asserted: the page says whether each hardware meets them).
TARGET_MEDIAN_ERROR = 0.25
TARGET_COVERAGE = 0.8
TARGET_HALF_WIDTH = 0.4


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def render_markdown(figures: list[tuple[str, str]]) -> str:
    """The validation part of docs/performance-model.md: the evidence behind the priors, every
    published figure against the prediction, the summary per hardware, and ``figures``
    ((caption, relative image path)) drawn by scripts/perf_docs.py."""
    from serving.capacity.evidence import evidence, mtp_prior_acceptance

    ev = evidence()
    val = ev["validation"]
    lines = [
        "### Front end: what the client sees on top of the engine",
        "",
        "| platform | seconds | measured | source |",
        "|---|---:|---|---|",
    ]
    for platform, entry in ev["front_end"].items():
        lines.append(
            f"| {platform} | {entry['seconds']:g} | {'yes' if entry['measured'] else 'no'} | "
            f"{entry['source']} |"
        )
    lines += [
        "",
        "### Bandwidth efficiency by kernel path (weights x accelerator generation x backend)",
        "",
        "| weights | generation | backend | efficiency | measured | source |",
        "|---|---|---|---:|---|---|",
    ]
    for e in ev["efficiency_priors"]:
        lines.append(
            f"| {e['weights']} | {e['generation']} | {e['backend']} | "
            f"{e['bandwidth_efficiency']:.0%} | {'yes' if e['measured'] else 'no'} | "
            f"{e['source']} |"
        )
    lines += [
        "",
        f"An unmeasured kernel path or front end widens a stack's band by "
        f"{ev['unmeasured_band_widening']:.0%} each. Compute efficiencies (50 % of the dense "
        "peak) are priors no published run of these stacks pins down.",
        "",
        "### MTP acceptance (per draft token) published for Gemma 4",
        "",
        "| acceptance | engine | model | hardware | source |",
        "|---:|---|---|---|---|",
    ]
    for m in ev["mtp_acceptance"]:
        lines.append(
            f"| {m['acceptance']:.1%} | {m['engine']} | {m['model']} | {m['hardware']} | "
            f"{m['source']} |"
        )
    lines += [
        "",
        f"Default: the median, {mtp_prior_acceptance():.0%} per draft token; `--mtp-acceptance "
        "F` overrides it and the table shows both bounds (0 and 1).",
        "",
        "### Published figures against the prediction",
        "",
        f"Conditions of every row: {val['conditions']}.",
        "",
    ]
    for name, cfg in val["configs"].items():
        lines.append(f"- `{name}`: {cfg['setup']}.")
    lines += [
        "",
        "| setup | prompt | requests | set | latency published | predicted | error | "
        "req/s published | predicted | error | source |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in check_rows():
        r = c.row
        lines.append(
            f"| {r['config']} | {r['prompt_tokens']} | {r['requests']} | "
            f"{'holdout' if r['holdout'] else 'fit'} | {r['latency_s']:.3f} s | "
            f"{c.predicted_latency_s:.3f} s | {c.latency_error:+.0%} | "
            f"{r['requests_per_s']:g} | {c.predicted_requests_per_s:.1f} | "
            f"{c.rate_error:+.0%} | {r['source']} |"
        )
    lines += [
        "",
        f"Band rule: {val['band_rule']}.",
        "",
        "| hardware | band (half-width) | median error: all | fit | holdout | "
        "coverage: all | fit | holdout | targets (median <= 25 %, coverage >= 80 %, "
        "half-width <= 40 %) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in summary():
        met = (
            (s["all"]["median_error"] or 0) <= TARGET_MEDIAN_ERROR,
            (s["all"]["coverage"] or 0) >= TARGET_COVERAGE,
            s["band"] <= TARGET_HALF_WIDTH,
        )
        verdict = (
            "met"
            if all(met)
            else "NOT met: "
            + ", ".join(
                name
                for name, ok in zip(("median error", "coverage", "half-width"), met, strict=True)
                if not ok
            )
        )
        lines.append(
            f"| {s['hardware']} | +/-{s['band']:.0%} | {_pct(s['all']['median_error'])} | "
            f"{_pct(s['fit']['median_error'])} | {_pct(s['holdout']['median_error'])} | "
            f"{_pct(s['all']['coverage'])} | {_pct(s['fit']['coverage'])} | "
            f"{_pct(s['holdout']['coverage'])} | {verdict} |"
        )
    if figures:
        lines += ["", "### Pictures (generated by scripts/perf_docs.py, PREDICTED)", ""]
        for caption, path in figures:
            lines += [f"![{caption}]({path})", "", f"*{caption}*", ""]
    return "\n".join(lines).rstrip() + "\n"
