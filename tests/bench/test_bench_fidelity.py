"""The fidelity script's building blocks work end to end (a smoke test, not a timing claim)."""

from __future__ import annotations

import asyncio

import pytest

from bench.fidelity import measure_concurrency, start_fake_server, stop_fake_server


def test_fake_server_process_and_one_cell() -> None:
    proc, url = start_fake_server(ttft_ms=30, itl_ms=5, output_tokens=4)
    try:
        row = asyncio.run(
            measure_concurrency(url, 2, ttft_ms=30, itl_ms=5, output_tokens=4, rounds=1)
        )
    finally:
        stop_fake_server(proc)
    assert (row.requests, row.failed) == (20, 0)
    assert row.server_ttft_ms == pytest.approx(30, abs=10)
    assert row.client_ttft_ms == pytest.approx(30, abs=10)
    assert row.client_itl_ms == pytest.approx(5, abs=2.5)
    assert row.true_e2e_ms == 45
