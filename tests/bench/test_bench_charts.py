"""Charts are drawn only from measured cells (checked on what was plotted, not pixels)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.reports.charts import cell_number, plan_charts, render_chart, write_charts
from bench.reports.latency_charts import latency_plans, render_latency
from tests.bench._cells import cell, write_run


def test_lines_only_for_measured_contexts_and_points() -> None:
    cells = [
        cell(1, 128),
        cell(8, 128),
        cell(64, 128, status="skipped"),
        cell(1, 4096, status="skipped"),
        cell(8, 4096, status="skipped"),
    ]
    plans = {p.filename: p for p in plan_charts(cells)}
    lines = plans["lines-request_throughput-o16.png"]
    assert [s.label for s in lines.series] == ["128 prompt tokens"]  # no 4096 line
    assert lines.series[0].x == (1.0, 8.0)  # no point at 64 (skipped)
    assert lines.series[0].y == (1.0, 8.0)
    drawn = render_chart(lines, None)
    assert drawn == [("128 prompt tokens", [1.0, 8.0], [1.0, 8.0])]


def test_heatmap_rows_and_columns_only_where_measured() -> None:
    cells = [
        cell(1, 128),
        cell(8, 2048),
        cell(8, 128, status="skipped"),
        cell(64, 4096, status="skipped"),
    ]
    heat = {p.filename: p for p in plan_charts(cells)}["heatmap-request_throughput-o16.png"]
    assert heat.rows == (1, 8)  # 64 never measured
    assert heat.columns == (128, 2048)  # 4096 never measured
    assert heat.values == ((1.0, None), (None, 8.0))
    assert heat.notes[1][0] == "skipped"
    drawn = render_chart(heat, None)
    assert drawn[0][2][0] == 1.0 and math.isnan(drawn[0][2][1])
    assert math.isnan(drawn[1][2][0]) and drawn[1][2][1] == 8.0


def test_nothing_measured_nothing_drawn(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", [cell(1, 128, status="skipped")], label="x", hardware=None)
    assert plan_charts(run.cells) == []
    assert write_charts(run) == []


def test_pngs_written(tmp_path: Path) -> None:
    cells = [cell(1, 128, p95_itl_ms=12.0), cell(8, 128, p95_itl_ms=14.0)]
    run = write_run(tmp_path / "r", cells, label="x", hardware=None)
    written = write_charts(run)
    # 3 heatmaps, 3 lines against concurrency, 4 latency-against-throughput charts.
    assert len(written) == 10
    assert sum(1 for p in written if p.name.startswith("latency-")) == 4
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)


@pytest.mark.parametrize(("suffix", "starts"), [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_the_file_name_chooses_the_format_and_a_redraw_is_byte_identical(
    tmp_path: Path, suffix: str, starts: bytes
) -> None:
    """``charts/*.png`` for a run; the docs draw the same charts as SVG (the browser check
    reads an SVG's labels), identical on every build from the same run."""
    cells = [cell(1, 128, p95_itl_ms=12.0), cell(8, 128, p95_itl_ms=14.0)]
    chart = next(p for p in plan_charts(cells, label="x") if p.kind == "heatmap")
    latency = latency_plans([("x", cells)])[0]
    for n in (1, 2):
        render_chart(chart, tmp_path / f"heatmap-{n}{suffix}")
        render_latency(latency, tmp_path / f"latency-{n}{suffix}")
    for name in ("heatmap", "latency"):
        first = (tmp_path / f"{name}-1{suffix}").read_bytes()
        assert first.startswith(starts)
        assert (tmp_path / f"{name}-2{suffix}").read_bytes() == first


@pytest.mark.parametrize(
    ("value", "shown"),
    [(1063.4, "1063"), (100.0, "100"), (99.95, "100"), (12.46, "12.5"), (0.4213, "0.421")],
)
def test_a_heatmap_number_is_never_in_exponent_form(value: float, shown: str) -> None:
    assert cell_number(value) == shown


def test_a_runs_latency_chart_names_the_run_in_its_title() -> None:
    """The run's label on each chart of a run, as on its heatmaps and lines (the docs' label
    says the run was against a fake server); charts comparing runs name them in the legend."""
    cells = [cell(1, 128), cell(8, 128)]
    plans = latency_plans([("paced fake server", cells)])
    assert plans and all(
        p.title.endswith("16 output tokens, closed loop, paced fake server") for p in plans
    )
    compared = latency_plans([("l4", cells), ("rtx", cells)], by_prompt=False)
    assert all(p.title.endswith("16 output tokens, closed loop") for p in compared)
