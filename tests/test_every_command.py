"""Every `gemma4` subcommand, in a subprocess, at the edges of its environment: a standard output
that is full, closed or a pipe whose reader left; Ctrl-C; bytes that are not UTF-8 in an
argument or in the environment; a read-only working folder. None may print a traceback, and each
exit status tells what happened (gemma4/guard.py handles them in one place).

The subcommands are read from the command line's own table (gemma4.cli.COMMANDS and each
command's argparse subparsers), so a new one is covered by the cases that need no arguments of
its own; :data:`WORK` holds each one's real work, and a test fails until a new one is added.
Each test runs its processes side by side (bounded), since most of their time is start-up.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gemma4.cli import COMMANDS, subcommand_parser
from tests.bench._cells import cell, write_run

ROOT = Path(__file__).resolve().parents[1]
WORKERS = 4
TIMEOUT_S = 120
PAUSE_SITE = ROOT / "tests" / "support" / "pause_site"


def subcommands() -> list[tuple[str, ...]]:
    """Every command path: each command, and each of its argparse subcommands."""
    paths: list[tuple[str, ...]] = []
    for command in COMMANDS:
        paths.append((command.name,))
        for action in subcommand_parser(command)._actions:
            if isinstance(action, argparse._SubParsersAction):
                paths += [(command.name, name) for name in action.choices]
    return paths


PATHS = subcommands()


@dataclass
class Ran:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    signalled: bool = False

    def where(self) -> str:
        return f"gemma4 {' '.join(self.args)[:200]} -> {self.returncode}\n{self.stderr[-1500:]}"


def _drop_dac() -> None:
    """As root (CAP_DAC_OVERRIDE), a folder's mode binds no one: drop that capability from
    the child so a read-only folder is read-only to it, as to any user."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def run(
    args: list[str],
    *,
    stdout: str = "pipe",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    interrupt_at: str | None = None,
    stdin: int | None = subprocess.DEVNULL,
    read_only: bool = False,
) -> Ran:
    """``python -m gemma4 ARGS``; ``stdout``: pipe, full (/dev/full), closed, or gone (a pipe
    whose reader closed before the command wrote). With ``interrupt_at`` (``EVENT:TEXT``, see
    tests/support/pause_site/sitecustomize.py) the command pauses at that point of its work and
    gets SIGINT there: an event, not a time, so the same on any machine, idle or loaded."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "PULUMI_"))}
    environ.update(env or {}, COLUMNS="100", PYTHONPATH=str(ROOT))
    marker = None
    if interrupt_at is not None:
        marker = Path(tempfile.mkdtemp(prefix="gemma4-pause-")) / "paused"
        environ.update(
            PYTHONPATH=f"{PAUSE_SITE}{os.pathsep}{ROOT}",
            GEMMA4_TEST_PAUSE_AT=interrupt_at,
            GEMMA4_TEST_PAUSED=str(marker),
        )
        environ.pop("GEMMA4_TEST_PAUSE_PID", None)
    devnull_full = None
    out: Any = subprocess.PIPE
    pre: list[Callable[[], None]] = []
    if stdout == "full":
        devnull_full = open("/dev/full", "w")  # noqa: SIM115 - closed below
        out = devnull_full
    elif stdout == "closed":
        out = None
        pre.append(lambda: os.close(1))
    if read_only:
        pre.append(_drop_dac)

    def preexec() -> None:
        # As a terminal's foreground job, whatever ran the suite (a background job ignores
        # SIGINT, and then so does Python; a thread of the suite's may have it blocked, and a
        # child keeps the mask of the thread that started it).
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        for step in pre:
            step()

    process = subprocess.Popen(
        [sys.executable, "-m", "gemma4", *args],
        stdin=stdin,
        stdout=out,
        stderr=subprocess.PIPE,
        env=environ,
        cwd=cwd or ROOT,
        preexec_fn=preexec,
    )
    if stdout == "gone":
        assert process.stdout is not None
        process.stdout.close()
    signalled = False
    try:
        if marker is not None:
            # Until the command reaches the point (the marker is written) or ends first.
            deadline = time.monotonic() + TIMEOUT_S
            while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            if marker.exists():
                process.send_signal(signal.SIGINT)
                signalled = True
        try:
            out, err = process.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"gemma4 {' '.join(args)[:200]} still runs {TIMEOUT_S} s after "
                f"{'SIGINT' if signalled else 'it started'}: {_signal_state(process.pid)}"
            ) from None
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        if devnull_full is not None:
            devnull_full.close()
        if marker is not None:
            shutil.rmtree(marker.parent, ignore_errors=True)
    return Ran(
        args,
        process.returncode,
        (out or b"").decode(errors="replace"),
        err.decode(errors="replace"),
        signalled,
    )


def _signal_state(pid: int) -> str:
    """What /proc says of a process's signals (pending, blocked, ignored, caught) and threads."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError as exc:
        return f"/proc/{pid}/status: {exc.strerror}"
    return "; ".join(
        line.replace("\t", " ")
        for line in status.splitlines()
        if line.startswith(("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt", "Threads", "State"))
    )


Job = tuple[list[str], dict[str, Any]]
"""The arguments of one :func:`run`, and its keyword arguments."""


def in_parallel(jobs: list[Job]) -> list[Ran]:
    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(lambda job: run(job[0], **job[1]), jobs))


def no_traceback(results: list[Ran]) -> None:
    bad = [r.where() for r in results if "Traceback" in r.stderr]
    assert not bad, "\n\n".join(bad)


def _hold_connections() -> tuple[str, Callable[[], None]]:
    """A loopback server that accepts connections and never answers (a cold start)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def close() -> None:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()

    return f"http://127.0.0.1:{listener.getsockname()[1]}", close


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("every")
    project = tmp / "project"
    project.mkdir()
    for path in ROOT.glob("Pulumi*.yaml"):
        shutil.copy(path, project / path.name)
    runs = tmp / "runs"
    for name, figure in (("a", 1.0), ("b", 2.0)):
        write_run(
            runs / name,
            [cell(1, 512, request_throughput=figure), cell(4, 512)],
            label=name,
            hardware="l4",
        )
    hang, close = _hold_connections()
    # Bound and never listening for the whole module: refused, and no other process can take
    # the port and answer (a port probed and released could be).
    with socket.socket() as refused:
        refused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{refused.getsockname()[1]}"
        yield {"project": project, "runs": runs, "hang": hang, "refused": url, "tmp": tmp}
    close()


@pytest.fixture(autouse=True)
def _pristine_project(request: pytest.FixtureRequest) -> None:
    """Each test starts from the shipped stack files: a command that writes (promote --write)
    in one test must not leave another test, in whatever order a worker runs them, nothing to
    write."""
    if "world" not in request.fixturenames:
        return
    project = request.getfixturevalue("world")["project"]
    for path in project.glob("Pulumi*.yaml"):
        path.unlink()
    for path in ROOT.glob("Pulumi*.yaml"):
        shutil.copy(path, project / path.name)


def work(world: dict[str, Any], path: tuple[str, ...], *, slow: bool = False) -> list[str]:
    """Each command path doing real work: with ``slow``, work that lasts (a cold start that
    never ends, the GKE preview) so that Ctrl-C lands while it runs."""
    p, runs = str(world["project"]), world["runs"]
    url = world["hang"] if slow else world["refused"]
    table: dict[tuple[str, ...], list[str]] = {
        ("preview",): ["preview", "-s", "gke-l4" if slow else "l4", "--project-dir", p],
        ("plan",): ["plan", "-s", "l4", "--project-dir", p],
        ("plan", "search"): ["plan", "search", "--rate", "1", "--ttft-ms", "500"],
        ("plan", "calibrate"): [
            "plan",
            "calibrate",
            str(runs / "a"),
            "-s",
            "l4",
            "--project-dir",
            p,
            "--out",
            "calibrations",
        ],
        ("health",): [
            "health",
            "--url",
            url,
            "--model",
            "m",
            "--timeout-seconds",
            "60",
            "--refused-grace-seconds",
            "0",
        ],
        ("bench",): ["bench"],
        ("bench", "run"): [
            "bench",
            "run",
            "--url",
            url,
            "--model",
            "m",
            "--out",
            "runs/new",
            "--ready-timeout-seconds",
            "60",
            "--no-progress",
            "--no-charts",
        ],
        ("bench", "compare"): [
            "bench",
            "compare",
            str(runs / "a"),
            str(runs / "b"),
            "--out",
            "cmp",
        ],
        ("bench", "gate"): ["bench", "gate", str(runs / "a"), "-s", "l4", "--project-dir", p],
        ("promote",): [
            "promote",
            "--from",
            "l4",
            "--to",
            "rtx6000",
            "--project-dir",
            p,
            "--write",
            "--source-image",
            f"vllm/vllm-openai:v0.27.1@sha256:{'a' * 64}",
        ],
        ("mcp",): ["mcp", "--project-dir", p, "-s", "l4"],
    }
    return table[path]


WORK_PATHS = {
    ("preview",),
    ("plan",),
    ("plan", "search"),
    ("plan", "calibrate"),
    ("health",),
    ("bench",),
    ("bench", "run"),
    ("bench", "compare"),
    ("bench", "gate"),
    ("promote",),
    ("mcp",),
}


def test_every_subcommand_has_its_work_here() -> None:
    """A new subcommand gets its real work in :func:`work` (the cases below that need none
    cover it already)."""
    assert set(PATHS) == WORK_PATHS


@pytest.mark.long
def test_output_that_cannot_be_written() -> None:
    """Full (/dev/full), closed (>&-) or left (| head -c 0): exit 1 with one line, or 141
    quietly; never a traceback, never exit 0 with nothing written."""
    commands = [path for path in PATHS if len(path) == 1]
    # A closed stdout is refused before a command's module loads: every path. A full or left
    # one fails in the same guard whichever command wrote: each command's help, the version
    # (and the commands' own output below).
    cases = [(path, "closed") for path in PATHS]
    cases += [(path, stdout) for path in [*commands, ("--version",)] for stdout in ("full", "gone")]
    jobs: list[Job] = [
        ([*path, "--help"] if path != ("--version",) else ["--version"], {"stdout": stdout})
        for path, stdout in cases
    ]
    problems = []
    for (_, stdout), ran in zip(cases, in_parallel(jobs), strict=True):
        lines = ran.stderr.strip().splitlines()
        expected = {
            "full": (1, "error: cannot write the output: No space left on device"),
            "closed": (1, "error: standard output is closed"),
            "gone": (141, None),
        }[stdout]
        ok = ran.returncode == expected[0] and "Traceback" not in ran.stderr
        if expected[1] is None:
            ok = ok and not lines
        else:
            ok = ok and len(lines) == 1 and expected[1] in lines[0]
        if not ok:
            problems.append(f"[stdout {stdout}] {ran.where()}")
    assert not problems, "\n\n".join(problems)


def test_real_output_to_a_full_disk(world: dict[str, Any]) -> None:
    """What the commands print (rich tables, JSON, markdown) goes through the same guard."""
    paths = [("preview",), ("plan",), ("plan", "search"), ("bench", "compare"), ("bench", "gate")]
    results = in_parallel(
        [
            (work(world, p)[: -2 if p == ("bench", "compare") else None], {"stdout": "full"})
            for p in paths
        ]
    )
    for ran in results:
        assert ran.returncode == 1, ran.where()
        assert (
            ran.stderr.strip()
            .splitlines()[-1]
            .endswith("error: cannot write the output: No space left on device")
        ), ran.where()
    no_traceback(results)


@pytest.mark.parametrize("where", ["argument", "environment"])
def test_input_that_is_not_utf8_is_refused_naming_it(where: str) -> None:
    bad = os.fsdecode(b"\xff\xfe")
    jobs: list[Job] = []
    for path in PATHS:
        if where == "argument":
            jobs.append(([*path, "--project-dir", f"x{bad}"], {}))
        else:
            jobs.append(([*path, "--help"], {"env": {"VLLM_API_KEY": f"k{bad}"}}))
    results = in_parallel(jobs)
    for ran in results:
        assert ran.returncode == 2, ran.where()
        named = (
            "the value of --project-dir ('x\\xff\\xfe')"
            if where == "argument"
            else ("environment variable VLLM_API_KEY is not valid UTF-8")
        )
        assert named in ran.stderr and "not valid UTF-8" in ran.stderr, ran.where()
        assert len(ran.stderr.strip().splitlines()) == 1, ran.where()
    no_traceback(results)


@pytest.mark.parametrize(
    "args",
    [
        ["health", "--url", "http://host\udcff/", "--model", "m"],
        ["health", "--url=http://\udcff"],
        ["bench", "run", "--url", "http://127.0.0.1:1", "--model", "gemma\udcff", "--out", "x"],
        ["health", "--url", "http://127.0.0.1:1", "--model", "m", "--api-key-env", "K\udcff"],
        ["preview", "-s", "l4\udcff"],
    ],
)
def test_the_issues_undecodable_values(args: list[str]) -> None:
    ran = run(args)
    assert ran.returncode == 2, ran.where()
    assert "is not valid UTF-8" in ran.stderr and "Traceback" not in ran.stderr


def test_an_api_key_variable_that_is_not_utf8() -> None:
    ran = run(
        ["health", "--url", "http://127.0.0.1:1", "--model", "m", "--api-key-env", "KEY"],
        env={"KEY": os.fsdecode(b"secret\xff")},
    )
    assert ran.returncode == 2 and "environment variable KEY is not valid UTF-8" in ran.stderr
    assert "secret" not in ran.stderr, "the value of a key variable is never shown"


def pause_point(world: dict[str, Any], path: tuple[str, ...]) -> str | None:
    """Where each command's slow work is interrupted (an audit event of its own work, see
    tests/support/pause_site/sitecustomize.py): the GKE preview inside the Pulumi program's
    import of the SDK, a command talking to a server that never answers once it connects,
    the others as they read the user's files. ``bench`` alone is a usage error, ended first."""
    project, runs = world["project"], world["runs"]
    hang_port = world["hang"].rsplit(":", 1)[1]
    points: dict[tuple[str, ...], str | None] = {
        ("preview",): "import:pulumi_gcp.compute.instance",
        ("plan",): f"open:{project}/Pulumi.l4.yaml",
        ("plan", "search"): "open:Pulumi.gke-l4.yaml",
        ("plan", "calibrate"): f"open:{runs}/a/",
        ("health",): f"socket.connect:, {hang_port})",
        ("bench",): None,
        ("bench", "run"): f"socket.connect:, {hang_port})",
        ("bench", "compare"): f"open:{runs}/b/",
        ("bench", "gate"): f"open:{runs}/a/",
        ("promote",): f"open:{project}/Pulumi.rtx6000.yaml",
        ("mcp",): "import:mcp_server.tools",
    }
    return points[path]


@pytest.mark.long
def test_ctrl_c_is_130_and_one_line(world: dict[str, Any]) -> None:
    """SIGINT while each command works: exit 130, 'interrupted', no traceback, and no verdict
    on the user's files (the GKE preview's interrupted import is not 'the program refused the
    stack'). Each command is interrupted at a point of its own work it waits at, so the
    outcome does not depend on how fast the machine is."""
    jobs: list[Job] = []
    for path in PATHS:
        stdin = subprocess.PIPE if path == ("mcp",) else subprocess.DEVNULL
        # `plan search` reads the stacks of the project it runs in.
        cwd = world["project"] if path == ("plan", "search") else world["tmp"]
        options = {"interrupt_at": pause_point(world, path), "stdin": stdin, "cwd": cwd}
        jobs.append((work(world, path, slow=True), options))
    results = in_parallel(jobs)
    for (_, options), ran in zip(jobs, results, strict=True):
        if options["interrupt_at"] is None:  # a usage error: nothing to interrupt
            assert ran.args == ["bench"] and ran.returncode == 2, ran.where()
            continue
        assert ran.signalled, f"never reached {options['interrupt_at']}: {ran.where()}"
        assert ran.returncode == 130, ran.where()
        assert ran.stderr.strip().splitlines()[-1].endswith(": interrupted"), ran.where()
        assert "refused the stack" not in ran.stderr, ran.where()
    no_traceback(results)


@pytest.mark.long
def test_a_read_only_folder(world: dict[str, Any], tmp_path: Path) -> None:
    """In a folder nobody may write: one message naming what could not be written, never a
    claim that something was kept, never a traceback."""
    folder = tmp_path / "ro"
    shutil.copytree(world["project"], folder)
    folder.chmod(0o555)
    for path in folder.iterdir():
        path.chmod(0o444)
    try:
        ro = {**world, "project": folder}
        results = in_parallel(
            [
                (work(ro, p), {"cwd": folder, "read_only": True})
                for p in sorted(WORK_PATHS - {("mcp",), ("bench",)})
            ]
        )
    finally:
        folder.chmod(0o755)
    no_traceback(results)
    by_path = {
        tuple(r.args[:2]) if r.args[0] in ("plan", "bench") else (r.args[0],): r for r in results
    }
    for writes in (("promote",), ("bench", "run"), ("bench", "compare")):
        ran = by_path[writes]
        assert ran.returncode != 0, ran.where()
        assert "Permission denied" in ran.stderr, ran.where()
        assert "are kept" not in ran.stderr, ran.where()
