"""Sweeps end to end against a real server: cells, skips, incremental write and resume."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import re
import shutil
import statistics
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import bench.load.sweep
from bench import Grid, SweepOptions, load_run, run_sweep
from bench.load.hotload import LoadPlan, WindowLoad, arrival_gap, run_load
from bench.load.sweep import probe
from bench.results.store import StoreError
from gemma4.workload_options import read_trace
from tests.bench.conftest import MODEL, ServerFactory
from tests.support.fake_vllm import FakeVllmConfig, FakeVllmServer

FAST = SweepOptions(num_requests=4, warmup=1, timeout_s=5.0, progress=False, charts=False)


class _Stop(Exception):
    pass


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (path / "cells.jsonl").read_text().splitlines()]


def test_sweep_writes_every_output(fake_vllm: ServerFactory, tmp_path: Path) -> None:
    server = fake_vllm(ttft_s=0.02, itl_s=0.005, output_tokens=8)
    options = replace(FAST, charts=True)
    run = run_sweep(server.url, MODEL, Grid((1, 2), (16,), (8,)), tmp_path / "r", options=options)
    assert [c["id"] for c in run.cells] == ["c1-p16-o8", "c2-p16-o8"]
    for cell in run.cells:
        assert cell["status"] == "ok"
        assert cell["completed"] == 4
        assert cell["total_output_tokens"] == 32
        assert cell["total_input_tokens"] == 64  # exact prompts, counted by the server
        assert cell["prompt_tokens_exact"] is True
        # The pacing is a floor; the ceiling rules out only a wrong unit (seconds would be
        # read 1000 times larger), never how late a loaded machine reads.
        assert 19 <= cell["median_ttft_ms"] < 5000
    out = tmp_path / "r"
    meta = json.loads((out / "run.json").read_text())
    assert meta["schema_version"] == 1
    assert meta["model"] == MODEL
    assert meta["max_model_len"] == 32768  # read from /v1/models
    assert "finished_at" in meta
    csv_lines = (out / "results.csv").read_text().splitlines()
    assert csv_lines[0].startswith("id,status,skip_reason,concurrency")
    assert len(csv_lines) == 3
    report = (out / "report.md").read_text()
    assert "| concurrency | 16 prompt tokens |" in report
    assert sorted(p.name for p in (out / "charts").iterdir())
    assert load_run(out).cells == run.cells
    # Each cell's requests, as a trace the configuration search reads.
    for cell in run.cells:
        lines = (out / "requests" / f"{cell['id']}.jsonl").read_text().splitlines()
        rows = [json.loads(x) for x in lines]
        assert len(rows) == cell["completed"]
        assert rows[0]["start_s"] == 0.0
        assert [r["start_s"] for r in rows] == sorted(r["start_s"] for r in rows)
        assert all(r["ok"] and r["output_tokens"] == 8 and r["prompt_tokens"] == 16 for r in rows)
        assert all(0 < r["ttft_s"] <= r["e2e_s"] for r in rows)
        trace = read_trace(out / "requests" / f"{cell['id']}.jsonl")
        assert [(t.prompt_tokens, t.output_tokens) for t in trace] == [(16, 8)] * len(rows)


class _Generations(FakeVllmServer):
    """The fake, also keeping the span of each generation on its own clock: from the request's
    arrival to its last token, stamped before the end of the stream goes out, so requests sent
    one after the other (each once the previous answer was read) never overlap. With ``hold``,
    the first generations wait (at most a minute) until ``hold`` are in progress together:
    requests a client sends at once are then seen together however late each arrives."""

    def __init__(self, config: FakeVllmConfig, *, hold: int = 1) -> None:
        super().__init__(config)
        self.spans: list[tuple[float, float]] = []
        self._hold = hold
        self._generating = 0
        self._together: asyncio.Event | None = None

    async def _stream(self, *args: Any, **kwargs: Any) -> Any:
        self._together = self._together or asyncio.Event()  # on the server's loop
        self._generating += 1
        try:
            if self._generating >= self._hold:
                self._together.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._together.wait(), 60.0)
            return await super()._stream(*args, **kwargs)
        finally:
            self._generating -= 1

    def _finish(self, prompt_tokens: int, n_out: int, ttft: float, e2e: float) -> None:
        now = time.perf_counter()
        self.spans.append((now - e2e, now))
        super()._finish(prompt_tokens, n_out, ttft, e2e)

    def most_at_once(self) -> int:
        """The most generations in progress at one instant."""
        edges = sorted([(end, -1) for _, end in self.spans] + [(s, 1) for s, _ in self.spans])
        return max(itertools.accumulate(step for _, step in edges))


def test_closed_loop_keeps_concurrency(tmp_path: Path) -> None:
    config = FakeVllmConfig(ttft_s=0.1, itl_s=0.0, output_tokens=1)
    options = SweepOptions(
        num_requests=8, warmup=0, timeout_s=120.0, progress=False, charts=False, preflight=False
    )
    alone, together = _Generations(config), _Generations(config, hold=4)
    with alone, together:
        grid = Grid((1,), (8,), (1,))
        (one,) = run_sweep(alone.url, MODEL, grid, tmp_path / "1", options=options).cells
        grid = Grid((4,), (8,), (1,))
        (four,) = run_sweep(together.url, MODEL, grid, tmp_path / "4", options=options).cells
    # What the server saw: one request at a time, then four at once and never a fifth (two
    # rounds of four, not eight at once nor in sequence).
    assert (len(alone.spans), alone.most_at_once()) == (8, 1)
    assert (len(together.spans), together.most_at_once()) == (8, 4)
    # The pacing's floors: 8 in sequence take at least 8 x 100 ms, two rounds 2 x 100 ms.
    assert one["duration"] >= 0.79 and four["duration"] >= 0.19
    assert four["request_throughput"] == pytest.approx(8 / four["duration"])


def test_cells_over_max_model_len_are_skipped(fake_vllm: ServerFactory, tmp_path: Path) -> None:
    server = fake_vllm(max_model_len=200, output_tokens=8)
    run = run_sweep(server.url, MODEL, Grid((1,), (64, 256), (8,)), tmp_path / "r", options=FAST)
    by_id = {c["id"]: c for c in run.cells}
    assert by_id["c1-p64-o8"]["status"] == "ok"
    skipped = by_id["c1-p256-o8"]
    assert skipped["status"] == "skipped"
    assert "max_model_len 200" in skipped["skip_reason"]
    assert "success_rate" not in skipped  # never a 0 % cell
    generated = [q for q in server.requests if q.path == "/v1/completions"]
    assert len(generated) == 1 + 4 + 1  # the preflight, the measured cell and its warm-up only
    report = (tmp_path / "r" / "report.md").read_text()
    assert re.search(r"^\| 1 \| [0-9.]+( †)? \| skipped \|$", report, re.M)
    assert "- c1-p256-o8: prompt 256 + output 8 tokens exceed max_model_len 200" in report


def test_interrupted_sweep_keeps_cells_and_resume_runs_the_rest(
    fake_vllm: ServerFactory, tmp_path: Path
) -> None:
    server = fake_vllm(output_tokens=4)
    grid = Grid((1, 2), (8, 16), (4,))
    out = tmp_path / "r"
    seen: list[str] = []

    def stop_after_two(record: dict[str, Any]) -> None:
        seen.append(record["id"])
        if len(seen) == 2:
            raise _Stop

    with pytest.raises(_Stop):
        run_sweep(server.url, MODEL, grid, out, options=FAST, on_cell=stop_after_two)
    assert [c["id"] for c in _lines(out)] == ["c1-p8-o4", "c2-p8-o4"]
    assert "finished_at" not in json.loads((out / "run.json").read_text())
    assert len((out / "results.csv").read_text().splitlines()) == 3

    with pytest.raises(StoreError, match="--resume"):
        run_sweep(server.url, MODEL, grid, out, options=FAST)

    resumed: list[str] = []
    run = run_sweep(
        server.url,
        MODEL,
        grid,
        out,
        options=FAST,
        resume=True,
        on_cell=lambda r: resumed.append(r["id"]),
    )
    assert resumed == ["c1-p16-o4", "c2-p16-o4"]
    assert sorted(c["id"] for c in run.cells) == sorted(k.id for k in grid.cells())
    assert len(_lines(out)) == 4
    assert json.loads((out / "run.json").read_text())["resumed"] == 1


TWO_CELLS = Grid((1, 2), (8,), (2,))


@pytest.fixture(scope="module")
def two_cells(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeVllmServer, Path]]:
    """A finished run of TWO_CELLS against a fake server that stays up for the module: the
    tests below each tear or damage a copy of it, then resume it against that server."""
    server = FakeVllmServer(FakeVllmConfig(output_tokens=2))
    server.start()
    out = tmp_path_factory.mktemp("two-cells") / "r"
    main_loop = asyncio.get_event_loop_policy().get_event_loop()
    try:
        run_sweep(server.url, MODEL, TWO_CELLS, out, options=FAST)
        asyncio.set_event_loop(main_loop)  # asyncio.run left the main thread without one
        yield server, out
    finally:
        server.stop()


def test_a_torn_last_record_is_dropped_and_its_cell_run_again(
    two_cells: tuple[FakeVllmServer, Path], tmp_path: Path
) -> None:
    server, finished = two_cells
    out = tmp_path / "r"
    grid = TWO_CELLS
    shutil.copytree(finished, out)
    lines = (out / "cells.jsonl").read_text().splitlines(keepends=True)
    # A crash while the second cell's record was being written: half of it, no newline.
    (out / "cells.jsonl").write_text(lines[0] + lines[1][: len(lines[1]) // 2])
    assert [c["id"] for c in load_run(out).cells] == ["c1-p8-o2"]
    assert load_run(out).missing_ids() == ["c2-p8-o2"]
    rerun: list[str] = []
    run = run_sweep(
        server.url,
        MODEL,
        grid,
        out,
        options=FAST,
        resume=True,
        on_cell=lambda r: rerun.append(r["id"]),
    )
    assert rerun == ["c2-p8-o2"]
    assert sorted(c["id"] for c in run.cells) == ["c1-p8-o2", "c2-p8-o2"]
    # The file holds two whole records: the torn one was removed, not merged.
    assert [json.loads(x)["id"] for x in (out / "cells.jsonl").read_text().splitlines()] == [
        "c1-p8-o2",
        "c2-p8-o2",
    ]


def test_a_complete_last_record_without_newline_is_run_again(
    two_cells: tuple[FakeVllmServer, Path], tmp_path: Path
) -> None:
    server, finished = two_cells
    out = tmp_path / "r"
    grid = TWO_CELLS
    shutil.copytree(finished, out)
    (out / "cells.jsonl").write_text((out / "cells.jsonl").read_text().rstrip("\n"))
    run = run_sweep(server.url, MODEL, grid, out, options=FAST, resume=True)
    lines = (out / "cells.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["c1-p8-o2", "c2-p8-o2"]
    assert len(run.cells) == 2


def test_resume_refuses_another_grid_url_or_options(
    fake_vllm: ServerFactory, tmp_path: Path
) -> None:
    server = fake_vllm(output_tokens=2)
    other = fake_vllm(output_tokens=2)
    out = tmp_path / "r"
    grid = Grid((1,), (8,), (2,))
    run_sweep(server.url, MODEL, grid, out, options=FAST)
    before = (out / "run.json").read_text()
    with pytest.raises(StoreError, match=r"grid.concurrency: stored \[1\], asked \[1, 2\]"):
        run_sweep(server.url, MODEL, Grid((1, 2), (8,), (2,)), out, options=FAST, resume=True)
    with pytest.raises(StoreError, match="url: stored"):
        run_sweep(other.url, MODEL, grid, out, options=FAST, resume=True)
    with pytest.raises(StoreError, match=r"options\.timeout_s"):
        run_sweep(
            server.url,
            MODEL,
            grid,
            out,
            options=SweepOptions(
                num_requests=4, warmup=1, timeout_s=9.0, progress=False, charts=False
            ),
            resume=True,
        )
    assert (out / "run.json").read_text() == before  # nothing rewritten
    assert other.requests == []  # refused before any request


def test_a_damaged_record_is_refused_with_its_line(
    two_cells: tuple[FakeVllmServer, Path], tmp_path: Path
) -> None:
    server, finished = two_cells
    out = tmp_path / "r"
    shutil.copytree(finished, out)
    lines = (out / "cells.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    del record["prompt_tokens"]
    (out / "cells.jsonl").write_text(json.dumps(record) + "\n" + lines[1] + "\n")
    with pytest.raises(StoreError, match=r"line 1: the record has no 'prompt_tokens' field"):
        load_run(out)
    for change, said in (
        ({"surprise": 1}, "line 2: unknown field 'surprise'"),
        ({"completed": -1}, "line 2: field 'completed': input should be greater than or equal"),
        ({"errors": {"timeout": "3"}}, "line 2: field 'errors.timeout': input should be"),
        ({"id": "c9-p8-o2"}, "line 2: id 'c9-p8-o2' does not match its key"),
    ):
        bad = json.dumps({**json.loads(lines[1]), **change})
        (out / "cells.jsonl").write_text(lines[0] + "\n" + bad + "\n")
        with pytest.raises(StoreError, match=re.escape(said)):
            load_run(out)
    (out / "cells.jsonl").write_text("{not json\n" + lines[1] + "\n")
    with pytest.raises(StoreError, match="line 1: not JSON"):
        run_sweep(server.url, MODEL, TWO_CELLS, out, options=FAST, resume=True)


def test_spec_decode_acceptance_from_metrics_deltas(
    fake_vllm: ServerFactory, tmp_path: Path
) -> None:
    # Each request of 8 tokens adds 4 drafts of 3 tokens, accepted round(4 x p) per position.
    server = fake_vllm(output_tokens=8, num_speculative_tokens=3, spec_acceptance=(0.5, 0.25, 0))
    options = SweepOptions(num_requests=5, warmup=2, timeout_s=5.0, progress=False, charts=False)
    run = run_sweep(server.url, MODEL, Grid((1,), (8,), (8,)), tmp_path / "r", options=options)
    (cell,) = run.cells
    # Over the cell only (warm-up excluded): 5 x 4 drafts, 5 x (2 + 1 + 0) accepted.
    assert cell["spec_decode"]["num_drafts"] == 20
    assert cell["spec_decode"]["num_draft_tokens"] == 60
    assert cell["spec_decode_acceptance_rate"] == pytest.approx(15 / 60)
    assert cell["spec_decode_acceptance_length"] == pytest.approx(1 + 15 / 20)
    # The raw counters at the window's edges are stored, so calibration derives the same
    # figures from them (and would refuse a counter that went backwards).
    counters = cell["spec_decode_counters"]
    assert counters["after"]["num_drafts"] - counters["before"]["num_drafts"] == 20
    from serving.capacity.acceptance import run_acceptance

    measured = run_acceptance(run.cells, 3)
    assert measured is not None
    assert (measured.drafts, measured.draft_tokens, measured.accepted) == (20, 60, 15)
    assert measured.per_position == (10, 5, 0)


def test_no_spec_decode_gives_none(fake_vllm: ServerFactory, tmp_path: Path) -> None:
    server = fake_vllm(output_tokens=2)
    run = run_sweep(server.url, MODEL, Grid((1,), (8,), (2,)), tmp_path / "r", options=FAST)
    assert run.cells[0]["spec_decode_acceptance_rate"] is None
    assert run.cells[0]["spec_decode_counters"] is None


def test_open_loop_sends_at_the_poisson_rate(
    fake_vllm: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[WindowLoad] = []

    async def keep(plan: LoadPlan, **kwargs: Any) -> WindowLoad:
        load = await run_load(plan, **kwargs)
        loads.append(load)
        return load

    monkeypatch.setattr(bench.load.sweep, "run_load", keep)
    server = fake_vllm(ttft_s=0.05, output_tokens=2)
    options = SweepOptions(
        num_requests=40, warmup=0, timeout_s=5.0, progress=False, charts=False, seed=3
    )
    grid = Grid((16,), (8,), (2,), request_rates=(50.0,))
    run = run_sweep(server.url, MODEL, grid, tmp_path / "r", options=options)
    (cell,) = run.cells
    assert cell["id"] == "c16-p8-o2-r50"
    assert cell["request_rate"] == 50.0
    assert cell["completed"] == 40
    # Every request is sent on the seeded schedule, never before its time (1 ms for the
    # clocks' rounding): a closed loop of 16 (sending as answers come) would run ahead of it.
    (load,) = loads
    assert load.schedule_start is not None and len(load.send_times) == 40
    rng = random.Random(3)
    due = list(itertools.accumulate((rng.expovariate(50.0) for _ in range(39)), initial=0.0))
    for sent, at in zip(load.send_times, due, strict=True):
        assert sent >= load.schedule_start + at - 0.001
    # Later only by how late a loaded machine sends, so the achieved rate is bounded below
    # only against a wrong schedule: also waiting for the last answer before each send (every
    # gap at least the 50 ms of pacing, against a 20 ms mean) reads 0.42 of the schedule's
    # rate here; half would need the last send 0.8 s late.
    assert cell["achieved_request_rate"] >= 0.5 * 39 / due[-1]


@pytest.mark.parametrize(("burstiness", "cv"), [(1.0, 1.0), (0.25, 2.0), (4.0, 0.5)])
def test_arrival_gaps_have_the_rate_and_the_burstiness(burstiness: float, cv: float) -> None:
    """Gamma gaps of shape k and mean 1/rate: the mean is the rate's, the coefficient of
    variation 1/sqrt(k) (vLLM's --burstiness); seeded, so the sample is fixed."""
    rng = random.Random(7)
    gaps = [arrival_gap(rng, 4.0, burstiness) for _ in range(40_000)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(0.25, rel=0.03)
    assert statistics.pstdev(gaps) / mean == pytest.approx(cv, rel=0.05)


def test_poisson_gaps_are_the_exponential_draws() -> None:
    """Burstiness 1 draws what ``expovariate`` drew: a seeded Poisson run keeps its schedule."""
    a, b = random.Random(3), random.Random(3)
    gaps = [arrival_gap(a, 50.0, 1.0) for _ in range(100)]
    assert gaps == pytest.approx([b.expovariate(50.0) for _ in range(100)], rel=1e-12)


def test_failures_are_counted_per_kind(fake_vllm: ServerFactory, tmp_path: Path) -> None:
    server = fake_vllm(output_tokens=2, fail_every=2, fail_status=503)
    options = SweepOptions(num_requests=6, warmup=0, timeout_s=5.0, progress=False, charts=False)
    run = run_sweep(server.url, MODEL, Grid((1,), (8,), (2,)), tmp_path / "r", options=options)
    (cell,) = run.cells
    assert (cell["completed"], cell["failed"]) == (3, 3)
    assert cell["errors"]["http_status"] == 3
    assert cell["success_rate"] == 0.5
    assert "| c1-p8-o2 | 3 | http_status 3 |" in (tmp_path / "r" / "report.md").read_text()


def test_probe_sends_one_short_request(fake_vllm: ServerFactory, closed_port: int) -> None:
    server = fake_vllm(output_tokens=20)
    result = asyncio.run(probe(server.url, MODEL))
    assert result.ok, result.error
    assert result.output_tokens == 8
    down = asyncio.run(probe(f"http://127.0.0.1:{closed_port}", MODEL))
    assert (down.ok, down.error_kind) == (False, "connection")


@pytest.mark.parametrize(
    ("answer", "recorded"),
    [
        ("0.27.1", "0.27.1"),
        ("0.27.1+cpu", "0.27.1+cpu"),  # a CPU build says so; calibrate then refuses it
        ("", None),
        ("v0.27.1; rm -rf /", None),
        ("9" * 80, None),
        ("not a version", None),
    ],
)
def test_the_run_records_the_engine_release_the_server_reports(
    fake_vllm: ServerFactory, tmp_path: Path, answer: str, recorded: str | None
) -> None:
    """`gemma4 plan calibrate` applies a calibration only to the engine release it was
    measured on; the run records what the server's GET /version says (vLLM answers
    {"version": "0.27.1"}), and nothing when the answer is not a version."""
    server = fake_vllm(ttft_s=0.01, itl_s=0.002, output_tokens=4, engine_version=answer)
    run_sweep(server.url, MODEL, Grid((1,), (16,), (4,)), tmp_path / "r", options=FAST)
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["engine_version"] == recorded


def test_the_fake_server_reports_the_release_the_stacks_pin() -> None:
    """The fake's GET /version is the vLLM release the GPU stacks' images pin, so a bench run
    against it is a run of the stack's engine as far as calibration can tell."""
    from serving.capacity.perf_stack import vllm_release
    from serving.config.settings import load_settings
    from tests.pulumi_harness import stack_config
    from tests.support.fake_vllm import FakeVllmConfig

    release = vllm_release(load_settings(stack_config("l4")))
    assert release == f"vllm {FakeVllmConfig().engine_version}"


def test_a_bench_run_of_the_stacks_engine_reaches_calibration(
    fake_vllm: ServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run made by `gemma4 bench run` records everything calibrate needs to know what it
    measured (model, hardware, engine release): calibrate judges its cells, never refuses it
    for what the benchmark left out; a run whose server reports a CPU build is refused as
    another target."""
    from dataclasses import replace as with_

    from gemma4.plan_cli import main as plan_main
    from serving.config.settings import load_settings
    from tests.pulumi_harness import stack_config

    model = load_settings(stack_config("l4")).model
    served = model.served_model_name or model.model
    options = with_(FAST, hardware="l4")
    for answer in ("0.27.1", "0.27.1+cpu"):
        server = fake_vllm(
            ttft_s=0.01,
            itl_s=0.002,
            output_tokens=4,
            engine_version=answer,
            served_model_name=served,
        )
        run_dir = tmp_path / answer
        run_sweep(server.url, served, Grid((1, 2), (16,), (4,)), run_dir, options=options)
        capsys.readouterr()
        code = plan_main(["calibrate", str(run_dir), "-s", "l4", "--out", str(tmp_path / "c")])
        err = capsys.readouterr().err
        assert code != 0 or answer == "0.27.1"
        assert "does not record" not in err
        if answer.endswith("+cpu"):
            assert code == 2 and "0.27.1+cpu" in err and "--allow-other-target" in err


@pytest.mark.parametrize("cell_id", ["", "../c1", "a/b", ".hidden"])
def test_a_cell_id_that_cannot_name_its_requests_file_is_refused(
    tmp_path: Path, cell_id: str
) -> None:
    from bench.results.record import RequestResult
    from bench.results.store import RunStore

    store = RunStore(tmp_path, {}, [])
    with pytest.raises(StoreError, match="cannot name a file"):
        store.write_requests(cell_id, [RequestResult(ok=True, start_s=1.0, e2e_s=0.5)])
    assert not (tmp_path / "requests").exists() or not any((tmp_path / "requests").iterdir())
    store.write_requests("c1-p8-o8", [])  # a cell with no measured request writes nothing
    assert not (tmp_path / "requests" / "c1-p8-o8.jsonl").exists()
