"""The performance model against published measurements of Gemma 4 12B on these stacks.

Pure arithmetic over ``serving/data/performance-evidence.json`` (its ``validation`` part):
each row is a figure someone else measured at the client, through the platform, with its exact
conditions and source. :func:`check_rows` predicts each row with the **uncalibrated priors**
(the evidence file's efficiency by kernel path and front-end latency) run as the source's client
ran: the requests it sent in the cell, the output tokens it asked for, how many it kept in
flight and where its timer started (conditions of the row, not of the product's predictions).
:func:`summary` reports, per hardware, the median error and how many figures the band covers.

Two terms are **derived** from published rows, from *fit* rows only
(:func:`derived_front_end`, :func:`derived_in_flight_cap`); the *holdout* rows set nothing
and are reported apart. The band of a hardware (:func:`derived_band`) is the smallest relative
half-width covering 80 % of all its figures. ``scripts/perf_docs.py`` renders all of it into
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
    "MAX_SEND_GAP_S",
    "ClientTerms",
    "RowCheck",
    "check_rows",
    "decode_validated",
    "derived_band",
    "derived_client_terms",
    "derived_front_end",
    "derived_in_flight_cap",
    "derived_instance_hold",
    "derived_send_gap",
    "fit_client_terms",
    "front_end",
    "model_for_config",
    "summary",
]

#: Share of a hardware's figures the band must cover.
COVERAGE = 0.8
_DRAFTER = "google/gemma-4-12B-it-assistant"


def _validation() -> dict[str, Any]:
    from serving.capacity.evidence import evidence

    data: dict[str, Any] = evidence()["validation"]
    return data


def _fit_rows() -> list[dict[str, Any]]:
    return [r for r in _validation()["rows"] if not r["holdout"]]


def model_for_config(name: str) -> StepModel:
    """The engine of one measured configuration with the uncalibrated priors (no front end:
    :func:`predict_row` adds the platform's)."""
    from serving.capacity.evidence import accepted_length, efficiency_prior, mtp_prior_acceptance
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
        max_num_seqs=int(cfg["max_num_seqs"]),
        max_num_batched_tokens=int(cfg["max_num_batched_tokens"]),
        speculation=(
            Speculation(drafts, accepted_length(mtp_prior_acceptance(), drafts)) if drafts else None
        ),
    )


def _engine_burst(
    row: dict[str, Any],
    in_flight: int | None,
    gap_s: float,
    send_gap_s: float = 0.0,
    hold_s: float = 0.0,
) -> tuple[float, float]:
    model = model_for_config(row["config"])
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
        instance_hold_s=hold_s if slots is not None else 0.0,
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
    #: The platform whose instance limit (``instance_concurrency``) the client's setups ran
    #: behind, and the time a request keeps that slot beyond the engine's answer (0, None:
    #: no such limit).
    platform: str | None
    instance_hold_s: float


#: The most the joint fit gives a client's serial time per request, seconds (a TLS handshake
#: and a request write on one thread take milliseconds; 50 ms would be a broken client).
MAX_SEND_GAP_S = 0.05


def _row_cost(row: dict[str, Any], send_gap_s: float, hold_s: float) -> float:
    check = _predict(row, send_gap_s, hold_s)
    return sum(math.log(r) ** 2 for r in check.ratios())


def derived_client_terms(client: str) -> ClientTerms:
    """The client's terms as the evidence file records them (``validation.derived_terms``):
    :func:`fit_client_terms`'s result, stored so that a plan does not repeat a search of a
    few seconds; tests/test_perf_validation.py holds the file to the fit."""
    entry = _validation()["derived_terms"].get(client)
    if entry is None:
        raise ValueError(
            f"client {client!r}: no derived terms in the evidence file's validation.derived_terms"
        )
    return ClientTerms(
        float(entry["send_gap_s"]), entry["platform"], float(entry["instance_hold_s"])
    )


@cache
def fit_client_terms(client: str) -> ClientTerms:
    """The client's serial time per request and, where its setups ran behind an instance
    limit, the platform's hold, DERIVED together from the fit rows of every setup that client
    measured: the pair that minimises the squared log error of every fit figure (latency and
    req/s), searched on a grid (send gap 0 to :data:`MAX_SEND_GAP_S`, hold 0 to the platform's
    front end: a request cannot spend longer inside the instance than its whole way through
    the platform), then on a grid 5 times finer around the best. Fitted together because
    each explains a cell's wall time: fitted apart, each would take the other's share."""
    rows = [r for r in _fit_rows() if _client_of(r)["name"] == client]
    if not rows:
        raise ValueError(f"client {client!r}: no fit rows to derive its terms from")
    configs = _validation()["configs"]
    derive_gap = any(_client_of(r).get("serial_send") == "derived" for r in rows)
    gated = {
        configs[r["config"]]["platform"]
        for r in rows
        if configs[r["config"]].get("instance_concurrency") is not None
    }
    if len(gated) > 1:
        raise ValueError(f"client {client!r}: setups behind instance limits on {sorted(gated)}")
    platform = next(iter(gated), None)
    gap_top = MAX_SEND_GAP_S if derive_gap else 0.0
    hold_top = platform_front_end(platform) if platform is not None else 0.0

    def cost(pair: tuple[float, float]) -> float:
        return sum(_row_cost(r, pair[0], pair[1]) for r in rows)

    def grid(centre: float, step: float, top: float, points: int) -> list[float]:
        values = {min(top, max(0.0, centre + i * step)) for i in range(-points, points + 1)}
        return sorted(values)

    gap_step, hold_step = gap_top / 20, hold_top / 12
    best = min(
        (
            (g, h)
            for g in grid(0.0, gap_step, gap_top, 20)
            for h in grid(0.0, hold_step, hold_top, 12)
        ),
        key=cost,
    )
    best = min(
        (
            (g, h)
            for g in grid(best[0], gap_step / 5, gap_top, 5)
            for h in grid(best[1], hold_step / 5, hold_top, 5)
        ),
        key=cost,
    )
    return ClientTerms(round(best[0], 6), platform, round(best[1], 6))


def derived_send_gap(client: str) -> float:
    """The client's serial time per request (:func:`derived_client_terms`)."""
    return derived_client_terms(client).send_gap_s


def derived_instance_hold(platform: str) -> float | None:
    """The time a request keeps its instance slot on ``platform`` beyond the engine's answer,
    DERIVED by :func:`derived_client_terms` from the clients that measured setups behind that
    platform's instance limit (the median over them; None: no such client)."""
    clients = sorted({_client_of(r)["name"] for r in _fit_rows()})
    holds = [
        t.instance_hold_s
        for t in (derived_client_terms(c) for c in clients)
        if t.platform == platform
    ]
    return statistics.median(holds) if holds else None


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
    from serving.capacity import evidence

    entry = evidence.evidence()["front_end"][platform]
    if "derived" not in entry:
        return evidence.front_end(platform)
    seconds = derived_front_end(platform)
    if seconds is None:
        raise ValueError(
            f"front end of {platform!r}: derived from {entry['derived']}, but there are none"
        )
    return seconds, False, f"{entry['source']} ({seconds * 1000:.0f} ms)"


def platform_front_end(platform: str) -> float:
    """The front end the validation adds on ``platform``."""
    return front_end(platform)[0]


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


def _predict(row: dict[str, Any], send_gap_s: float, hold_s: float) -> RowCheck:
    cfg = _validation()["configs"][row["config"]]
    f = platform_front_end(cfg["platform"])
    mean, last = _engine_burst(row, _in_flight(row), f, send_gap_s, hold_s)
    return RowCheck(row, cfg["hardware"], f + mean, int(row["requests"]) / (f + last))


def predict_row(row: dict[str, Any]) -> RowCheck:
    """One published cell, run as its client ran it: the cell's requests, at most the
    client's in-flight cap out at once (each timed from when it is sent), the next sent when
    one is answered, behind the setup's instance limit. Mean latency at the client = front
    end + the engine's mean; req/s = requests over the front end plus the time until the last
    answer. The client's terms are :func:`derived_client_terms`."""
    terms = derived_client_terms(_client_of(row)["name"])
    return _predict(row, terms.send_gap_s, terms.instance_hold_s)


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


def decode_validated(hardware: str) -> bool:
    """Whether a published row of ``hardware`` asked for more than one output token: rows of
    one token measure the front end, the prefill and the slots, never a decode step, so a band
    drawn from them alone says nothing of the decode speed that longer answers depend on."""
    return any(c.hardware == hardware and int(c.row["output_tokens"]) > 1 for c in check_rows())


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
            + ("with the platform's instance hold " if terms.platform is not None else "")
            + "from the fit rows of every setup it measured (below)."
            + (
                f" Instance limit: {slots} requests at once (the platform's own queue holds "
                "the rest, in order); each keeps its slot "
                f"**{terms.instance_hold_s * 1000:.0f} ms, DERIVED**, beyond the engine's answer."
                if slots is not None
                else ""
            )
            + (
                f" In flight at most: **{cap}, DERIVED** from the fit rows (Little's law: "
                "the largest published req/s x mean latency among them)."
                if cap is not None
                else ""
            )
            + (f" Doubt: {client['doubt']}." if client.get("doubt") else ""),
        ]
    lines += [
        "",
        "A client's serial time per request and the time a request keeps its Cloud Run slot "
        "beyond the engine's answer both lengthen a cell's wall time, so they are fitted "
        "together: the pair that minimises the squared log error of every fit figure of that "
        f"client (send gap 0 to {MAX_SEND_GAP_S * 1000:.0f} ms; hold 0 to the platform's "
        "front end, since a request cannot spend longer inside the instance than its whole "
        "way through the platform), on a grid, then a finer one around the best. The `l4` "
        "setup's Cloud Run concurrency (4) is below its engine's slots (8), so there the hold, "
        "not the engine, sets the rate; the `rtx` setup's (16) is above its 8. The product "
        "uses the same hold on its Cloud Run stacks, whose concurrency equals max-num-seqs "
        "(`gemma4 plan`: at full load the engine runs slots x e2e / (e2e + hold) sequences).",
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
        "No time per request in the API server is assumed: the only figure for it would be 1 "
        "/ the highest published rate of a hardware, fitted to the rows it would then "
        "predict; on the TPU that rate is the client's in-flight cap, not the server's.",
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
    if figures:
        lines += ["", "### Pictures (generated by scripts/perf_docs.py, PREDICTED)", ""]
        for caption, path in figures:
            lines += [f"![{caption}]({path})", "", f"*{caption}*", ""]
    return "\n".join(lines).rstrip() + "\n"
