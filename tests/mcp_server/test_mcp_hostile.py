"""The MCP server against hostile upstreams and hostile folders, over a real stdio session:
every credential goes only where it belongs, no secret comes out in part at any cut, no tool
outlives its deadline, no body or file is read past a cap, and no result names a local path.

The hostile server is one loopback aiohttp application standing in for the model endpoint and
for the Google APIs; ``MODE`` tells it, per test, how to misbehave.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from mcp import StdioServerParameters

from bench.cli import main as bench_main
from tests.bench._cells import cell, write_run
from tests.mcp_server.conftest import (
    API_KEY,
    HF_TOKEN,
    ID_TOKEN,
    PROJECT,
    ROOT,
    McpClient,
    server_params,
)
from tests.support.fake_vllm import FakeVllmConfig, FakeVllmServer

MODEL = "google/gemma-4-12B-it-qat-w4a16-ct"
TEST_DEADLINE_S = 1.0
"""Every tool's deadline in the server the deadline tests call (``hostile["deadline_client"]``);
the other tests call a server with the real deadlines (60 s and more), so that nothing they
expect depends on finishing within these three seconds on a loaded machine."""

GITHUB = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
SLACK = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrSt"
PASSPHRASE = "correct horse battery staple 42"
SHAPED = "Qm9vT2tZ3xR7pL1sW8vN4cK6"  # a credential-shaped value in an innocent name
PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB"
    "AAAAMwAAAAtzc2gtZWQyNTUxOQAAACDplantedPemBodyXq\n-----END OPENSSH PRIVATE KEY-----"
)
PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGVplantedPgpBodyAbCdEf0123456789\n=Xy12\n"
    "-----END PGP PRIVATE KEY BLOCK-----"
)
AWS = "AKIAQWERTYUIOPASDF12"
CMDLINE_KEY = "cmdlineKeyQwErTy123"
TOKENS = {
    "github": GITHUB,
    "slack": SLACK,
    "hf": HF_TOKEN,
    "passphrase": PASSPHRASE,
    "shaped": SHAPED,
    "pem": PEM,
    "pgp": PGP,
    "aws": AWS,
    "cmdline": f"--api-key {CMDLINE_KEY}",
}

MODE: dict[str, Any] = {}


def _pieces(secret: str) -> list[str]:
    """Distinctive pieces of ``secret``: any 8 consecutive characters of its secret part."""
    body = {
        PEM: "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQyNTUxOQAAACD"
        "plantedPemBodyXq",
        PGP: "lQOYBGVplantedPgpBodyAbCdEf0123456789",
        f"--api-key {CMDLINE_KEY}": CMDLINE_KEY,
    }.get(secret, secret)
    prefixes = ("ghp_", "xoxb-", "hf_", "AKIA")
    for prefix in prefixes:
        body = body.removeprefix(prefix)
    return [body[i : i + 8] for i in range(0, max(1, len(body) - 7))]


def assert_no_piece(text: str, secrets: Any = None) -> None:
    for secret in TOKENS.values() if secrets is None else secrets:
        for piece in _pieces(secret):
            assert piece not in text, (piece, secret[:12])


def straddling(secret: str, cut: int, filler: str = "x") -> str:
    """A text whose secret's middle lies at ``cut`` (an offset where a cut splits it)."""
    start = max(0, cut - len(secret) // 2)
    return filler * start + " " + secret + " tail"


# The hostile server ---------------------------------------------------------------------------


async def _drip(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    while True:
        await response.write(b" ")
        await asyncio.sleep(1.0)


async def _models(request: web.Request) -> web.StreamResponse:
    mode = MODE.get("models")
    if mode == "drip":
        return await _drip(request)
    if mode == "endless":
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        chunk = b"[" * (1 << 20)
        for _ in range(400):  # 400 MiB unless the client stops reading
            await response.write(chunk)
        return response
    if isinstance(mode, str):
        return web.Response(status=500, text=mode)
    return web.json_response({"data": [{"id": MODEL, "max_model_len": 32768}]})


async def _metrics(request: web.Request) -> web.Response:
    return web.Response(
        body=MODE["gzip_bomb"], headers={"Content-Encoding": "gzip", "Content-Type": "text/plain"}
    )


async def _health(request: web.Request) -> web.Response:
    return web.Response(text="")


async def _chat(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    if MODE.get("chat") == "comments":
        while True:
            await response.write(b": keep-alive\n\n")
            await asyncio.sleep(0.2)
    content = MODE["chat"]
    chunk = {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}
    await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
    done = {
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
    await response.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())
    return response


async def _google(request: web.Request) -> web.StreamResponse:
    mode = MODE.get("google")
    if mode == "drip":
        return await _drip(request)
    if mode == "endless":
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for _ in range(400):  # 400 MiB unless the client stops reading
            await response.write(b" " * (1 << 20))
        return response
    if mode == "locations":
        return web.json_response(
            {"locations": [{"locationId": f"zone-{i}"} for i in range(20_000)]}
        )
    if mode == "entries":
        return web.json_response({"entries": MODE["entries"]})
    if isinstance(mode, str):
        return web.json_response(
            {"error": {"code": 403, "message": mode, "status": "PERMISSION_DENIED"}}, status=403
        )
    return web.json_response({"error": {"code": 500, "message": "no mode"}}, status=500)


class Hostile:
    def __init__(self) -> None:
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/v1/models", _models)
        app.router.add_get("/metrics", _metrics)
        app.router.add_get("/health", _health)
        app.router.add_post("/v1/chat/completions", _chat)
        app.router.add_route("*", "/{version:v2[a-z0-9]*}/{tail:.*}", _google)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


@pytest.fixture(scope="module")
def hostile(world: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A second project folder whose two stacks point at the hostile server, and two MCP
    servers with secrets in their environment: ``client`` with the real tool deadlines,
    ``deadline_client`` with every deadline shortened to :data:`TEST_DEADLINE_S`."""
    server = Hostile()
    server.start()
    MODE["gzip_bomb"] = gzip.compress(b"0" * (64 << 20), compresslevel=9)
    tmp = world["tmp"] / "hostile"
    root = tmp / "project"
    root.mkdir(parents=True)
    for name in ("Pulumi.yaml", "Pulumi.l4.yaml", "Pulumi.tpu-v6e1.yaml"):
        shutil.copy(ROOT / name, root / name)
    outputs = tmp / "outputs"
    outputs.mkdir()
    (outputs / "l4.json").write_text(
        json.dumps(
            {
                "service_url": server.url,
                "service_name": "gemma-l4-vllm",
                "served_model_name": MODEL,
                "vllm_command_line": f"vllm serve /mnt/models/m --api-key {CMDLINE_KEY} "
                f"--port=8080 --hf-token={HF_TOKEN}",
            }
        )
    )
    (outputs / "tpu-v6e1.json").write_text(
        json.dumps(
            {
                "endpoint_urls": [server.url],
                "node_names": ["gemma-tpu-v6e1-tpu-0-node"],
                "served_model_name": MODEL,
            }
        )
    )

    def params(*extra: str) -> StdioServerParameters:
        params = server_params(
            world,
            "--endpoint-auth",
            "none",
            "--run-api-url",
            server.url,
            "--tpu-api-url",
            server.url,
            "--logging-api-url",
            server.url,
            *extra,
        )
        args = list(params.args)
        args[args.index("--root") + 1] = str(root)
        args[args.index("--outputs-dir") + 1] = str(outputs)
        params.args = args
        assert params.env is not None
        params.env["PULUMI_CONFIG_PASSPHRASE"] = PASSPHRASE
        params.env["CI_BUILD_VALUE"] = SHAPED
        return params

    client = McpClient(params())
    deadline_client = McpClient(params("--tool-deadline-s", str(TEST_DEADLINE_S)))
    yield {
        "client": client,
        "deadline_client": deadline_client,
        "root": root,
        "server": server,
        "tmp": tmp,
    }
    deadline_client.close()
    client.close()
    server.stop()


# 1. Each target's credential is decided by the target -----------------------------------------


def _auth_seen(fake: FakeVllmServer, since: int) -> set[str | None]:
    return {r.authorization for r in fake.requests[since:]}


@pytest.mark.parametrize("api_key_env", [True, False])
def test_each_endpoint_gets_only_its_own_credential(
    world: dict[str, Any], api_key_env: bool
) -> None:
    cloud_run, tpu = world["cloud_run"], world["tpu"]
    extra = ("--api-key-env", "VLLM_KEY") if api_key_env else ()
    params = server_params(world, *extra)
    assert params.env is not None
    params.env["VLLM_KEY"] = API_KEY
    client = McpClient(params)
    try:
        seen_run, seen_tpu = len(cloud_run.requests), len(tpu.requests)
        for stack in ("l4", "tpu-v6e1"):
            assert client.ok("health_check", {"stack": stack, "deadline_seconds": 30})["ok"]
            client.ok("model_details", {"stack": stack})
            client.ok("query_model", {"stack": stack, "prompt": "hi", "max_tokens": 4})
        # Cloud Run got the ID token for its URL, and never the vLLM key.
        assert _auth_seen(cloud_run, seen_run) == {f"Bearer {ID_TOKEN}"}
        # The TPU node got the vLLM key (from the variable or Secret Manager), never a token.
        assert _auth_seen(tpu, seen_tpu) <= {f"Bearer {API_KEY}", None}
        assert f"Bearer {API_KEY}" in _auth_seen(tpu, seen_tpu)
        described = client.ok("stack_endpoints", {"stack": "l4"})["endpoints"][0]["auth"]
        assert "ID token" in described or "id token" in described.lower()
    finally:
        client.close()


def test_endpoint_auth_none_sends_no_credential(world: dict[str, Any]) -> None:
    tpu = world["tpu"]
    client = McpClient(server_params(world, "--endpoint-auth", "none", "--api-key-env", "X"))
    try:
        seen = len(tpu.requests)
        client.call("model_details", {"stack": "tpu-v6e1"})
        assert _auth_seen(tpu, seen) == {None}
    finally:
        client.close()


@pytest.mark.parametrize("mode", ["id-token", "api-key"])
def test_endpoint_auth_modes_that_would_misroute_are_usage_errors(
    world: dict[str, Any], mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from mcp_server.cli import main

    assert main(["--endpoint-auth", mode, "--root", str(world["root"])]) == 2
    assert "--endpoint-auth" in capsys.readouterr().err


# 2. Redaction before every cut ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TOKENS))
@pytest.mark.parametrize("cut", [300, 296, 304])
def test_echoed_error_bodies_never_show_part_of_a_secret(
    hostile: dict[str, Any], name: str, cut: int
) -> None:
    MODE["models"] = straddling(TOKENS[name], cut)
    text = hostile["client"].error("model_details", {"stack": "l4"})
    assert "HTTP 500" in text
    assert_no_piece(text, [TOKENS[name]])


@pytest.mark.parametrize("name", sorted(TOKENS))
def test_google_error_messages_cut_after_redaction(hostile: dict[str, Any], name: str) -> None:
    MODE["google"] = straddling(TOKENS[name], 300)
    text = hostile["client"].error("service_status", {"stack": "l4"})
    assert "PERMISSION_DENIED" in text
    assert_no_piece(text, [TOKENS[name]])


@pytest.mark.parametrize("cut", [2000, 1995, 2003])
def test_log_entries_cut_after_redaction(hostile: dict[str, Any], cut: int) -> None:
    MODE["google"] = "entries"
    MODE["entries"] = [
        {"severity": "ERROR", "textPayload": straddling(secret, cut)} for secret in TOKENS.values()
    ] + [{"severity": "ERROR", "jsonPayload": {"message": straddling(PEM, cut, "y")}}]
    result = hostile["client"].ok("error_logs", {"stack": "l4", "limit": 20})
    entries = result["entries"]
    assert len(entries) == len(TOKENS) + 1
    assert all(len(e["text"]) <= 2000 for e in entries), str([len(e["text"]) for e in entries])
    assert_no_piece(json.dumps(result))


@pytest.mark.parametrize("name", sorted(TOKENS))
def test_answers_cut_at_200_after_redaction(hostile: dict[str, Any], name: str) -> None:
    MODE["chat"] = straddling(TOKENS[name], 200)
    result = hostile["client"].call("query_model", {"stack": "l4", "prompt": "hi"})
    assert_no_piece(result.model_dump_json(), [TOKENS[name]])


def test_command_lines_and_the_environment_are_redacted(hostile: dict[str, Any]) -> None:
    MODE["models"] = None
    details = hostile["client"].ok("model_details", {"stack": "l4"})
    args = details["configured"]["vllm_args"]
    assert "--api-key" in args and args[args.index("--api-key") + 1] == "[REDACTED]"
    assert_no_piece(json.dumps(details), [CMDLINE_KEY, HF_TOKEN])
    # The environment's passphrase and credential-shaped values, wherever they come back.
    MODE["models"] = f"echo {PASSPHRASE} and {SHAPED}"
    assert_no_piece(hostile["client"].error("model_details", {"stack": "l4"}), [PASSPHRASE, SHAPED])


@pytest.mark.parametrize("cut", [300, 296])
def test_run_labels_cut_after_redaction(hostile: dict[str, Any], cut: int) -> None:
    results = hostile["root"] / "bench-results" / "l4"
    for i, secret in enumerate(TOKENS.values()):
        write_run(
            results / f"2026112{i}T000000Z",
            [cell(1, 128)],
            label=straddling(secret, cut),
            hardware="l4",
        )
    try:
        result = hostile["client"].ok("benchmark_runs", {"stack": "l4", "limit": 50})
        assert len(result["runs"]) == len(TOKENS)
        assert_no_piece(json.dumps(result))
    finally:
        shutil.rmtree(results)


# 3. Deadlines -----------------------------------------------------------------------------------


def _timed_error(client: McpClient, tool: str, arguments: dict[str, Any]) -> tuple[str, float]:
    started = time.monotonic()
    text = client.error(tool, arguments)
    return text, time.monotonic() - started


STOPPED = f"ran past its overall deadline of {TEST_DEADLINE_S:g} s and was stopped"
"""What a tool stopped at the test's deadline says (the real ones are 60 s and more)."""


@pytest.mark.parametrize(
    ("mode", "tool", "arguments"),
    [
        ({"models": "drip"}, "model_details", {"stack": "l4"}),
        ({"google": "drip"}, "service_status", {"stack": "l4"}),
        ({"google": "drip"}, "error_logs", {"stack": "l4"}),
        ({"chat": "comments"}, "query_model", {"stack": "l4", "prompt": "hi"}),
    ],
)
def test_no_tool_outlives_its_deadline(
    hostile: dict[str, Any], mode: dict[str, str], tool: str, arguments: dict[str, Any]
) -> None:
    """The hostile server never ends its answer: the tool's own deadline (the test's one
    second, as its error says, not a real one of 60 s and more) stops it."""
    MODE.update(mode)
    text, took = _timed_error(hostile["deadline_client"], tool, arguments)
    assert STOPPED in text
    assert took >= TEST_DEADLINE_S  # it waited for the deadline (a lower bound: slept)


def test_every_description_states_its_deadline(hostile: dict[str, Any]) -> None:
    for tool in hostile["client"].list_tools():
        assert "Overall deadline: " in (tool.description or ""), tool.name


def test_twenty_thousand_locations_are_refused(hostile: dict[str, Any]) -> None:
    MODE["google"] = "locations"
    text = hostile["client"].error("tpu_zones", {"stack": "tpu-v6e1"})
    assert "more than 200 locations" in text  # refused, not stopped at a deadline
    assert "overall deadline" not in text


# 4. Capped bodies and files ----------------------------------------------------------------------


def test_endless_model_list_is_refused_at_the_cap(hostile: dict[str, Any]) -> None:
    MODE["models"] = "endless"
    text = hostile["client"].error("model_details", {"stack": "l4"})
    assert "larger than 1048576 bytes" in text


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("service_status", {"stack": "tpu-v6e1"}),  # the TPU API client
        ("service_status", {"stack": "l4"}),  # the Cloud Run Admin API
        ("error_logs", {"stack": "l4"}),  # Cloud Logging
    ],
)
def test_endless_google_api_bodies_are_refused_at_the_cap(
    hostile: dict[str, Any], tool: str, arguments: dict[str, Any]
) -> None:
    MODE["google"] = "endless"
    text = hostile["client"].error(tool, arguments)
    assert "larger than 8388608 bytes" in text


def test_gzip_bomb_on_metrics_is_refused(hostile: dict[str, Any]) -> None:
    text = hostile["client"].error("metrics_summary", {"stack": "l4", "window_seconds": 1})
    assert "larger than" in text and "/metrics" in text


def test_hostile_results_folders(hostile: dict[str, Any], tmp_path: Path) -> None:
    results = hostile["root"] / "bench-results" / "l4"
    results.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "outside-run"
    write_run(outside, [cell(1, 128)], label="outside", hardware="l4")
    (results / "linked-out").symlink_to(outside, target_is_directory=True)
    fifo = results / "fifo-run"
    fifo.mkdir()
    os.mkfifo(fifo / "run.json")
    device = results / "device-run"
    write_run(device, [cell(1, 128)], label="device", hardware="l4")
    (device / "cells.jsonl").unlink()
    (device / "cells.jsonl").symlink_to("/dev/zero")
    huge = results / "huge-run"
    write_run(huge, [cell(1, 128)], label="huge", hardware="l4")
    with (huge / "cells.jsonl").open("r+b") as handle:
        handle.truncate(1 << 34)  # 16 GiB, sparse
    write_run(results / "fine", [cell(1, 128)], label="fine", hardware="l4")
    try:
        # Nothing blocks on the FIFO or reads /dev/zero: either would end the call at its
        # deadline, an error, not this result.
        result = hostile["client"].ok("benchmark_runs", {"stack": "l4"})
        assert [r["run"] for r in result["runs"]] == ["l4/fine"]
        problems = " ".join(result["problems"])
        assert "fifo-run/run.json is not a regular file" in problems
        assert "device-run/cells.jsonl is a symbolic link" in problems
        assert "huge-run/cells.jsonl is 17179869184 bytes, over the cap" in problems
        assert str(hostile["root"]) not in json.dumps(result)
        for run in ("l4/linked-out", "l4/fifo-run", "l4/device-run", "l4/../../outside-run"):
            text = hostile["client"].error(
                "compare_benchmarks", {"baseline": run, "other": "l4/fine"}
            )
            assert str(tmp_path) not in text and str(hostile["root"]) not in text
    finally:
        shutil.rmtree(results)


# 5. Paths, hints and the documented run folders -------------------------------------------------


def test_runs_from_the_readme_bench_examples_are_listed_and_compared(
    world: dict[str, Any], hostile: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gemma4 bench run --url ... --out runs/l4-base`` (the README's example) writes a run
    benchmark_runs lists, and compare_benchmarks compares without a local path."""
    root = hostile["root"]
    monkeypatch.chdir(root)
    with FakeVllmServer(FakeVllmConfig(served_model_name=MODEL)) as fake:
        for name in ("l4-base", "l4-mtp-off"):
            code = bench_main(
                [
                    "run",
                    "--url",
                    fake.url,
                    "--model",
                    MODEL,
                    "--concurrency",
                    "1",
                    "--prompt-tokens",
                    "128",
                    "--output-tokens",
                    "16",
                    "--label",
                    name,
                    "--no-progress",
                    "--no-charts",
                    "--out",
                    f"runs/{name}",
                ]
            )
            assert code == 0
    try:
        listed = hostile["client"].ok("benchmark_runs", {})
        ids = {r["run"] for r in listed["runs"]}
        assert {"runs/l4-base", "runs/l4-mtp-off"} <= ids
        compared = hostile["client"].ok(
            "compare_benchmarks", {"baseline": "runs/l4-base", "other": "runs/l4-mtp-off"}
        )
        assert [r["path"] for r in compared["comparison"]["runs"]] == [
            "runs/l4-base",
            "runs/l4-mtp-off",
        ]
        text = json.dumps(compared)
        assert str(root) not in text and str(root.resolve()) not in text
    finally:
        shutil.rmtree(root / "runs")


def test_missing_pulumi_cli_hint_names_what_the_server_takes(world: dict[str, Any]) -> None:
    params = server_params(world)
    args = list(params.args)
    index = args.index("--outputs-dir")
    del args[index : index + 2]
    params.args = args
    client = McpClient(params)
    try:
        text = client.error("stack_endpoints", {"stack": "l4"})
        assert "--outputs-dir" in text
        assert "--url" not in text and "--model" not in text
    finally:
        client.close()


def test_no_local_path_and_no_secret_in_any_hostile_output(hostile: dict[str, Any]) -> None:
    everything = "\n".join(hostile["client"].outputs + hostile["deadline_client"].outputs)
    assert str(hostile["root"]) not in everything
    assert_no_piece(everything)
    assert PROJECT  # the project id is not a secret and may appear


def test_environment_secrets_by_name_and_by_shape_but_not_switches() -> None:
    from mcp_server._redaction import environment_secrets

    found = environment_secrets(
        {
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.a0AfH6SMBplanted",
            "CI_BUILD_VALUE": SHAPED,
            "SOME_GITHUB": GITHUB,
            "AUTH_MODE": "enabled",
            "TOKEN_COUNT": "123456789",
            "PATH": "/usr/local/bin:/usr/bin",
            "GOOGLE_CLOUD_PROJECT": "my-project-123456",
            "GOOGLE_APPLICATION_CREDENTIALS": "/home/me/key.json",
            "DB_PW": "hunter2hunter",
            "SENTRY_DSN": "https://abc123@o1.ingest.sentry.io/42",
            "PWD": "/home/me/work",
            "DATABASE": "postgres://app:CorrectHorse42@db.internal/app",
        }
    )
    assert set(found) == {
        PASSPHRASE,
        "ya29.a0AfH6SMBplanted",
        SHAPED,
        GITHUB,
        "hunter2hunter",
        "https://abc123@o1.ingest.sentry.io/42",
        "postgres://app:CorrectHorse42@db.internal/app",
    }


def test_local_paths_become_relative_only_where_they_are_paths(tmp_path: Path) -> None:
    from mcp_server._deployments import Deployments
    from mcp_server.tools import Tools

    root = tmp_path / "app"
    root.mkdir()
    shutil.copy(ROOT / "Pulumi.l4.yaml", root)
    tools = Tools(Deployments(root=root), None)  # type: ignore[arg-type]
    assert tools.localize(f"read {root}/bench-results/l4/x") == "read bench-results/l4/x"
    assert tools.localize(f"({root})") == "(.)"
    url = f"http://host{root}/x"
    assert tools.localize(url) == url  # a URL path is not a local path
    assert tools.localize(f"{root}x/y") == f"{root}x/y"  # nor is a longer name
    assert tools.localize(str(Path.home() / "f")) == "~/f"
