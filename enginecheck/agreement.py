"""The benchmark's figures against the real server's own, for the same requests. Pure.

:func:`cell_problems` checks one cell record of ``gemma4 bench run`` (the client's figures and
the deltas of vLLM's ``/metrics`` histograms over the cell's window) by the rules of
docs/engine-check.md, step 4. Means, not medians: the histograms' sums are exact, their
buckets too coarse for a median.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.load.window import ClientLimits

__all__ = ["TOLERANCE", "cell_problems", "cell_summary", "run_problems"]

#: Client and server means within 10 % of the server's.
TOLERANCE = 0.10
#: A difference of at most this many milliseconds is agreement whatever its share: the same
#: absolute limit under which the benchmark never marks a cell client-limited
#: (bench.load.window.ClientLimits.min_client_gap_ms). vLLM's TTFT histogram starts when the
#: engine receives the request, after the API server parsed and tokenized it: a few ms on a
#: busy CPU that the client rightly sees and the histogram does not.
ABSOLUTE_SLACK_MS = ClientLimits().min_client_gap_ms


def _num(record: Mapping[str, Any], key: str) -> float | None:
    value = record.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def cell_summary(record: Mapping[str, Any]) -> str:
    """One line: the cell, the client's and the server's TTFT and ITL means."""
    parts = [str(record.get("id"))]
    for key, name in (("ttft", "TTFT"), ("itl", "ITL")):
        client = _num(record, f"client_mean_{key}_ms")
        server = _num(record, f"server_mean_{key}_ms")
        if client is not None and server is not None:
            parts.append(f"{name} client {client:.2f} ms / server {server:.2f} ms")
    prompt = record.get("median_prompt_tokens")
    parts.append(f"prompt {prompt} tokens (asked {record.get('prompt_tokens')})")
    rate = _num(record, "spec_decode_acceptance_rate")
    if rate is not None:
        parts.append(f"acceptance {rate:.1%}")
    if record.get("client_limited"):
        parts.append("client-limited")
    return ", ".join(parts)


def cell_problems(
    record: Mapping[str, Any],
    *,
    agreeing_drafter_tokens: int | None = None,
    tolerance: float = TOLERANCE,
) -> list[str]:
    """What does not agree in one cell record, one sentence each (empty: it agrees)."""
    cell = str(record.get("id"))
    out: list[str] = []
    if record.get("status") != "ok":
        problems = "; ".join(str(p) for p in record.get("problems") or [])
        out.append(f"{cell}: status {record.get('status')} ({problems})")
    asked = record.get("prompt_tokens")
    counted = record.get("median_prompt_tokens")
    if not isinstance(asked, int) or not isinstance(counted, int):
        out.append(f"{cell}: no prompt length as the server counted it")
    elif abs(counted - asked) > 0.02 * asked:
        out.append(f"{cell}: prompts of {counted} tokens as the server counted them, {asked} asked")
    if not record.get("client_limited"):
        for key, name in (("ttft", "TTFT"), ("itl", "ITL")):
            client = _num(record, f"client_mean_{key}_ms")
            server = _num(record, f"server_mean_{key}_ms")
            if client is None or server is None:
                out.append(f"{cell}: no {name} from the server's /metrics to compare with")
                continue
            gap = abs(client - server)
            if gap > max(tolerance * server, ABSOLUTE_SLACK_MS):
                out.append(
                    f"{cell}: mean {name} {client:.2f} ms by the client, {server:.2f} ms by the "
                    f"server ({gap / server:.0%} apart; at most {tolerance:.0%})"
                )
    if agreeing_drafter_tokens is not None:
        rate = _num(record, "spec_decode_acceptance_rate")
        length = _num(record, "spec_decode_acceptance_length")
        if rate is None or length is None:
            out.append(f"{cell}: no speculative-decoding figures in /metrics")
        else:
            if rate < 0.999:
                out.append(
                    f"{cell}: acceptance {rate:.2%} with a drafter that always agrees (100 %)"
                )
            if abs(length - (agreeing_drafter_tokens + 1)) > 0.01:
                out.append(
                    f"{cell}: mean accepted length {length:.2f}, "
                    f"{agreeing_drafter_tokens + 1} expected"
                )
    return out


def run_problems(
    cells: list[dict[str, Any]], *, agreeing_drafter_tokens: int | None = None
) -> list[str]:
    """Every cell's problems, and one more when no cell could be judged on latency (every
    cell client-limited or failed): nothing compared is not agreement."""
    problems: list[str] = []
    for cell in cells:
        problems += cell_problems(cell, agreeing_drafter_tokens=agreeing_drafter_tokens)
    if not any(c.get("status") == "ok" and not c.get("client_limited") for c in cells):
        problems.append("every cell was client-limited or failed: no TTFT or ITL was compared")
    return problems
