"""The post-deploy benchmark hook, called as the engine calls it, against a loopback server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bench.hook import BenchmarkFailedError, BenchmarkHookConfig, benchmark_hook
from bench.load.sweep import Grid
from endpoint.auth import ApiKeyAuth, NoAuth
from serving.config.groups import SloSettings
from tests.pulumi_harness import run_hook
from tests.support.fake_vllm import FakeVllmConfig, FakeVllmServer

MODEL = "google/gemma-4-12B-it-qat-w4a16-ct"


def config(tmp_path: Path, **overrides: Any) -> BenchmarkHookConfig:
    base: dict[str, Any] = {
        "stack": "l4",
        "served_model_name": MODEL,
        "hardware": "l4",
        "grid": Grid(concurrency=(1, 4), prompt_tokens=(64,), output_tokens=(16,)),
        # A budget no test reaches: the cells end at their request counts, however loaded the
        # machine (a budget cut would end a cell early and change what the tests see).
        "budget_s": 600.0,
        "slo": SloSettings(),
        "results_dir": tmp_path,
        "min_requests": 4,
        "requests_per_slot": 1,
    }
    return BenchmarkHookConfig(**{**base, **overrides})


class Logs:
    def __init__(self) -> None:
        self.info: list[str] = []
        self.warn: list[str] = []


def call_hook(url: str, cfg: BenchmarkHookConfig, logs: Logs) -> BaseException | None:
    """Create the benchmark hook under mocks and call it like the engine after a create."""
    return run_hook(
        lambda: benchmark_hook(
            "l4-benchmark", cfg, auth=NoAuth(), log=logs.info.append, warn=logs.warn.append
        ),
        {"uri": url},
        stack=cfg.stack,
    )


def test_fast_server_passes_and_the_run_is_written(tmp_path: Path) -> None:
    logs = Logs()
    fake = FakeVllmConfig(served_model_name=MODEL, ttft_s=0.01, itl_s=0.002, output_tokens=16)
    with FakeVllmServer(fake) as server:
        assert call_hook(server.url, config(tmp_path), logs) is None
    assert logs.warn == []
    summary = [line for line in logs.info if line.startswith("c=")]
    assert len(summary) == 2 and all("TTFT p50" in s and "req/s" in s for s in summary)
    assert "success 100.0%" in summary[0]
    (run_dir,) = (tmp_path / "l4").iterdir()
    assert run_dir.name.endswith("Z-serving")  # <UTC timestamp>-<resource name>
    assert {"run.json", "cells.jsonl", "report.md"} <= {p.name for p in run_dir.iterdir()}
    assert any(str(run_dir) in line for line in logs.info)
    assert "l4 meets its SLOs in every measured cell" in logs.info


def test_slow_server_misses_the_slo_with_a_warning(tmp_path: Path) -> None:
    logs = Logs()
    fake = FakeVllmConfig(served_model_name=MODEL, ttft_s=0.25, itl_s=0.001, output_tokens=4)
    with FakeVllmServer(fake) as server:
        cfg = config(tmp_path, slo=SloSettings(sloP95TtftMs=100))  # type: ignore[call-arg]
        assert call_hook(server.url, cfg, logs) is None
    (warning,) = logs.warn
    assert "l4 misses its SLOs" in warning and "sloP95TtftMs p95_ttft_ms" in warning
    assert "set benchmarkFailOnSlo" in warning


def test_slow_server_fails_up_when_the_stack_enforces_slos(tmp_path: Path) -> None:
    logs = Logs()
    fake = FakeVllmConfig(served_model_name=MODEL, ttft_s=0.25, itl_s=0.001, output_tokens=4)
    with FakeVllmServer(fake) as server:
        cfg = config(tmp_path, slo=SloSettings(sloP95TtftMs=100), fail_on_slo=True)  # type: ignore[call-arg]
        error = call_hook(server.url, cfg, logs)
    assert isinstance(error, BenchmarkFailedError)
    assert "sloP95TtftMs" in str(error) and "needs <= 100" in str(error)


def test_unreachable_server_fails_within_the_deadline(tmp_path: Path, closed_port: int) -> None:
    """At the first refused request, with its reason: not when the budget (an hour) or the
    probe's 60 s run out, which would say "did not answer a first request in time"."""
    port = closed_port
    error = call_hook(f"http://127.0.0.1:{port}", config(tmp_path, budget_s=3600.0), Logs())
    assert isinstance(error, BenchmarkFailedError)
    assert "cannot benchmark" in str(error) and "connection" in str(error)
    assert not (tmp_path / "l4").exists()  # no sweep started


class LateMetrics(FakeVllmServer):
    """Reads its counters a second after a /metrics request came: as a scrape that reaches the
    server late on a busy machine, while the client goes on."""

    async def _metrics_handler(self, request: Any) -> Any:
        await asyncio.sleep(1.0)
        return await super()._metrics_handler(request)


@pytest.mark.parametrize("server", [FakeVllmServer, LateMetrics])
def test_mtp_acceptance_is_reported(tmp_path: Path, server: type[FakeVllmServer]) -> None:
    """A window's MTP acceptance is the difference of the server's counters at its edges. The
    first edge is read before any measured request is sent, so a late scrape (LateMetrics)
    delays the window instead of missing it: with the scrape racing the requests, a fast server
    answered the whole window first and there was no acceptance to report."""
    logs = Logs()
    fake = FakeVllmConfig(served_model_name=MODEL, output_tokens=16, num_speculative_tokens=3)
    with server(fake) as running:
        grid = Grid(concurrency=(2,), prompt_tokens=(32,), output_tokens=(16,))
        assert call_hook(running.url, config(tmp_path, grid=grid), logs) is None
    (line,) = [line for line in logs.info if line.startswith("c=")]
    assert "MTP acceptance" in line and "mean length" in line


def test_hook_without_a_url_output_fails_clearly(tmp_path: Path) -> None:
    error = call_hook("not-a-url", config(tmp_path), Logs())
    assert isinstance(error, BenchmarkFailedError) and "no endpoint URL" in str(error)


def test_failed_cells_warn_and_no_reflected_key_is_logged_or_written(tmp_path: Path) -> None:
    key = "hook-bench-key-61d0aa"
    logs = Logs()
    fake = FakeVllmConfig(
        served_model_name=MODEL,
        output_tokens=16,
        api_key=key,
        auth_all_paths=False,
        reflect_authorization=True,
        fail_every=3,
    )
    cfg = config(tmp_path)
    with FakeVllmServer(fake) as server:
        error = run_hook(
            lambda: benchmark_hook(
                "l4-benchmark",
                cfg,
                auth=ApiKeyAuth("K", environ={"K": key}),
                log=logs.info.append,
                warn=logs.warn.append,
            ),
            {"uri": server.url},
            stack=cfg.stack,
        )
    assert error is None
    (warning,) = logs.warn
    assert "is failed: success rate" in warning
    written = "".join(
        p.read_text(errors="replace")
        for p in tmp_path.rglob("*")
        if p.is_file() and p.suffix != ".png"
    )
    assert "injected failure" in written  # the failures' bodies are kept ...
    assert key not in written + "\n".join(logs.info + logs.warn)  # ... redacted


def test_summary_line_names_the_client_share_and_a_client_limited_cell() -> None:
    from pathlib import Path

    from bench.hook import summary_lines
    from bench.results.store import RunData

    cell = {
        "id": "c8-p512-o128", "status": "ok", "concurrency": 8, "prompt_tokens": 512,
        "output_tokens": 128, "median_ttft_ms": 210.0, "p95_ttft_ms": 380.0,
        "output_throughput": 412.0, "request_throughput": 3.1, "success_rate": 1.0,
        "client_share_ttft": 0.032, "client_limited": True,
        "warnings": ["the client's event loop lagged 40.0 ms at p99"],
    }  # fmt: skip
    (line,) = summary_lines(RunData(Path("."), {}, [cell]))
    assert line.endswith(
        "success 100.0%, client share of TTFT 3.2% "
        "(client-limited: the client's event loop lagged 40.0 ms at p99)"
    )
