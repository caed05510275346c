"""The command lines of the client-fidelity harness: ``python -m bench.fidelity`` (:func:`main`,
the harness of :mod:`bench.fidelity.harness`) and ``python -m bench.fidelity.pacedserver``
(:func:`pacedserver_main`, the server of :mod:`bench.fidelity.pacedserver`).

The bench's client cell lives here (:func:`bench_cell`): it runs ``python -m bench run``'s own
command line in process, and only the command-line layer calls another command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from bench.fidelity import harness, pacedserver
from bench.fidelity.harness import Pacing
from serving.capacity.perf import Coefficients

__all__ = [
    "bench_cell",
    "build_pacedserver_parser",
    "build_parser",
    "main",
    "pacedserver_main",
]


def _pacings(text: str) -> list[Pacing]:
    try:
        return [Pacing.parse(x) for x in text.split(",")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.fidelity",
        description=harness.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=1, help="runs; the table shows medians")
    parser.add_argument(
        "--streams", type=lambda t: [int(x) for x in t.split(",")], default=[1, 64, 512, 1024]
    )
    parser.add_argument(
        "--pacings",
        type=_pacings,
        default=[Pacing(100, 20), Pacing(200, 50)],
        help="TTFT/ITL in ms, comma-separated (default 100/20,200/50)",
    )
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="measured requests per stream")
    parser.add_argument("--min-requests", type=int, default=10)
    parser.add_argument("--no-pin", action="store_true", help="do not pin server and clients")
    parser.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    # One client cell (internal: the script runs each client in its own process).
    parser.add_argument("--client", choices=["bench", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cpus", default="", help=argparse.SUPPRESS)
    parser.add_argument("--uvloop", action="store_true", help=argparse.SUPPRESS)
    return parser


def bench_cell(url: str, streams: int, requests: int, output_tokens: int) -> dict[str, Any]:
    """One cell through ``python -m bench run`` itself (its CLI, sweep, hot path, workers as
    it chooses them); the cell's record."""
    from bench.cli import main as bench_main

    with tempfile.TemporaryDirectory(prefix="bench-fidelity-") as tmp:
        out = Path(tmp) / "run"
        status = bench_main(
            [
                "run", "--url", url, "--model", harness.MODEL, "--out", str(out),
                "--concurrency", str(streams),
                "--prompt-tokens", str(len(harness.PROMPT.split()) + 1),
                "--output-tokens", str(output_tokens), "--num-requests", str(requests),
                "--no-tokenize", "--no-progress",
            ]
        )  # fmt: skip
        lines = (out / "cells.jsonl").read_text().splitlines() if out.exists() else []
        if not lines:
            raise RuntimeError(f"the bench wrote no cell (exit {status})")
        record: dict[str, Any] = json.loads(lines[-1])
    return record


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.client:
        # One client cell in this process: its record, with its own CPU time.
        harness.pin(args.cpus)
        cell = (args.url, args.streams[0], args.requests, args.output_tokens)
        record = harness.with_cpu_time(
            bench_cell(*cell) if args.client == "bench" else harness.bare_cell(*cell, args.uvloop)
        )
        sys.stdout.write(json.dumps(record, default=str) + "\n")
        return 0
    if args.runs < 1 or any(s < 1 for s in args.streams):
        parser.error("--runs and --streams must be positive")
    started = time.monotonic()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    runs = [
        harness.run_once(
            run + 1,
            pacings=args.pacings,
            streams=args.streams,
            output_tokens=args.output_tokens,
            rounds=args.rounds,
            min_requests=args.min_requests,
            pin=not args.no_pin,
            progress=_progress,
        )
        for run in range(args.runs)
    ]
    elapsed = time.monotonic() - started
    cpus = harness.usable_cpus()
    print(
        f"# bench fidelity: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{platform.machine()}, {len(cpus)} CPUs ({platform.processor() or 'unknown'}), "
        f"Python {platform.python_version()}; {args.runs} run(s) in {elapsed:.0f} s; "
        f"load average at start {load[0]:.2f}"
        if load
        else ""
    )
    print(
        f"# {args.output_tokens} output tokens, {len(harness.PROMPT.split()) + 1}-token prompts; "
        + (
            f"server pinned to CPU {cpus[-1]}, clients to {cpus[:-1]}"
            if len(cpus) > 1 and not args.no_pin
            else "nothing pinned"
        )
        + "; TTFT columns: median over the server's own median TTFT, minus 1"
    )
    print()
    print(harness.table(runs))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                [
                    [
                        {
                            "pacing": c.pacing.label,
                            "streams": c.streams,
                            "server_ttft_ms": c.server_ttft_ms,
                            "bench": c.bench,
                            "bare": c.bare,
                        }
                        for c in run
                    ]
                    for run in runs
                ],
                indent=1,
                default=str,
            )
        )
    return 0


def build_pacedserver_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.fidelity.pacedserver", description=pacedserver.__doc__
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--itl-ms", type=float, default=20.0)
    parser.add_argument(
        "--step-model",
        metavar="JSON",
        default=None,
        help="pace by the synthetic step model with these coefficients (a JSON object with "
        "the keys of serving.capacity.perf.Coefficients; '{}' for the priors) instead of fixed "
        "times",
    )
    parser.add_argument("--max-num-seqs", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--cpu", type=int, default=None, help="pin this process to that CPU")
    return parser


def pacedserver_main(argv: Sequence[str] | None = None) -> int:
    parser = build_pacedserver_parser()
    args = parser.parse_args(argv)
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    from bench.load.hotload import new_event_loop

    step_model = None
    if args.step_model is not None:
        try:
            raw = orjson.loads(args.step_model)
            if not isinstance(raw, dict) or not set(raw) <= set(Coefficients().as_dict()):
                raise ValueError(f"keys must be among {sorted(Coefficients().as_dict())}")
            coefficients = Coefficients(**{k: float(v) for k, v in raw.items()})
        except (orjson.JSONDecodeError, TypeError, ValueError) as exc:
            parser.error(f"--step-model: {exc}")
        if not 1 <= args.max_num_seqs <= 4096:
            parser.error("--max-num-seqs must be in [1, 4096]")
        step_model = pacedserver.synthetic_model(coefficients, args.max_num_seqs)
    server = pacedserver.PacedServer(
        args.ttft_ms / 1000, args.itl_ms / 1000, args.output_tokens, step_model=step_model
    )
    loop = new_event_loop()
    with contextlib.suppress(KeyboardInterrupt):
        loop.run_until_complete(pacedserver.serve(server, args.host, args.port))
    loop.close()
    return 0
