"""Does the client distort what it measures? ``python -m bench.fidelity``.

Starts the fake vLLM server (``tests/support/fake_vllm.py``) as its own process with a known
pacing (a fixed time to first token and a fixed interval per token), then:

1. at concurrency 1, 64 and 512 (closed loop, the benchmark's own code path: a client from
   :func:`endpoint.client.make_client` sized to the concurrency, pool warmed, one untimed
   round), compares the medians the client measured with the truth and with the server's own
   per-request view (``GET /fake/timings``: from the request's arrival to the first chunk
   written), so the client's share of any error shows on its own;
2. raises an open-loop Poisson request rate step by step until the client no longer sends at
   95 % of the offered rate, a request fails, or the median TTFT it measures exceeds 1.5 x the
   truth, and reports the highest rate it sustained.

Every step is bounded in requests and time (the whole script in about three minutes at most).
The figures depend on the machine; the README states the ones measured and where.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from endpoint.client import make_client

from .load import closed_loop, open_loop, warm_pool
from .request import RequestSpec
from .stats import percentile

__all__ = ["FidelityRow", "main", "measure_concurrency", "start_fake_server", "stop_fake_server"]

MODEL = "google/gemma-4-12B-it"
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class FidelityRow:
    concurrency: int
    requests: int
    failed: int
    true_ttft_ms: float
    server_ttft_ms: float | None
    client_ttft_ms: float
    true_itl_ms: float
    client_itl_ms: float
    client_e2e_ms: float
    true_e2e_ms: float

    @property
    def ttft_error(self) -> float:
        return (self.client_ttft_ms - self.true_ttft_ms) / self.true_ttft_ms

    @property
    def itl_error(self) -> float:
        return (self.client_itl_ms - self.true_itl_ms) / self.true_itl_ms


def start_fake_server(
    ttft_ms: float, itl_ms: float, output_tokens: int
) -> tuple[subprocess.Popen[str], str]:
    """The fake server in its own process; returns it and its base URL."""
    command = [
        sys.executable,
        "-m",
        "tests.support.fake_vllm",
        "--port",
        "0",
        "--ttft-ms",
        str(ttft_ms),
        "--itl-ms",
        str(itl_ms),
        "--output-tokens",
        str(output_tokens),
        "--pace-from-client",
    ]
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    line = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("listening on "):
            return proc, line.split("listening on ", 1)[1].strip()
        if proc.poll() is not None:
            break
    stop_fake_server(proc)
    raise RuntimeError(f"the fake server did not start (last line: {line!r})")


def stop_fake_server(proc: subprocess.Popen[str]) -> None:
    """Stop the server process and close its pipe."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


async def _stamp(request: httpx.Request) -> None:
    # The server paces from this instant (its --pace-from-client): the truth starts at send.
    request.headers["X-Sent-At"] = repr(time.monotonic())


def _client(url: str, concurrency: int) -> httpx.AsyncClient:
    client = make_client(url, max_concurrency=concurrency, timeout_s=120)
    client.event_hooks["request"].append(_stamp)
    return client


async def _server_ttfts(url: str, clear: bool = False) -> list[float]:
    async with make_client(url, max_concurrency=1) as client:
        response = await client.get("/fake/timings", params={"clear": "1"} if clear else None)
        response.raise_for_status()
        return [float(t["ttft_s"]) for t in response.json()["timings"]]


def _specs(n: int, output_tokens: int) -> list[RequestSpec]:
    prompt = " ".join(f"word{i % 50}" for i in range(31))
    return [RequestSpec(MODEL, prompt, output_tokens) for _ in range(n)]


async def measure_concurrency(
    url: str, concurrency: int, *, ttft_ms: float, itl_ms: float, output_tokens: int, rounds: int
) -> FidelityRow:
    """One closed-loop cell at ``concurrency``, compared with the truth and the server."""
    n = max(concurrency * rounds, 20)
    async with _client(url, concurrency) as client:
        await warm_pool(client, concurrency)
        await closed_loop(client, _specs(concurrency, output_tokens), concurrency, timeout_s=120)
        await _server_ttfts(url, clear=True)
        load = await closed_loop(
            client, _specs(n, output_tokens), concurrency, timeout_s=120, max_duration_s=60
        )
    server = await _server_ttfts(url, clear=True)
    ok = [r for r in load.results if r.ok]
    if not ok:
        raise RuntimeError(f"every request failed at concurrency {concurrency}")
    ttfts = [r.ttft_s * 1000 for r in ok if r.ttft_s is not None]
    itls = [x * 1000 for r in ok for x in r.itls_s]
    return FidelityRow(
        concurrency=concurrency,
        requests=len(load.results),
        failed=len(load.results) - len(ok),
        true_ttft_ms=ttft_ms,
        server_ttft_ms=statistics.median(server) * 1000 if server else None,
        client_ttft_ms=percentile(ttfts, 50),
        true_itl_ms=itl_ms,
        client_itl_ms=percentile(itls, 50),
        client_e2e_ms=percentile([r.e2e_s * 1000 for r in ok], 50),
        true_e2e_ms=ttft_ms + (output_tokens - 1) * itl_ms,
    )


@dataclass(frozen=True)
class RateStep:
    offered: float
    achieved: float | None
    requests: int
    failed: int
    client_ttft_ms: float | None
    sustained: bool


async def find_max_rate(
    url: str,
    *,
    ttft_ms: float,
    output_tokens: int,
    rates: Sequence[float],
    step_seconds: float,
    deadline: float,
) -> list[RateStep]:
    """Open loop at increasing rates until one is not sustained (or time runs out)."""
    steps: list[RateStep] = []
    cap = 4096
    async with _client(url, cap) as client:
        await warm_pool(client, 256)
        for rate in rates:
            if time.monotonic() + step_seconds * 2 > deadline:
                break
            n = max(20, int(rate * step_seconds))
            load = await open_loop(
                client,
                _specs(n, output_tokens),
                rate,
                max_concurrency=cap,
                timeout_s=60,
                seed=int(rate),
                max_duration_s=step_seconds * 2,
            )
            ok = [r for r in load.results if r.ok]
            ttfts = [r.ttft_s * 1000 for r in ok if r.ttft_s is not None]
            ttft = percentile(ttfts, 50) if ttfts else None
            achieved = load.achieved_rate
            sustained = (
                achieved is not None
                and achieved >= 0.95 * rate
                and len(ok) == len(load.results) == n
                and ttft is not None
                and ttft <= 1.5 * ttft_ms
            )
            steps.append(
                RateStep(
                    rate, achieved, len(load.results), len(load.results) - len(ok), ttft, sustained
                )
            )
            if not sustained:
                break
    return steps


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


async def _main(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.max_seconds
    proc, url = start_fake_server(args.ttft_ms, args.itl_ms, args.output_tokens)
    try:
        print(
            f"# bench fidelity: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"fake server in its own process"
        )
        print(
            f"# pacing: TTFT {args.ttft_ms:g} ms, ITL {args.itl_ms:g} ms, "
            f"{args.output_tokens} output tokens (true E2E "
            f"{args.ttft_ms + (args.output_tokens - 1) * args.itl_ms:g} ms)"
        )
        print()
        print(
            "| concurrency | requests | failed | true TTFT ms | server TTFT ms | measured TTFT ms "
            "| error | true ITL ms | measured ITL ms | error | measured E2E ms |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in args.concurrency:
            row = await measure_concurrency(
                url,
                c,
                ttft_ms=args.ttft_ms,
                itl_ms=args.itl_ms,
                output_tokens=args.output_tokens,
                rounds=args.rounds,
            )
            server = f"{row.server_ttft_ms:.1f}" if row.server_ttft_ms is not None else "n/a"
            print(
                f"| {c} | {row.requests} | {row.failed} | {row.true_ttft_ms:g} | {server} | "
                f"{row.client_ttft_ms:.1f} | {_pct(row.ttft_error)} | {row.true_itl_ms:g} | "
                f"{row.client_itl_ms:.2f} | {_pct(row.itl_error)} | {row.client_e2e_ms:.1f} |",
                flush=True,
            )
        print()
        steps = await find_max_rate(
            url,
            ttft_ms=args.ttft_ms,
            output_tokens=args.output_tokens,
            rates=args.rates,
            step_seconds=args.step_seconds,
            deadline=deadline,
        )
        print(
            "| offered req/s | sent req/s | requests | failed | measured median TTFT ms "
            "| TTFT error | kept up |"
        )
        print("|---:|---:|---:|---:|---:|---:|---|")
        for s in steps:
            achieved = f"{s.achieved:.1f}" if s.achieved is not None else "n/a"
            ttft = f"{s.client_ttft_ms:.1f}" if s.client_ttft_ms is not None else "n/a"
            error = (
                _pct((s.client_ttft_ms - args.ttft_ms) / args.ttft_ms)
                if s.client_ttft_ms is not None
                else "n/a"
            )
            print(
                f"| {s.offered:g} | {achieved} | {s.requests} | {s.failed} | {ttft} | {error} | "
                f"{'yes' if s.sustained else 'no'} |"
            )
        best = max((s.offered for s in steps if s.sustained), default=None)
        faithful = max(
            (
                s.offered
                for s in steps
                if s.sustained
                and s.client_ttft_ms is not None
                and abs(s.client_ttft_ms - args.ttft_ms) <= 0.02 * args.ttft_ms
            ),
            default=None,
        )
        print()
        print(
            "highest sustained request rate (sent >= 95% of offered, no failure, median TTFT "
            "<= 1.5 x truth): "
            + (f"{best:g} req/s" if best is not None else "none of the rates tried")
        )
        print(
            "highest rate with the median TTFT within 2% of truth: "
            + (f"{faithful:g} req/s" if faithful is not None else "none of the rates tried")
        )
    finally:
        stop_fake_server(proc)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.fidelity",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--ttft-ms", type=float, default=200.0)
    parser.add_argument("--itl-ms", type=float, default=50.0)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument(
        "--concurrency", type=lambda t: [int(x) for x in t.split(",")], default=[1, 64, 512]
    )
    parser.add_argument("--rounds", type=int, default=2, help="requests per slot per cell")
    parser.add_argument(
        "--rates",
        type=lambda t: [float(x) for x in t.split(",")],
        default=[25, 50, 100, 200, 400, 600, 800, 900, 1000, 1200, 1600],
    )
    parser.add_argument("--step-seconds", type=float, default=5.0)
    parser.add_argument("--max-seconds", type=float, default=170.0)
    return asyncio.run(_main(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
