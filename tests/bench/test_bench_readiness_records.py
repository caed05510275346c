"""A server still loading is waited for; a failed start is kept; run files are checked and
capped when read back (compare and gate echo them)."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from bench.cli import main
from tests.bench._cells import cell, write_run
from tests.bench.conftest import MODEL, ServerFactory, quick_run
from tests.support.fake_vllm import FakeVllmConfig, FakeVllmServer

SMALL = quick_run(2)
GRID = ["--concurrency", "1", "--prompt-tokens", "8", "--output-tokens", "2"]
ROOT = Path(__file__).resolve().parents[2]


def _run(server_url: str, out: Path, *extra: str) -> int:
    model = [] if "--model" in extra else ["--model", MODEL]
    return main(["run", "--url", server_url, "--out", str(out), *model, *SMALL, *GRID, *extra])


def test_a_loading_server_is_waited_for(
    fake_vllm: ServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = fake_vllm(cold_start_503s=2)
    assert _run(server.url, tmp_path / "run") == 0
    assert (tmp_path / "run" / "run.json").is_file()
    assert not (tmp_path / "run" / "preflight.json").exists()


def test_not_ready_within_the_deadline_keeps_why(
    fake_vllm: ServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = fake_vllm(cold_start_503s=1000)
    out = tmp_path / "run"
    assert _run(server.url, out, "--ready-timeout-seconds", "1") == 1
    err = capsys.readouterr().err
    assert "preflight failed" in err and "not ready" in err
    record = json.loads((out / "preflight.json").read_text())
    assert record["status"] is None or record["status"] == 503
    assert "HTTP 503" in record["reason"]
    assert not (out / "run.json").exists()
    cwd = ROOT
    assert main(["gate", str(out), "-s", "l4", "--cwd", str(cwd)]) == 1
    text = capsys.readouterr().out
    assert "preflight failed" in text and "not a benchmark run" not in text


def test_a_failed_preflight_keeps_status_and_body(
    fake_vllm: ServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = fake_vllm()
    out = tmp_path / "run"
    assert _run(server.url, out, "--model", "no-such-model") == 1
    record = json.loads((out / "preflight.json").read_text())
    assert record["status"] == 404
    assert record["body"] and len(record["body"]) <= 400
    assert "no-such-model" in record["reason"]
    assert main(["gate", str(out), "-s", "l4", "--cwd", str(ROOT), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] is False and "preflight failed" in doc["problems"][0]


def test_a_closed_port_is_waited_for_up_to_the_ready_deadline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], closed_port: int
) -> None:
    """vLLM keeps its port closed while it loads: refusals are waited for (not a 2 s grace),
    up to --ready-timeout-seconds, and the failure says it may still be loading."""
    started = time.monotonic()
    url = f"http://127.0.0.1:{closed_port}"
    assert _run(url, tmp_path / "run", "--ready-timeout-seconds", "4") == 1
    assert time.monotonic() - started >= 3.5
    err = capsys.readouterr().err
    assert "loading? port closed" in err and "not ready after" in err
    assert json.loads((tmp_path / "run" / "preflight.json").read_text())["status"] is None


def test_a_server_whose_port_opens_late_is_benchmarked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The port stays closed for 4 s (a loading vLLM), then a server answers: the run waits
    and succeeds."""
    # The port is bound (so connections are refused, as on a closed port) and held the whole
    # time: a port probed and released could be taken by another test before the server binds.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = FakeVllmServer(FakeVllmConfig(served_model_name=MODEL), sock=sock)
    timer = threading.Timer(4.0, server.start)
    timer.start()
    try:
        assert _run(server.url, tmp_path / "run") == 0
    finally:
        timer.join()
        server.stop()
        sock.close()
    assert (tmp_path / "run" / "run.json").is_file()


def test_a_fake_server_whose_port_is_taken_fails_to_start_and_stops_cleanly() -> None:
    """The late-start test above depends on it: a server that cannot bind raises at start, and
    stopping it afterwards leaves no coroutine unawaited for a later test to trip over."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        server = FakeVllmServer(port=int(other.getsockname()[1]))
        with pytest.raises(RuntimeError, match="failed to start"):
            server.start()
        server.stop()


@pytest.mark.parametrize(
    ("field", "value", "exit_status"),
    [
        ("p95_ttft_ms", "fast", 2),
        ("p95_ttft_ms", -5, 2),
        ("success_rate", 2.0, 2),
        ("failed", -3, 2),
        ("completed", 1.5, 2),
        ("p95_ttft_ms", None, 1),  # null is read; the gate fails on the missing figure
    ],
)
def test_a_bad_figure_is_refused_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object, exit_status: int
) -> None:
    run = tmp_path / "run"
    write_run(run, [cell(1, 8, 2)], label="r", hardware="l4")
    with (run / "cells.jsonl").open("a") as handle:
        handle.write(json.dumps({**cell(2, 8, 2), field: value}) + "\n")
    assert main(["gate", str(run), "-s", "l4", "--cwd", str(ROOT)]) == exit_status
    err = capsys.readouterr().err
    if exit_status == 2:
        assert "cells.jsonl, line 2" in err and repr(field) in err
        assert main(["compare", str(run), str(run)]) == 2
        assert "unexpected error" not in capsys.readouterr().err


def test_long_strings_are_capped_when_read_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    write_run(run, [cell(1, 8, 2)], label="L" * 900_000, hardware="H" * 100_000)
    assert main(["gate", str(run), "-s", "l4", "--cwd", str(ROOT)]) in (0, 1)
    gate_out = capsys.readouterr().out
    assert len(gate_out) < 10_000 and "[truncated]" in gate_out
    assert main(["compare", str(run), str(run)]) == 0
    assert len(capsys.readouterr().out) < 50_000


def test_prompts_of_the_wrong_length_fail_the_cell_naming_the_length(
    fake_vllm: ServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without /tokenize the estimate assumes one token a word; with a tokenizer of two or
    more, the server counts longer prompts: the cell fails saying so instead of being
    labelled with the asked length."""
    server = fake_vllm(piece_chars=2)
    out = tmp_path / "run"
    assert _run(server.url, out, "--no-tokenize", "--prompt-tokens", "64") == 1
    cell = json.loads((out / "cells.jsonl").read_text().splitlines()[0])
    assert cell["status"] == "failed"
    assert cell["median_prompt_tokens"] > 64 * 1.02
    assert any("were not 64 tokens as the server counted them" in p for p in cell["problems"])
    # With /tokenize the same server gets prompts of the asked length.
    assert _run(server.url, tmp_path / "exact", "--prompt-tokens", "64") == 0
