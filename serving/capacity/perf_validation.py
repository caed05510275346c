"""The performance model against published measurements of Gemma 4 12B on these stacks.

Pure arithmetic over ``serving/data/performance-evidence.json`` (its ``validation`` part),
rendered into docs/performance-evidence.md, which states the rules: :func:`check_rows` predicts
each published row with the uncalibrated priors, run as the source's client ran it; the terms
only published rows can give (a platform's front end, a client's in-flight cap, its serial
time per request and the extra step of a setup whose settings were not recorded) are DERIVED
from the *fit* rows only, the *holdout* rows set nothing; a hardware's band
(:func:`derived_band`) is the smallest relative half-width covering 80 % of its figures.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from serving.capacity import evidence
from serving.capacity.evidence import (
    accepted_length,
    api_server_time,
    efficiency_prior,
    kernel_path,
    mtp_prior_acceptance,
)
from serving.capacity.perf import Coefficients, Speculation, StepModel, Workload
from serving.capacity.shapes import device_for, shape_for
from serving.catalog.hardware import HARDWARE
from serving.catalog.models import MODELS, ModelCard

#: Share of a hardware's figures the band must cover.
COVERAGE = 0.8
_DRAFTER = "google/gemma-4-12B-it-assistant"


def _validation() -> dict[str, Any]:
    data: dict[str, Any] = evidence.evidence()["validation"]
    return data


def _fit_rows() -> list[dict[str, Any]]:
    return [r for r in _validation()["rows"] if not r["holdout"]]


def _served(cfg: dict[str, Any]) -> tuple[ModelCard, str | None]:
    """The checkpoint a setup's engine served, and the weight format it served it in where
    that is not the catalogue's (``--quantization fp8`` on a bf16 checkpoint: the setup's
    ``weights`` give the format and the bytes; None: the catalogue's format)."""
    card = MODELS[cfg["checkpoint"]]
    weights = cfg.get("weights")
    if weights is None:
        return card, None
    return replace(card, weight_bytes=int(weights["bytes"])), str(weights["format"])


def model_for_config(name: str, step_extra_s: float | None = None) -> StepModel:
    """The engine of one measured configuration with the uncalibrated priors (no front end:
    :func:`predict_row` adds the platform's), each step ``step_extra_s`` longer for a setup
    whose own step constant is DERIVED (None: the evidence file's, :func:`setup_step_extra`)."""
    cfg = _validation()["configs"][name]
    card, weights = _served(cfg)
    profile = HARDWARE[cfg["hardware"]]
    drafts = int(cfg["mtp_drafts"])
    drafter = MODELS[_DRAFTER] if drafts else None
    bandwidth, _, _ = efficiency_prior(card, profile, weights)
    extra = setup_step_extra(name) if step_extra_s is None else step_extra_s
    prior = Coefficients(bandwidth_efficiency=bandwidth)
    server_request, server_prompt_token, _ = api_server_time()
    return StepModel(
        shape=shape_for(card, cfg["kv_cache_dtype"], "auto", drafter),
        device=device_for(profile),
        coefficients=replace(prior, step_overhead_s=prior.step_overhead_s + extra),
        max_num_seqs=int(cfg["max_num_seqs"]),
        max_num_batched_tokens=int(cfg["max_num_batched_tokens"]),
        server_request_s=server_request,
        server_prompt_token_s=server_prompt_token,
        speculation=(
            Speculation(drafts, accepted_length(mtp_prior_acceptance(), drafts)) if drafts else None
        ),
    )


def _engine_burst(
    row: dict[str, Any],
    in_flight: int | None,
    gap_s: float,
    send_gap_s: float = 0.0,
    step_extra_s: float | None = None,
) -> tuple[float, float]:
    model = model_for_config(row["config"], step_extra_s)
    slots = _validation()["configs"][row["config"]].get("instance_concurrency")
    w = Workload(int(row["prompt_tokens"]), int(row["output_tokens"]))
    return model.burst(
        int(row["requests"]),
        w,
        int(row.get("cached_prompt_tokens", 0)),
        client_slots=in_flight,
        return_gap_s=gap_s,
        send_gap_s=send_gap_s,
        instance_slots=None if slots is None else int(slots),
    )


def _client_of(row: dict[str, Any]) -> dict[str, Any]:
    client: dict[str, Any] = _validation()["configs"][row["config"]]["client"]
    return client


@dataclass(frozen=True)
class ClientTerms:
    """What only a client's published rows can give, DERIVED jointly from its fit rows."""

    #: The client's own serial time per request (one Python thread opens every connection,
    #: does its TLS handshake and writes its request in turn); 0 for a client whose setups
    #: do not say ``serial_send: derived``.
    send_gap_s: float
    #: The one setup of the client's whose server settings were not recorded as the rows
    #: ran (``step_extra: derived``), and the time each of its steps takes beyond the priors
    #: (None, 0: no such setup).
    setup: str | None
    step_extra_s: float


#: The most the joint fit gives a client's serial time per request, seconds (a TLS handshake
#: and a request write on one thread take milliseconds; 50 ms would be a broken client).
MAX_SEND_GAP_S = 0.05
#: The most the joint fit adds to a setup's step, seconds: vLLM without CUDA graphs
#: (``--enforce-eager``) launches every kernel of every layer from Python each step, tens of
#: milliseconds on a few vCPUs; 50 ms would be more than the step itself.
MAX_STEP_EXTRA_S = 0.05


def _row_cost(row: dict[str, Any], send_gap_s: float, step_extra_s: float | None) -> float:
    check = _predict(row, send_gap_s, step_extra_s)
    return sum(math.log(r) ** 2 for r in check.ratios())


def derived_client_terms(client: str) -> ClientTerms:
    """The client's terms as the evidence file records them (``validation.derived_terms``):
    :func:`fit_client_terms`'s result, stored so that reading the validation does not repeat
    a search of a second or two; tests/test_perf_validation.py holds the file to the fit."""
    entry = _validation()["derived_terms"].get(client)
    if entry is None:
        raise ValueError(
            f"client {client!r}: no derived terms in the evidence file's validation.derived_terms"
        )
    return ClientTerms(float(entry["send_gap_s"]), entry["setup"], float(entry["step_extra_s"]))


def setup_step_extra(config: str) -> float:
    """What each step of setup ``config`` takes beyond the priors: DERIVED (stored) for the
    setup whose client's terms name it, 0 for every other."""
    cfg = _validation()["configs"][config]
    if cfg.get("step_extra") != "derived":
        return 0.0
    terms = derived_client_terms(cfg["client"]["name"])
    return terms.step_extra_s if terms.setup == config else 0.0


@cache
def fit_client_terms(client: str) -> ClientTerms:
    """The client's serial time per request and, for the one setup of its whose server
    settings were not recorded (``step_extra: derived``), that setup's extra time per step,
    DERIVED together from the fit rows of every setup that client measured: the pair that
    minimises the squared log error of every fit figure (latency and req/s), searched on a
    grid (send gap 0 to :data:`MAX_SEND_GAP_S`, extra step 0 to :data:`MAX_STEP_EXTRA_S`),
    then on a grid 5 times finer around the best. Fitted together because each explains a
    cell's wall time: fitted apart, each would take the other's share."""
    rows = [r for r in _fit_rows() if _client_of(r)["name"] == client]
    if not rows:
        raise ValueError(f"client {client!r}: no fit rows to derive its terms from")
    configs = _validation()["configs"]
    derive_gap = any(_client_of(r).get("serial_send") == "derived" for r in rows)
    doubtful = sorted(
        {r["config"] for r in rows if configs[r["config"]].get("step_extra") == "derived"}
    )
    if len(doubtful) > 1:
        raise ValueError(f"client {client!r}: more than one setup to derive a step for")
    setup = doubtful[0] if doubtful else None
    gap_top = MAX_SEND_GAP_S if derive_gap else 0.0
    extra_top = MAX_STEP_EXTRA_S if setup is not None else 0.0

    def cost(pair: tuple[float, float]) -> float:
        return sum(_row_cost(r, pair[0], pair[1] if r["config"] == setup else 0.0) for r in rows)

    def grid(centre: float, step: float, top: float, points: int) -> list[float]:
        values = {min(top, max(0.0, centre + i * step)) for i in range(-points, points + 1)}
        return sorted(values)

    gap_step, extra_step = gap_top / 20, extra_top / 10
    best = min(
        (
            (g, e)
            for g in grid(0.0, gap_step, gap_top, 20)
            for e in grid(0.0, extra_step, extra_top, 10)
        ),
        key=cost,
    )
    best = min(
        (
            (g, e)
            for g in grid(best[0], gap_step / 5, gap_top, 5)
            for e in grid(best[1], extra_step / 5, extra_top, 5)
        ),
        key=cost,
    )
    return ClientTerms(round(best[0], 6), setup, round(best[1], 6))


@cache
def derived_in_flight_cap(config: str) -> int | None:
    """Requests the source's client kept in flight at most, for a setup whose client says
    ``in_flight_cap: derived`` (None: the client sent as its script says). DERIVED from the
    setup's fit rows by Little's law, which holds for any client: requests in flight on average
    over a cell = published req/s x published mean latency; the cap is the largest of them,
    rounded. (A cell that sent everything at once would show the whole cell in flight.)"""
    cfg = _validation()["configs"][config]
    if cfg["client"].get("in_flight_cap") != "derived":
        return None
    seen = [
        float(r["requests_per_s"]) * float(r["latency_s"])
        for r in _fit_rows()
        if r["config"] == config
    ]
    if not seen:
        raise ValueError(f"setup {config!r}: an in-flight cap to derive but no fit rows")
    return max(1, round(max(seen)))


def _in_flight(row: dict[str, Any]) -> int:
    cap = derived_in_flight_cap(row["config"])
    c = int(row["concurrency"])
    return c if cap is None else min(c, cap)


@cache
def derived_front_end(platform: str) -> float | None:
    """The client's time on top of the engine on ``platform``, DERIVED from the fit rows with
    one request in flight on it: the median of (published mean latency - the engine's
    predicted mean latency for the same requests), never below 0. None: no such rows."""
    gaps = []
    for r in _fit_rows():
        cfg = _validation()["configs"][r["config"]]
        if cfg["platform"] != platform or _in_flight(r) != 1:
            continue
        mean, _ = _engine_burst(r, 1, 0.0)
        gaps.append(float(r["latency_s"]) - mean)
    return max(0.0, statistics.median(gaps)) if gaps else None


def front_end(platform: str) -> tuple[float, bool, str]:
    """(seconds, measured, source) the client sees on top of the engine on ``platform``: the
    evidence file's figure, or for an entry that says ``derived``, :func:`derived_front_end`
    (never "measured", its source says DERIVED and the value)."""
    entry = evidence.evidence()["front_end"][platform]
    if "stand_in" in entry:
        # Another platform's front end plus what this one adds (the source says what).
        base, _, _ = front_end(str(entry["stand_in"]))
        total = base + float(entry["plus_seconds"])
        return total, False, f"{entry['source']} ({total * 1000:.0f} ms)"
    if "derived" not in entry:
        return evidence.front_end(platform)
    seconds = derived_front_end(platform)
    if seconds is None:
        raise ValueError(
            f"front end of {platform!r}: derived from {entry['derived']}, but there are none"
        )
    return seconds, False, f"{entry['source']} ({seconds * 1000:.0f} ms)"


def front_end_basis(platform: str) -> str:
    """How the front end of ``platform`` was had: "measured", "derived" (from the published
    rows, :func:`derived_front_end`), "stand-in" (another platform's or an unmeasured figure)."""
    entry = evidence.evidence()["front_end"][platform]
    if "derived" in entry:
        return "derived"
    if "stand_in" not in entry and entry.get("measured"):
        return "measured"
    return "stand-in"


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


def _predict(row: dict[str, Any], send_gap_s: float, step_extra_s: float | None) -> RowCheck:
    cfg = _validation()["configs"][row["config"]]
    f = front_end(cfg["platform"])[0]
    mean, last = _engine_burst(row, _in_flight(row), f, send_gap_s, step_extra_s)
    return RowCheck(row, cfg["hardware"], f + mean, int(row["requests"]) / (f + last))


def predict_row(row: dict[str, Any]) -> RowCheck:
    """One published cell, run as its client ran it: the cell's requests, at most the
    client's in-flight cap out at once (each timed from when it is sent), the next sent when
    one is answered, behind the setup's instance limit. Mean latency at the client = front
    end + the engine's mean; req/s = requests over the front end plus the time until the last
    answer. The client's terms are :func:`derived_client_terms`."""
    return _predict(row, derived_client_terms(_client_of(row)["name"]).send_gap_s, None)


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
    of every published figure for it (fit and holdout rows: the fit rows also set the derived
    terms, and a band drawn from them alone would look more certain than the evidence).
    None: no rows for it."""
    ratios = [r for c in check_rows() if c.hardware == hardware for r in c.ratios()]
    return _covering(ratios) if ratios else None


def setup_kernel(name: str) -> tuple[str, bool]:
    """(weight format the setup's engine served, whether it drafted with MTP)."""
    cfg = _validation()["configs"][name]
    card, weights = _served(cfg)
    return kernel_path(card, HARDWARE[cfg["hardware"]], weights)[0], int(cfg["mtp_drafts"]) > 0


def stack_band(hardware: str, weights: str, speculative: bool) -> float | None:
    """The band of a stack that serves ``weights`` on ``hardware``, with or without MTP: its
    hardware's band (:func:`derived_band`), or wider where the setups served like the stack
    give a wider band on their own figures. A hardware's band pools its setups, and one of
    them (another checkpoint, many figures) can make it narrower than the evidence closest to
    the stack: a prediction never looks more certain than that evidence. None: no rows."""
    band = derived_band(hardware)
    if band is None:
        return None
    alike = [
        b["own_band"]
        for b in by_setup()
        if b["hardware"] == hardware and setup_kernel(b["setup"]) == (weights, speculative)
    ]
    return float(max([band, *alike]))


def decode_validated(hardware: str) -> bool:
    """Whether a published row of ``hardware`` asked for more than one output token: rows of
    one token measure the front end, the prefill and the slots, never a decode step, so a band
    drawn from them alone says nothing of the decode speed that longer answers depend on."""
    return any(c.hardware == hardware and int(c.row["output_tokens"]) > 1 for c in check_rows())


def _scores(checks: list[RowCheck], band: float) -> tuple[list[float], list[bool]]:
    """Each figure's absolute error, and whether ``band`` covers it."""
    errors = [abs(e) for c in checks for e in (c.latency_error, c.rate_error)]
    covered = [1 / (1 + band) - 1e-12 <= r <= 1 + band + 1e-12 for c in checks for r in c.ratios()]
    return errors, covered


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
            errors, covered = _scores(subset, band)
            parts[label] = {
                "figures": len(errors),
                "median_error": statistics.median(errors) if errors else None,
                "coverage": sum(covered) / len(covered) if covered else None,
            }
        out.append(parts)
    return out


def by_setup() -> list[dict[str, Any]]:
    """Per setup: its hardware, figures, median absolute error, the band its figures alone
    would give (the same rule) and how many of them its hardware's band covers: a hardware's
    band can come mostly from one setup, and this says which."""
    out = []
    for name in dict.fromkeys(c.row["config"] for c in check_rows()):
        mine = [c for c in check_rows() if c.row["config"] == name]
        hardware = mine[0].hardware
        band = derived_band(hardware)
        assert band is not None
        errors, covered = _scores(mine, band)
        out.append(
            {
                "setup": name,
                "hardware": hardware,
                "figures": len(errors),
                "median_error": statistics.median(errors),
                "own_band": _covering([r for c in mine for r in c.ratios()]),
                "covered_by_hardware_band": sum(covered) / len(covered),
            }
        )
    return out


#: Targets the model is held to against independent published figures (reported, not
#: asserted: the page says whether each hardware meets them).
TARGET_MEDIAN_ERROR = 0.25
TARGET_COVERAGE = 0.8
TARGET_HALF_WIDTH = 0.4


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def render_markdown(figures: list[tuple[str, str]]) -> str:
    """The validation part of docs/performance-evidence.md: the evidence behind the priors, every
    published figure against the prediction, the summary per hardware, and ``figures``
    ((caption, relative image path)) drawn by scripts/perf_docs.py."""
    api = api_server_time()

    ev = evidence.evidence()
    val = ev["validation"]
    lines = [
        "### Front end: what the client sees on top of the engine",
        "",
        "| platform | seconds | measured | source |",
        "|---|---:|---|---|",
    ]
    for platform, entry in ev["front_end"].items():
        seconds, measured, source = front_end(platform)
        kind = "yes" if measured else "DERIVED" if "derived" in entry else "no"
        lines.append(f"| {platform} | {seconds:.3g} | {kind} | {source} |")
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
        f"An unmeasured kernel path or front end, and a hardware whose published rows all "
        f"asked for one output token (no decode step measured), widen a stack's band by "
        f"{ev['unmeasured_band_widening']:.0%} each. A stack starts from its hardware's band, "
        "or from the band of the setups served like it (same weight format, MTP or not) where "
        "their own figures give a wider one (the table by setup, below). Compute efficiencies "
        "(50 % of the dense peak) are priors no published run of these stacks pins down.",
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
        client = cfg["client"]
        cap = derived_in_flight_cap(name)
        terms = derived_client_terms(client["name"])
        slots = cfg.get("instance_concurrency")
        lines += [
            f"- `{name}`: {cfg['setup']}.",
            f"  Client `{client['name']}`: {client['script']}: {client['sends']}; "
            f"{client['output_tokens']} output token(s); {client['connection']}; "
            f"{client['prefix_cache']}; {client['serial_note']}. Its serial time per request: "
            f"**{terms.send_gap_s * 1000:.1f} ms, DERIVED** "
            + (f"with setup `{terms.setup}`'s step " if terms.setup is not None else "")
            + "from the fit rows of every setup it measured (below)."
            + (
                f" Cloud Run lets {slots} requests into the instance at once (its own queue holds "
                "the rest, in order; a slot frees when the answer leaves the API server)."
                if slots is not None
                else ""
            )
            + (
                f" Each step takes **{setup_step_extra(name) * 1000:.1f} ms, DERIVED**, beyond "
                "the priors: the server settings of these cells were not recorded."
                if cfg.get("step_extra") == "derived"
                else ""
            )
            + (
                f" In flight at most: **{cap}, DERIVED** from the fit rows (Little's law: "
                "the largest published req/s x mean latency among them)."
                if cap is not None
                else ""
            )
            + (f" Doubt: {cfg['doubt']}." if cfg.get("doubt") else "")
            + (f" Doubt: {client['doubt']}." if client.get("doubt") else ""),
        ]
    lines += [
        "",
        "A client's serial time per request and the extra time per step of a setup whose "
        "server settings were not recorded both lengthen a cell's wall time, so they are "
        "fitted together: the pair that minimises the squared log error of every fit figure "
        f"of that client (send gap 0 to {MAX_SEND_GAP_S * 1000:.0f} ms, extra step 0 to "
        f"{MAX_STEP_EXTRA_S * 1000:.0f} ms), on a grid, then a finer one around the best. The "
        "extra step belongs to that setup's rows alone: `gemma4 plan` predicts this project's "
        "stacks, whose vLLM settings are known, with the priors. The `l4` setup's Cloud Run "
        "concurrency (4) is below its engine's slots (8), so there the instance limit, not the "
        "engine alone, sets the rate; the `rtx` setup's (16) is above its 8.",
    ]
    derived = [
        (platform, derived_front_end(platform))
        for platform, entry in ev["front_end"].items()
        if "derived" in entry
    ]
    lines += [""]
    for platform, derived_s in derived:
        lines.append(
            f"Front end of `{platform}` used for its rows: "
            + ("none (no fit rows)" if derived_s is None else f"**{derived_s:.3f} s, DERIVED**")
            + " from the fit rows with one request in flight (published mean latency - the "
            "engine's predicted mean, median, never below 0)."
        )
    lines += [
        "",
        f"The API server's serial time per request, in the validation as in `gemma4 plan`: "
        f"**{api[0] * 1000:.2f} ms + {api[1] * 1e6:.2f} us per prompt token, "
        f"{'MEASURED' if ev['api_server']['measured'] else 'NOT measured'}** "
        f"on the real engine, not fitted: {api[2]}. It hands a wave's requests to the engine "
        "one at a time that far apart, and caps a replica at one over it.",
        "",
        "| setup | prompt | c | requests sent | output | set | latency published | "
        "predicted | error | req/s published | predicted | error | source |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in check_rows():
        r = c.row
        lines.append(
            f"| {r['config']} | {r['prompt_tokens']} | {r['concurrency']} | {r['requests']} | "
            f"{r['output_tokens']} | {'holdout' if r['holdout'] else 'fit'} | "
            f"{r['latency_s']:.3f} s | {c.predicted_latency_s:.3f} s | "
            f"{c.latency_error:+.0%} | {r['requests_per_s']:g} | "
            f"{c.predicted_requests_per_s:.1f} | {c.rate_error:+.0%} | {r['source']} |"
        )
    lines += ["", "Published figures left out, and why:", ""]
    lines += [f"- {reason}." for reason in val["left_out"]]
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
    lines += [
        "",
        "By setup: how many of a hardware's figures each setup holds, and the band its figures "
        "alone would give by the same rule.",
        "",
        "| setup | hardware | figures | median error | band of its figures alone | "
        "covered by the hardware's band |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for b in by_setup():
        lines.append(
            f"| {b['setup']} | {b['hardware']} | {b['figures']} | {_pct(b['median_error'])} | "
            f"+/-{b['own_band']:.0%} | {_pct(b['covered_by_hardware_band'])} |"
        )
    if figures:
        lines += ["", "### Pictures (generated by scripts/perf_docs.py, PREDICTED)", ""]
        for caption, path in figures:
            lines += [f"![{caption}]({path})", "", f"*{caption}*", ""]
    return "\n".join(lines).rstrip() + "\n"
