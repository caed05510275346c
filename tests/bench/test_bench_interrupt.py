"""Ctrl-C during ``bench run``: one clean message, exit 130, and nothing after it (no traceback
from a worker process, no task left using a closed session). A terminal's Ctrl-C reaches the
whole foreground process group, so the test sends SIGINT to the group of a real subprocess.

Each Ctrl-C is sent once the run has reached its point, as the fake server and ``/proc`` show
it (never after a guessed delay): the same point on an idle machine and a loaded one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from multiprocessing.context import SpawnProcess
from pathlib import Path

import pytest

from bench.load.hotload import start_workers
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
SIGINT_BIT = 1 << (signal.SIGINT - 1)
"""SIGINT's bit in the signal masks of ``/proc/PID/status`` (SigBlk, SigIgn)."""


def _completions(fake: FakeVllmServer) -> int:
    return sum(1 for r in list(fake.requests) if r.path == "/v1/completions")


def _generating(fake: FakeVllmServer) -> int:
    """Completions the server has received and not finished (it records each when done)."""
    return _completions(fake) - len(fake.timings)


def _workers_of(pid: int) -> list[int]:
    """The spawned worker processes of ``pid`` (not its resource tracker, nor a child still
    between fork and exec): its children whose command line is multiprocessing's spawn."""
    workers = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # it ended meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # after "pid (comm) state"
        if ppid == pid and b"--multiprocessing-fork" in cmdline:
            workers.append(int(entry.name))
    return workers


def _sigint_mask(pid: int) -> int:
    """SIGINT's bit in ``pid``'s blocked and ignored signals (0: a Ctrl-C would reach it)."""
    status = dict(
        line.split(":\t", 1)
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if ":\t" in line
    )
    return (int(status["SigBlk"], 16) | int(status["SigIgn"], 16)) & SIGINT_BIT


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


Reached = Callable[[FakeVllmServer, int], bool]
"""Whether the run (the fake server it talks to, its process id) is at the point to interrupt."""


@pytest.mark.parametrize(
    ("extra", "reached"),
    [
        pytest.param(
            ("--concurrency", "1,8"),
            # The preflight, the warm-up, then a measured request being generated.
            lambda fake, _: _completions(fake) >= 3 and _generating(fake) >= 1,
            id="closed loop, in this process",
        ),
        pytest.param(
            ("--concurrency", "8", "--request-rate", "20"),
            # Requests last 1.3 s at the server: two at once are open-loop tasks in flight
            # (the warm-up runs alone).
            lambda fake, _: _generating(fake) >= 2,
            id="open loop, tasks in flight",
        ),
        pytest.param(
            ("--concurrency", "16", "--workers", "2"),
            lambda _, pid: bool(_workers_of(pid)),
            id="worker processes starting",
        ),
        pytest.param(
            ("--concurrency", "16", "--workers", "2"),
            lambda fake, _: _completions(fake) >= 16,
            id="worker processes sending",
        ),
    ],
)
def test_ctrl_c_prints_one_clean_message(
    tmp_path: Path, extra: tuple[str, ...], reached: Reached
) -> None:
    config = FakeVllmConfig(served_model_name="m", itl_s=0.02, output_tokens=64)
    with FakeVllmServer(config) as fake:
        out = tmp_path / "run"
        argv = [sys.executable, "-m", "bench", "run", "--url", fake.url, "--model", "m"]
        argv += ["--prompt-tokens", "16", "--output-tokens", "64", "--no-progress", "--no-charts"]
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
            # The run is recorded (run.json: what --resume continues) and at its point; the
            # deadline only bounds a run that never gets there (a loaded machine takes seconds
            # to start worker processes).
            deadline = time.monotonic() + 120
            while not ((out / "run.json").is_file() and reached(fake, proc.pid)):
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, "the run never reached its point"
                time.sleep(0.01)
            os.killpg(proc.pid, signal.SIGINT)
            # A bound against a hang only: a Ctrl-C that was lost lets the run finish (exit 0),
            # one that hangs never ends.
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "--resume" in err
    for noise in NOISE:
        assert noise not in err, err


class _Interrupted(Exception):
    pass


def _interrupted(signum: int, frame: object) -> None:
    raise _Interrupted


def test_a_ctrl_c_while_workers_start_is_raised_once_they_have_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Ctrl-C lands inside ``start_workers``, while the first worker is being spawned (the
    window no timing can aim at from outside): the workers never get it, the caller does,
    right after they have started, and they are stopped. Ignoring SIGINT while spawning (as
    the workers inherit) would lose it, and the run would go on."""
    real_start = SpawnProcess.start
    spawned: list[SpawnProcess] = []
    reachable: list[int] = []

    def start(self: SpawnProcess) -> None:
        if not spawned:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, to the process as a terminal sends
        real_start(self)
        spawned.append(self)
        assert self.pid is not None
        if not _sigint_mask(self.pid):
            reachable.append(self.pid)

    monkeypatch.setattr(SpawnProcess, "start", start)
    previous = signal.signal(signal.SIGINT, _interrupted)
    try:
        with pytest.raises(_Interrupted):
            start_workers(2)
        assert signal.getsignal(signal.SIGINT) is _interrupted  # the caller's handler is back
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(spawned) == 2  # both started: the Ctrl-C waited for the spawn to end
    assert reachable == []  # SIGINT blocked or ignored in every worker from its first moment
    assert not any(p.is_alive() for p in spawned)  # stopped by start_workers, not left behind
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())  # unblocked
