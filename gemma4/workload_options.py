"""The workload and latency-target options `gemma4 plan`, `plan search` and `preview` share:
request lengths (fixed, or a mean and a p95, or a trace file), burstiness, a shared prompt
prefix, and the targets (`--ttft-ms` on the mean, `--ttft-p95-ms` on a percentile, ...)."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

from bench.results.record import RequestResult
from gemma4.options import bounded_int, bounded_number
from serving.capacity.configsearch import METRICS, STATS, Target
from serving.capacity.perf import MAX_TOKENS
from serving.capacity.simulate import MAX_REQUESTS, TraceRequest, Traffic
from serving.config.inputs import JsonInputError, read_text

#: Largest trace file read, and its longest line.
MAX_TRACE_BYTES = 32 << 20
MAX_TRACE_LINE = 4096
#: The keys a trace line may hold: a benchmark request record's (bench.results.record), of
#: which ``start_s``, ``prompt_tokens`` and ``output_tokens`` are read.
TRACE_KEYS = frozenset(f.name for f in fields(RequestResult)) | {"sent_at"}


def add_workload_options(parser: argparse.ArgumentParser, default_note: str) -> None:
    """Lengths, their tails, burstiness, a shared prefix and a trace."""
    group = parser.add_argument_group("workload")
    for name, what in (("prompt", "prompt"), ("output", "output")):
        group.add_argument(
            f"--{name}-tokens",
            type=bounded_int(f"--{name}-tokens", 1, MAX_TOKENS),
            metavar="N",
            help=f"mean {what} tokens per request ({default_note})",
        )
        group.add_argument(
            f"--{name}-p95",
            type=bounded_int(f"--{name}-p95", 1, MAX_TOKENS),
            metavar="N",
            help=f"95th percentile of {what} tokens: lengths then vary (a lognormal with "
            f"that mean and p95); default: every request the mean",
        )
    group.add_argument(
        "--burstiness",
        type=bounded_number("--burstiness", 0.01, 100.0),
        default=1.0,
        metavar="F",
        help="gamma shape of the arrivals, as `vllm bench serve --burstiness`: 1 Poisson "
        "(default), below 1 burstier",
    )
    group.add_argument(
        "--shared-prefix-tokens",
        type=bounded_int("--shared-prefix-tokens", 0, 10_000_000),
        default=0,
        metavar="N",
        help="prompt tokens every request shares at its start (a system prompt the prefix "
        "cache holds; default 0)",
    )
    group.add_argument(
        "--trace",
        type=Path,
        metavar="FILE",
        help="JSON lines of requests (start_s, prompt_tokens, output_tokens: the benchmark's "
        "request records): their arrivals and lengths replace the options above, and their "
        "mean rate the rate unless one is given",
    )


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """``--ttft-ms`` (the mean) and ``--ttft-p95-ms`` (a percentile), for TTFT, ITL, E2E."""
    group = parser.add_argument_group(
        "latency targets (ms; the mean, or a percentile of the simulated requests)"
    )
    words = {"ttft": "time to first token", "itl": "inter-token latency", "e2e": "end to end"}
    for metric in METRICS:
        for stat in STATS:
            t = Target(metric, stat, 1.0)
            group.add_argument(
                t.flag,
                dest=f"{metric}_{stat}_ms",
                type=bounded_number(t.flag, 1e-3, 3_600_000),
                metavar="MS",
                help=f"{stat} {words[metric]} at most"
                if stat != "mean"
                else f"mean {words[metric]} at most",
            )


def targets_from(options: argparse.Namespace) -> tuple[Target, ...]:
    return tuple(
        Target(metric, stat, float(value))
        for metric in METRICS
        for stat in STATS
        if (value := getattr(options, f"{metric}_{stat}_ms", None)) is not None
    )


def read_trace(path: Path) -> tuple[TraceRequest, ...]:
    """The requests of a trace file; ValueError naming the file and the line otherwise."""
    try:
        text = read_text(path, MAX_TRACE_BYTES)
    except JsonInputError as exc:
        raise ValueError(f"--trace {path}: {exc}") from None
    out: list[TraceRequest] = []
    for number, line in enumerate(text.split("\n"), 1):  # JSON lines end in \n only
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        where = f"--trace {path}, line {number}"
        if len(line) > MAX_TRACE_LINE:
            raise ValueError(f"{where}: longer than {MAX_TRACE_LINE} characters")
        if len(out) >= MAX_REQUESTS:
            raise ValueError(f"{where}: more than {MAX_REQUESTS} requests")
        request = _trace_line(line, where)
        if request is not None:
            out.append(request)
    if len(out) < 2:
        raise ValueError(f"--trace {path}: needs at least 2 requests, has {len(out)}")
    return tuple(out)


def _trace_line(line: str, where: str) -> TraceRequest | None:
    """One trace line as a request; None for a benchmark record of a failed request
    (``"ok": false``: its lengths are not what a served request holds)."""
    try:
        record = json.loads(line, parse_constant=_refuse_constant, object_pairs_hook=_unique)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{where}: not JSON ({str(exc)[:80]})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{where}: a JSON object is expected, got {type(record).__name__}")
    if record.get("ok") is False:
        return None
    unknown = sorted(set(record) - TRACE_KEYS)
    if unknown:
        raise ValueError(
            f"{where}: unknown key {unknown[0][:40]!r}; a request record has "
            "start_s, prompt_tokens, output_tokens"
        )
    start = record.get("start_s")
    if (
        isinstance(start, bool)
        or not isinstance(start, int | float)
        or not (math.isfinite(start) and 0 <= start <= 1e9)
    ):
        raise ValueError(f"{where}: start_s must be a number of seconds in [0, 1e9]")
    lengths = []
    for key in ("prompt_tokens", "output_tokens"):
        value = record.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
            raise ValueError(f"{where}: {key} must be an integer in [1, {MAX_TOKENS}]")
        lengths.append(value)
    return TraceRequest(float(start), lengths[0], lengths[1])


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ValueError(f"the key {twice[0][:40]!r} is given twice")
    return dict(pairs)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def traffic_from(
    options: argparse.Namespace, rate: float | None, prompt: int, output: int
) -> Traffic:
    """The traffic the options describe (``prompt``/``output``: the lengths when not given);
    ValueError naming the option otherwise."""
    trace = read_trace(options.trace) if options.trace is not None else None
    if trace is not None:
        given = [
            flag
            for flag, value in (
                ("--prompt-tokens", options.prompt_tokens),
                ("--output-tokens", options.output_tokens),
                ("--prompt-p95", options.prompt_p95),
                ("--output-p95", options.output_p95),
                ("--burstiness", None if options.burstiness == 1.0 else options.burstiness),
            )
            if value is not None
        ]
        if given:
            raise ValueError(f"--trace gives the arrivals and the lengths: drop {', '.join(given)}")
        span = max(r.arrival_s for r in trace) - min(r.arrival_s for r in trace)
        if rate is None:
            if span <= 0:
                raise ValueError(
                    f"--trace {options.trace}: every request at one instant; give --rate"
                )
            rate = (len(trace) - 1) / span
        prompt = round(sum(r.prompt_tokens for r in trace) / len(trace))
        output = round(sum(r.output_tokens for r in trace) / len(trace))
    if rate is None:
        raise ValueError("give --rate (or a --trace, whose mean rate is used)")
    if trace is None:
        prompt = options.prompt_tokens or prompt
        output = options.output_tokens or output
    if options.shared_prefix_tokens and not 0 <= options.shared_prefix_tokens <= prompt:
        raise ValueError(
            f"--shared-prefix-tokens must be an integer in [0, {prompt}] (the mean prompt), "
            f"got {options.shared_prefix_tokens}"
        )
    for flag, p95, mean in (
        ("--prompt-p95", options.prompt_p95, prompt),
        ("--output-p95", options.output_p95, output),
    ):
        if p95 is not None and p95 < mean:
            raise ValueError(f"{flag} ({p95}) must be at least the mean ({mean})")
    try:
        return Traffic(
            rate,
            prompt,
            output,
            prompt_p95=options.prompt_p95,
            output_p95=options.output_p95,
            burstiness=float(options.burstiness),
            shared_prefix_tokens=int(options.shared_prefix_tokens or 0),
            trace=trace,
        )
    except ValueError as exc:  # the lengths' tails: named by their options
        text = str(exc).replace("prompt tokens p95", "--prompt-p95")
        raise ValueError(text.replace("output tokens p95", "--output-p95")) from None
