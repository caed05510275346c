"""Ctrl-C during ``bench run``: one clean message, exit 130, and nothing after it (no traceback
from a worker process, no task left using a closed session). A terminal's Ctrl-C reaches the
whole foreground process group, so the test sends SIGINT to the group of a real subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.fake_vllm import FakeVllmConfig, FakeVllmServer

ROOT = Path(__file__).resolve().parents[2]
NOISE = (
    "Traceback",
    "Session is closed",
    "Task was destroyed",
    "never retrieved",
    "Fatal error",
    "KeyboardInterrupt",
    "Unclosed",
)


def _completions(fake: FakeVllmServer) -> int:
    return sum(1 for r in list(fake.requests) if r.path == "/v1/completions")


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("extra", "after_s", "sent"),
    [
        (("--concurrency", "1,8"), 1.0, 1),  # closed loop, in this process
        (("--concurrency", "8", "--request-rate", "20"), 1.5, 1),  # open loop: tasks in flight
        (("--concurrency", "16", "--workers", "2"), 0.3, 0),  # worker processes starting
        (("--concurrency", "16", "--workers", "2"), 0.0, 16),  # worker processes sending
    ],
)
def test_ctrl_c_prints_one_clean_message(
    tmp_path: Path, extra: tuple[str, ...], after_s: float, sent: int
) -> None:
    config = FakeVllmConfig(served_model_name="m", itl_s=0.02, output_tokens=64)
    with FakeVllmServer(config) as fake:
        out = tmp_path / "run"
        argv = [sys.executable, "-m", "bench", "run", "--url", fake.url, "--model", "m"]
        argv += ["--prompt-tokens", "16", "--output-tokens", "64", "--no-progress"]
        argv += ["--out", str(out), *extra]
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            # As in a terminal's foreground job, whatever ran this suite: a shell starts a
            # background job (`scripts/check &`) with SIGINT ignored, and Python then installs
            # no KeyboardInterrupt handler in the child, so Ctrl-C could not be tested.
            preexec_fn=_sigint_default,
        )
        try:
            assert proc.stderr is not None
            first = proc.stderr.readline()  # "benchmarking m at ...": the run has begun
            assert "benchmarking" in first
            # Mid-run: at least `sent` completions have reached the server (on a loaded
            # machine the workers may take seconds to start), then `after_s` more.
            deadline = time.monotonic() + 60
            while _completions(fake) < sent and time.monotonic() < deadline:
                time.sleep(0.01)
            assert _completions(fake) >= sent
            time.sleep(after_s)
            os.killpg(proc.pid, signal.SIGINT)
            started = time.monotonic()
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert time.monotonic() - started < 15
    assert proc.returncode == 130, err
    assert "interrupted" in err and "--resume" in err
    for noise in NOISE:
        assert noise not in err, err
