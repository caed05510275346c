"""``python -m bench run`` end to end against a real server on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.cli import main
from tests.bench.conftest import MODEL, ServerFactory, quick_run
from tests.support.fake_vllm import FakeVllmConfig, FakeVllmServer

SMALL = quick_run(3)


def test_run_then_gate(
    fake_vllm: ServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = fake_vllm(output_tokens=4, max_model_len=100)
    out = tmp_path / "run"
    argv = [
        "run",
        "--url",
        server.url,
        "--model",
        MODEL,
        "--concurrency",
        "1,2",
        "--prompt-tokens",
        "8,200",
        "--output-tokens",
        "4",
        "--out",
        str(out),
        "--hardware",
        "l4",
        "--label",
        "fake",
        *SMALL,
    ]
    assert main(argv) == 0
    assert (out / "report.md").is_file() and not (out / "charts").exists()  # --no-charts
    meta = json.loads((out / "run.json").read_text())
    assert (meta["hardware"], meta["label"], meta["max_model_len"]) == ("l4", "fake", 100)
    assert meta["options"]["goodput_slo"] == {"ttft": 2000.0, "e2el": 60000.0}
    cells = [json.loads(x) for x in (out / "cells.jsonl").read_text().splitlines()]
    assert {c["id"]: c["status"] for c in cells} == {
        "c1-p8-o4": "ok",
        "c2-p8-o4": "ok",
        "c1-p200-o4": "skipped",
        "c2-p200-o4": "skipped",
    }
    assert main(["run", "--url", server.url, "--model", MODEL, "--out", str(out), *SMALL]) == 2
    root = Path(__file__).resolve().parents[2]
    # The fake serves another model than the l4 stack: the gate says so and fails, unless told.
    capsys.readouterr()
    assert main(["gate", str(out), "-s", "l4", "--cwd", str(root), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["target_differences"] == [
        f"the run was made against model {MODEL!r}; stack 'l4' serves "
        "'google/gemma-4-12B-it-qat-w4a16-ct'"
    ]
    gate = ["gate", str(out), "-s", "l4", "--cwd", str(root), "--allow-other-target"]
    assert main(gate) == 0
    assert "note (--allow-other-target): the run was made against model" in capsys.readouterr().out


def test_resume_takes_url_and_model_from_the_run(fake_vllm: ServerFactory, tmp_path: Path) -> None:
    server = fake_vllm(output_tokens=2)
    out = tmp_path / "run"
    grid = ["--prompt-tokens", "8", "--output-tokens", "2"]
    base = ["run", "--url", server.url, "--model", MODEL, "--out", str(out), *grid, *SMALL]
    assert main([*base, "--concurrency", "1,2"]) == 0
    cells = out / "cells.jsonl"
    cells.write_text(cells.read_text().splitlines(keepends=True)[0])  # killed after one cell
    # Nothing but --resume: the stored URL, model, grid and options are used.
    assert main(["run", "--resume", "--out", str(out), "--no-progress", "--no-charts"]) == 0
    ids = [json.loads(x)["id"] for x in cells.read_text().splitlines()]
    assert ids == ["c1-p8-o2", "c2-p8-o2"]


def test_burstiness_is_recorded_and_resumed(fake_vllm: ServerFactory, tmp_path: Path) -> None:
    server = fake_vllm(output_tokens=2)
    out = tmp_path / "run"
    grid = ["--prompt-tokens", "8", "--output-tokens", "2", "--concurrency", "4"]
    base = ["run", "--url", server.url, "--model", MODEL, "--out", str(out), *grid, *SMALL]
    assert main([*base, "--request-rate", "20,40", "--burstiness", "0.25"]) == 0
    assert json.loads((out / "run.json").read_text())["options"]["burstiness"] == 0.25
    cells = out / "cells.jsonl"
    cells.write_text(cells.read_text().splitlines(keepends=True)[0])  # killed after one cell
    # The stored rates and burstiness are used; another burstiness is another experiment.
    resume = ["run", "--resume", "--out", str(out), "--no-progress", "--no-charts"]
    assert main([*resume, "--burstiness", "1"]) == 2
    assert main(resume) == 0
    assert len(cells.read_text().splitlines()) == 2


@pytest.mark.parametrize("value", ["0", "-1", "101", "nan", "inf", "x"])
def test_burstiness_out_of_range_is_refused(value: str, tmp_path: Path, capsys) -> None:
    argv = ["run", "--url", "http://h", "--model", "m", "--request-rate", "1"]
    assert main([*argv, "--burstiness", value, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "argument --burstiness" in err
    assert "at most 100" in err or "expected a number" in err
    assert not (tmp_path / "x").exists()


def test_burstiness_needs_an_open_loop(tmp_path: Path, capsys) -> None:
    argv = ["run", "--url", "http://h", "--model", "m", "--burstiness", "0.5"]
    assert main([*argv, "--out", str(tmp_path / "x")]) == 2
    assert "--burstiness shapes open-loop arrivals: it needs --request-rate" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "x").exists()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished run (two cells against a fake server), the same for every test that
    resumes a copy of it with something changed; its server is gone once it is written."""
    server = FakeVllmServer(FakeVllmConfig(output_tokens=2))
    server.start()
    out = tmp_path_factory.mktemp("finished") / "run"
    base = ["--prompt-tokens", "8", "--output-tokens", "2", "--concurrency", "1,2"]
    try:
        assert (
            main(["run", "--url", server.url, "--model", MODEL, "--out", str(out), *base, *SMALL])
            == 0
        )
    finally:
        server.stop()
    return out


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--concurrency", "1"], "grid.concurrency"),
        (["--output-tokens", "4"], "grid.output_tokens"),
        (["--request-timeout-seconds", "7"], "options.timeout_s"),
        (["--min-success-rate", "0.5"], "options.min_success_rate"),
        (["--url", "http://127.0.0.1:9", "--model", MODEL], "url"),
        (["--model", "other"], "model"),
    ],
)
def test_resume_refuses_what_differs(
    finished_run: Path, tmp_path: Path, capsys, extra: list[str], field: str
) -> None:
    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    before = (out / "run.json").read_text()
    assert main(["run", "--resume", "--out", str(out), "--no-progress", *extra]) == 2
    err = capsys.readouterr().err
    assert f"{field}: stored" in err
    assert "Traceback" not in err
    assert (out / "run.json").read_text() == before


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--out", "x"],  # no target
        ["run", "--url", "http://127.0.0.1:1", "--out", "x"],  # no model
        ["run", "--url", "ftp://h", "--model", "m", "--out", "x"],
        ["run", "--url", "http://h", "--model", "m", "--concurrency", "0", "--out", "x"],
        ["run", "--url", "http://h", "--model", "m", "--request-rate", "-1", "--out", "x"],
        ["run", "--url", "http://h", "--model", "m", "--auth", "api-key", "--out", "x"],
        ["run", "--url", "http://h", "--model", "m", "--prompt-tokens", "1", "--out", "x"],
        ["run", "--url", "http://h", "--model", "m", "--prompt-tokens", "9" * 12, "--out", "x"],
        [
            "run",
            "--url",
            "http://h",
            "--model",
            "m",
            "--request-timeout-seconds",
            "inf",
            "--out",
            "x",
        ],
        [
            "run",
            "--url",
            "http://h",
            "--model",
            "m",
            "--request-timeout-seconds",
            "nan",
            "--out",
            "x",
        ],
        ["run", "--url", "http://h", "--model", "m", "--max-cell-seconds", "0", "--out", "x"],
        ["run", "--url", "http://h", "--model", "m", "--request-rate", "inf", "--out", "x"],
        ["run", "--url", "http://h", "--model", "m", "--min-success-rate", "1.5", "--out", "x"],
        ["run", "--url", "http://h", "--model", "m", "--goodput-ttft-ms", "-1", "--out", "x"],
        ["run", "--url", "http://h/v1", "--model", "m", "--out", "x"],
        ["run", "--url", "http://h:8000/v1/", "--model", "m", "--out", "x"],
        ["run", "--url", "http://u:p@h", "--model", "m", "--out", "x"],
        ["run", "--url", "http://h:99999", "--model", "m", "--out", "x"],
        ["run", "--resume", "--out", "x"],  # nothing to resume
        ["bogus"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], tmp_path: Path, capsys) -> None:
    argv = [a if a != "x" else str(tmp_path / "x") for a in argv]
    assert main(argv) == 2
    assert not (tmp_path / "x").exists()
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error" in err
    assert "u:p@" not in err


def test_run_from_stack_outputs(
    fake_vllm: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_vllm(output_tokens=2)
    outputs = {"service_url": server.url, "served_model_name": MODEL}
    monkeypatch.setattr("healthchecks.cli.read_stack_outputs", lambda stack, cwd: outputs)
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "run"
    argv = [
        "run",
        "-s",
        "l4",
        "--cwd",
        str(root),
        "--auth",
        "none",
        "--concurrency",
        "1",
        "--prompt-tokens",
        "8",
        "--output-tokens",
        "2",
        "--out",
        str(out),
        *SMALL,
    ]
    assert main(argv) == 0
    meta = json.loads((out / "run.json").read_text())
    assert (meta["url"], meta["model"], meta["stack"]) == (server.url, MODEL, "l4")
    assert meta["hardware"] == "l4"  # from Pulumi.l4.yaml, for cost in compare


def test_server_gone_exits_1_and_keeps_nothing_broken(tmp_path: Path, closed_port: int) -> None:
    port = closed_port
    out = tmp_path / "run"
    argv = [
        "run",
        "--url",
        f"http://127.0.0.1:{port}",
        "--model",
        MODEL,
        "--concurrency",
        "1",
        "--prompt-tokens",
        "8",
        "--output-tokens",
        "2",
        "--out",
        str(out),
        *SMALL,
        # A closed port may be a server still loading: waited for up to this deadline.
        "--ready-timeout-seconds",
        "2",
    ]
    assert main(argv) == 1
    assert not (out / "run.json").exists()  # the preflight failed before anything was written
