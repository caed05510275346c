"""The sweep reports the client's share per cell, marks client-limited cells, draws them."""

from __future__ import annotations

import csv
import json
from collections.abc import AsyncGenerator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from matplotlib import colormaps
from matplotlib.colors import Normalize

from bench import Grid, SweepOptions, compare_runs, run_sweep
from bench.cli import main
from bench.reports.charts import ChartPlan, contrast_ratio, heatmap_labels
from bench.reports.tables import render_report
from bench.results.store import RunData
from endpoint.auth import AuthError, AuthStrategy
from tests.bench._cells import cell, write_run
from tests.bench.conftest import MODEL, ServerFactory

FAST = SweepOptions(num_requests=8, warmup=1, timeout_s=5.0, progress=False, charts=False)


def test_sweep_records_the_server_view_beside_the_client(
    fake_vllm: ServerFactory, tmp_path: Path
) -> None:
    server = fake_vllm(ttft_s=0.05, itl_s=0.01, output_tokens=6)
    options = replace(FAST, charts=True)
    run = run_sweep(server.url, MODEL, Grid((1, 4), (16,), (6,)), tmp_path / "r", options=options)
    for c in run.cells:
        assert c["status"] == "ok"
        # The fake exports vLLM's histograms: the server measured every request of the window.
        assert c["server_ttft_count"] >= 8
        assert c["server_mean_ttft_ms"] >= 50.0
        # The client's view, in the same unit: never before the pacing (the fake sends nothing
        # before the first token), and more by however loaded the machine is, so only a gross
        # mismatch (seconds read as milliseconds) is ruled out. Not floored at the server's
        # figure: the server stamps its first write once it has the GIL back, which a loaded
        # machine can delay past the client's read of that write.
        assert c["client_mean_ttft_ms"] >= 50.0 - 1.0
        assert c["client_mean_ttft_ms"] < c["server_mean_ttft_ms"] + 5000.0
        assert c["client_share_ttft"] == pytest.approx(
            max(
                0.0,
                (c["client_mean_ttft_ms"] - c["server_mean_ttft_ms"]) / c["client_mean_ttft_ms"],
            )
        )
        assert c["server_mean_itl_ms"] is not None and c["client_share_itl"] is not None
        assert c["workers"] == 1 and c["untimed_requests"] >= 1
        assert c["p99_loop_lag_ms"] is not None and c["mean_in_flight"] is not None
        assert isinstance(c["client_limited"], bool) and isinstance(c["warnings"], list)
        assert c["coalesced_tokens"] >= 0
    four = run.cells[1]
    assert four["ramp_s"] > 0  # the four streams started one after another
    assert four["max_in_flight"] <= 4
    out = tmp_path / "r"
    report = (out / "report.md").read_text()
    assert "## Client share" in report
    header = next(csv.reader((out / "results.csv").read_text().splitlines()))
    assert {"client_share_ttft", "server_mean_itl_ms", "p99_loop_lag_ms", "client_limited"} <= set(
        header
    )
    meta = json.loads((out / "run.json").read_text())
    assert meta["client"]["hot_path"].startswith("aiohttp")
    assert (out / "charts" / "latency-p95_ttft_ms-o6.png").is_file()


def test_a_client_limited_cell_is_marked_in_every_table(tmp_path: Path) -> None:
    limited = cell(
        64, 128, client_limited=True, warnings=["the client's event loop lagged 40.0 ms at p99"],
        client_mean_ttft_ms=150.0, server_mean_ttft_ms=100.0, client_share_ttft=1 / 3,
        p99_loop_lag_ms=40.0, max_loop_lag_ms=55.0, mean_in_flight=64.0, server_in_flight=51.0,
        coalesced_tokens=12, coalesced_share=0.01, workers=1,
    )  # fmt: skip
    fine = cell(1, 128, client_limited=False, warnings=[], client_share_ttft=0.01)
    run = write_run(tmp_path / "r", [fine, limited], label="x", hardware=None)
    report = render_report(RunData(run.path, run.run, run.cells))
    assert "| 64 | 64.00 † |" in report  # request throughput matrix
    assert "| 1 | 1.00 |" in report
    assert "| c64-p128-o16 | 150.0 / 100.0 | +33.3% |" in report
    assert "- c64-p128-o16: the client's event loop lagged 40.0 ms at p99" in report
    assert "1 client-limited cell(s)" in report


def test_heatmap_numbers_are_readable_on_every_colour() -> None:
    values = ((0.0, 25.0, 50.0, 75.0, 100.0), (None, 10.0, 90.0, 55.0, 45.0))
    plan = ChartPlan(
        "h.png", "heatmap", "t", "x", "y", rows=(1, 2), columns=(1, 2, 3, 4, 5),
        values=values, notes=(("",) * 5, ("skipped", "", "", "", "")),
    )  # fmt: skip
    labels = heatmap_labels(plan, colormaps["viridis"], Normalize(0.0, 100.0))
    assert len(labels) == 10
    black, white = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    for label in labels:
        rgb = black if label.color == "black" else white
        assert contrast_ratio(rgb, label.background) >= 4.5, label
    skipped = next(x for x in labels if x.text == "skipped")
    assert skipped.color == "black"  # on the white of a blank cell
    colours = {x.color for x in labels}
    assert colours == {"black", "white"}  # viridis runs from dark to light


def test_compare_draws_latency_against_throughput_per_run(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", [cell(1, 128), cell(8, 128)], label="l4", hardware=None)
    b = write_run(
        tmp_path / "b", [cell(1, 128), cell(8, 128, client_limited=True)], label="rtx",
        hardware=None,
    )  # fmt: skip
    written = compare_runs([a, b]).write(tmp_path / "cmp")
    markdown = (tmp_path / "cmp" / "compare.md").read_text()
    assert "| c8-p128-o16 | 8.00 | 8.00 † (+0.0%) |" in markdown
    names = {p.name for p in written}
    assert "compare-latency-p95_ttft_ms-o16.png" in names
    plans = compare_runs([a, b]).latency_plans()
    assert [s.label for s in plans[0].series] == ["l4", "rtx"]
    assert plans[0].series[1].limited == (False, True)


class _LostCredentials(AuthStrategy):
    """Control calls went through; by the time the cell asks, the credentials are gone."""

    description = "lost"

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        yield request

    def headers(self) -> dict[str, str]:
        raise AuthError("the token could not be refreshed")


def test_credentials_that_cannot_be_had_fail_the_cell_as_auth(
    fake_vllm: ServerFactory, tmp_path: Path
) -> None:
    server = fake_vllm(output_tokens=2)
    options = SweepOptions(
        num_requests=3, warmup=0, timeout_s=5.0, progress=False, preflight=False, charts=False
    )
    run = run_sweep(
        server.url, MODEL, Grid((1,), (8,), (2,)), tmp_path / "r", options=options,
        auth=_LostCredentials(),
    )  # fmt: skip
    (c,) = run.cells
    assert (c["status"], c["failed"], c["errors"]["auth"]) == ("failed", 3, 3)
    assert not [q for q in server.requests if q.path == "/v1/completions"]


def test_cli_client_options_reach_the_run(fake_vllm: ServerFactory, tmp_path: Path) -> None:
    server = fake_vllm(output_tokens=2)
    out = tmp_path / "r"
    argv = [
        "run", "--url", server.url, "--model", MODEL, "--out", str(out), "--concurrency", "2",
        "--prompt-tokens", "8", "--output-tokens", "2", "--num-requests", "4", "--no-progress",
        "--no-charts", "--workers", "1", "--ramp-seconds", "0", "--client-share-limit", "0.5",
        "--max-loop-lag-ms", "25",
    ]  # fmt: skip
    assert main(argv) in (0, 1)
    meta = json.loads((out / "run.json").read_text())
    assert meta["client"]["workers"] == 1 and meta["client"]["ramp_s"] == 0.0
    assert meta["client"]["client_limits"]["max_client_share"] == 0.5
    assert meta["client"]["client_limits"]["max_loop_lag_ms"] == 25.0
    (c,) = [json.loads(line) for line in (out / "cells.jsonl").read_text().splitlines()]
    assert c["ramp_s"] == 0.0 and c["workers"] == 1


def test_run_prints_client_and_server_means_per_cell(
    fake_vllm: ServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = fake_vllm(ttft_s=0.02, itl_s=0.005, output_tokens=4)
    argv = [
        "run", "--url", server.url, "--model", MODEL, "--out", str(tmp_path / "r"),
        "--concurrency", "2", "--prompt-tokens", "8", "--output-tokens", "4",
        "--num-requests", "4", "--no-progress", "--no-charts",
    ]  # fmt: skip
    main(argv)
    err = capsys.readouterr().err
    assert "c2-p8-o4: mean TTFT" in err and "(server " in err and "client share" in err


def test_multi_token_chunks_are_not_a_client_share(
    fake_vllm: ServerFactory, tmp_path: Path
) -> None:
    """With speculative decoding a step streams several tokens in one chunk; vLLM observes its
    ITL once per step. The client's ITL is compared per step too, so an idle client shows no
    share however many tokens a chunk carries (per token its mean would be a quarter of the
    server's here). Checked through what holds on any machine: the server's samples are one
    per step, and the client's per-step mean is bounded by the pacing and its own E2E."""
    server = fake_vllm(ttft_s=0.05, itl_s=0.02, output_tokens=16, tokens_per_chunk=4)
    run = run_sweep(server.url, MODEL, Grid((1,), (16,), (16,)), tmp_path / "r", options=FAST)
    (c,) = run.cells
    assert c["status"] == "ok"
    # Four chunks of 4 tokens: 3 ITL samples per request at the server, not 15.
    assert c["server_itl_count"] == 3 * c["server_ttft_count"] > 0
    # Per request, TTFT plus the client's 3 step gaps is the time from sending to reading the
    # last chunk: at least the server's pacing (the last chunk is due 50 + 12 x 20 ms after
    # the request arrived), at most E2E. A per-token mean (12 gaps) would fall far below the
    # floor on an idle machine, a step miscounted would exceed the ceiling.
    itl, ttft, e2e = c["client_mean_itl_ms"], c["client_mean_ttft_ms"], c["client_mean_e2el_ms"]
    assert 50.0 + 12 * 20.0 - 1.0 <= ttft + 3 * itl <= e2e + 1e-6
    assert c["client_share_itl"] == pytest.approx(max(0.0, (itl - c["server_mean_itl_ms"]) / itl))
