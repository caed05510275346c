"""Latency against throughput: one curve per series, the SLO line, client-limited cells."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.reports.latency_charts import latency_plans, render_latency, slo_ttft_ms


def _cell(c: int, p: int, tput: float, ttft: float, limited: bool = False) -> dict[str, Any]:
    return {
        "id": f"c{c}-p{p}-o64", "status": "ok", "concurrency": c, "prompt_tokens": p,
        "output_tokens": 64, "request_rate": None, "output_throughput": tput,
        "median_ttft_ms": ttft, "p95_ttft_ms": ttft * 1.5, "median_itl_ms": 20.0,
        "p95_itl_ms": 30.0, "client_limited": limited,
    }  # fmt: skip


def test_run_chart_has_a_curve_per_prompt_length_the_slo_and_marked_cells(
    tmp_path: Path,
) -> None:
    cells = [
        _cell(8, 128, 800.0, 120.0),
        _cell(1, 128, 100.0, 100.0),
        _cell(64, 128, 3000.0, 900.0, limited=True),
        _cell(1, 2048, 90.0, 300.0),
        {
            "id": "c8-p2048-o64",
            "status": "skipped",
            "concurrency": 8,
            "prompt_tokens": 2048,
            "output_tokens": 64,
            "request_rate": None,
        },
    ]
    plans = latency_plans([("run", cells)], slo_ms=1000.0)
    names = [p.filename for p in plans]
    assert names == [
        "latency-median_ttft_ms-o64.png",
        "latency-p95_ttft_ms-o64.png",
        "latency-median_itl_ms-o64.png",
        "latency-p95_itl_ms-o64.png",
    ]
    p95 = plans[1]
    assert p95.slo_ms == 1000.0 and plans[0].slo_ms is None and plans[3].slo_ms is None
    drawn = render_latency(p95, tmp_path / p95.filename)
    assert (tmp_path / p95.filename).stat().st_size > 0
    assert drawn["slo"] == 1000.0
    assert drawn["lines"][0] == (
        "128 prompt tokens",
        [100.0, 800.0, 3000.0],
        [150.0, 180.0, 1350.0],
    )
    assert drawn["lines"][1] == ("2048 prompt tokens", [90.0], [450.0])  # skipped cell left out
    assert drawn["limited"] == [(3000.0, 1350.0)]


def test_compare_draws_one_curve_per_run() -> None:
    a = [_cell(1, 128, 100.0, 100.0), _cell(8, 128, 700.0, 130.0)]
    b = [_cell(1, 128, 120.0, 90.0), _cell(8, 128, 900.0, 110.0, limited=True)]
    plans = latency_plans([("l4", a), ("rtx", b)], prefix="compare-latency", by_prompt=False)
    drawn = render_latency(plans[0], None)
    assert [label for label, _, _ in drawn["lines"]] == ["l4", "rtx"]
    assert drawn["limited"] == [(900.0, 110.0)]
    assert drawn["slo"] is None


def test_slo_from_run_metadata() -> None:
    assert slo_ttft_ms({"options": {"goodput_slo": {"ttft": 2000.0}}}) == 2000.0
    assert slo_ttft_ms({"slo": {"ttft": 1500}}) == pytest.approx(1500.0)
    assert slo_ttft_ms({}) is None
