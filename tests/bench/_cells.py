"""Synthetic cell records for the report, chart, compare and gate tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.reports.tables import write_tables
from bench.results.store import CellKey, RunData, RunStore


def cell(c: int, p: int, o: int = 16, *, status: str = "ok", **figures: Any) -> dict[str, Any]:
    key = CellKey(c, p, o)
    record: dict[str, Any] = {"id": key.id, "status": status, "skip_reason": None, **key.as_dict()}
    if status == "skipped":
        record["skip_reason"] = "too long"
        return record
    record.update(
        {
            "completed": 10,
            "failed": 0,
            "success_rate": 1.0,
            "errors": {},
            "request_throughput": float(c),
            "output_throughput": float(c * o),
            "p95_ttft_ms": 100.0 + p / 10,
            "median_ttft_ms": 90.0,
            "median_itl_ms": 10.0,
            "p95_e2el_ms": 1000.0 + c,
            "request_goodput": float(c),
        }
    )
    record.update(figures)
    return record


def write_run(
    path: Path, cells: list[dict[str, Any]], *, label: str, hardware: str | None
) -> RunData:
    """A run of ``cells`` whose stored grid is the cross product of their keys."""
    grid = {
        "concurrency": sorted({c["concurrency"] for c in cells}),
        "prompt_tokens": sorted({c["prompt_tokens"] for c in cells}),
        "output_tokens": sorted({c["output_tokens"] for c in cells}),
        "request_rates": [None],
    }
    store = RunStore.open(
        path,
        {"model": "m", "url": "http://x", "label": label, "hardware": hardware, "grid": grid},
        resume=False,
    )
    for record in cells:
        store.append_cell(record)
    write_tables(store.data())
    store.close()
    return RunData(store.path, store.run, store.cells)
