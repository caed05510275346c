"""The server's command line: usage errors, the HTTP transport, and the redaction step."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from endpoint.redact import MASK, register_secret
from mcp_server._deployments import Deployments
from mcp_server._redaction import redact, redact_text, register_environment_secrets
from mcp_server.cli import EXIT_USAGE, main
from mcp_server.google_apis import GoogleApis
from mcp_server.tools import Tools

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["-s", "h100"], "unknown stack(s) h100"),
        (["--enable-action", "deploy"], "invalid choice: 'deploy'"),
        (["--transport", "sse"], "invalid choice: 'sse'"),
        (["--port", "0"], "--port must be an integer from 1 to 65535"),
        (["--port", " 8765"], "--port must be an integer from 1 to 65535"),
        (["--transport", "http", "--host", "0.0.0.0"], "--host must be a loopback address"),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_USAGE
    assert expected in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_on_a_free_port() -> tuple[subprocess.Popen[bytes], int]:
    """The MCP server on a port that was free a moment ago, listening; another process may
    take a port between its probe and the server's bind, so that case is tried again."""
    for _ in range(5):
        port = _free_port()
        argv = ["-m", "mcp_server", "--transport", "http", "--port", str(port), "-s", "l4"]
        server = subprocess.Popen(
            [sys.executable, *argv],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while server.poll() is None and time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return server, port
            time.sleep(0.1)
        server.kill()
        _, err = server.communicate(timeout=10)
        if b"address already in use" not in err.lower():
            raise AssertionError(f"the MCP server did not listen on {port}: {err.decode()}")
    raise AssertionError("no free port in five tries")


def test_streamable_http_on_loopback(tmp_path: Path) -> None:
    server, port = _serve_on_a_free_port()
    try:

        async def session() -> list[str]:
            async with (
                streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write, _),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                stacks = await client.call_tool("list_stacks", {})
                assert not stacks.isError
                assert stacks.structuredContent is not None
                assert [s["stack"] for s in stacks.structuredContent["stacks"]] == ["l4"]
                return [t.name for t in (await client.list_tools()).tools]

        names = asyncio.run(session())
        assert "list_stacks" in names and "run_benchmark_cell" not in names
        # Bound to the loopback interface only.
        listening = subprocess.run(
            ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=False
        ).stdout
        for line in listening.splitlines():
            assert line.split()[3] == f"127.0.0.1:{port}", line  # the local address
    finally:
        server.terminate()
        server.wait(10)
        if server.stderr:
            server.stderr.close()


def test_redaction_by_shape_and_by_value() -> None:
    register_secret("s3cr3t-value-registered")
    text = (
        "Authorization: Bearer abc.def.ghi key=AIzaSyA1234567890123456789012345678 "
        "hf_abcdefghijklmnop ya29.a0AfH6SMB url?access_token=xyz123&x=1 "
        '{"api_key": "k-123456"} s3cr3t-value-registered max_tokens=128'
    )
    register_environment_secrets({"MY_TOKEN": "envsecret123"})
    out = redact_text(text)
    for secret in ("abc.def.ghi", "AIzaSy", "hf_abcdef", "ya29.", "xyz123", "k-123456", "s3cr3t"):
        assert secret not in out
    assert "max_tokens=128" in out
    assert redact_text("token in envsecret123 here") == f"token in {MASK} here"
    assert redact({"a": ["ok", "Bearer zzz"], "n": 3}) == {
        "a": ["ok", f"Bearer {MASK}"],
        "n": 3,
    }
    # Error reasons keep their words: only name=value and quoted members are assignments.
    assert redact_text("could not get an ID token: Invalid grant") == (
        "could not get an ID token: Invalid grant"
    )


def test_no_stack_files_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--root", str(tmp_path)]) == EXIT_USAGE  # no project file at all
    assert "holds no Pulumi.yaml" in capsys.readouterr().err
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")  # a project, no stack file
    assert main(["--root", str(tmp_path)]) == EXIT_USAGE
    assert "no Pulumi.<stack>.yaml" in capsys.readouterr().err


def test_a_torn_stack_file_is_reported_not_fatal(tmp_path: Path) -> None:
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copy(ROOT / "Pulumi.l4.yaml", tmp_path / "Pulumi.l4.yaml")
    (tmp_path / "Pulumi.torn.yaml").write_text("config:\n  gemma4-vllm:hardware: [l4\n")
    tools = Tools(Deployments(root=tmp_path), GoogleApis(lambda: lambda: "unused"))
    result = tools.list_stacks()
    assert [s.stack for s in result.stacks] == ["l4"]
    assert len(result.problems) == 1 and "Pulumi.torn.yaml: not valid YAML" in result.problems[0]
