"""Runs side by side: deltas, cost per million requests, output files and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import compare_runs, cost_per_million_requests, load_run
from bench.cli import main
from serving.hardware import HARDWARE
from tests.bench._cells import cell, write_run


def test_cost_per_million_requests_formula() -> None:
    assert cost_per_million_requests(3.6, 10.0) == pytest.approx(100.0)
    assert cost_per_million_requests(3.6, 0.0) is None


def _two_runs(tmp_path: Path) -> tuple[Path, Path]:
    a = tmp_path / "l4"
    b = tmp_path / "rtx"
    write_run(
        a, [cell(1, 128), cell(8, 128), cell(8, 4096, status="skipped")], label="l4", hardware="l4"
    )
    write_run(
        b,
        [
            cell(1, 128, request_throughput=2.0),
            cell(8, 128, request_throughput=12.0),
            cell(8, 4096, request_throughput=6.0),
        ],
        label="rtx",
        hardware="rtx-pro-6000",
    )
    return a, b


def test_deltas_and_costs(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    comparison = compare_runs([load_run(a), load_run(b)])
    data = comparison.as_dict()
    cells = {c["id"]: c for c in data["cells"]}
    assert cells["c8-p128-o16"]["request_throughput"] == [8.0, 12.0]
    assert cells["c8-p128-o16"]["request_throughput_delta_percent"][1] == pytest.approx(50.0)
    assert cells["c1-p128-o16"]["request_throughput_delta_percent"][1] == pytest.approx(100.0)
    assert cells["c8-p4096-o16"]["request_throughput"] == ["skipped", 6.0]
    assert cells["c8-p4096-o16"]["request_throughput_delta_percent"] == [None, None]
    l4 = HARDWARE["l4"].price.usd_per_hour
    rtx = HARDWARE["rtx-pro-6000"].price.usd_per_hour
    assert cells["c8-p128-o16"]["cost_per_million_requests"] == [
        pytest.approx(l4 / (3600 * 8) * 1e6),
        pytest.approx(rtx / (3600 * 12) * 1e6),
    ]
    runs = data["runs"]
    assert runs[0]["best_cell"] == "c8-p128-o16"
    assert runs[1]["cost_per_million_requests_at_best"] == pytest.approx(rtx / (3600 * 12) * 1e6)
    md = comparison.markdown()
    assert "| c8-p128-o16 | 8.00 | 12.00 (+50.0%) |" in md
    assert "| c8-p4096-o16 | skipped | 6.00 |" in md


def test_explicit_price_wins(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    comparison = compare_runs([load_run(a), load_run(b)], prices={"rtx": 3.6})
    assert comparison.prices[1] == 3.6


def test_compare_charts_only_measured(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    plans = {p.filename: p for p in compare_runs([load_run(a), load_run(b)]).chart_plans()}
    p4096 = plans["compare-request_throughput-p4096-o16.png"]
    assert [s.label for s in p4096.series] == ["rtx"]  # l4 skipped that context


def test_compare_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _two_runs(tmp_path)
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    assert "| c8-p128-o16 | 8.00 | 12.00 (+50.0%) |" in capsys.readouterr().out
    assert json.loads((out / "compare.json").read_text())["baseline"] == "l4"
    assert any(p.name.startswith("compare-") for p in (out / "charts").iterdir())
    assert main(["compare", str(a)]) == 2
    assert main(["compare", str(a), str(tmp_path / "missing")]) == 2
    assert main(["compare", str(a), str(b), "--price", "oops"]) == 2
