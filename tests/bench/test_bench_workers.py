"""Worker processes: how a cell is dealt out, and how their raw samples merge exactly."""

from __future__ import annotations

import asyncio

import pytest

from bench.load.hotload import (
    LoadPlan,
    WindowLoad,
    merge_loads,
    run_load,
    run_load_in_workers,
    split_plan,
)
from bench.load.hotpath import HotResult, RequestSpec
from bench.load.monitor import MonitorStats
from bench.load.workers import choose_workers, is_loopback
from bench.results.stats import percentile, summarize
from tests.bench.conftest import MODEL, ServerFactory


def _result(sent_at: float, ttft: float, e2e: float = 1.0) -> HotResult:
    return HotResult(
        ok=True, start_s=sent_at, e2e_s=e2e, ttft_s=ttft, itls_s=[0.01, 0.01],
        output_tokens=3, prompt_tokens=4, sent_at=sent_at,
    )  # fmt: skip


def _load(results: list[HotResult], lag: list[float], in_flight: list[int]) -> WindowLoad:
    return WindowLoad(
        results=results,
        first_send=min(r.sent_at for r in results),
        last_end=max(r.sent_at + r.e2e_s for r in results),
        monitor=MonitorStats(0.005, lag, in_flight, 1.0),
        ramp_s=0.5,
        untimed=3,
        send_times=[r.sent_at for r in results],
        cpu_s=0.25,
    )


def test_merge_keeps_every_sample_and_percentiles_come_from_the_union() -> None:
    # A fast worker (many requests, TTFT 0.1 s) and a slow one (few requests, TTFT 1 s).
    fast = _load([_result(100.0 + i * 0.01, 0.1) for i in range(90)], [0.001], [9, 9])
    slow = _load([_result(100.005 + i * 0.1, 1.0) for i in range(10)], [0.05], [1, 1])
    merged = merge_loads([fast, slow])
    assert len(merged.results) == 100
    assert [r.sent_at for r in merged.results] == sorted(r.sent_at for r in merged.results)
    assert merged.first_send == 100.0
    assert merged.last_end == pytest.approx(100.905 + 1.0)
    assert merged.duration_s == pytest.approx(1.905)
    assert merged.monitor.in_flight == [10, 10]
    assert merged.untimed == 6 and merged.workers == 2 and merged.cpu_s == 0.5
    union = [r.ttft_s * 1000 for r in fast.results + slow.results]  # type: ignore[operator]
    summary = summarize(merged.results, merged.duration_s)
    assert summary["p95_ttft_ms"] == pytest.approx(percentile(union, 95))
    assert summary["median_ttft_ms"] == pytest.approx(100.0)
    # Averaging the workers' percentiles would have said 550 ms.
    assert summary["p95_ttft_ms"] != pytest.approx((100.0 + 1000.0) / 2)
    assert summary["request_throughput"] == pytest.approx(100 / 1.905)


def test_split_deals_streams_round_robin_and_splits_requests_and_rate() -> None:
    plan = LoadPlan("http://h/v1/completions", (b"{}",), 1001, 10, metrics_url="http://h/metrics")
    shares = split_plan(plan, 3)
    assert [s.concurrency for s in shares] == [4, 3, 3]
    assert sum(s.num_requests for s in shares) == 1001
    assert [s.stream_offset for s in shares] == [0, 1, 2]
    assert {s.stream_stride for s in shares} == {3} and {s.total_streams for s in shares} == {10}
    assert [s.metrics_url for s in shares] == ["http://h/metrics", None, None]
    assert len({s.seed for s in shares}) == 3
    open_loop = split_plan(LoadPlan("u", (b"{}",), 100, 8, request_rate=9.0), 3)
    assert sum(s.request_rate or 0 for s in open_loop) == pytest.approx(9.0)
    assert len(split_plan(LoadPlan("u", (b"{}",), 100, 2), 8)) == 2


def _plan(url: str, **kw: object) -> LoadPlan:
    body = RequestSpec(MODEL, "hello there", 4).encoded_body
    return LoadPlan(
        url + "/v1/completions", (body,), metrics_url=url + "/metrics", health_url=url,
        **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_one_process_closed_loop_window(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(ttft_s=0.02, itl_s=0.005, output_tokens=4)
    load = asyncio.run(run_load(_plan(server.url, num_requests=12, concurrency=4, warmup=2)))
    assert len(load.results) == 12 and all(r.ok for r in load.results)
    assert load.untimed >= 2  # the warm-up, plus what the ramp sent
    assert load.ramp_s > 0
    assert load.metrics_before is not None and load.metrics_after is not None
    assert load.monitor.in_flight and max(load.monitor.in_flight) <= 4


def test_open_loop_window(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(output_tokens=2)
    plan = _plan(server.url, num_requests=10, concurrency=4, request_rate=200.0, warmup=0)
    load = asyncio.run(run_load(plan))
    assert len(load.results) == 10 and load.offered_rate == 200.0
    assert load.ramp_s == 0.0
    assert load.achieved_rate is not None


def test_two_worker_processes_run_one_cell(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(ttft_s=0.01, itl_s=0.002, output_tokens=4)
    load = run_load_in_workers(_plan(server.url, num_requests=20, concurrency=4), 2)
    assert load.workers == 2
    assert len(load.results) == 20 and all(r.ok for r in load.results)
    assert load.metrics_before is not None  # worker 0 read /metrics
    assert len(load.send_times) == 20


def test_choose_workers() -> None:
    assert choose_workers(64, "http://10.0.0.5:8000", cpus=8) == 1
    assert choose_workers(1024, "http://10.0.0.5:8000", cpus=8) == 4
    assert choose_workers(1024, "https://example.run.app", cpus=2) == 2
    assert choose_workers(1024, "http://127.0.0.1:8000", cpus=2) == 1  # one CPU is the server's
    assert choose_workers(4096, "http://localhost:8000", cpus=4) == 3
    assert is_loopback("http://[::1]:80") and not is_loopback("http://10.1.1.1")
    with pytest.raises(ValueError):
        choose_workers(0, "http://h")


def test_spawned_workers_do_not_run_the_cli_again(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m bench run --workers 2``: spawn imports the parent's main module as
    ``__mp_main__`` in every worker; it must not start another sweep there."""
    import runpy

    import bench.cli

    def boom(*_: object) -> int:
        raise AssertionError("the CLI ran in a worker")

    monkeypatch.setattr(bench.cli, "main", boom)
    runpy.run_module("bench.__main__", run_name="__mp_main__")
    # As the main module it runs the command (through the command line's guard, which says
    # an unexpected error in one line and exits 1).
    with pytest.raises(SystemExit) as ended:
        runpy.run_module("bench.__main__", run_name="__main__")
    assert ended.value.code == 1
    assert "the CLI ran in a worker" in capsys.readouterr().err
