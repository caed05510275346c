"""An MCP client session over stdio against ``python -m mcp_server`` in a subprocess, with
loopback fakes of vLLM and of the Google APIs.

The world the server sees (one per test module):

- a project folder with the repository's ``Pulumi.yaml``, ``Pulumi.l4.yaml`` and
  ``Pulumi.tpu-v6e1.yaml`` and saved stack outputs (``--outputs-dir``) pointing at two fake
  vLLM servers: ``l4`` (a private Cloud Run service: every path needs the Google ID token) and
  ``tpu-v6e1`` (``vllm serve --api-key`` with the key held in the fake Secret Manager);
- Application Default Credentials from an ``authorized_user`` file whose token URI is the fake
  Google server, which issues the access token (and the user ID token Cloud Run accepts);
- secrets planted where a careless server would leak them: the access token, the ID token, the
  API key, a Hugging Face token in the environment and in log entries.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shutil
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

from tests.bench._cells import cell, write_run
from tests.support.fake_google import FakeGoogle
from tests.support.fake_vllm import FakeVllmConfig, FakeVllmServer

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "test-proj"

ACCESS_TOKEN = "plantedAccessTokenAbc123XYZ"
ID_TOKEN = (
    ".".join(
        base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=")
        for part in ({"alg": "RS256"}, {"exp": 4102444800, "aud": "planted-audience"})
    )
    + ".plantedIdTokenSignatureQwe456Abc"
)
API_KEY = "plantedVllmKeyZxc789VBN"
HF_TOKEN = "hf_PlantedHuggingFaceToken0123"
SECRETS = (ACCESS_TOKEN, ID_TOKEN, API_KEY, HF_TOKEN)

TPU_NODE = "gemma-tpu-v6e1-tpu-0"

FAKE_PREVIEW = f"""
from pathlib import Path

from pydantic import BaseModel


class Preview(BaseModel):
    stack: str
    stack_file: str
    resources: int
    note: str


def build_preview(stack: str, stack_file: Path | None = None) -> Preview:
    if stack == "tpu-v6e1":
        raise ValueError("config key 'zone' is required (token={HF_TOKEN})")
    return Preview(stack=stack, stack_file=str(stack_file), resources=7, note="hf={HF_TOKEN}")
"""


class McpClient:
    """A ClientSession held open in a background event loop; calls block until answered."""

    def __init__(self, params: StdioServerParameters) -> None:
        self._params = params
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._session: ClientSession | None = None
        self._ready: Future[None] = Future()
        self._closing: asyncio.Event | None = None
        self._main = asyncio.run_coroutine_threadsafe(self._run(), self._loop)
        self._ready.result(60)
        self.outputs: list[str] = []
        self.progress: list[tuple[str, float, float | None, str | None]] = []

    async def _run(self) -> None:
        self._closing = asyncio.Event()
        try:
            async with (
                stdio_client(self._params) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                self._session = session
                self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def _do(self, coro: Any, timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def list_tools(self) -> list[Any]:
        assert self._session is not None
        return list(self._do(self._session.list_tools()).tools)

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        assert self._session is not None

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            self.progress.append((name, progress, total, message))

        result: CallToolResult = self._do(
            self._session.call_tool(name, arguments or {}, progress_callback=on_progress)
        )
        self.outputs.append(result.model_dump_json())
        return result

    def ok(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool that must succeed; its structured result."""
        result = self.call(name, arguments)
        text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
        assert not result.isError, f"{name} failed: {text}"
        assert result.structuredContent is not None
        return result.structuredContent

    def error(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        """Call a tool that must fail; its error text."""
        result = self.call(name, arguments)
        assert result.isError, f"{name} should have failed: {result.structuredContent}"
        assert result.content
        return str(result.content[0].text)  # type: ignore[union-attr]

    def close(self) -> None:
        if self._closing is not None:
            self._loop.call_soon_threadsafe(self._closing.set)
        with contextlib.suppress(Exception):  # the server's exit status is not under test
            self._main.result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def _service(project: str) -> dict[str, Any]:
    name = f"projects/{project}/locations/us-east4/services/gemma-l4-vllm"
    return {
        "name": name,
        "uri": "https://gemma-l4-vllm-abc123-uk.a.run.app",
        "reconciling": False,
        "latestReadyRevision": f"{name}/revisions/gemma-l4-vllm-00003-xyz",
        "latestCreatedRevision": f"{name}/revisions/gemma-l4-vllm-00003-xyz",
        "terminalCondition": {
            "type": "Ready",
            "state": "CONDITION_SUCCEEDED",
            "lastTransitionTime": "2026-11-20T10:00:00Z",
        },
        "conditions": [
            {"type": "ConfigurationsReady", "state": "CONDITION_SUCCEEDED"},
            {"type": "RoutesReady", "state": "CONDITION_SUCCEEDED"},
        ],
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("mcp")
    root = tmp / "project"
    root.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.l4.yaml", "Pulumi.tpu-v6e1.yaml"):
        shutil.copy(ROOT / name, root / name)

    google = FakeGoogle(access_token=ACCESS_TOKEN, id_token=ID_TOKEN)
    google.services[f"projects/{PROJECT}/locations/us-east4/services/gemma-l4-vllm"] = _service(
        PROJECT
    )
    google.queued_resources[
        f"projects/{PROJECT}/locations/us-east5-b/queuedResources/{TPU_NODE}"
    ] = {
        "name": f"projects/{PROJECT}/locations/us-east5-b/queuedResources/{TPU_NODE}",
        "state": {"state": "ACTIVE", "stateInitiator": "USER"},
    }
    google.locations = {
        "us-east5-b": [
            {
                "name": f"projects/{PROJECT}/locations/us-east5-b/acceleratorTypes/v6e-1",
                "type": "v6e-1",
                "acceleratorConfigs": [{"type": "V6E", "topology": "1x1"}],
            },
            {
                "name": f"projects/{PROJECT}/locations/us-east5-b/acceleratorTypes/v5litepod-1",
                "type": "v5litepod-1",
            },
        ],
        "europe-west4-a": [
            {
                "name": f"projects/{PROJECT}/locations/europe-west4-a/acceleratorTypes/v6e-1",
                "type": "v6e-1",
                "acceleratorConfigs": [{"type": "V6E", "topology": "1x1"}],
            }
        ],
        "us-central1-a": [
            {
                "name": f"projects/{PROJECT}/locations/us-central1-a/acceleratorTypes/v5p-8",
                "type": "v5p-8",
            }
        ],
    }
    google.log_entries = [
        {
            "logName": f"projects/{PROJECT}/logs/run.googleapis.com%2Fstderr",
            "timestamp": "2026-11-20T10:05:00Z",
            "severity": "ERROR",
            "resource": {
                "type": "cloud_run_revision",
                "labels": {"service_name": "gemma-l4-vllm", "location": "us-east4"},
            },
            "textPayload": f"download failed with token {HF_TOKEN}: 401 Unauthorized "
            f"(Authorization: Bearer {ACCESS_TOKEN}) api_key={API_KEY}; reflected "
            f"{ACCESS_TOKEN} and {API_KEY} bare",
        },
        {
            "logName": f"projects/{PROJECT}/logs/run.googleapis.com%2Fstderr",
            "timestamp": "2026-11-20T10:04:00Z",
            "severity": "CRITICAL",
            "resource": {"type": "cloud_run_revision", "labels": {}},
            "jsonPayload": {"message": "x" * 5000},
        },
    ]
    google.secrets[f"projects/{PROJECT}/secrets/vllm-api-key"] = API_KEY
    google.start()

    # Cloud Run: every path needs the (user) ID token, like a private service.
    cloud_run = FakeVllmServer(
        FakeVllmConfig(
            served_model_name="google/gemma-4-12B-it-qat-w4a16-ct",
            api_key=ID_TOKEN,
            max_model_len=32768,
        )
    )
    # TPU: vllm serve --api-key (only /v1 needs it), speculative decoding on.
    tpu = FakeVllmServer(
        FakeVllmConfig(
            served_model_name="google/gemma-4-12B-it",
            api_key=API_KEY,
            auth_all_paths=False,
            max_model_len=4096,
            num_speculative_tokens=3,
            itl_s=0.002,
        )
    )
    cloud_run.start()
    tpu.start()

    outputs = tmp / "outputs"
    outputs.mkdir()
    (outputs / "l4.json").write_text(
        json.dumps(
            {
                "hardware": "l4",
                "service_url": cloud_run.url,
                "service_name": "gemma-l4-vllm",
                "served_model_name": "google/gemma-4-12B-it-qat-w4a16-ct",
                "image_ref": "vllm/vllm-openai:v0.27.1",
                "vllm_command_line": "vllm serve /mnt/models/gemma-4-12B-it-qat-w4a16-ct "
                "--quantization=compressed-tensors --max-model-len=32768 --kv-cache-dtype=fp8 "
                "--port=8080",
                "bucket_name": "gemma-l4-models",
            }
        )
    )
    (outputs / "tpu-v6e1.json").write_text(
        json.dumps(
            {
                "hardware": "tpu-v6e-1",
                "endpoint_urls": [tpu.url],
                "node_names": [f"projects/{PROJECT}/locations/us-east5-b/nodes/{TPU_NODE}-node"],
                "states": ["ACTIVE"],
                "served_model_name": "google/gemma-4-12B-it",
                "api_key_secret": "vllm-api-key",
            }
        )
    )
    credentials = tmp / "adc.json"
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    credentials.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": PROJECT,
                "private_key_id": "planted-key-id",
                "private_key": pem,
                "client_email": f"ops@{PROJECT}.iam.gserviceaccount.com",
                "client_id": "1234567890",
                "token_uri": f"{google.url}/token",
            }
        )
    )
    results = root / "bench-results" / "l4"
    write_run(
        results / "20261120T100000Z",
        [cell(1, 512), cell(8, 512)],
        label="baseline",
        hardware="l4",
    )
    write_run(
        results / "20261121T100000Z",
        [cell(1, 512, request_throughput=2.0), cell(8, 512, request_throughput=12.0)],
        label="tuned",
        hardware="l4",
    )
    (results / "not-a-run").mkdir()
    # A stand-in for the offline preview package, first on the action server's path: the tool
    # is tested for its wiring (lazy import, arguments, redaction), not for the preview itself.
    fake_preview = tmp / "fake_preview" / "preview"
    fake_preview.mkdir(parents=True)
    (fake_preview / "__init__.py").write_text("")
    (fake_preview / "build.py").write_text(FAKE_PREVIEW)
    yield {
        "root": root,
        "outputs": outputs,
        "credentials": credentials,
        "google": google,
        "cloud_run": cloud_run,
        "tpu": tpu,
        "fake_preview": fake_preview.parent,
        "tmp": tmp,
    }
    cloud_run.stop()
    tpu.stop()
    google.stop()


def server_params(
    world: dict[str, Any], *extra: str, path: tuple[Path, ...] = ()
) -> StdioServerParameters:
    google = world["google"]
    env = {
        "PYTHONPATH": ":".join(str(p) for p in (*path, ROOT)),
        "PATH": "/usr/bin:/bin",
        "GOOGLE_APPLICATION_CREDENTIALS": str(world["credentials"]),
        "HF_TOKEN": HF_TOKEN,
        "NO_PROXY": "127.0.0.1",
        "NO_GCE_CHECK": "True",
    }
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "mcp_server",
            "--root",
            str(world["root"]),
            "--outputs-dir",
            str(world["outputs"]),
            "--project",
            PROJECT,
            "--run-api-url",
            google.url,
            "--tpu-api-url",
            google.url,
            "--logging-api-url",
            google.url,
            "--secretmanager-api-url",
            google.url,
            *extra,
        ],
        cwd=str(world["tmp"]),
        env=env,
    )


@pytest.fixture(scope="module")
def clients(world: dict[str, Any]) -> Iterator[tuple[McpClient, McpClient]]:
    """The plain server and one with both actions enabled, started side by side."""
    with ThreadPoolExecutor(2) as pool:
        plain = pool.submit(McpClient, server_params(world))
        actions = pool.submit(
            McpClient,
            server_params(
                world,
                "--enable-action",
                "bench-cell",
                "--enable-action",
                "preview",
                path=(world["fake_preview"],),
            ),
        )
        pair = (plain.result(), actions.result())
    yield pair
    for session in pair:
        session.close()


@pytest.fixture(scope="module")
def client(clients: tuple[McpClient, McpClient]) -> McpClient:
    return clients[0]


@pytest.fixture(scope="module")
def action_client(clients: tuple[McpClient, McpClient]) -> McpClient:
    return clients[1]
