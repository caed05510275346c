"""Calibrating the performance model from our own benchmark runs (pure; no Pulumi).

:func:`observations` turns a benchmark run's measured cells (the client's figures, vLLM's
histogram means over each cell's window, its spec-decode counters, read by
:mod:`serving.capacity.acceptance`) into the model's inputs and targets; :func:`fit` finds the
coefficients that best explain them. :func:`calibrate` fits twice on alternate concurrency
levels and predicts the other half (held-out error, the figure a calibration states), then fits
once on every cell for the coefficients it stores. Calibrations are JSON files in
``serving/data/calibrations/``, one per hardware + checkpoint + vLLM release, with their
provenance (which run, when, where, by what).
"""

from __future__ import annotations

import functools
import math
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeGuard

from serving.capacity import itl_spread, start_records
from serving.capacity.acceptance import AcceptanceError, cell_counts, run_acceptance
from serving.capacity.perf import Coefficients, Speculation, StepModel, Workload
from serving.capacity.simulate import TraceRequest, replay

CALIBRATIONS_DIR = Path(__file__).resolve().parent.parent / "data" / "calibrations"
MAX_FILE_BYTES = 256 * 1024
SCHEMA = 1
#: Cells whose batch fills more than this share of max_num_seqs are left out of the TTFT fit.
TTFT_LOAD_LIMIT = 0.7
METRICS = ("ttft", "itl", "e2e", "tokens_per_s")


class CalibrationError(ValueError):
    """A run that cannot calibrate, or a calibration file that cannot be read."""


@dataclass(frozen=True)
class Observation:
    """One measured cell, as the model sees it (seconds, tokens)."""

    cell: str
    concurrency: int
    batch: float
    prompt_tokens: float
    output_tokens: float
    step_s: float
    ttft_s: float | None
    e2e_s: float | None
    output_tokens_per_s: float | None
    accepted_length: float | None
    #: The cell's requests as its client sent them (seconds, lengths; :func:`replayed`), the
    #: first ``lead`` of them the requests already in flight when its window opened: predicted
    #: through the scheduler simulation replaying them, not the closed forms. Empty: the closed
    #: forms (a steady state, every request's prefill spread evenly over the steps).
    sent: tuple[TraceRequest, ...] = ()
    #: For each of ``sent``: None (sent at its time), or (index, think): sent ``think`` seconds
    #: after that request's answer (a closed loop's client; :func:`simulate.replay`).
    after: tuple[tuple[int, float] | None, ...] = ()
    lead: int = 0


def _is_number(value: Any) -> TypeGuard[int | float]:
    """A JSON number a float holds: strict JSON still allows an integer of thousands of digits,
    which ``float()`` and ``math`` refuse with OverflowError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, float) or abs(value) <= sys.float_info.max


def _num(record: Mapping[str, Any], key: str) -> float | None:
    value = record.get(key)
    if not _is_number(value):
        return None
    value = float(value)
    return value if math.isfinite(value) and value > 0 else None


#: Fewest completed requests a cell needs to be fitted on (a mean of fewer says little).
MIN_CELL_REQUESTS = 8


def observations(
    cells: Iterable[Mapping[str, Any]],
    max_num_seqs: int,
    min_requests: int = MIN_CELL_REQUESTS,
    num_speculative_tokens: int | None = None,
    records: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> list[Observation]:
    """The measured, closed-loop cells with a step time and at least ``min_requests``
    completed requests; others are left out. Each cell's accepted length comes from its
    spec-decode counters, checked against the stack (``num_speculative_tokens`` None: no MTP;
    :func:`serving.capacity.acceptance.cell_counts` refuses inconsistent ones). A cell whose
    id has request records in ``records`` (the benchmark's ``requests/<cell id>.jsonl`` rows)
    is observed through them: :func:`replayed`."""
    out: list[Observation] = []
    for r in cells:
        if r.get("status") != "ok" or r.get("request_rate") is not None:
            continue
        done = r.get("completed")
        if not isinstance(done, int) or isinstance(done, bool) or done < min_requests:
            continue
        concurrency = r.get("concurrency")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            continue
        completed = _num(r, "completed")
        prompt = (_num(r, "total_input_tokens") or 0.0) / completed if completed else None
        prompt = prompt or _num(r, "prompt_tokens")
        output = _num(r, "mean_output_tokens") or _num(r, "output_tokens")
        try:
            counts = cell_counts(r, num_speculative_tokens)
        except AcceptanceError as exc:
            raise CalibrationError(str(exc)) from None
        accepted = counts.mean_accepted_length if counts is not None else None
        # The client's per-step figure (first-to-last token time over the steps between, for
        # the cell's measured requests only) first: a constant network delay cancels out of
        # it, while the server's histogram delta also holds steps of the warm-up requests
        # still streaming when the window opened (run at a smaller batch).
        step_ms = _num(r, "client_mean_itl_ms") or _num(r, "server_mean_itl_ms")
        if step_ms is None and (per_token := _num(r, "mean_itl_ms")) is not None:
            step_ms = per_token * (accepted or 1.0)
        if prompt is None or output is None or step_ms is None:
            continue
        ttft = _num(r, "server_mean_ttft_ms") or _num(r, "mean_ttft_ms")
        e2e = _num(r, "server_mean_e2el_ms") or _num(r, "mean_e2el_ms")
        # The batch: the client's own count of requests in flight (send to last byte), never
        # more than the clients or the sequence slots. It is what a request arriving at the
        # server finds running; the server's Little's-law count misses each answer's successor
        # while it is on its way.
        in_flight = min(float(concurrency), _num(r, "mean_in_flight") or float(concurrency))
        batch = min(in_flight, float(max_num_seqs))
        # Steady-state throughput by Little's law over the client's window (its count and its
        # mean latency); the cell's own output_throughput also counts its ramp and its last,
        # partly filled wave.
        client_e2e = _num(r, "mean_e2el_ms")
        rate = (
            in_flight * output / (client_e2e / 1000.0)
            if client_e2e
            else _num(r, "output_throughput")
        )
        observation = Observation(
            cell=str(r.get("id", "")),
            concurrency=concurrency,
            batch=batch,
            prompt_tokens=prompt,
            output_tokens=output,
            step_s=step_ms / 1000.0,
            ttft_s=ttft / 1000.0 if ttft else None,
            e2e_s=e2e / 1000.0 if e2e else None,
            output_tokens_per_s=rate,
            accepted_length=accepted,
        )
        rows = records.get(observation.cell) if records else None
        out.append(observation if rows is None else replayed(observation, rows, min_requests))
    return out


def _record_number(row: Mapping[str, Any], key: str, where: str, low: float = 0.0) -> float:
    value = row.get(key)
    if not _is_number(value) or not math.isfinite(value) or value < low:
        raise CalibrationError(
            f"{where}: {key} must be a number of at least {low:g}, got {value!r}"
        )
    return float(value)


def replayed(
    o: Observation, rows: Sequence[Mapping[str, Any]], min_requests: int = MIN_CELL_REQUESTS
) -> Observation:
    """A closed-loop cell observed through its request records (``start_s``, ``ttft_s``,
    ``e2e_s``, ``prompt_tokens``, ``output_tokens``, ``ok``; the client's view): its measured
    TTFT, step and E2E are the means over its answered requests, and it is predicted by
    replaying their sends through the scheduler simulation (:func:`predict`), whatever the
    client's sends were: waves of prompts sent together, a stagger, or a mix. The records hold
    the measured requests only. Each send that came on a measured answer (a client's next
    request, :func:`_closed_loop_links`) is replayed on the simulated answer, the same time
    after it; the requests already in flight when the window opened are put back as the
    ``lead``: one before each send no measured answer came before, with its lengths, sent so
    that at the measured speed it ends there (the window's first requests meet the load they
    met, and the simulated engine never holds more than the client had in flight). Failed
    requests are left out. CalibrationError names a bad row."""
    measured: list[tuple[TraceRequest, float, float]] = []
    for n, row in enumerate(rows, 1):
        where = f"cell {o.cell}, request record {n}"
        if row.get("ok") is not True:
            continue
        prompt, output = row.get("prompt_tokens"), row.get("output_tokens")
        if (
            not (isinstance(prompt, int) and isinstance(output, int) and min(prompt, output) >= 1)
            or isinstance(prompt, bool)
            or isinstance(output, bool)
        ):
            raise CalibrationError(f"{where}: prompt_tokens and output_tokens must be counts")
        sent = _record_number(row, "start_s", where)
        ttft = _record_number(row, "ttft_s", where)
        e2e = _record_number(row, "e2e_s", where, low=ttft)
        if output < 2:
            continue  # no token gap: says nothing of a step
        measured.append((TraceRequest(sent, prompt, output), ttft, e2e))
    if len(measured) < min_requests:
        raise CalibrationError(
            f"cell {o.cell}: {len(measured)} answered requests of at least 2 tokens in its "
            f"records, at least {min_requests} needed"
        )
    measured.sort(key=lambda m: m[0].arrival_s)
    links = _closed_loop_links([(r.arrival_s, r.arrival_s + e) for r, _, e in measured])
    thinks = [think for link in links if link is not None for think in (link[1],)]
    think = statistics.median(thinks) if thinks else 0.0
    # One lead request before each send that follows no measured answer (the window's first,
    # one per client): sent so that, at the measured speed, it ends where that client's first
    # measured request is sent.
    n = sum(1 for link in links if link is None)
    lead: list[TraceRequest] = []
    after: list[tuple[int, float] | None] = [None] * n
    for (r, _, e2e), link in zip(measured, links, strict=True):
        if link is None:
            after.append((len(lead), think))
            lead.append(TraceRequest(r.arrival_s - think - e2e, r.prompt_tokens, r.output_tokens))
        else:
            after.append((link[0] + n, link[1]))
    per_step = o.accepted_length or 1.0
    return replace(
        o,
        ttft_s=statistics.fmean(t for _, t, _ in measured),
        e2e_s=statistics.fmean(e for _, _, e in measured),
        step_s=per_step * statistics.fmean((e - t) / (r.output_tokens - 1) for r, t, e in measured),
        output_tokens_per_s=None,
        sent=(*lead, *(r for r, _, _ in measured)),
        after=tuple(after),
        lead=n,
    )


def _closed_loop_links(spans: Sequence[tuple[float, float]]) -> list[tuple[int, float] | None]:
    """For each request (send, end), sends ascending, of a closed loop: the request whose
    answer its client was waiting on, and how long after that answer it was sent, as
    ``(index, seconds)``; None for a send no measured answer came before (its client's first
    in the window). Each answer frees one client: a send follows the latest answer not yet
    followed that ended before it."""
    free: list[int] = []  # answers ended and not yet followed, by end
    ends = sorted(range(len(spans)), key=lambda i: spans[i][1])
    k = 0
    out: list[tuple[int, float] | None] = []
    for sent, _ in spans:
        while k < len(ends) and spans[ends[k]][1] <= sent + 1e-9:
            free.append(ends[k])
            k += 1
        if free:
            j = free.pop()
            out.append((j, max(0.0, sent - spans[j][1])))
        else:
            out.append(None)
    return out


def _model_for(base: StepModel, obs: Observation) -> StepModel:
    spec = base.speculation
    if spec is not None and obs.accepted_length is not None:
        length = min(max(obs.accepted_length, 1.0), spec.num_speculative_tokens + 1.0)
        return replace(base, speculation=Speculation(spec.num_speculative_tokens, length))
    return base


#: The names of the fitted coefficients, in the order :func:`fit` searches them.
_LOG = ("bandwidth_efficiency", "decode_compute_efficiency", "prefill_compute_efficiency")
_LIN = ("step_overhead_s", "prefill_overhead_s")


def _loss(base: StepModel, obs: Sequence[Observation], coefficients: Coefficients) -> float:
    """Sum of squared log ratios, predicted over measured: every cell's step, and the TTFT
    of the cells below ~70 % of the slots (above that a request also queues)."""
    model = replace(base, coefficients=coefficients, front_end_s=0.0)
    total = 0.0
    for o in obs:
        p = predict(model, o)
        total += math.log(p["itl"] / o.step_s) ** 2
        if o.ttft_s and (o.sent or o.batch <= TTFT_LOAD_LIMIT * base.max_num_seqs + 1):
            total += math.log(p["ttft"] / o.ttft_s) ** 2
    return total


def _physical(base: StepModel, obs: Sequence[Observation]) -> None:
    """Refuse a run whose steps are faster than reading the weights once at peak bandwidth."""
    floor = base.shape.weight_bytes / base.device.memory_bandwidth_bytes_per_s
    fast = [o for o in obs if o.step_s < floor]
    if fast:
        o = fast[0]
        raise CalibrationError(
            f"cell {o.cell or o.concurrency}: a step of {o.step_s * 1000:.2f} ms is faster than "
            f"reading the weights once at the chip's peak bandwidth ({floor * 1000:.2f} ms): "
            "not a run of this checkpoint on this hardware, or its latencies were altered"
        )


def fit(base: StepModel, obs: Sequence[Observation]) -> Coefficients:
    """The coefficients that best explain ``obs`` for ``base``'s hardware and checkpoint: a
    bounded pattern search (:func:`_search`) minimising :func:`_loss` through the full step
    model. A run faster than reading the weights at peak bandwidth, or one only an efficiency
    above 1 fits, is refused. Cached: scripts/synthetic_calibration.py fits, then calibrates
    the same cells."""
    return _cached_fit(base, tuple(obs))


def _make(v: Mapping[str, float]) -> Coefficients | None:
    try:
        return Coefficients(**v)
    except ValueError:
        return None


@functools.lru_cache(maxsize=32)
def _cached_fit(base: StepModel, obs: tuple[Observation, ...]) -> Coefficients:
    if len(obs) < 2:
        raise CalibrationError(f"need at least 2 measured closed-loop cells, got {len(obs)}")
    _physical(base, obs)
    # Cells replayed through the simulation cost a few hundred simulated requests a loss: the
    # search stops at steps 10 times coarser (0.1 % of a step, ~1 % of an efficiency).
    coarse = 10.0 if any(o.sent for o in obs) else 1.0
    return _checked(base, obs, _staged(base, obs, coarse))


def _staged(base: StepModel, obs: Sequence[Observation], coarse: float) -> dict[str, float]:
    """The pattern search in stages from the base's coefficients; ``coarse`` multiplies the
    steps it stops at."""
    # First the decode terms alone (the steps pin bandwidth efficiency and the per-step
    # constant), then the prefill terms (the TTFTs), then the decode terms again (chunked
    # prefills ride in decode steps, so the steps of prompt-heavy cells depend on the prefill
    # terms), then every coefficient from there. Without the third stage the search stopped in
    # a local minimum 100x worse than the truth on a synthetic run with known coefficients.
    decode = ("bandwidth_efficiency", "step_overhead_s")
    prefill = ("prefill_compute_efficiency", "prefill_overhead_s")
    # The loss of each point tried, by its coefficients: the search comes back to points it
    # has tried (a step back from where it moved, each stage's start), and the loss is a pure
    # function of the coefficients for this base and these cells.
    losses: dict[tuple[tuple[str, float], ...], float] = {}
    values = dict(base.coefficients.as_dict())
    for names in (decode, prefill, decode, (*_LOG, *_LIN)):
        values = _search(base, obs, values, names, losses, coarse)
    return values


def _search(
    base: StepModel,
    obs: Sequence[Observation],
    start: Mapping[str, float],
    names: Sequence[str],
    losses: dict[tuple[tuple[str, float], ...], float],
    coarse: float = 1.0,
) -> dict[str, float]:
    """Pattern search over ``names`` from ``start`` (efficiencies in log steps within (0, 1],
    constants in [0, 10] s); ``losses`` holds the loss of each point already tried."""

    def loss(v: Mapping[str, float], c: Coefficients) -> float:
        key = tuple(sorted(v.items()))
        if key not in losses:
            losses[key] = _loss(base, obs, c)
        return losses[key]

    values = dict(start)
    steps = {name: 0.5 if name in _LOG else 0.01 for name in names}
    current = _make(values)
    assert current is not None
    best = loss(values, current)
    for _ in range(400):
        improved = False
        for name in names:
            for sign in (1.0, -1.0):
                trial = dict(values)
                if name in _LOG:
                    trial[name] = min(1.0, values[name] * math.exp(sign * steps[name]))
                else:
                    trial[name] = min(10.0, max(0.0, values[name] + sign * steps[name]))
                if trial[name] == values[name]:
                    continue
                c = _make(trial)
                if c is None:
                    continue
                tried = loss(trial, c)
                if tried < best - 1e-15:
                    values, best, improved = trial, tried, True
                    break
        if not improved:
            for name in steps:
                steps[name] /= 2.0
            if all(s < coarse * (1e-3 if n in _LOG else 1e-6) for n, s in steps.items()):
                break
    return values


def _checked(
    base: StepModel, obs: Sequence[Observation], values: Mapping[str, float]
) -> Coefficients:
    """The fitted coefficients, or a refusal when only an efficiency above 1 would fit."""
    fitted = _make(values)
    assert fitted is not None
    model = replace(base, coefficients=fitted, front_end_s=0.0)
    ratios = [predict(model, o)["itl"] / o.step_s for o in obs]
    if values["bandwidth_efficiency"] >= 0.999 and not base.device.ceilings_only:
        raise CalibrationError(
            "the fit is not physical: the run's steps are as fast as reading the weights and KV "
            "cache at the chip's full peak bandwidth, or faster (at 100 % the model is still "
            f"{statistics.median(ratios):.2f}x of the measured step, median): an efficiency "
            "above 1 would be needed (another model or GPU than the stack's, or latencies "
            "that were altered)"
        )
    return fitted


def predict(model: StepModel, o: Observation) -> dict[str, float]:
    """The model's figures for one observed cell (same concurrency, lengths, acceptance): its
    requests replayed through the scheduler simulation when it has them (means over the
    measured ones, the lead left out), else the closed forms."""
    m = _model_for(model, o)
    if o.sent:
        times = replay(m, o.sent, o.after or None)[o.lead :]
        requests = o.sent[o.lead :]
        gaps = [(d - f) / (r.output_tokens - 1) for (f, d), r in zip(times, requests, strict=True)]
        return {
            "ttft": statistics.fmean(f for f, _ in times),
            "itl": statistics.fmean(gaps) * m.tokens_per_step,
            "e2e": statistics.fmean(d for _, d in times),
            "tokens_per_s": math.nan,  # not observed through records (measured: None)
        }
    w = Workload(max(1, round(o.prompt_tokens)), max(1, round(o.output_tokens)))
    point = m.at_concurrency(o.batch if o.concurrency <= model.max_num_seqs else o.concurrency, w)
    # The engine's own figures: the measured TTFT and E2E are the server's histograms.
    return {
        "ttft": point.engine_ttft_s,
        "itl": point.step_s,
        "e2e": point.engine_e2e_s,
        "tokens_per_s": point.output_tokens_per_s,
    }


def measured(o: Observation) -> dict[str, float | None]:
    return {
        "ttft": o.ttft_s,
        "itl": o.step_s,
        "e2e": o.e2e_s,
        "tokens_per_s": o.output_tokens_per_s,
    }


def _relative_errors(
    model: StepModel, obs: Sequence[Observation], per: dict[str, list[float]]
) -> None:
    for o in obs:
        p = predict(model, o)
        for metric, value in measured(o).items():
            if (
                metric == "ttft"
                and not o.sent
                and o.batch > TTFT_LOAD_LIMIT * model.max_num_seqs + 1
            ):
                continue  # the closed forms' TTFT holds below ~70 % load only
            if value:
                per[metric].append(abs(p[metric] - value) / value)


def _medians(per: dict[str, list[float]]) -> dict[str, float | None]:
    return {m: (statistics.median(v) if v else None) for m, v in per.items()}


def errors(model: StepModel, obs: Sequence[Observation]) -> dict[str, float | None]:
    """Median absolute relative error per metric over ``obs`` (None where nothing measured)."""
    per: dict[str, list[float]] = {m: [] for m in METRICS}
    _relative_errors(model, obs, per)
    return _medians(per)


@dataclass(frozen=True)
class Calibration:
    """Fitted coefficients for one hardware + checkpoint + vLLM release, with provenance."""

    hardware: str
    checkpoint: str
    vllm: str
    coefficients: Coefficients
    #: Median relative error per metric on held-out cells (fit on half, predict the rest).
    held_out_error: Mapping[str, float | None]
    #: Where the figures come from: run label, its created_at, URL host, cells, fitted_at,
    #: and whether the server was a real vLLM or the paced fake (``synthetic``).
    provenance: Mapping[str, Any]
    #: MTP's mean accepted length measured by the run (its spec-decode counters pooled over
    #: its cells; None without speculative decoding).
    mean_accepted_length: float | None = None
    #: The measured acceptance in full (:meth:`MeasuredAcceptance.as_dict`: per-draft-token
    #: acceptance, vLLM's rate, the counts and where they come from); None without MTP.
    mtp_acceptance: Mapping[str, Any] | None = None
    #: A token gap's spread around its step's mean, from the run's concurrency-1 cell
    #: (:func:`serving.capacity.itl_spread.from_cells`); empty when the run had none.
    itl_spread: tuple[float, ...] = ()
    #: The measured starts of one stack's new instances after deploy
    #: (:func:`serving.capacity.start_records.summary`); None when no run recorded one.
    start: Mapping[str, Any] | None = None
    #: A first token's spread around its mean, from the same concurrency-1 cell
    #: (:func:`serving.capacity.itl_spread.from_cells` with ``"ttft"``); empty when none.
    ttft_spread: tuple[float, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.hardware} / {self.checkpoint} / {self.vllm}"

    @property
    def synthetic(self) -> bool:
        return bool(self.provenance.get("synthetic"))

    @property
    def band(self) -> float:
        """The widest held-out median error over the measured metrics (the stated band)."""
        known = [v for v in self.held_out_error.values() if v is not None]
        return max(known) if known else 0.5

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "hardware": self.hardware,
            "checkpoint": self.checkpoint,
            "vllm": self.vllm,
            "coefficients": self.coefficients.as_dict(),
            "held_out_error": dict(self.held_out_error),
            "provenance": dict(self.provenance),
            "mean_accepted_length": self.mean_accepted_length,
            "mtp_acceptance": dict(self.mtp_acceptance) if self.mtp_acceptance else None,
            "itl_spread": list(self.itl_spread),
            "start": dict(self.start) if self.start else None,
            "ttft_spread": list(self.ttft_spread),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Calibration:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise CalibrationError(f"{where}: not a calibration (schema {SCHEMA} expected)")
        try:
            strings = {k: data[k] for k in ("hardware", "checkpoint", "vllm")}
            if not all(isinstance(v, str) and 0 < len(v) <= 200 for v in strings.values()):
                raise TypeError("hardware, checkpoint and vllm must be short strings")
            raw = data["coefficients"]
            if not isinstance(raw, dict) or set(raw) != set(Coefficients().as_dict()):
                raise TypeError(
                    f"coefficients must have exactly {sorted(Coefficients().as_dict())}"
                )
            if not all(_is_number(v) for v in raw.values()):
                raise TypeError("coefficients must be numbers")
            coefficients = Coefficients(**{k: float(v) for k, v in raw.items()})
            held = data["held_out_error"]
            if not isinstance(held, dict) or not set(held) <= set(METRICS):
                raise TypeError(f"held_out_error keys must be among {list(METRICS)}")
            for value in held.values():
                if value is not None and not (
                    _is_number(value) and math.isfinite(value) and 0 <= value < 100
                ):
                    raise TypeError("held_out_error values must be numbers in [0, 100) or null")
            provenance = data["provenance"]
            if not isinstance(provenance, dict):
                raise TypeError("provenance must be a mapping")
            accepted = data.get("mean_accepted_length")
            if accepted is not None and not (
                _is_number(accepted) and math.isfinite(accepted) and 1 <= accepted <= 17
            ):
                raise TypeError("mean_accepted_length must be a number in [1, 17] or null")
            mtp = _mtp_acceptance(data.get("mtp_acceptance"), accepted)
            spreads = []
            for name in ("itl_spread", "ttft_spread"):
                raw_spread = data.get(name, [])  # absent in files written before it
                if not isinstance(raw_spread, list):
                    raise TypeError(f"{name} must be a list of numbers")
                spreads.append(itl_spread.check(raw_spread, name))
            start = start_records.check_summary(data.get("start"))  # absent in older files
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise CalibrationError(f"{where}: {exc}") from None
        return cls(
            strings["hardware"],
            strings["checkpoint"],
            strings["vllm"],
            coefficients,
            held,
            provenance,
            float(accepted) if accepted is not None else None,
            mtp,
            spreads[0],
            start,
            spreads[1],
        )

    @property
    def acceptance_source(self) -> str:
        """Where the calibration's MTP acceptance comes from, for the plan's output."""
        if self.mtp_acceptance and isinstance(self.mtp_acceptance.get("source"), str):
            return f"calibration {self.name}: {self.mtp_acceptance['source'][:300]}"
        return f"calibration {self.name}: its measured mean accepted length"


def _mtp_acceptance(raw: Any, length: Any) -> dict[str, Any] | None:
    """A calibration file's ``mtp_acceptance``: null, or the measured figures, each in range
    and agreeing with ``mean_accepted_length`` (else TypeError naming the field)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TypeError("mtp_acceptance must be an object or null")
    ranges = {
        "acceptance": (0.0, 1.0),
        "acceptance_rate": (0.0, 1.0),
        "mean_accepted_length": (1.0, 17.0),
        "num_speculative_tokens": (1.0, 16.0),
    }
    for key, (lo, hi) in ranges.items():
        value: Any = raw.get(key)
        if not (_is_number(value) and math.isfinite(value) and lo <= value <= hi):
            raise TypeError(f"mtp_acceptance.{key} must be a number in [{lo:g}, {hi:g}]")
    if length is None or not math.isclose(raw["mean_accepted_length"], length, rel_tol=1e-9):
        raise TypeError("mtp_acceptance.mean_accepted_length must equal mean_accepted_length")
    source = raw.get("source")
    if not isinstance(source, str) or not 0 < len(source) <= 1000:
        raise TypeError("mtp_acceptance.source must be a string of 1 to 1000 characters")
    return dict(raw)


def load_calibration(path: Path) -> Calibration:
    from serving.config.inputs import JsonInputError, read_json

    try:  # a regular file, bounded, strict JSON (no NaN, no key twice)
        data = read_json(path, MAX_FILE_BYTES)
    except JsonInputError as exc:
        raise CalibrationError(f"{path.name}: cannot be read ({exc})") from None
    return Calibration.from_dict(data, path.name)


def find_calibration(
    hardware: str,
    checkpoint: str,
    vllm: str,
    folder: Path = CALIBRATIONS_DIR,
    platform: str | None = None,
) -> Calibration | None:
    """The calibration for exactly this hardware, checkpoint and vLLM release (and, when
    given, the platform the run measured through: a Cloud Run run does not change a GKE
    stack's plan); synthetic ones (fitted on the paced fake server) never stand in for a real
    one."""
    for c in map(load_calibration, sorted(folder.glob("*.json"))):
        if (c.hardware, c.checkpoint, c.vllm) != (hardware, checkpoint, vllm) or c.synthetic:
            continue
        if platform is not None and c.provenance.get("platform") != platform:
            continue
        return c
    return None


def find_start(
    stack: str, target: Mapping[str, str], folder: Path = CALIBRATIONS_DIR
) -> tuple[Path, Any] | None:
    """(file, its ``start``) of the calibration holding the measured starts of ``stack`` running
    ``target`` (:func:`serving.capacity.start_records.summary`): another stack's, a same-named
    stack's elsewhere, or this stack's before its target changed, never stands in; nor does a
    synthetic one."""
    wanted = {"stack": stack, "target": dict(target)}
    for path in sorted(folder.glob("*.json")):
        c = load_calibration(path)
        if c.start and not c.synthetic and {k: c.start[k] for k in wanted} == wanted:
            return path, c.start
    return None


def held_out(base: StepModel, obs: Sequence[Observation]) -> dict[str, float | None]:
    """Two-fold by concurrency level: fit on alternate levels, predict the others; the median
    of both folds' relative errors per metric."""
    even = set(sorted({o.concurrency for o in obs})[::2])
    a = [o for o in obs if o.concurrency in even]
    b = [o for o in obs if o.concurrency not in even]
    if len({o.concurrency for o in obs}) < 4 or len(a) < 2 or len(b) < 2:
        raise CalibrationError(
            "a held-out check needs at least 4 concurrency levels (fit on half, predict the rest)"
        )
    per: dict[str, list[float]] = {m: [] for m in METRICS}
    for train, test in ((a, b), (b, a)):
        _relative_errors(replace(base, coefficients=fit(base, train)), test, per)
    return _medians(per)


def calibrate(
    base: StepModel,
    cells: Iterable[Mapping[str, Any]],
    *,
    hardware: str,
    checkpoint: str,
    vllm: str,
    provenance: Mapping[str, Any],
    records: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> Calibration:
    """The run's cells fitted (:func:`fit`), with their held-out error (:func:`held_out`),
    measured MTP acceptance, token-gap and first-token spreads. With ``records`` (cell id:
    the benchmark's request records of that cell, ``requests/<cell id>.jsonl``), each
    closed-loop cell that has them is fitted through the simulation replaying its requests as
    they were sent (:func:`replayed`): the client's own figures, so only for a client beside
    the server (the front end taken as 0), as sim-check's is."""
    cells = list(cells)
    k = base.speculation.num_speculative_tokens if base.speculation else None
    try:
        measured_acceptance = run_acceptance(cells, k, str(provenance.get("run", "")))
    except AcceptanceError as exc:
        raise CalibrationError(str(exc)) from None
    obs = observations(cells, base.max_num_seqs, num_speculative_tokens=k, records=records)
    if not obs:
        raise CalibrationError(
            "the run has no measured closed-loop cell with a step time (server_mean_itl_ms, "
            f"client_mean_itl_ms or mean_itl_ms), token counts and at least {MIN_CELL_REQUESTS} "
            "completed requests"
        )
    error = held_out(base, obs)
    coefficients = fit(base, obs)
    return Calibration(
        hardware,
        checkpoint,
        vllm,
        coefficients,
        error,
        {
            **provenance,
            "cells": len(obs),
            "levels": sorted({o.concurrency for o in obs}),
            # How many cells the simulation replayed (only when request records were given).
            **({"replayed": sum(1 for o in obs if o.sent)} if records is not None else {}),
        },
        measured_acceptance.mean_accepted_length if measured_acceptance else None,
        measured_acceptance.as_dict() if measured_acceptance else None,
        itl_spread.from_cells(cells),
        ttft_spread=itl_spread.from_cells(cells, "ttft"),
    )
