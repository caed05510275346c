"""The health checks against servers that are not there, throttle, or are hostile: each gives the
right verdict within its deadline, with no traceback and no secret on screen."""

from __future__ import annotations

import asyncio
import http.server
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from endpoint.auth import ApiKeyAuth
from endpoint.limits import MAX_ECHO_CHARS, MAX_ERROR_BODY_BYTES
from healthchecks.cli import main
from healthchecks.runner import run_health_checks
from tests.endpoint.test_error_line import TOKEN
from tests.healthchecks._helpers import MODEL, ServerFactory
from tests.support.front_end import ERROR_ANSWERS, front_end

KEY = "hc-hostile-key-93f1c2"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str, float]:
    started = time.monotonic()
    code = main(list(argv))
    took = time.monotonic() - started
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err, took


def _checks(out: str) -> dict[str, dict[str, Any]]:
    (target,) = json.loads(out)["targets"]
    return {c["name"]: c for c in target["checks"]}


@pytest.fixture
def plain_http() -> Iterator[int]:
    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


@pytest.fixture
def resetting() -> Iterator[int]:
    """A port that accepts and resets every connection at once (as a TLS port may answer plain
    HTTP)."""
    import struct

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join(2)
    listener.close()


LONG = ["--model", MODEL, "--timeout-seconds", "3600", "--backoff-max-seconds", "0.1", "--json"]
"""A deadline the tests must never wait for: an hour, so a check that waited for it would end the
test at pytest's timeout; a test that passes shows by its verdict what ended the check."""

NEVER = "86400"
"""A Retry-After (a day) past the LONG deadline."""


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:{closed}", "connection refused"),
        ("https://127.0.0.1:{plain}", "TLS handshake failed"),
        ("http://no-such-service.invalid:8000", "DNS lookup failed"),
    ],
)
def test_not_listening_fails_within_seconds(
    capsys, plain_http: int, closed_port: int, url: str, expected: str
) -> None:
    """Not at the (hour-long) deadline: refused connections end at the grace, a TLS or DNS
    failure at the first attempt. The DNS case waits for the resolver's answer however long it
    takes (the request timeout is 120 s), so a slow resolver makes it slow, not failed."""
    url = url.format(closed=closed_port, plain=plain_http)
    code, out, _, _ = _run(capsys, "--url", url, "--refused-grace-seconds", "0.5", *LONG)
    assert code == 1
    readiness = _checks(out)["readiness"]
    assert readiness["detail"].startswith(f"not listening: {expected}")
    if expected == "connection refused":
        assert "the refused-connection grace" in readiness["detail"]
    else:
        assert readiness["data"]["attempts"] == 1


def test_a_port_that_resets_every_connection_fails_after_the_grace(capsys, resetting: int) -> None:
    url = f"http://127.0.0.1:{resetting}"
    code, out, _, _ = _run(capsys, "--url", url, "--refused-grace-seconds", "0.5", *LONG)
    assert code == 1
    detail = _checks(out)["readiness"]["detail"]
    assert detail.startswith("not listening: connection dropped")
    assert "the refused-connection grace" in detail  # not the hour-long deadline
    assert "use https://?" in detail


def test_retry_after_is_honoured_within_the_deadline(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(health_throttle=2, retry_after="0.3")
    code, out, _, took = _run(capsys, "--url", server.url, *LONG)
    assert code == 0, out
    assert _checks(out)["readiness"]["data"]["attempts"] == 3
    assert took >= 0.6  # waited what the server asked, twice


def test_503_with_retry_after_is_waited_too(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(health_throttle=1, health_throttle_status=503, retry_after="0.2")
    code, out, _, _ = _run(capsys, "--url", server.url, *LONG)
    assert code == 0, out


def test_retry_after_past_the_deadline_fails_at_once(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(health_throttle=100, retry_after=NEVER)
    code, out, _, took = _run(capsys, "--url", server.url, *LONG)
    assert code == 1
    detail = _checks(out)["readiness"]["detail"]
    assert f"asking to retry after {NEVER} s, past the deadline" in detail
    assert [q.path for q in server.requests] == ["/health"]  # one try, no second
    assert took < 30  # at once, not after the day the server asked for (nor the hour's deadline)


def test_429_without_retry_after_backs_off_until_it_passes(
    fake_vllm: ServerFactory, capsys
) -> None:
    server = fake_vllm(health_throttle=3)
    code, out, _, _ = _run(capsys, "--url", server.url, *LONG)
    assert code == 0, out


def test_reflected_authorization_is_never_printed(
    fake_vllm: ServerFactory, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_vllm(api_key="the-right-key-0000", reflect_authorization=True)
    monkeypatch.setenv("HC_TEST_KEY", KEY)
    for extra in ([], ["--json"]):
        code, out, err, _ = _run(
            capsys, "--url", server.url, "--model", MODEL, "--api-key-env", "HC_TEST_KEY", *extra
        )
        assert code == 1
        assert "credentials rejected (HTTP 401) using vLLM API key from $HC_TEST_KEY" in out
        assert KEY not in out + err
        assert "[REDACTED]" in out


def test_reflected_key_in_a_404_body_is_redacted(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(api_key=KEY, reflect_authorization=True)
    report = asyncio.run(
        run_health_checks(
            server.url,
            "google/other-model",
            auth=ApiKeyAuth("K", environ={"K": KEY}),
            deadline_s=600,
        )
    )
    assert not report.ok
    text = json.dumps(report.as_dict()) + report.failure_summary()
    assert "does not exist" in text
    assert KEY not in text


def test_a_huge_model_id_is_not_echoed_whole(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(served_model_name="m" * 100_000)
    code, out, err, _ = _run(capsys, "--url", server.url, "--model", "other", "--json")
    assert code == 1
    assert "not listed" in _checks(out)["models"]["detail"]
    assert len(out + err) < 20_000


def test_gzip_bomb_on_metrics_fails_the_check(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(metrics_gzip_bomb=64 << 20)
    code, out, _, _ = _run(capsys, "--url", server.url, "--model", MODEL, "--json")
    assert code == 1
    assert "/metrics is larger than" in _checks(out)["metrics"]["detail"]


def test_a_huge_stream_line_fails_the_chat_check(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(huge_sse_line=4 << 20)
    code, out, _, _ = _run(capsys, "--url", server.url, *LONG)
    assert code == 1
    assert "longer than" in _checks(out)["chat"]["detail"]  # refused at the cap, no deadline


@pytest.mark.parametrize(
    "argv",
    [
        ["--backoff-max-seconds", "0"],
        ["--timeout-seconds", "inf"],
        ["--timeout-seconds", "nan"],
        ["--timeout-seconds", "-5"],
        ["--request-timeout-seconds", "inf"],
        ["--refused-grace-seconds", "inf"],
    ],
)
def test_bad_numbers_exit_2_with_one_message(
    fake_vllm: ServerFactory, capsys, argv: list[str]
) -> None:
    server = fake_vllm()
    code, _, err, _ = _run(capsys, "--url", server.url, "--model", "m", *argv)
    assert code == 2
    assert "error:" in err
    assert server.requests == []  # refused before any request


@pytest.mark.parametrize(
    "url",
    [
        "http://h:8000/v1",
        "http://h/v1/",
        "http://h/V1/chat/completions",
        "http://user:pw@h",
        "http://h/?key=abc",
        "http://h:x",
    ],
)
def test_unusable_urls_exit_2_without_echoing_credentials(capsys, url: str) -> None:
    code, _, err, _ = _run(capsys, "--url", url, "--model", "m")
    assert code == 2
    assert "pw@" not in err and "key=abc" not in err


def test_retry_after_zero_forever_is_not_a_tight_loop(fake_vllm: ServerFactory, capsys) -> None:
    server = fake_vllm(health_throttle=10**6, retry_after="0")
    argv = ["--url", server.url, "--model", MODEL, "--timeout-seconds", "1", "--json"]
    code, out, err, _ = _run(capsys, *argv, "--backoff-max-seconds", "0.2")
    assert code == 1
    detail = _checks(out)["readiness"]["detail"]
    assert "not ready after" in detail or "past the deadline" in detail  # the deadline ended it
    health = [q for q in server.requests if q.path == "/health"]
    assert len(health) < 20  # backoff still applies: not hundreds of polls in a second
    # The waits the client chose: the backoff (0.2 s), not the server's 0; only the last may be
    # cut short by the deadline.
    waits = re.findall(r"next try in (\d+\.\d) s", " ".join(err.split()))
    assert len(waits) == len(health) - 1 and set(waits[:-1]) <= {"0.2"}


@pytest.mark.parametrize(
    ("check", "throttle"),
    [
        ("models", "models_throttle"),
        ("chat", "completions_throttle"),
        ("metrics", "metrics_throttle"),
    ],
)
def test_every_check_honours_a_429s_retry_after(
    fake_vllm: ServerFactory, capsys, check: str, throttle: str
) -> None:
    """Not only readiness: /v1/models, the chat completion and /metrics answering 429 with a
    Retry-After are waited and tried again within the deadline."""
    server = fake_vllm(**{throttle: 2}, retry_after="0.3")
    code, out, err, took = _run(capsys, "--url", server.url, *LONG)
    assert code == 0, out
    assert _checks(out)[check]["ok"]
    assert took >= 0.6  # waited what the server asked, twice
    assert f"{check}: HTTP 429, retrying in 0.5 s" in err


@pytest.mark.parametrize(
    "throttle", ["models_throttle", "completions_throttle", "metrics_throttle"]
)
def test_a_retry_after_past_the_deadline_ends_the_check_and_says_so(
    fake_vllm: ServerFactory, capsys, throttle: str
) -> None:
    server = fake_vllm(**{throttle: 100}, retry_after=NEVER)
    code, out, _, took = _run(capsys, "--url", server.url, *LONG)
    assert code == 1
    failed = [c for c in _checks(out).values() if not c["ok"]]
    assert failed and "answered HTTP 429" in failed[0]["detail"]
    assert f"Retry-After ({NEVER} s) ends past the deadline" in failed[0]["detail"]
    path = {"models_throttle": "/v1/models", "completions_throttle": "/v1/chat/completions",
            "metrics_throttle": "/metrics"}[throttle]  # fmt: skip
    assert [q.path for q in server.requests].count(path) == 1  # one try, no second
    assert took < 30  # at once, not after the day the server asked for (nor the hour's deadline)


@pytest.mark.parametrize("answer", list(ERROR_ANSWERS))
def test_an_error_answer_is_one_line_per_check(answer: str, capsys) -> None:
    """A front end in front of vLLM (Google's, on Cloud Run) or vLLM itself answers every request
    but /health with an error: a multi-line HTML page, JSON, a reflected credential, megabytes.
    Each failed check says the status and what the body says in one line, redacted and
    bounded, never the body."""
    status, body, content_type, said = ERROR_ANSWERS[answer]
    with front_end(status, body, content_type) as url:
        code, table, _, _ = _run(capsys, "--url", url, "--model", MODEL)
        assert code == 1
        assert len([line for line in table.splitlines() if " FAIL " in line]) == 3
        code, out, _, _ = _run(capsys, "--url", url, "--model", MODEL, "--json")
    assert code == 1
    failed = {name: c["detail"] for name, c in _checks(out).items() if not c["ok"]}
    assert list(failed) == ["models", "chat", "metrics"]  # readiness passed
    for detail in failed.values():
        assert "\n" not in detail and len(detail) < MAX_ECHO_CHARS + 60, detail
        capped = len(body) > MAX_ERROR_BODY_BYTES and "larger than" in detail
        assert capped or f"answered HTTP {status}: {said}" in detail, detail
    for shown in (table, out):
        assert "<" not in shown and "an error." not in shown and TOKEN[3:] not in shown


@pytest.mark.parametrize("answer", list(ERROR_ANSWERS))
def test_an_error_answer_to_health_is_one_line_while_waited_for_and_at_the_end(
    answer: str, capsys
) -> None:
    """A front end with no backend yet answers /health itself with an error: each progress line
    and the failed readiness check say the status and what the body says (not a bare `HTTP
    503`), on one line, redacted and bounded, never the page."""
    status, body, content_type, said = ERROR_ANSWERS[answer]
    with front_end(status, body, content_type, health_too=True) as url:
        code, out, err, _ = _run(
            capsys, "--url", url, "--model", MODEL, "--json", "--deadline-seconds", "1.5"
        )
    assert code == 1
    detail = _checks(out)["readiness"]["detail"]
    assert "\n" not in detail and len(detail) < MAX_ECHO_CHARS + 60, detail
    if len(body) > MAX_ERROR_BODY_BYTES:
        assert (
            detail == f"the answer to /health is larger than {MAX_ERROR_BODY_BYTES} bytes; refused"
        )
        return
    assert f"HTTP {status}: {said}" in detail, detail
    waits = err.splitlines()
    assert waits and all(line.startswith("waiting for /health: ") for line in waits), err
    assert all(f"HTTP {status}: {said}" in line and len(line) < 250 for line in waits), err
    for shown in (out, err):
        assert "<" not in shown and "an error." not in shown and TOKEN[3:] not in shown
