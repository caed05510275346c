"""The run directory: what a sweep writes, cell by cell, and how it is read back.

Layout of ``OUT/``:

- ``run.json``: the run's metadata (``schema_version``, tool, creation time, URL, model,
  hardware, label, the grid, the options, how prompts were sized); rewritten when the run ends.
- ``cells.jsonl``: one JSON object per finished cell, appended, flushed and fsynced as the cell
  ends, so an interrupted sweep keeps every finished cell and ``--resume`` runs only the rest.
  A line cut short by a crash is ignored when read back.
- ``results.csv``: the same cells as a flat table (one row per cell, columns :data:`CSV_COLUMNS`).
- ``report.md``: latency and throughput matrices (concurrency x prompt tokens) per output
  length and request rate; skipped cells are marked, cells never measured are left empty.
- ``charts/*.png``: see :mod:`bench.charts`.

A cell record carries the cell's key (``concurrency``, ``prompt_tokens``, ``output_tokens``,
``request_rate``: None for closed loop), ``id``, ``status`` (``"ok"`` or ``"skipped"`` with a
``skip_reason``) and the figures of :func:`bench.stats.summarize` plus
``spec_decode_acceptance_rate``, ``spec_decode_acceptance_length``, ``spec_decode`` (the
deltas), ``achieved_request_rate``, ``prompt_tokens_method`` and ``prompt_tokens_exact``.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CSV_COLUMNS",
    "SCHEMA_VERSION",
    "CellKey",
    "RunData",
    "RunStore",
    "StoreError",
    "cell_order",
    "load_run",
    "render_report",
]

SCHEMA_VERSION = 1
"""Bumped when a field changes meaning or disappears (new fields do not bump it)."""

RUN_FILE = "run.json"
CELLS_FILE = "cells.jsonl"
CSV_FILE = "results.csv"
REPORT_FILE = "report.md"

CSV_COLUMNS = (
    "id",
    "status",
    "skip_reason",
    "concurrency",
    "prompt_tokens",
    "output_tokens",
    "request_rate",
    "achieved_request_rate",
    "completed",
    "failed",
    "success_rate",
    "duration",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "request_goodput",
    *(
        f"{stat}_{metric}_ms"
        for metric in ("ttft", "tpot", "itl", "e2el")
        for stat in ("mean", "median", "std", "p90", "p95", "p99")
    ),
    "errors_timeout",
    "errors_http_status",
    "errors_connection",
    "errors_truncated",
    "errors_protocol",
    "errors_auth",
    "total_input_tokens",
    "total_output_tokens",
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
    "prompt_tokens_method",
    "prompt_tokens_exact",
)


def cell_order(record: dict[str, Any]) -> tuple[int, int, int, float]:
    """Sort key of a cell record (see :meth:`CellKey.order`)."""
    return CellKey.of(record).order()


class StoreError(Exception):
    """A run directory that cannot be used as asked (exists without --resume, wrong schema)."""


@dataclass(frozen=True)
class CellKey:
    """One point of the grid."""

    concurrency: int
    prompt_tokens: int
    output_tokens: int
    request_rate: float | None = None
    """Poisson arrivals per second (open loop); None: closed loop at ``concurrency``."""

    @property
    def id(self) -> str:
        base = f"c{self.concurrency}-p{self.prompt_tokens}-o{self.output_tokens}"
        return base if self.request_rate is None else f"{base}-r{self.request_rate:g}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def order(self) -> tuple[int, int, int, float]:
        """Sort order: concurrency, prompt, output, rate (closed loop first)."""
        rate = -1.0 if self.request_rate is None else self.request_rate
        return (self.concurrency, self.prompt_tokens, self.output_tokens, rate)

    @classmethod
    def of(cls, record: dict[str, Any]) -> CellKey:
        rate = record.get("request_rate")
        return cls(
            int(record["concurrency"]),
            int(record["prompt_tokens"]),
            int(record["output_tokens"]),
            float(rate) if rate is not None else None,
        )


@dataclass
class RunData:
    """A run read back: its metadata and its finished cells, in the order they finished."""

    path: Path
    run: dict[str, Any]
    cells: list[dict[str, Any]]

    @property
    def label(self) -> str:
        return str(self.run.get("label") or self.path.name)

    def measured(self) -> list[dict[str, Any]]:
        return [c for c in self.cells if c.get("status") == "ok"]

    def by_key(self) -> dict[CellKey, dict[str, Any]]:
        return {CellKey.of(c): c for c in self.cells}


def _read_cells(path: Path) -> list[dict[str, Any]]:
    cells: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by an interrupted write
        if isinstance(record, dict) and "id" in record:
            cells[str(record["id"])] = record
    return list(cells.values())


def load_run(path: str | Path) -> RunData:
    """Read a run directory. Raises :class:`StoreError` when it is not one."""
    root = Path(path)
    run_file = root / RUN_FILE
    if not run_file.is_file():
        raise StoreError(f"{root} is not a benchmark run (no {RUN_FILE})")
    try:
        run = json.loads(run_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise StoreError(f"{run_file} is not JSON: {exc}") from exc
    version = run.get("schema_version")
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"{run_file} has schema_version {version!r}; this version reads {SCHEMA_VERSION}"
        )
    return RunData(root, run, _read_cells(root / CELLS_FILE))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


class RunStore:
    """Writes one run directory (see the module docstring)."""

    def __init__(self, path: Path, run: dict[str, Any], cells: list[dict[str, Any]]) -> None:
        self.path = path
        self.run = run
        self.cells = cells

    @classmethod
    def open(cls, path: str | Path, run: dict[str, Any], *, resume: bool) -> RunStore:
        """Start a run in ``path``, or continue the one there with ``resume``.

        A fresh run refuses a directory that already holds one; a resumed run must be of the
        same model and schema (its finished cells are kept; the grid may grow).
        """
        root = Path(path)
        exists = (root / RUN_FILE).exists()
        if exists and not resume:
            raise StoreError(f"{root} already holds a run; pass --resume to continue it")
        if resume and exists:
            previous = load_run(root)
            if previous.run.get("model") != run.get("model"):
                raise StoreError(
                    f"{root} holds a run of model {previous.run.get('model')!r}, "
                    f"not {run.get('model')!r}"
                )
            merged = {**previous.run, **run, "created_at": previous.run.get("created_at")}
            merged["resumed"] = int(previous.run.get("resumed", 0)) + 1
            store = cls(root, merged, previous.cells)
        else:
            root.mkdir(parents=True, exist_ok=True)
            store = cls(root, dict(run), [])
        store.write_run()
        return store

    def finished_ids(self) -> set[str]:
        return {str(c["id"]) for c in self.cells}

    def write_run(self) -> None:
        self.run["schema_version"] = SCHEMA_VERSION
        _write_atomic(self.path / RUN_FILE, json.dumps(self.run, indent=2, sort_keys=True) + "\n")

    def append_cell(self, record: dict[str, Any]) -> None:
        """Append one finished cell to ``cells.jsonl`` and make it durable before returning."""
        line = json.dumps(record, sort_keys=True, allow_nan=False)
        with (self.path / CELLS_FILE).open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.cells = [c for c in self.cells if c.get("id") != record["id"]] + [record]

    def write_tables(self) -> None:
        """Rewrite ``results.csv`` and ``report.md`` from the finished cells."""
        data = RunData(self.path, self.run, self.cells)
        _write_atomic(self.path / CSV_FILE, render_csv(data.cells))
        _write_atomic(self.path / REPORT_FILE, render_report(data))


def _flat(record: dict[str, Any]) -> dict[str, Any]:
    row = dict(record)
    for kind, count in (record.get("errors") or {}).items():
        row[f"errors_{kind}"] = count
    return row


def render_csv(cells: Iterable[dict[str, Any]]) -> str:
    """The cells as CSV text (columns :data:`CSV_COLUMNS`), ordered by key."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for record in sorted(cells, key=cell_order):
        row = _flat(record)
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in CSV_COLUMNS})
    return out.getvalue()


# ----- markdown --------------------------------------------------------------------------------

_MATRICES: tuple[tuple[str, str, str], ...] = (
    ("request_throughput", "Request throughput (requests/s)", "{:.2f}"),
    ("output_throughput", "Output token throughput (tokens/s)", "{:.1f}"),
    ("p95_ttft_ms", "p95 time to first token (ms)", "{:.0f}"),
    ("median_ttft_ms", "Median time to first token (ms)", "{:.0f}"),
    ("median_itl_ms", "Median inter-token latency (ms per token)", "{:.1f}"),
    ("p95_e2el_ms", "p95 end-to-end latency (ms)", "{:.0f}"),
    ("success_rate", "Success rate", "{:.1%}"),
    ("request_goodput", "Goodput (requests/s within the goodput SLO)", "{:.2f}"),
)


def _cell_text(record: dict[str, Any] | None, metric: str, fmt: str) -> str:
    if record is None:
        return ""
    if record.get("status") == "skipped":
        return "skipped"
    value = record.get(metric)
    if value is None:
        return "n/a"
    return fmt.format(value)


def _slices(cells: Sequence[dict[str, Any]]) -> list[tuple[int, float | None]]:
    keys = {(CellKey.of(c).output_tokens, CellKey.of(c).request_rate) for c in cells}
    return sorted(keys, key=lambda k: (k[0], -1.0 if k[1] is None else k[1]))


def matrix_markdown(
    cells: Sequence[dict[str, Any]], metric: str, fmt: str, output_tokens: int, rate: float | None
) -> str:
    """One matrix: rows concurrency, columns prompt tokens, of the cells measured or skipped."""
    keyed = {
        CellKey.of(c): c
        for c in cells
        if CellKey.of(c).output_tokens == output_tokens and CellKey.of(c).request_rate == rate
    }
    concurrencies = sorted({k.concurrency for k in keyed})
    prompts = sorted({k.prompt_tokens for k in keyed})
    lines = [
        "| concurrency | " + " | ".join(f"{p} prompt tokens" for p in prompts) + " |",
        "|---:|" + "---:|" * len(prompts),
    ]
    for c in concurrencies:
        row = [
            _cell_text(keyed.get(CellKey(c, p, output_tokens, rate)), metric, fmt) for p in prompts
        ]
        lines.append(f"| {c} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def render_report(data: RunData) -> str:
    """The markdown report of a run."""
    run = data.run
    lines = [
        f"# Benchmark: {run.get('model')} ({data.label})",
        "",
        f"- endpoint: `{run.get('url')}`; hardware: {run.get('hardware') or 'not recorded'}",
        f"- started {run.get('created_at')}; schema version {run.get('schema_version')}",
        f"- cells: {len(data.measured())} measured, "
        f"{sum(1 for c in data.cells if c.get('status') == 'skipped')} skipped",
        f"- per-request timeout {run.get('options', {}).get('timeout_s')} s; warm-up "
        f"{run.get('options', {}).get('warmup')} requests per cell",
        "- latencies over successful requests; percentiles by linear interpolation (type 7); "
        "ITL per output token; output tokens from the server's usage",
        "",
    ]
    methods = {c.get("prompt_tokens_method") for c in data.measured()}
    if "estimate" in methods:
        lines += [
            "> Prompt sizes are **estimated** (the server has no /tokenize): one token per word "
            "plus BOS. Actual prompt tokens per cell are in `total_input_tokens`.",
            "",
        ]
    skipped = [c for c in data.cells if c.get("status") == "skipped"]
    for output_tokens, rate in _slices(data.cells):
        load = "closed loop" if rate is None else f"open loop, {rate:g} requests/s (Poisson)"
        lines += [f"## {output_tokens} output tokens, {load}", ""]
        for metric, title, fmt in _MATRICES:
            lines += [
                f"### {title}",
                "",
                matrix_markdown(data.cells, metric, fmt, output_tokens, rate),
                "",
            ]
    errors = [c for c in data.measured() if c.get("failed")]
    if errors:
        lines += ["## Errors", "", "| cell | failed | by kind |", "|---|---:|---|"]
        for c in sorted(errors, key=cell_order):
            kinds = ", ".join(f"{k} {n}" for k, n in (c.get("errors") or {}).items() if n)
            lines.append(f"| {c['id']} | {c['failed']} | {kinds} |")
        lines.append("")
    spec = [c for c in data.measured() if c.get("spec_decode_acceptance_rate") is not None]
    if spec:
        lines += [
            "## Speculative decoding (from /metrics deltas over each cell)",
            "",
            "| cell | acceptance rate | mean acceptance length |",
            "|---|---:|---:|",
        ]
        for c in sorted(spec, key=cell_order):
            lines.append(
                f"| {c['id']} | {c['spec_decode_acceptance_rate']:.1%} | "
                f"{c['spec_decode_acceptance_length']:.2f} |"
            )
        lines.append("")
    if skipped:
        lines += ["## Skipped cells", ""]
        lines += [f"- {c['id']}: {c.get('skip_reason')}" for c in sorted(skipped, key=cell_order)]
        lines.append("")
    return "\n".join(lines)
