"""The CLI against a fake vLLM server: each failure mode ends in a failed check with its reason."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from healthchecks.cli import main
from tests.healthchecks._helpers import FAST, MODEL, ServerFactory

ROOT = Path(__file__).resolve().parents[2]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*FAST, *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, dict[str, Any]]]:
    code, out, _ = _run(capsys, *argv, "--json")
    document = json.loads(out)
    (target,) = document["targets"]
    assert document["ok"] is (code == 0)
    return code, {c["name"]: c for c in target["checks"]}


def test_healthy_server_passes_with_table(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(num_speculative_tokens=3, ttft_s=0.01)
    code, out, _ = _run(capsys, "--url", server.url, "--model", MODEL)
    assert code == 0
    assert out.count("PASS") == 4 and "FAIL" not in out
    assert "healthy" in out and "spec decode acceptance" in out


def test_healthy_json_carries_figures(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(output_tokens=7, num_speculative_tokens=2)
    code, checks = _json(capsys, "--url", server.url, "--model", MODEL)
    assert code == 0
    assert all(c["ok"] for c in checks.values())
    assert checks["chat"]["data"]["completion_tokens"] == 7
    assert checks["chat"]["data"]["latency_s"] > 0
    assert checks["metrics"]["data"]["generation_tokens_total"] == 7
    assert checks["metrics"]["data"]["spec_decode"]["num_drafts"] == 3


def test_cold_start_waits_then_passes(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(cold_start_503s=3)
    code, out, err = _run(capsys, "--url", server.url, "--model", MODEL)
    assert code == 0
    assert "after 4 attempt(s)" in out
    assert err.count("waiting for /health: loading (HTTP 503: Service Unavailable)") == 3


def test_never_ready_fails_and_skips_the_rest(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(cold_start_503s=10_000)
    code = main(
        [
            "--url",
            server.url,
            "--model",
            MODEL,
            "--json",
            "--timeout-seconds",
            "0.5",
            "--backoff-max-seconds",
            "0.05",
        ]
    )
    document = json.loads(capsys.readouterr().out)
    checks = {c["name"]: c for c in document["targets"][0]["checks"]}
    assert code == 1
    assert checks["readiness"]["detail"].startswith("not ready after")
    assert "last: loading (HTTP 503: Service Unavailable)" in checks["readiness"]["detail"]
    for name in ("models", "chat", "metrics"):
        assert checks[name] == {
            **checks[name],
            "ok": False,
            "detail": "not reached: readiness failed",
        }


def test_refused_connection_is_retried_for_the_grace_only(capsys, closed_port: int) -> None:
    # The deadline is an hour: the check ends at the grace (it says so), never at the deadline.
    code, checks = _json(
        capsys,
        "--url",
        f"http://127.0.0.1:{closed_port}",
        "--model",
        MODEL,
        "--timeout-seconds",
        "3600",
        "--refused-grace-seconds",
        "0.5",
        "--backoff-max-seconds",
        "0.1",
    )
    assert code == 1
    detail = checks["readiness"]["detail"]
    assert detail.startswith("not listening: connection refused")
    assert "the refused-connection grace" in detail
    assert "check the port in the URL" in detail
    assert checks["readiness"]["data"]["attempts"] > 1


def test_401_without_credentials(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(api_key="secret-token")
    code, out, _ = _run(capsys, "--url", server.url, "--model", MODEL)
    assert code == 1
    assert "credentials rejected (HTTP 401)" in out
    assert len(server.requests) == 1  # a 401 is not retried


def test_wrong_model(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm()
    code, checks = _json(capsys, "--url", server.url, "--model", "google/gemma-4-31B-it")
    assert code == 1
    assert checks["readiness"]["ok"]
    assert "'google/gemma-4-31B-it' not listed" in checks["models"]["detail"]
    assert checks["chat"]["detail"] == (
        "chat completion answered HTTP 404: The model `google/gemma-4-31B-it` does not exist."
    )


def test_empty_completion(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(empty_completion=True)
    code, checks = _json(capsys, "--url", server.url, "--model", MODEL)
    assert code == 1
    assert checks["chat"]["detail"].startswith("empty completion (finish_reason=stop")
    assert checks["models"]["ok"] and checks["metrics"]["ok"]


def test_timeout(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(hang_paths=("/v1/models",))
    # The models check hangs to the deadline; before it only one /health (a few ms even on a
    # loaded machine, 1.5 s allowed), after it nothing is tried.
    code, checks = _json(capsys, "--url", server.url, "--model", MODEL, "--timeout-seconds", "1.5")
    assert code == 1
    assert checks["readiness"]["ok"]
    assert checks["models"]["detail"].startswith("timed out")
    for name in ("chat", "metrics"):
        assert checks[name]["detail"] == "not reached: the deadline had passed"
    assert [q.path for q in server.requests] == ["/health", "/v1/models"]


def test_request_timeout_shorter_than_deadline(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(hang_paths=("/metrics",))
    # Long enough for the chat to answer on a loaded machine; the hang never answers.
    code, checks = _json(
        capsys, "--url", server.url, "--model", MODEL, "--request-timeout-seconds", "1"
    )
    assert code == 1
    assert checks["chat"]["ok"]
    assert checks["metrics"]["detail"].startswith(
        "timed out (SocketTimeoutError: Timeout on reading"
    )


def test_malformed_metrics(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(malformed_metrics=True)
    code, checks = _json(capsys, "--url", server.url, "--model", MODEL)
    assert code == 1
    assert checks["metrics"]["detail"].startswith("malformed /metrics: not Prometheus text")
    assert checks["chat"]["ok"]


def test_connection_dropped_mid_stream(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(drop_after_chunks=3, output_tokens=10)
    code, checks = _json(capsys, "--url", server.url, "--model", MODEL)
    assert code == 1
    assert checks["chat"]["detail"].startswith("connection dropped mid-stream after 3 chunk(s)")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", "http://127.0.0.1:1"], "--url needs --model"),
        (["--url", "ftp://x", "--model", "m"], "must be an http(s) URL"),
        (["--url", "http://h", "--model", "m", "--auth", "api-key"], "needs --api-key-env"),
        (["--url", "http://h", "--model", "m", "--timeout-seconds", "0"], "at least 0.001"),
    ],
)
def test_usage_errors_exit_2(capsys, argv: list[str], message: str) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_argparse_errors_exit_2(capsys) -> None:
    assert main(["--model", "m"]) == 2  # neither --url nor -s
    assert "one of the arguments --url -s/--stack is required" in capsys.readouterr().err


def _fake_pulumi(tmp_path: Path, outputs: Mapping[str, object]) -> None:
    script = tmp_path / "pulumi"
    log = tmp_path / "argv.txt"
    script.write_text(
        f"#!/bin/sh\necho \"$@\" > {log}\ncat <<'JSON'\n{json.dumps(outputs)}\nJSON\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_stack_outputs_cloud_run(fake_vllm: ServerFactory, capsys, tmp_path, monkeypatch) -> None:
    server = fake_vllm()
    _fake_pulumi(tmp_path, {"service_url": server.url, "served_model_name": MODEL})
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    # A Cloud Run stack defaults to ID-token auth; this local URL is public, so say none.
    code, checks = _json(capsys, "-s", "dev", "--auth", "none")
    assert code == 0, checks
    argv = (tmp_path / "argv.txt").read_text().split()
    assert argv == ["stack", "output", "--json", "--show-secrets=false", "-s", "dev"]


def test_stack_outputs_tpu_checks_each_endpoint(
    fake_vllm: ServerFactory, capsys, tmp_path, monkeypatch
) -> None:
    healthy = fake_vllm(api_key="k1", auth_all_paths=False)
    broken = fake_vllm(api_key="k1", auth_all_paths=False, empty_completion=True)
    outputs = {
        "endpoint_urls": [healthy.url, broken.url],
        "served_model_name": MODEL,
        "api_key_secret": "vllm-api-key",
    }
    _fake_pulumi(tmp_path, outputs)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert main(["-s", "tpu", *FAST]) == 2
    assert "Secret Manager secret 'vllm-api-key'" in capsys.readouterr().err
    monkeypatch.setenv("HC_TEST_KEY", "k1")
    code, out, _ = _run(capsys, "-s", "tpu", "--api-key-env", "HC_TEST_KEY", "--json")
    document = json.loads(out)
    assert code == 1
    assert [t["ok"] for t in document["targets"]] == [True, False]
    assert "k1" not in out


def test_stack_without_pulumi_cli(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["-s", "dev"]) == 2
    assert "the pulumi CLI was not found on PATH" in capsys.readouterr().err


def test_cli_as_subprocess(fake_vllm: ServerFactory) -> None:
    ok = fake_vllm()
    dropping = fake_vllm(drop_after_chunks=1)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "250"}
    for server, expected in ((ok, 0), (dropping, 1)):
        done = subprocess.run(
            [sys.executable, "-m", "healthchecks", "--url", server.url, "--model", MODEL, *FAST],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == expected, done.stdout + done.stderr
        assert "Traceback" not in done.stdout + done.stderr
    assert "connection dropped mid-stream after 1 chunk(s)" in done.stdout


def test_check_logic_does_not_import_pulumi() -> None:
    code = "import sys, healthchecks, healthchecks.cli; print('pulumi' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"
