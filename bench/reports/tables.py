"""A run's tables: ``results.csv`` (one row per cell) and ``report.md`` (matrices per output
length and request rate, the client share, errors, failed, spec-decode and skipped cells)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any

from bench.results.record import ERROR_KINDS
from bench.results.store import (
    MEASURED_STATUSES,
    STATS,
    CellKey,
    RunData,
    cell_order,
    slices,
    write_atomic,
)
from endpoint.redact import redact

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
    *(f"{stat}_{metric}_ms" for metric in ("ttft", "tpot", "itl", "e2el") for stat in STATS),
    *(f"errors_{kind}" for kind in ERROR_KINDS),
    "total_input_tokens",
    "total_output_tokens",
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
    "prompt_tokens_method",
    "prompt_tokens_exact",
    *(
        name
        for m in ("ttft", "itl", "e2el")
        for name in (f"client_mean_{m}_ms", f"server_mean_{m}_ms", f"client_share_{m}")
    ),
    "server_in_flight",
    "mean_in_flight",
    "min_in_flight",
    *(f"{stat}_loop_lag_ms" for stat in ("mean", "p99", "max")),
    "coalesced_tokens",
    "coalesced_share",
    "client_cpu_ms_per_request",
    "workers",
    "ramp_s",
    "untimed_requests",
    "client_limited",
)


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
    status = record.get("status")
    if status == "skipped":
        return "skipped"
    if status == "short" and metric not in ("success_rate",):
        # Measured at another output length than the label says: no figure under this label.
        return f"short ({_num(record.get('mean_output_tokens'))} tok)"
    value = record.get(metric)
    if value is None:
        return "n/a"
    text = fmt.format(value)
    if record.get("client_limited") and metric != "success_rate":
        text += CLIENT_LIMITED_MARK
    return f"{text} FAILED" if status == "failed" else text


CLIENT_LIMITED_MARK = " †"
"""After a figure of a client-limited cell: the client's figure, not the server's."""


def _ms(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "n/a"


def _share(value: Any) -> str:
    return f"{value:+.1%}" if isinstance(value, int | float) else "n/a"


def client_share_markdown(cells: Sequence[dict[str, Any]]) -> list[str]:
    """The client-share table of measured cells and the warnings of client-limited ones."""
    rows = [c for c in cells if c.get("status") in MEASURED_STATUSES and "client_limited" in c]
    if not rows:
        return []
    lines = [
        "## Client share (the server's own histograms over each cell's window)",
        "",
        "Server figures are the means of vLLM's `vllm:time_to_first_token_seconds` and "
        "`vllm:inter_token_latency_seconds` over the cell's measured window (`/metrics` read "
        "at its start and end); the share is (client - server) / client, and holds the network "
        "between client and server too. In flight: asked / kept by the client / seen by the "
        "server (Little's law on `vllm:e2e_request_latency_seconds`). Coalesced: output tokens "
        "that arrived in one network read with an earlier chunk (their ITL is the read's gap "
        f"shared, never zero). {CLIENT_LIMITED_MARK.strip()} marks a client-limited cell in "
        "every table of this report.",
        "",
        "| cell | TTFT client / server ms | share | ITL client / server ms | share "
        "| coalesced | loop lag p99 / max ms | in flight | client CPU ms/req | workers "
        "| client-limited |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in sorted(rows, key=cell_order):
        in_flight = (
            f"{c.get('concurrency')} / {_ms(c.get('mean_in_flight'))} / "
            f"{_ms(c.get('server_in_flight'))}"
        )
        coalesced = c.get("coalesced_share")
        lines.append(
            f"| {c['id']} | {_ms(c.get('client_mean_ttft_ms'))} / "
            f"{_ms(c.get('server_mean_ttft_ms'))} | {_share(c.get('client_share_ttft'))} | "
            f"{_ms(c.get('client_mean_itl_ms'))} / {_ms(c.get('server_mean_itl_ms'))} | "
            f"{_share(c.get('client_share_itl'))} | "
            f"{c.get('coalesced_tokens', 0)}"
            + (f" ({coalesced:.1%})" if isinstance(coalesced, int | float) else "")
            + f" | {_ms(c.get('p99_loop_lag_ms'))} / {_ms(c.get('max_loop_lag_ms'))} | "
            f"{in_flight} | {_ms(c.get('client_cpu_ms_per_request'))} | "
            f"{c.get('workers', 1)} | {'yes' if c.get('client_limited') else 'no'} |"
        )
    lines.append("")
    limited = [c for c in rows if c.get("client_limited")]
    if limited:
        lines += ["Client-limited cells: their figures are the client's, not the server's.", ""]
        for c in sorted(limited, key=cell_order):
            lines.append(f"- {c['id']}: " + "; ".join(c.get("warnings") or []))
        lines.append("")
    return lines


def _num(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "?"


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


def _client_line(run: dict[str, Any], cells: Sequence[dict[str, Any]]) -> str:
    client = run.get("client") or {}
    limited = sum(1 for c in cells if c.get("client_limited"))
    return (
        f"- client: {client.get('hot_path', 'aiohttp')}, staggered start not measured; "
        f"{limited} client-limited cell(s), marked {CLIENT_LIMITED_MARK.strip()}"
    )


def render_report(data: RunData) -> str:
    """The markdown report of a run."""
    run = data.run
    lines = [
        f"# Benchmark: {run.get('model')} ({data.label})",
        "",
        f"- endpoint: `{redact(str(run.get('url')))}`; "
        f"hardware: {run.get('hardware') or 'not recorded'}",
        f"- started {run.get('created_at')}; schema version {run.get('schema_version')}",
        f"- cells: {len(data.measured())} measured "
        f"({sum(1 for c in data.cells if c.get('status') == 'failed')} failed, "
        f"{sum(1 for c in data.cells if c.get('status') == 'short')} short), "
        f"{sum(1 for c in data.cells if c.get('status') == 'skipped')} skipped"
        + (f", {len(data.missing_ids())} not run" if data.missing_ids() else ""),
        f"- a cell passes when its success rate is at least "
        f"{run.get('options', {}).get('min_success_rate', 1.0)}; FAILED marks one that did not, "
        "short one whose responses were shorter than its output length",
        f"- per-request timeout {run.get('options', {}).get('timeout_s')} s; warm-up "
        f"{run.get('options', {}).get('warmup')} requests per cell",
        "- latencies over successful requests; percentiles by linear interpolation (type 7); "
        "ITL per output token; output tokens from the server's usage",
        _client_line(run, data.cells),
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
    for output_tokens, rate in slices(data.cells):
        load = "closed loop" if rate is None else f"open loop, {rate:g} requests/s (Poisson)"
        lines += [f"## {output_tokens} output tokens, {load}", ""]
        for metric, title, fmt in _MATRICES:
            lines += [
                f"### {title}",
                "",
                matrix_markdown(data.cells, metric, fmt, output_tokens, rate),
                "",
            ]
    lines += client_share_markdown(data.cells)
    errors = [c for c in data.measured() if c.get("failed")]
    if errors:
        lines += ["## Errors", "", "| cell | failed | by kind |", "|---|---:|---|"]
        for c in sorted(errors, key=cell_order):
            kinds = ", ".join(f"{k} {n}" for k, n in (c.get("errors") or {}).items() if n)
            lines.append(f"| {c['id']} | {c['failed']} | {kinds} |")
        lines.append("")
    troubled = [c for c in data.measured() if c.get("problems")]
    if troubled:
        lines += ["## Cells that did not pass", ""]
        for c in sorted(troubled, key=cell_order):
            lines.append(f"- {c['id']} ({c.get('status')}): " + "; ".join(c["problems"]))
            for sample in (c.get("failure_samples") or [])[:3]:
                lines.append(
                    f"  - {sample.get('kind')}, HTTP {sample.get('status')}: "
                    f"`{str(sample.get('error')).replace('`', chr(39))}`"
                )
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


def write_tables(data: RunData) -> None:
    """Rewrite ``results.csv`` and ``report.md`` from the run's finished cells."""
    write_atomic(data.path / CSV_FILE, render_csv(data.cells))
    write_atomic(data.path / REPORT_FILE, render_report(data))
