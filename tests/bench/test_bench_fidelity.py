"""The fidelity script: its paced server's own clock, its table, one end-to-end run."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Iterator

import pytest

from bench.fidelity.cli import main
from bench.fidelity.harness import CellResult, Pacing, table
from bench.fidelity.pacedserver import PacedServer, serving_in_thread


@pytest.fixture
def paced() -> Iterator[tuple[PacedServer, str]]:
    server = PacedServer(ttft_s=0.05, itl_s=0.01, output_tokens=3)
    with serving_in_thread(server) as url:
        yield server, url


def _post(port: int, body: bytes, *, pause_before_body: float = 0.0, stamp: str = "") -> bytes:
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"{stamp}Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(head)
        time.sleep(pause_before_body)
        s.sendall(body)
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


def _timings(url: str) -> list[dict[str, float]]:
    with urllib.request.urlopen(url + "/timings?clear=1") as r:
        return list(json.load(r)["timings"])


BODY = b'{"prompt": "a b c", "max_tokens": 3, "stream": true}'


def test_the_server_times_from_the_first_bytes_it_received(
    paced: tuple[PacedServer, str],
) -> None:
    _server, url = paced
    port = int(url.rsplit(":", 1)[1])
    # A client stamp claiming the request was sent 10 s ago changes nothing.
    data = _post(port, BODY, stamp=f"X-Sent-At: {time.monotonic() - 10}\r\n")
    assert data.count(b"data: ") == 5  # 3 tokens, usage, [DONE]
    assert b'"completion_tokens":3' in data
    (first,) = _timings(url)
    # The pacing is a floor; the stamp would have made it 10 s (a loaded machine may add
    # some, never seconds).
    assert 0.05 <= first["ttft_s"] < 5.0
    # The body arrives 1 s after the head: the server's clock started at the head.
    _post(port, BODY, pause_before_body=1.0)
    (second,) = _timings(url)
    # Counted from the body it would be the pacing alone (0.05 s); a loaded machine may read
    # the head late, so the floor leaves it half the pause.
    assert second["ttft_s"] >= 0.5
    assert _timings(url) == []  # ?clear=1 emptied the log


def test_the_server_exports_its_histograms_as_vllm_does(paced: tuple[PacedServer, str]) -> None:
    from bench.load.server_metrics import histogram_deltas, parse_histograms

    server, url = paced
    port = int(url.rsplit(":", 1)[1])

    def scrape() -> str:
        with urllib.request.urlopen(url + "/metrics") as r:
            return str(r.read().decode())

    before = parse_histograms(scrape(), model_name=server.model)
    _post(port, BODY)
    d = histogram_deltas(before, parse_histograms(scrape(), model_name=server.model))
    assert d["ttft"] is not None and d["ttft"].count == 1
    assert d["itl"] is not None and d["itl"].count == 2
    assert d["e2el"] is not None and d["e2el"].count == 1
    # In seconds, on the clock of the server's log: the two gaps add up to its first to last
    # token (however late a loaded machine fires a timer, which moves a gap, not the sum).
    (timing,) = _timings(url)
    assert d["itl"].sum == pytest.approx(timing["e2e_s"] - timing["ttft_s"], abs=1e-6)
    assert d["ttft"].sum == pytest.approx(timing["ttft_s"], abs=1e-6)
    assert d["e2el"].sum == pytest.approx(timing["e2e_s"], abs=1e-6)
    assert timing["e2e_s"] >= 0.05 + 2 * 0.01  # the last token is never before its time


def _cell(streams: int, bench: float, bare: float, itl: float) -> CellResult:
    return CellResult(
        Pacing(100, 20), streams, 100.0,
        {"median_ttft_ms": bench, "client_mean_itl_ms": itl, "server_mean_itl_ms": 20.0},
        {"median_ttft_ms": bare},
    )  # fmt: skip


def test_table_takes_medians_over_runs_and_judges_targets() -> None:
    runs = [
        [_cell(512, 104.0, 130.0, 20.1), _cell(1024, 150.0, 140.0, 20.0)],
        [_cell(512, 103.0, 120.0, 20.2), _cell(1024, 108.0, 140.0, 21.0)],
        [_cell(512, 190.0, 125.0, 20.3), _cell(1024, 109.0, 140.0, 20.0)],
    ]
    lines = table(runs).splitlines()
    assert "| 100/20 ms | 512 | 100.0 | +4.0% | +25.0% | +1.0% |" in lines[2]
    assert lines[2].endswith("| met |")
    assert "| 100/20 ms | 1024 | 100.0 | +9.0% | +40.0% | +0.0% |" in lines[3]
    worse = table([[_cell(1024, 109.0, 105.0, 20.5)]]).splitlines()[2]
    assert "missed: ITL +2.5% (target 2%); worse than the bare loop" in worse
    noise = table([[_cell(1, 100.4, 100.3, 20.0)]]).splitlines()[2]
    assert noise.endswith("| met |")  # 0.1 point above the bare loop is noise


def test_the_script_runs_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--streams", "2", "--pacings", "20/5", "--min-requests", "4"]) == 0
    out = capsys.readouterr().out
    assert "| 20/5 ms | 2 |" in out
    assert "server pinned" in out or "nothing pinned" in out
