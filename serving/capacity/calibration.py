"""Calibrating the performance model from our own benchmark runs (pure; no Pulumi).

A benchmark run (``bench/store.py``) stores, per cell, the client's figures and vLLM's own
histogram means over the cell's window (``server_mean_ttft_ms``, ``server_mean_e2el_ms``,
``server_mean_itl_ms``) and the client's per-step ITL (``client_mean_itl_ms``), the spec-decode
acceptance (``spec_decode_acceptance_length``) and the token counts. :func:`observations` turns
the measured cells into the model's inputs and targets; :func:`fit` finds the coefficients:

1. decode: ``step = x1 x bytes + x2 x flops + x3`` by least squares over the cells' step times
   (the client's per-step ITL, else the server's), non-negative:
   a coefficient that comes out negative is dropped and the rest refitted; when the cells cannot
   tell bytes from FLOPs apart (one prompt length only) the compute term keeps its prior;
2. prefill: ``ttft - chunks x step(B - 1) = y1 x prefill flops + y2`` over the cells below
   ~70 % of the batch slots (above that a request also waits in the queue).

:func:`calibrate` fits twice on alternate concurrency levels and predicts the other half
(held-out error, the figure a calibration states), then fits once on every cell for the
coefficients it stores. Calibrations are JSON files in ``serving/data/calibrations/``, one per
hardware + checkpoint + vLLM release, with their provenance (which run, when, where, by what).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from serving.capacity.perf import Coefficients, Speculation, StepModel

__all__ = [
    "CALIBRATIONS_DIR",
    "Calibration",
    "CalibrationError",
    "Observation",
    "calibrate",
    "errors",
    "find_calibration",
    "fit",
    "load_calibration",
    "load_calibrations",
    "observations",
]

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


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _num(record: Mapping[str, Any], key: str) -> float | None:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and value > 0 else None


def observations(cells: Iterable[Mapping[str, Any]], max_num_seqs: int) -> list[Observation]:
    """The measured, closed-loop cells with a step time; others are left out."""
    out: list[Observation] = []
    for r in cells:
        if r.get("status") != "ok" or r.get("request_rate") is not None:
            continue
        concurrency = r.get("concurrency")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            continue
        completed = _num(r, "completed")
        prompt = (_num(r, "total_input_tokens") or 0.0) / completed if completed else None
        prompt = prompt or _num(r, "prompt_tokens")
        output = _num(r, "mean_output_tokens") or _num(r, "output_tokens")
        accepted = _num(r, "spec_decode_acceptance_length")
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
        out.append(
            Observation(
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
        )
    return out


def _solve(rows: Sequence[Sequence[float]], ys: Sequence[float]) -> list[float] | None:
    """Least squares by the normal equations (Gauss-Jordan with pivoting; a handful of
    columns); None when the columns are (numerically) dependent."""
    n = len(rows[0])
    scale = [max(abs(r[j]) for r in rows) or 1.0 for j in range(n)]
    a = [
        [sum(r[i] * r[j] / (scale[i] * scale[j]) for r in rows) for j in range(n)] for i in range(n)
    ]
    b = [sum(r[i] / scale[i] * y for r, y in zip(rows, ys, strict=True)) for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda k: abs(a[k][col]))
        if abs(a[pivot][col]) < 1e-9:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        b[col], b[pivot] = b[pivot], b[col]
        for k in range(n):
            if k != col:
                f = a[k][col] / a[col][col]
                a[k] = [x - f * y for x, y in zip(a[k], a[col], strict=True)]
                b[k] -= f * b[col]
    return [b[i] / a[i][i] / scale[i] for i in range(n)]


def _nonnegative(
    rows: Sequence[Sequence[float]], ys: Sequence[float], fixed: Mapping[int, float]
) -> list[float] | None:
    """Least squares with the ``fixed`` columns held and every other coefficient >= 0."""
    n = len(rows[0])
    held = dict(fixed)
    while True:
        free = [j for j in range(n) if j not in held]
        if not free:
            return [held[j] for j in range(n)]
        sub = [[r[j] for j in free] for r in rows]
        rest = [y - sum(r[j] * v for j, v in held.items()) for r, y in zip(rows, ys, strict=True)]
        if len(sub) < len(free):
            return None
        solved = _solve(sub, rest)
        if solved is None:
            return None
        negative = [j for j, v in zip(free, solved, strict=True) if v < 0]
        if not negative:
            values = dict(zip(free, solved, strict=True))
            values.update(held)
            return [values[j] for j in range(n)]
        held[min(negative, key=lambda j: solved[free.index(j)])] = 0.0


def _model_for(base: StepModel, obs: Observation) -> StepModel:
    spec = base.speculation
    if spec is not None and obs.accepted_length is not None:
        length = min(max(obs.accepted_length, 1.0), spec.num_speculative_tokens + 1.0)
        return replace(base, speculation=Speculation(spec.num_speculative_tokens, length))
    return base


def fit(base: StepModel, obs: Sequence[Observation]) -> Coefficients:
    """The coefficients that best explain ``obs`` for ``base``'s hardware and checkpoint."""
    if len(obs) < 2:
        raise CalibrationError(f"need at least 2 measured closed-loop cells, got {len(obs)}")
    bandwidth = base.device.memory_bandwidth_bytes_per_s
    peak = base.device.dense_flops
    prior = base.coefficients
    rows: list[list[float]] = []
    ys: list[float] = []
    for o in obs:
        read, flops = _model_for(base, o).decode_features(
            o.batch, o.prompt_tokens + o.output_tokens / 2.0
        )
        rows.append([read / bandwidth, flops / peak, 1.0])
        ys.append(o.step_s)
    solved = _nonnegative(rows, ys, {})
    if solved is None or solved[0] <= 0 or solved[1] <= 0:
        # Bytes and FLOPs move together in these cells: keep the compute prior.
        solved = _nonnegative(rows, ys, {1: 1.0 / prior.decode_compute_efficiency})
    if solved is None or solved[0] <= 0:
        raise CalibrationError(
            "the cells cannot separate the weights' and KV cache's reads from the per-step "
            "constant: measure at least two concurrency levels"
        )
    try:
        decode = replace(
            prior,
            bandwidth_efficiency=1.0 / solved[0],
            decode_compute_efficiency=1.0 / solved[1] if solved[1] > 0 else 1.5,
            step_overhead_s=solved[2],
        )
    except ValueError as exc:
        raise CalibrationError(_unphysical(exc)) from None
    decoded = replace(base, coefficients=decode)
    prows: list[list[float]] = []
    pys: list[float] = []
    for o in obs:
        if o.ttft_s is None or o.batch > TTFT_LOAD_LIMIT * base.max_num_seqs + 1:
            continue
        m = _model_for(decoded, o)
        context = o.prompt_tokens + o.output_tokens / 2.0
        ride = m.prefill_chunks(o.prompt_tokens) * m.decode_step_s(max(0.0, o.batch - 1), context)
        prows.append([m.prefill_flops(o.prompt_tokens) / peak, 1.0])
        pys.append(o.ttft_s - ride)
    psolved = _nonnegative(prows, pys, {}) if len(prows) >= 2 else None
    if psolved is None or psolved[0] <= 0:
        psolved = _nonnegative(prows, pys, {0: 1.0 / prior.prefill_compute_efficiency})
    if psolved is None:
        return decode
    try:
        return replace(
            decode,
            prefill_compute_efficiency=1.0 / psolved[0] if psolved[0] > 0 else 1.5,
            prefill_overhead_s=psolved[1],
        )
    except ValueError as exc:
        raise CalibrationError(_unphysical(exc)) from None


def _unphysical(exc: ValueError) -> str:
    return (
        f"the fit is not physical ({exc}): the run's figures do not follow the model for this "
        "hardware and checkpoint (another model or GPU than the stack's, client-limited cells, "
        "or a server that was not the only load)"
    )


def predict(model: StepModel, o: Observation) -> dict[str, float]:
    """The model's figures for one observed cell (same concurrency, lengths, acceptance)."""
    from serving.capacity.perf import Workload

    m = _model_for(model, o)
    w = Workload(max(1, round(o.prompt_tokens)), max(1, round(o.output_tokens)))
    point = m.at_concurrency(o.batch if o.concurrency <= model.max_num_seqs else o.concurrency, w)
    return {
        "ttft": point.ttft_s,
        "itl": point.step_s,
        "e2e": point.e2e_s,
        "tokens_per_s": point.output_tokens_per_s,
    }


def measured(o: Observation) -> dict[str, float | None]:
    return {
        "ttft": o.ttft_s,
        "itl": o.step_s,
        "e2e": o.e2e_s,
        "tokens_per_s": o.output_tokens_per_s,
    }


def errors(model: StepModel, obs: Sequence[Observation]) -> dict[str, float | None]:
    """Median absolute relative error per metric over ``obs`` (None where nothing measured)."""
    out: dict[str, float | None] = {}
    per: dict[str, list[float]] = {m: [] for m in METRICS}
    for o in obs:
        p = predict(model, o)
        for metric, value in measured(o).items():
            if metric == "ttft" and o.batch > TTFT_LOAD_LIMIT * model.max_num_seqs + 1:
                continue  # the target covers TTFT below ~70 % load only
            if value:
                per[metric].append(abs(p[metric] - value) / value)
    for metric, values in per.items():
        out[metric] = statistics.median(values) if values else None
    return out


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
    #: MTP's mean accepted length measured by the run (median over its cells; None without
    #: speculative decoding or spec-decode counters).
    mean_accepted_length: float | None = None

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
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationError(f"{where}: {exc}") from None
        return cls(
            strings["hardware"],
            strings["checkpoint"],
            strings["vllm"],
            coefficients,
            held,
            provenance,
            float(accepted) if accepted is not None else None,
        )


def load_calibration(path: Path) -> Calibration:
    from serving.config.inputs import JsonInputError, read_json

    try:  # a regular file, bounded, strict JSON (no NaN, no key twice)
        data = read_json(path, MAX_FILE_BYTES)
    except JsonInputError as exc:
        raise CalibrationError(f"{path.name}: cannot be read ({exc})") from None
    return Calibration.from_dict(data, path.name)


def load_calibrations(folder: Path = CALIBRATIONS_DIR) -> list[Calibration]:
    if not folder.is_dir():
        return []
    return [load_calibration(p) for p in sorted(folder.glob("*.json"))]


def find_calibration(
    hardware: str, checkpoint: str, vllm: str, folder: Path = CALIBRATIONS_DIR
) -> Calibration | None:
    """The calibration for exactly this hardware, checkpoint and vLLM release; synthetic ones
    (fitted on the paced fake server) never stand in for a real one."""
    for c in load_calibrations(folder):
        if (c.hardware, c.checkpoint, c.vllm) == (hardware, checkpoint, vllm) and not c.synthetic:
            return c
    return None


def _halves(obs: Sequence[Observation]) -> tuple[list[Observation], list[Observation]]:
    levels = sorted({o.concurrency for o in obs})
    even = {c for i, c in enumerate(levels) if i % 2 == 0}
    return [o for o in obs if o.concurrency in even], [o for o in obs if o.concurrency not in even]


def held_out(base: StepModel, obs: Sequence[Observation]) -> dict[str, float | None]:
    """Two-fold by concurrency level: fit on alternate levels, predict the others; the median
    of both folds' relative errors per metric."""
    a, b = _halves(obs)
    if len({o.concurrency for o in obs}) < 4 or len(a) < 2 or len(b) < 2:
        raise CalibrationError(
            "a held-out check needs at least 4 concurrency levels (fit on half, predict the rest)"
        )
    per: dict[str, list[float]] = {m: [] for m in METRICS}
    for train, test in ((a, b), (b, a)):
        model = replace(base, coefficients=fit(base, train))
        for o in test:
            p = predict(model, o)
            for metric, value in measured(o).items():
                if metric == "ttft" and o.batch > TTFT_LOAD_LIMIT * base.max_num_seqs + 1:
                    continue
                if value:
                    per[metric].append(abs(p[metric] - value) / value)
    return {m: (statistics.median(v) if v else None) for m, v in per.items()}


def calibrate(
    base: StepModel,
    cells: Iterable[Mapping[str, Any]],
    *,
    hardware: str,
    checkpoint: str,
    vllm: str,
    provenance: Mapping[str, Any],
) -> Calibration:
    obs = observations(cells, base.max_num_seqs)
    if not obs:
        raise CalibrationError(
            "the run has no measured closed-loop cell with a step time (server_mean_itl_ms, "
            "client_mean_itl_ms or mean_itl_ms) and token counts"
        )
    error = held_out(base, obs)
    coefficients = fit(base, obs)
    lengths = [o.accepted_length for o in obs if o.accepted_length is not None]
    return Calibration(
        hardware,
        checkpoint,
        vllm,
        coefficients,
        error,
        {**provenance, "cells": len(obs), "levels": sorted({o.concurrency for o in obs})},
        statistics.median(lengths) if lengths and base.speculation is not None else None,
    )
