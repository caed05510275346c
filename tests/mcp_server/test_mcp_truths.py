"""What the MCP server tells an agent is true of each stack, and what it refuses before a request:
the platform of every shipped stack, the credential its platform takes whatever its saved
outputs hold, ids from API answers checked before they go into a URL that carries the token,
bounded stdin, and failures told in words (never pydantic's dump or "internal error")."""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp.server.fastmcp.exceptions import ToolError

from mcp_server._deployments import DeploymentError, Deployments, EndpointOptions
from mcp_server.google_apis import ApiUrls, GoogleApiError, GoogleApis, cluster_host, segment
from mcp_server.models import ServedModel
from mcp_server.server import MAX_STDIN_MESSAGE_BYTES, _safe, build_server
from mcp_server.tools import Tools, platform_of

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(
    p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in ROOT.glob("Pulumi.*.yaml")
)
#: What each shipped stack is, by its stack file's `platform` key (absent: the hardware's own).
PLATFORMS = {
    "l4": ("cloud-run", "us-east4"),
    "rtx6000": ("cloud-run", "us-central1"),
    "tpu-v6e1": ("tpu", "us-east5-b"),
    "gke-l4": ("gke", "us-east4"),
    "gke-tpu-v6e": ("gke", "us-east5"),
}


def _tools(outputs: Path, **options: Any) -> Tools:
    deployments = Deployments(
        root=ROOT, outputs_dir=outputs, project="test-proj", endpoint=EndpointOptions(**options)
    )
    return Tools(deployments, GoogleApis(lambda: lambda: "token"))


def test_every_shipped_stack_is_in_the_table() -> None:
    assert set(SHIPPED) == set(PLATFORMS)


@pytest.mark.parametrize("stack", SHIPPED)
def test_list_stacks_names_each_stacks_platform(stack: str, tmp_path: Path) -> None:
    summary = {s.stack: s for s in _tools(tmp_path).list_stacks().stacks}[stack]
    assert (summary.platform, summary.location) == PLATFORMS[stack]
    config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    declared = config.get("gemma4-vllm:platform")
    if declared == "gke":  # a GKE stack is GKE, whatever accelerator its nodes carry
        assert summary.platform == "gke"


def _outputs(tmp_path: Path, stack: str, outputs: dict[str, Any]) -> Path:
    (tmp_path / f"{stack}.json").write_text(json.dumps(outputs))
    return tmp_path


@pytest.mark.parametrize(
    ("stack", "outputs", "refused"),
    [
        # A Cloud Run stack whose saved outputs look like a TPU stack's: no API key to it.
        ("l4", {"endpoint_urls": ["https://x.example"]}, "has no service_url output"),
        # A GKE or TPU stack whose outputs look like Cloud Run's: no ID token to it.
        ("gke-l4", {"service_url": "https://x.example"}, "has no endpoint_urls output"),
        ("tpu-v6e1", {"service_url": "https://x.example"}, "has no endpoint_urls output"),
        ("gke-l4", {"endpoint_urls": "https://x.example"}, "not a list of URLs"),
        ("gke-l4", {"endpoint_urls": ["ftp://x.example"]}, "must be an http(s) URL"),
        ("l4", {"service_url": "https://u:p@x.example"}, "must not carry credentials"),
        ("l4", {"service_url": "https://x.example", "served_model_name": 5}, "not a model name"),
    ],
)
def test_credential_follows_the_platform_not_the_outputs_shape(
    stack: str, outputs: dict[str, Any], refused: str, tmp_path: Path
) -> None:
    tools = _tools(_outputs(tmp_path, stack, outputs), api_key_env="VLLM_API_KEY")
    with pytest.raises(DeploymentError, match=None) as caught:
        tools.deployments.targets(stack)
    assert refused in str(caught.value)


@pytest.mark.parametrize(("stack", "credential"), [("gke-l4", "vLLM API key"), ("l4", "Google ID")])
def test_each_platform_gets_its_own_credential(stack: str, credential: str, tmp_path: Path) -> None:
    outputs = (
        {"service_url": "https://x.example"}
        if stack == "l4"
        else {"endpoint_urls": ["http://10.0.0.5"], "service_url": "https://y.example"}
    )
    tools = _tools(_outputs(tmp_path, stack, outputs), api_key_env="VLLM_API_KEY")
    (target,) = tools.deployments.targets(stack)
    assert target.url == ("https://x.example" if stack == "l4" else "http://10.0.0.5")
    assert credential in target.auth.description
    assert platform_of(tools.deployments.settings(stack)) in ("gke", "cloud-run")


@pytest.mark.parametrize(
    "value",
    [
        "..",
        ".",
        "../../v1/projects/p/secrets/s",
        "a/b",
        "a%2F..",
        "a?x=1",
        "a#b",
        "a b",
        "",
        "-a",
        "x" * 129,
        None,
        5,
        "us-east5-b/../x",
    ],
)
def test_resource_ids_that_could_move_a_request_are_refused(value: Any) -> None:
    with pytest.raises(GoogleApiError, match="not a valid resource id"):
        segment(value, "zone")


@pytest.mark.parametrize("value", ["us-east5-b", "test-proj", "gemma-l4-vllm", "ns_1.a~b"])
def test_plain_resource_ids_pass(value: str) -> None:
    assert segment(value, "zone") == value


@pytest.mark.parametrize(
    ("value", "host"),
    [("34.1.2.3", "34.1.2.3"), ("2001:db8::1", "[2001:db8::1]"), ("gke.example.com", None)],
)
def test_cluster_endpoints_that_are_hosts_pass(value: str, host: str | None) -> None:
    assert cluster_host(value) == (host or value)


@pytest.mark.parametrize(
    "value",
    [
        "evil.example/x",
        "a@evil.example",
        "evil.example:8443",
        "1.2.3.4#",
        "",
        None,
        "[::1]",
        "a..b",
    ],
)
def test_cluster_endpoints_that_are_not_hosts_are_refused(value: Any) -> None:
    with pytest.raises(GoogleApiError, match="not an IP address or host name"):
        cluster_host(value)


class _Answers(BaseHTTPRequestHandler):
    """A Cloud TPU API whose location list carries an id with `..` segments."""

    paths: list[str] = []

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        body = json.dumps(
            {
                "locations": [
                    {"locationId": "us-east5-b"},
                    {"locationId": "../../../v1/projects/test-proj/secrets/k"},
                ]
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def tpu_api() -> Iterator[str]:
    _Answers.paths = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_location_id_with_dot_dot_in_an_answer_builds_no_url(
    tpu_api: str, tmp_path: Path
) -> None:
    tools = _tools(tmp_path)
    tools.apis = GoogleApis(lambda: lambda: "token", ApiUrls(tpu=tpu_api))

    async def progress(*_: Any) -> None:
        return None

    with pytest.raises(Exception, match="not a valid resource id") as caught:
        asyncio.run(tools.tpu_zones("tpu-v6e1", progress))
    assert "internal error" not in str(caught.value)
    # Only the list was asked for: no request for any location, the good one included.
    assert [p.split("?")[0] for p in _Answers.paths] == ["/v2/projects/test-proj/locations"]


def _call(server: Any, name: str, arguments: dict[str, Any]) -> str:
    with pytest.raises(ToolError) as caught:
        asyncio.run(server.call_tool(name, arguments))
    return str(caught.value)


@pytest.mark.parametrize(
    ("name", "arguments", "said"),
    [
        ("stack_endpoints", {"stack": "x" * 120_000}, "stack: String should have at most 128"),
        ("capacity_plan", {"stack": "l4", "requests_per_second": "many"}, "requests_per_second"),
        (
            "compare_benchmarks",
            {"baseline": "l4/" + "a" * 400, "other": "l4/b"},
            "not a run folder",
        ),
        ("compare_benchmarks", {"baseline": "l4/" + "a" * 600, "other": "l4/b"}, "baseline"),
        ("benchmark_runs", {"limit": 0}, "limit: Input should be greater than or equal to 1"),
    ],
)
def test_bad_arguments_are_told_in_words(
    name: str, arguments: dict[str, Any], said: str, tmp_path: Path
) -> None:
    server = build_server(_tools(tmp_path))
    text = _call(server, name, arguments)
    assert said in text
    for dump in ("internal error", "validation error for", "errors.pydantic.dev", "OSError"):
        assert dump not in text
    assert len(text) < 1000


def test_a_malformed_upstream_field_is_told_in_words() -> None:
    async def model_details() -> ServedModel:
        return ServedModel.model_validate({"id": "m", "max_model_len": "a lot"})

    with pytest.raises(ToolError) as caught:
        asyncio.run(_safe(model_details, 5)())  # type: ignore[arg-type]
    text = str(caught.value)
    assert "an answer from upstream has a malformed field: max_model_len" in text
    assert "internal error" not in text and "pydantic.dev" not in text


def _limit_memory() -> None:  # a server that read stdin unbounded fails here, not the machine
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.mark.parametrize("source", ["zeros", "long line"])
def test_stdin_is_read_with_a_bound(source: str, tmp_path: Path) -> None:
    """`gemma4 mcp < /dev/zero` (bytes that never end a line) and one message over the cap
    stop the server with a usage error, in bounded memory."""
    argv = [sys.executable, "-m", "mcp_server", "--project-dir", str(ROOT), "-s", "l4"]
    run: dict[str, Any] = dict(
        capture_output=True, timeout=60, preexec_fn=_limit_memory, cwd=tmp_path
    )
    if source == "zeros":
        with open("/dev/zero", "rb") as zeros:
            done = subprocess.run(argv, stdin=zeros, **run)
    else:
        message = b'{"jsonrpc": "2.0", "id": 1, "method": "' + b"x" * MAX_STDIN_MESSAGE_BYTES
        done = subprocess.run(argv, input=message + b'"}\n', **run)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert f"a message on stdin is longer than {MAX_STDIN_MESSAGE_BYTES} bytes" in err
    assert "Traceback" not in err


def test_a_message_that_is_not_utf8_json_is_dropped_in_one_line() -> None:
    """Undecodable bytes or text that is not JSON on stdin: one line each on stderr (not the
    SDK's pydantic dump), the server reads on, and ends cleanly at end of input."""
    import io

    from mcp_server.server import BoundedLines

    stdin = BoundedLines(io.BytesIO(b'\xff\xfe{"jsonrpc"\n\nnot json\n{"jsonrpc": "2.0"}\n'))
    assert stdin.readline() == '{"jsonrpc": "2.0"}\n'
    assert stdin.readline() == "" and not stdin.overflow
    done = subprocess.run(
        [sys.executable, "-m", "mcp_server", "--project-dir", str(ROOT), "-s", "l4"],
        input=b"\xff\xfe{\nnot json\n",
        capture_output=True,
        timeout=60,
    )
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert err.count("ignored a message on stdin that is not UTF-8 JSON") == 2
    assert "pydantic" not in err and "Traceback" not in err
    assert done.stdout == b""
