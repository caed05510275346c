"""Does the client distort what it measures? ``python -m bench.fidelity [--runs N]``.

Starts a paced server (:mod:`bench.fidelity.pacedserver`) that times every request from the
moment it received it, then for each pacing and number of streams runs two clients, each in a
fresh process: one closed-loop cell through ``python -m bench run`` itself, and a bare aiohttp
loop (all streams at once, timing the first ``data:`` line). With two or more CPUs the server
is pinned to the last one. Printed per cell, as medians over ``--runs``: the server's own TTFT,
each client's excess over it, this bench's ITL against the server's, coalesced tokens, client
share, loop lag and in-flight requests; and whether the targets are met: TTFT within 5 % up to
512 streams and 10 % at 1024, ITL within 2 %, never worse than the bare loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CellResult",
    "Pacing",
    "bare_cell",
    "pin",
    "run_once",
    "table",
    "targets_for",
    "usable_cpus",
    "with_cpu_time",
]

ROOT = Path(__file__).resolve().parent.parent
MODEL = "google/gemma-4-12B-it"
PROMPT = " ".join(f"word{i % 50}" for i in range(63))


@dataclass(frozen=True)
class Pacing:
    ttft_ms: float
    itl_ms: float

    @classmethod
    def parse(cls, text: str) -> Pacing:
        ttft, _, itl = text.partition("/")
        try:
            pacing = cls(float(ttft), float(itl))
        except ValueError:
            raise ValueError(f"pacing is TTFT/ITL in ms, got {text!r}") from None
        if pacing.ttft_ms <= 0 or pacing.itl_ms <= 0:
            raise ValueError(f"pacing must be positive, got {text!r}")
        return pacing

    @property
    def label(self) -> str:
        return f"{self.ttft_ms:g}/{self.itl_ms:g} ms"


def targets_for(streams: int) -> float:
    """The largest TTFT excess over the server's own that meets the target at ``streams``."""
    return 0.10 if streams > 512 else 0.05


ITL_TARGET = 0.02
BARE_TOLERANCE = 0.005
"""'Worse than the bare loop' means by more than half a percentage point of TTFT: below that,
two medians of the same server differ by noise (a tenth of a millisecond at 1 stream)."""


# ----- the server --------------------------------------------------------------------------


def usable_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def start_server(
    pacing: Pacing, output_tokens: int, cpu: int | None
) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable, "-m", "bench.fidelity.pacedserver", "--ttft-ms", str(pacing.ttft_ms),
        "--itl-ms", str(pacing.itl_ms), "--output-tokens", str(output_tokens),
    ]  # fmt: skip
    if cpu is not None:
        command += ["--cpu", str(cpu)]
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        stop_server(proc)
        raise RuntimeError(f"the paced server did not start (said {line!r})")
    return proc, line.split("listening on ", 1)[1].strip()


def stop_server(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def _server_log(url: str) -> list[float]:
    with urllib.request.urlopen(url + "/timings?clear=1", timeout=30) as response:
        return [float(t["ttft_s"]) for t in json.load(response)["timings"]]


# ----- the two clients (each in its own process) -------------------------------------------


async def _bare(url: str, streams: int, requests: int, output_tokens: int) -> dict[str, Any]:
    import aiohttp

    from bench.load.hotpath import RequestSpec

    body = RequestSpec(MODEL, PROMPT, output_tokens).encoded_body
    headers = {"Content-Type": "application/json"}
    ttfts: list[float] = []
    itls: list[float] = []
    failed = 0
    left = [requests]
    connector = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def health() -> None:
            async with session.get(url + "/health") as r:
                await r.read()

        await asyncio.gather(*(health() for _ in range(streams)))

        async def one() -> None:
            nonlocal failed
            start = time.perf_counter()
            first = last = None
            async with session.post(url + "/v1/completions", data=body, headers=headers) as r:
                async for line in r.content:
                    if not line.startswith(b"data:") or line.startswith(b"data: [DONE]"):
                        continue
                    now = time.perf_counter()
                    if first is None:
                        first = now
                    elif last is not None:
                        itls.append(now - last)
                    last = now
            if first is None:
                failed += 1
            else:
                ttfts.append(first - start)

        await one()  # one untimed request
        ttfts.clear()
        itls.clear()
        cpu_start = time.process_time()

        async def stream() -> None:
            while left[0] > 0:
                left[0] -= 1
                await one()

        await asyncio.gather(*(stream() for _ in range(streams)))
        cpu_s = time.process_time() - cpu_start
    return {
        "client_cpu_ms_per_request": cpu_s * 1000.0 / requests,
        "completed": len(ttfts),
        "failed": failed,
        "median_ttft_ms": statistics.median(ttfts) * 1000 if ttfts else None,
        "median_itl_ms": statistics.median(itls) * 1000 if itls else None,
    }


def pin(cpus: str) -> None:
    """Keep this process on ``cpus`` (``"0,1"``; empty: anywhere)."""
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})


def bare_cell(
    url: str, streams: int, requests: int, output_tokens: int, uvloop: bool
) -> dict[str, Any]:
    """One cell of the bare aiohttp loop in this process: its record."""
    from bench.load.hotload import new_event_loop

    loop = new_event_loop() if uvloop else asyncio.new_event_loop()
    try:
        return loop.run_until_complete(_bare(url, streams, requests, output_tokens))
    finally:
        loop.close()


def with_cpu_time(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with this process's CPU time so far (``client_cpu_s``)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record["client_cpu_s"] = usage.ru_utime + usage.ru_stime
    return record


def run_client(
    client: str, url: str, streams: int, requests: int, output_tokens: int, cpus: list[int]
) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "bench.fidelity", "--client", client, "--url", url,
        "--streams", str(streams), "--requests", str(requests),
        "--output-tokens", str(output_tokens), "--cpus", ",".join(map(str, cpus)),
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{client} client failed: {done.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ----- the comparison ----------------------------------------------------------------------


@dataclass
class CellResult:
    pacing: Pacing
    streams: int
    server_ttft_ms: float
    bench: dict[str, Any]
    bare: dict[str, Any]

    def excess(self, which: str) -> float | None:
        record = self.bench if which == "bench" else self.bare
        value = record.get("median_ttft_ms")
        if value is None:
            return None
        return float(value) / self.server_ttft_ms - 1.0

    @property
    def itl_error(self) -> float | None:
        client, server = self.bench.get("client_mean_itl_ms"), self.bench.get("server_mean_itl_ms")
        if client is None or not server:
            return None
        return float(client) / float(server) - 1.0


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:+.1f}%"


def _num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "n/a" if x is None else fmt.format(x)


def table(runs: list[list[CellResult]]) -> str:
    """The comparison as markdown: medians over the runs, per cell."""
    lines = [
        "| pacing (TTFT/ITL) | streams | server TTFT ms | this bench | bare aiohttp loop "
        "| ITL vs server | coalesced tokens | client share of TTFT (/metrics) | loop lag p99 ms "
        "| in flight (server) | targets |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for i, first in enumerate(runs[0]):
        cells = [run[i] for run in runs]
        bench = _median([c.excess("bench") for c in cells])
        bare = _median([c.excess("bare") for c in cells])
        itl = _median([c.itl_error for c in cells])
        server = _median([c.server_ttft_ms for c in cells])
        share = _median([c.bench.get("client_share_ttft") for c in cells])
        lag = _median([c.bench.get("p99_loop_lag_ms") for c in cells])
        in_flight = _median([c.bench.get("server_in_flight") for c in cells])
        coalesced = _median([c.bench.get("coalesced_share") for c in cells])
        missed = []
        limit = targets_for(first.streams)
        if bench is None or abs(bench) > limit:
            missed.append(f"TTFT {_pct(bench)} (target {limit:.0%})")
        if itl is None or abs(itl) > ITL_TARGET:
            missed.append(f"ITL {_pct(itl)} (target {ITL_TARGET:.0%})")
        if bench is not None and bare is not None and bench - bare > BARE_TOLERANCE:
            missed.append("worse than the bare loop")
        verdict = "met" if not missed else "missed: " + "; ".join(missed)
        lines.append(
            f"| {first.pacing.label} | {first.streams} | {_num(server)} | {_pct(bench)} | "
            f"{_pct(bare)} | {_pct(itl)} | {_num(coalesced, '{:.1%}')} | {_pct(share)} | "
            f"{_num(lag)} | {_num(in_flight, '{:.0f}')} | {verdict} |"
        )
    return "\n".join(lines)


def run_once(
    run: int,
    *,
    pacings: Sequence[Pacing],
    streams: Sequence[int],
    output_tokens: int,
    rounds: int,
    min_requests: int,
    pin: bool,
    progress: Callable[[str], None],
) -> list[CellResult]:
    """One run: every pacing against every number of streams, each cell told to ``progress``."""
    cpus = usable_cpus()
    server_cpu = cpus[-1] if len(cpus) > 1 and pin else None
    client_cpus = cpus[:-1] if server_cpu is not None else []
    cells: list[CellResult] = []
    for pacing in pacings:
        proc, url = start_server(pacing, output_tokens, server_cpu)
        try:
            for n in streams:
                requests = max(min_requests, rounds * n)
                results: dict[str, dict[str, Any]] = {}
                server_ttfts: list[float] = []
                for client in ("bench", "bare"):
                    _server_log(url)
                    results[client] = run_client(
                        client, url, n, requests, output_tokens, client_cpus
                    )
                    server_ttfts += _server_log(url)
                cell = CellResult(
                    pacing,
                    n,
                    statistics.median(server_ttfts) * 1000,
                    results["bench"],
                    results["bare"],
                )
                cells.append(cell)
                progress(
                    f"run {run}: {pacing.label}, {n} streams: server "
                    f"{cell.server_ttft_ms:.1f} ms, bench {_pct(cell.excess('bench'))}, bare "
                    f"{_pct(cell.excess('bare'))}, ITL {_pct(cell.itl_error)}; client CPU s: "
                    f"bench {cell.bench.get('client_cpu_s', 0):.2f}, "
                    f"bare {cell.bare.get('client_cpu_s', 0):.2f}; CPU ms/request: bench "
                    f"{cell.bench.get('client_cpu_ms_per_request') or 0:.3f}, bare "
                    f"{cell.bare.get('client_cpu_ms_per_request') or 0:.3f}"
                )
        finally:
            stop_server(proc)
    return cells
